#!/usr/bin/env bash
# Build evoracle-0.37, the client-go v0.37.2 reference harness, from Go modules.
#
# usage: scripts/oracle/client-go-0.37/build.sh        prints the binary's path
#
# The module here (go.mod, go.sum, main.go, series.go, eventsoracle/oracle_hooks.go) is copied to
# $KEVENTS_CACHE/oracle/client-go-0.37.2/src together with a private copy of client-go's
# tools/events taken from the Go module cache (go.sum-verified): its non-test files, with the
# three time.Now() calls rewritten to oracleNow() (checked: exactly 3), plus oracle_hooks.go, as
# the package k8s.io/client-go/tools/eventsoracle of a copy of the client-go module
# ($OUT/client-go; checked to differ from the module in nothing else), which the build copy of
# go.mod points k8s.io/client-go at (`replace`), so the package may import
# tools/internal/events, as the Debian-built harness has it in its GOPATH tree. Go refuses
# packages added under GOMODCACHE, even by -overlay. Then `go build -mod=readonly -trimpath`.
# The copy's diff against tools/events is written to $OUT/eventsoracle.diff.
#
# Result: $KEVENTS_CACHE/oracle/client-go-0.37.2/evoracle-0.37 (and STAMP: a hash of this
# directory's files and the Go version; a change rebuilds). Nothing is written in the clone.
# Environment: KEVENTS_CACHE (default /var/cache/kevents), KEVENTS_GO (default go on PATH),
# KEVENTS_FORCE_REBUILD=1. Go module cache: $KEVENTS_CACHE/go/mod, build cache
# $KEVENTS_CACHE/go/build (shared with scripts/apiserver/provision.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${KEVENTS_CACHE:-/var/cache/kevents}
GO=${KEVENTS_GO:-go}
CLIENT_GO=$(awk '$1 == "k8s.io/client-go" {print $2}' "$here/go.mod")
[ -n "$CLIENT_GO" ] || { echo "build.sh: no k8s.io/client-go require in $here/go.mod" >&2; exit 1; }
OUT="$CACHE/oracle/client-go-${CLIENT_GO#v}"
bin="$OUT/evoracle-0.37"

export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOFLAGS="-mod=readonly -buildvcs=false" \
    CGO_ENABLED=0 GOWORK=off GOTOOLCHAIN=${GOTOOLCHAIN:-auto}
mkdir -p "$OUT" "$GOMODCACHE" "$GOCACHE"

stamp=$({ "$GO" env GOVERSION; cd "$here" && cat go.mod go.sum main.go series.go eventsoracle/oracle_hooks.go build.sh; } \
    | sha256sum | cut -c1-16)
if [ "${KEVENTS_FORCE_REBUILD:-0}" != 1 ] && [ -x "$bin" ] && [ "$(cat "$OUT/STAMP" 2>/dev/null)" = "$stamp" ]; then
    echo "$bin"; exit 0
fi

src="$OUT/src"
cg="$OUT/client-go"
rm -rf "$src" "$cg" "$OUT/eventsoracle" "$OUT/overlay.json"; mkdir -p "$src"
cp "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/series.go" "$src/"
# The module's source, downloaded and checked against go.sum; `go mod verify` checks that the
# unpacked module cache still hashes to it.
up=$(cd "$src" && "$GO" mod download -json "k8s.io/client-go@$CLIENT_GO" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$up/tools/events" ] || { echo "build.sh: k8s.io/client-go@$CLIENT_GO not in the module cache ($up)" >&2; exit 1; }
(cd "$src" && "$GO" mod verify >&2)
# A copy of that module (Go refuses to build a package added under GOMODCACHE, even by an
# overlay) with the private package tools/eventsoracle added; the build copy of go.mod replaces
# k8s.io/client-go by it. The committed go.mod and go.sum stay as they are.
cp -a "$up" "$cg"; chmod -R u+w "$cg"
fork="$cg/tools/eventsoracle"
mkdir -p "$fork"
for f in "$up"/tools/events/*.go; do
    case $f in *_test.go) ;; *) cp "$f" "$fork/" ;; esac
done
chmod -R u+w "$fork"
sed -i 's/\btime\.Now()/oracleNow()/g' "$fork/event_broadcaster.go" "$fork/event_recorder.go"
n=$(cat "$fork"/*.go | grep -o 'oracleNow()' | wc -l)
[ "$n" = 3 ] || { echo "build.sh: expected 3 time.Now() calls in tools/events, rewrote $n: check the package" >&2; exit 1; }
for f in "$fork/event_broadcaster.go" "$fork/event_recorder.go"; do
    grep -q '\btime\.' "$f" || sed -i '/^\t"time"$/d' "$f"   # import left unused by the rewrite
done
cp "$here/eventsoracle/oracle_hooks.go" "$fork/"
(cd "$cg/tools" && diff -ruN -x '*_test.go' -x OWNERS events eventsoracle >"$OUT/eventsoracle.diff" || true)
# Nothing else of the copy differs from the module.
extra=$(diff -rq "$up" "$cg" | grep -v "^Only in $cg/tools: eventsoracle\$" || true)
[ -z "$extra" ] || { echo "build.sh: the client-go copy differs from the module beyond tools/eventsoracle: $extra" >&2; exit 1; }
printf '\nreplace k8s.io/client-go => ../client-go\n' >>"$src/go.mod"

( cd "$src" && nice -n 19 "$GO" vet . >&2 || true
  nice -n 19 "$GO" build -trimpath -o "$bin.tmp" . )
mv -f "$bin.tmp" "$bin"
echo "$stamp" >"$OUT/STAMP"
echo "$bin"
