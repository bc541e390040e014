#!/usr/bin/env bash
# What a paged list of events costs and returns with resourceVersion "" and "0", on a
# kube-apiserver with the events watch cache on (--watch-cache-sizes=events#1000) or off (the
# default): five events created, then `limit=2` with each, the items and continue token
# answered, and the apiserver's own metrics of where the list was served from
# (apiserver_storage_list_total{storage="watchcache"} where the server has it, and
# etcd_requests_total). docs/export.md, "The apiserver's side", quotes its output.
#
# usage: scripts/apiserver/list-semantics.sh [cache|nocache]   (KEVENTS_K8S_VERSION=1.20|1.37)
set -euo pipefail
mode=${1:-cache}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/kevents-list-semantics.XXXXXX)
extra=""
[ "$mode" = cache ] && extra="--watch-cache-sizes=events#1000"
KEVENTS_APISERVER_EXTRA_ARGS="$extra" bash "$here/start.sh" "$dir/state" >"$dir/start.log" 2>&1 \
    || { tail -20 "$dir/start.log"; exit 1; }
trap 'bash "$here/stop.sh" "$dir/state" >/dev/null 2>&1' EXIT
# shellcheck disable=SC1091
source "$dir/state/env"
auth="Authorization: Bearer $KEVENTS_ADMIN_TOKEN"
curl_() { curl -sS --cacert "$KEVENTS_APISERVER_CA" -H "$auth" "$@"; }
for i in 1 2 3 4 5; do
    curl_ -o /dev/null -H 'Content-Type: application/json' -X POST \
        "$KEVENTS_APISERVER_URL/api/v1/namespaces/default/events" \
        -d "{\"metadata\":{\"name\":\"e$i\"},\"involvedObject\":{\"kind\":\"Pod\",\"name\":\"p\",\"namespace\":\"default\"},\"reason\":\"R\",\"message\":\"m\",\"count\":1}"
done
served() {
    curl_ "$KEVENTS_APISERVER_URL/metrics" \
        | grep -E '^(apiserver_storage_list_total|etcd_requests_total)\{' \
        | grep 'resource="events"' | grep -vE 'operation="(create|update|get|delete)"' || true
}
items() {
    python3 -c 'import json,sys; d=json.load(sys.stdin); print("  items:", len(d["items"]), "continue:", bool(d["metadata"].get("continue")))'
}
echo "kube-apiserver $KEVENTS_APISERVER_VERSION, events watch cache: $mode"
for rv in "" 0; do
    echo "-- GET .../events?limit=2&resourceVersion=$rv"
    curl_ "$KEVENTS_APISERVER_URL/api/v1/namespaces/default/events?limit=2&resourceVersion=$rv" | items
    served | sed 's/^/  /'
done
