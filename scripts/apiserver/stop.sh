#!/usr/bin/env bash
# Stop the kube-apiserver and etcd started by start.sh DIR (pids from DIR/env).
# Sends SIGTERM, waits up to 15 s per process, then SIGKILL. Removes nothing.
#
# usage: scripts/apiserver/stop.sh DIR
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
DIR=$1
ENV_FILE="$DIR/env"
[ -f "$ENV_FILE" ] || { echo "stop.sh: $ENV_FILE not found (was start.sh DIR successful?)" >&2; exit 1; }

get() { sed -n "s/^$1=//p" "$ENV_FILE" | tail -n1; }
ETCD_PID=$(get ETCD_PID)
APISERVER_PID=$(get APISERVER_PID)

alive() {
    local pid=$1 state
    [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$state" != Z ] && [ "$state" != X ]   # a zombie has exited
}

# Only signal the pid if it still is the process we started (pid reuse).
is_ours() {
    local pid=$1 name=$2 exe
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
    [ "${exe##*/}" = "$name" ] || [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ]
}

stop_one() {
    local name=$1 pid=$2
    if ! [[ "$pid" =~ ^[0-9]+$ ]]; then
        echo "stop.sh: no pid for $name in $ENV_FILE" >&2; return 0
    fi
    if ! alive "$pid"; then
        echo "stop.sh: $name (pid $pid) already exited" >&2; return 0
    fi
    if ! is_ours "$pid" "$name"; then
        echo "stop.sh: pid $pid is not $name any more; not touching it" >&2; return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 150); do
        alive "$pid" || { echo "stop.sh: $name (pid $pid) stopped" >&2; return 0; }
        sleep 0.1
    done
    echo "stop.sh: $name (pid $pid) did not exit after SIGTERM; sending SIGKILL" >&2
    kill -KILL "$pid" 2>/dev/null || true
    for i in $(seq 1 50); do
        alive "$pid" || return 0
        sleep 0.1
    done
    echo "stop.sh: $name (pid $pid) is still running" >&2
    return 1
}

rc=0
stop_one kube-apiserver "$APISERVER_PID" || rc=1
stop_one etcd "$ETCD_PID" || rc=1
exit $rc
