#!/usr/bin/env bash
# `kevents export` at scale, medians of RUNS: `kevents bench export` (the scale simulator in
# process, a local nats-server, the release `kevents export` as a child) run RUNS times;
# prints every run's JSON lines, then one line of medians.
#
# usage: scripts/bench/export_scale.sh [RUNS] [-- BENCH_ARGS...]
#   RUNS        runs (default 5)
#   BENCH_ARGS  passed to `kevents bench export` (default: --events 1000000 --rate 5000
#               --duration 300); e.g. `-- --events 100000 --rate 1000 --duration 30`
#
# Environment:
#   KEVENTS      the kevents binary (default target/release/kevents, built if missing with
#                `cargo build --release -p kevents-cli`; CARGO_TARGET_DIR is honoured)
#   NATS_SERVER  the nats-server binary (default nats-server on PATH)
#   OUT          also append every JSON line to this file
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=5
if [ $# -gt 0 ] && [ "$1" != "--" ]; then RUNS=$1; shift; fi
[ "${1:-}" = "--" ] && shift
ARGS=("$@")
[ ${#ARGS[@]} -eq 0 ] && ARGS=(--events 1000000 --rate 5000 --duration 300)
TARGET=${CARGO_TARGET_DIR:-target}
KEVENTS=${KEVENTS:-$TARGET/release/kevents}
if [ ! -x "$KEVENTS" ]; then
    cargo build --release -p kevents-cli >&2
fi
LINES=$(mktemp)
trap 'rm -f "$LINES"' EXIT
for i in $(seq 1 "$RUNS"); do
    echo "export_scale.sh: run $i of $RUNS: $KEVENTS bench export ${ARGS[*]}" >&2
    "$KEVENTS" bench export --nats-server "${NATS_SERVER:-nats-server}" "${ARGS[@]}" | tee -a "$LINES" ${OUT:+-a "$OUT"}
done
python3 - "$LINES" "$RUNS" <<'EOF'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(phase, key):
    xs = [l[key] for l in lines if l.get("phase") == phase and l.get(key) is not None]
    return statistics.median(xs) if xs else None
first = [l for l in lines if l.get("phase") == "first_export"]
out = {
    "phase": "medians",
    "runs": int(sys.argv[2]),
    "first_export_complete": sum(1 for l in first if l.get("complete")),
    "events": first[0]["events"] if first else None,
    "first_export_records_per_s": med("first_export", "records_per_s"),
    "first_export_seconds": med("first_export", "seconds"),
    "rss_mib_after_first_export": med("first_export", "rss_mib"),
    "hwm_mib_after_first_export": med("first_export", "hwm_mib"),
    "steady_occurrences_per_s": med("steady", "occurrences_per_s"),
    "lag_p50_s": med("steady", "lag_p50_s"),
    "lag_p99_s": med("steady", "lag_p99_s"),
    "lag_max_s": med("steady", "lag_max_s"),
    "rss_mib_at_end": med("steady", "rss_mib"),
    "hwm_mib_at_end": med("steady", "hwm_mib"),
}
print(json.dumps(out))
EOF
