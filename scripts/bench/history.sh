#!/usr/bin/env bash
# `kevents history` on a large stream: wall time and peak resident memory (docs/benchmarks.md,
# "History").
#
# usage: bash scripts/bench/history.sh [RECORDS=1000000] [RUNS=5]
#
# Starts a nats-server (`-js -sd DIR`; KEVENTS_NATS_SERVER or `nats-server` on PATH) on a
# free loopback port with its store in a temporary directory, fills stream `bench` with
# RECORDS records spread over 24 hours (crates/kevents-cli/examples/history_fill.rs:
# published straight into the stream, as `kevents export` writes them), then runs, RUNS times
# each and interleaved, under /usr/bin/time -v:
#   for:  kevents history --for pod/web-0 --since 1h -o json        (every namespace)
#   forn: kevents history -n web --for pod/web-0 --since 1h -o json (its namespace)
#   ns:   kevents history -n ns-7 --since 1h -o json                (a namespace's hour)
# and prints each one's median wall time and peak RSS. It checks the answer too: `--from
# END-1h --to END` for web-0 must give exactly the occurrences and counts the fill wrote in
# that hour. Release builds (built here if missing: `cargo build --release`).
set -euo pipefail
cd "$(dirname "$0")/../.."
records=${1:-1000000}
runs=${2:-5}
target=${CARGO_TARGET_DIR:-target}
nats_server=${KEVENTS_NATS_SERVER:-$(command -v nats-server)}

cargo build --release -q -p kevents-cli
cargo build --release -q -p kevents-cli --example history_fill
kevents="$target/release/kevents"
fill="$target/release/examples/history_fill"

dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$nats_server" -js -sd "$dir/store" -a 127.0.0.1 -p "$port" >"$dir/nats.log" 2>&1 &
nats_pid=$!
trap 'kill "$nats_pid" 2>/dev/null || true; wait "$nats_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
url="nats://127.0.0.1:$port"
for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done
echo "nats-server $("$nats_server" --version | awk '{print $NF}') at $url, store $dir/store" >&2

"$fill" "$url" bench "$records" 50000 24 >"$dir/fill.json"
cat "$dir/fill.json" >&2

# The answer, checked against what the fill wrote in its last hour.
python3 - "$kevents" "$url" "$dir/fill.json" <<'EOF'
import json, subprocess, sys
kevents, url, fill = sys.argv[1], sys.argv[2], json.load(open(sys.argv[3]))
out = subprocess.run([kevents, "history", "--nats", url, "--stream", "bench", "--for", "pod/web-0",
                      "--from", fill["hour_before_end"], "--to", fill["end"], "-o", "json"],
                     check=True, capture_output=True, text=True).stdout
got = {e["reason"]: {"occurrences": e["occurrences"], "count": e["count"]}
       for e in map(json.loads, out.splitlines())}
want = {k: v for k, v in fill["web_0"].items() if v["occurrences"] > 0}
if got != want:
    sys.exit(f"kevents history answered {got}, the fill wrote {want}")
print(f"answer checked: {got}", file=sys.stderr)
EOF

declare -A cmds=(
    [for]="--for pod/web-0 --since 1h -o json"
    [forn]="-n web --for pod/web-0 --since 1h -o json"
    [ns]="-n ns-7 --since 1h -o json"
)
for run in $(seq "$runs"); do
    for name in for forn ns; do
        # shellcheck disable=SC2086
        /usr/bin/time -v "$kevents" history --nats "$url" --stream bench ${cmds[$name]} \
            >"$dir/out" 2>"$dir/time"
        wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$dir/time")
        rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$dir/time")
        echo "$name $run $wall $rss $(wc -l <"$dir/out")" >>"$dir/results"
    done
done
python3 - "$dir/results" "$records" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, run, wall, rss, lines = line.split()
    m, s = wall.split(":")[-2:]
    rows.setdefault(name, []).append((float(m) * 60 + float(s), int(rss) / 1024, int(lines)))
cmds = {"for": "--for pod/web-0 --since 1h", "forn": "-n web --for pod/web-0 --since 1h",
        "ns": "-n ns-7 --since 1h"}
print(f"| `kevents history` on {int(sys.argv[2]):,} records (24 h) | median wall (s) | median max RSS (MiB) | events printed | runs |")
print("|---|---|---|---|---|")
for name, rs in rows.items():
    print(f"| `{cmds[name]} -o json` | {statistics.median(r[0] for r in rs):.2f} "
          f"| {statistics.median(r[1] for r in rs):.1f} | {rs[0][2]} | {len(rs)} |")
EOF
