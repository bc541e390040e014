#!/usr/bin/env bash
# Peers on the same storm (issue 49): the OpenTelemetry Collector's k8s_events receiver,
# kubernetes-event-exporter (when it can be built) and `kevents export`, side by side against
# one real kube-apiserver, on one storm of core/v1 count increases, each exporter SIGKILLed and
# restarted once in the middle. Figures in docs/benchmarks.md ("Peers on the same storm").
# Not part of CI.
#
# usage: scripts/bench/peers.sh [OUT_DIR] [-- peers.py options: --events 50 --rate 50
#        --duration 60 --kill-at 25 --down 5 --settle 15 --ha]
#
# Builds (cached under $KEVENTS_CACHE/peers, Go module and build caches in
# $KEVENTS_CACHE/go/{mod,build}, shared with scripts/apiserver and scripts/nats):
#   - otelcol-k8sevents: the wrapper module scripts/bench/peers/otelcol-k8sevents (Collector
#     v0.148.0 with the contrib k8s_events receiver and file exporter), go build -mod=readonly
#     against its committed go.sum;
#   - kubernetes-event-exporter: github.com/resmoio/kubernetes-event-exporter is not served by
#     the Go module proxy (403 for its version list, v1.7.0, and for the old
#     github.com/opsgenie path), so it cannot be required from a wrapper module. Given its
#     source (KEVENTS_KEE_SRC, a checkout of commit 907ce91, 2024-05-13, its last), it is
#     built with -mod=readonly against its own go.sum, every dependency from the proxy;
#     without it, it is left out and said so.
# Environment:
#   KEVENTS_BIN      the kevents binary (default target/release/kevents; build it with
#                    cargo build --release -p kevents-cli)
#   KEVENTS_CACHE    default /var/cache/kevents
#   KEVENTS_GO       the go command (default /usr/local/go/bin/go, else go on PATH; Go >= 1.26)
#   KEVENTS_KEE_SRC  a kubernetes-event-exporter source tree (see above)
#   KEVENTS_K8S_VERSION  which apiserver scripts/apiserver/start.sh starts (default 1.20)
set -Eeuo pipefail
export LC_ALL=C.UTF-8

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${KEVENTS_CACHE:-/var/cache/kevents}
OUT=${1:-$(mktemp -d /tmp/kevents-peers.XXXXXX)}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
KEVENTS_BIN=${KEVENTS_BIN:-$ROOT/target/release/kevents}
SECONDS=0
log() { printf '[peers +%ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf '[peers +%ss] ERROR: %s\n' "$SECONDS" "$*" >&2; exit 1; }

[ -x "$KEVENTS_BIN" ] || die "no kevents binary at $KEVENTS_BIN (cargo build --release -p kevents-cli, or set KEVENTS_BIN)"
command -v nats-server >/dev/null || die "nats-server not on PATH (bash scripts/nats/provision.sh)"
python3 -c 'import nats' 2>/dev/null || die "python3 cannot import nats (pip install nats-py): needed to read the stream back"
GO=${KEVENTS_GO:-}
[ -n "$GO" ] || { [ -x /usr/local/go/bin/go ] && GO=/usr/local/go/bin/go; } || GO=$(command -v go || true)
[ -n "$GO" ] || die "no go command (set KEVENTS_GO)"

mkdir -p "$CACHE/peers" "$CACHE/go/mod" "$CACHE/go/build" "$CACHE/go/tmp" "$OUT"
gobuild() {   # usage: gobuild MODULE_DIR OUT LOG
    local mod=$1 out=$2 buildlog=$3
    ( cd "$mod" && env GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTMPDIR="$CACHE/go/tmp" \
        GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 GOWORK=off \
        "$GO" build -trimpath -ldflags "-s -w" -o "$out.tmp" . ) >"$buildlog" 2>&1 || return 1
    mv -f "$out.tmp" "$out"
}
# A build is reused while its inputs (go.mod, go.sum, main.go / the source tree) are unchanged.
stamp_of() { (cd "$1" && find . -name '*.go' -o -name go.mod -o -name go.sum | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-16; }

OTEL_MOD="$ROOT/scripts/bench/peers/otelcol-k8sevents"
OTEL="$CACHE/peers/otelcol-k8sevents"
s=$(stamp_of "$OTEL_MOD")
if [ -x "$OTEL" ] && [ "$(cat "$OTEL.stamp" 2>/dev/null)" = "$s" ]; then
    log "cached: $OTEL"
else
    log "building $OTEL (log $CACHE/peers/otelcol-build.log)"
    gobuild "$OTEL_MOD" "$OTEL" "$CACHE/peers/otelcol-build.log" || { tail -n 20 "$CACHE/peers/otelcol-build.log" >&2; die "otelcol-k8sevents did not build"; }
    echo "$s" >"$OTEL.stamp"
fi

KEE="$CACHE/peers/kubernetes-event-exporter"
KEE_ARGS=()
if [ -n "${KEVENTS_KEE_SRC:-}" ]; then
    s=$(stamp_of "$KEVENTS_KEE_SRC")
    if [ -x "$KEE" ] && [ "$(cat "$KEE.stamp" 2>/dev/null)" = "$s" ]; then
        log "cached: $KEE"
    else
        log "building $KEE from $KEVENTS_KEE_SRC (log $CACHE/peers/kee-build.log)"
        if gobuild "$KEVENTS_KEE_SRC" "$KEE" "$CACHE/peers/kee-build.log"; then
            echo "$s" >"$KEE.stamp"
        else
            tail -n 20 "$CACHE/peers/kee-build.log" >&2
            log "kubernetes-event-exporter did not build: left out"
            rm -f "$KEE"
        fi
    fi
    [ -x "$KEE" ] && KEE_ARGS=(--kee "$KEE")
elif [ -x "$KEE" ]; then
    log "using the cached $KEE (built from $(cat "$KEE.src" 2>/dev/null || echo 'a source tree'))"
    KEE_ARGS=(--kee "$KEE")
else
    log "kubernetes-event-exporter left out: not served by the Go module proxy; set KEVENTS_KEE_SRC to its source tree"
fi

APIDIR="$OUT/apiserver"
NATSDIR="$OUT/nats"
NATS_PID=""
cleanup() {
    [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null && wait "$NATS_PID" 2>/dev/null || true
    [ -f "$APIDIR/env" ] && bash "$ROOT/scripts/apiserver/stop.sh" "$APIDIR" >/dev/null 2>&1 || true
}
trap cleanup EXIT
log "starting kube-apiserver in $APIDIR"
bash "$ROOT/scripts/apiserver/start.sh" "$APIDIR" >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
mkdir -p "$NATSDIR"
nats-server -js -a 127.0.0.1 -p "$port" -sd "$NATSDIR" >"$OUT/nats-server.log" 2>&1 &
NATS_PID=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.2; done

log "versions: kevents $("$KEVENTS_BIN" --version 2>&1 | head -n1); otelcol-k8sevents $("$OTEL" --version 2>&1 | head -n1); nats-server $(nats-server --version 2>&1); apiserver $(. "$APIDIR/env"; echo "$KEVENTS_APISERVER_VERSION")"
python3 "$ROOT/scripts/bench/peers.py" --env "$APIDIR/env" --out "$OUT/run" --nats "nats://127.0.0.1:$port" \
    --kevents "$KEVENTS_BIN" --otelcol "$OTEL" "${KEE_ARGS[@]}" "$@"
log "outputs in $OUT/run (summary.json, each exporter's log and output)"
