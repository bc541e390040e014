#!/usr/bin/env bash
# Provision an OpenTelemetry Collector (core v0.161.0 with the OTLP receiver and the contrib
# file exporter v0.161.0, pinned by the wrapper module scripts/otelcol/otelcol-0.161, go.sum
# committed), built with Go from the Go module proxy: `go build -mod=readonly`,
# CGO_ENABLED=0, -trimpath. Idempotent and non-interactive. The tests' Collector
# (kevents_testkit::otelcol) runs it with an OTLP/HTTP receiver and a file exporter.
#
# Result:  ${KEVENTS_CACHE:-/var/cache/kevents}/otelcol-<version>/otelcol   (+ RECIPE, BUILDINFO)
#          ${KEVENTS_CACHE:-/var/cache/kevents}/otelcol-current -> otelcol-<version>  (symlink)
# The binary's path is printed on stdout at the end (everything else goes to stderr).
#
# If the cached binary exists and its RECIPE stamp (a hash of the recipe revision and the
# wrapper module's go.mod, go.sum and main.go) matches, nothing is downloaded or built.
# Environment:
#   KEVENTS_CACHE          cache directory (default /var/cache/kevents); Go module and build
#                          caches in $KEVENTS_CACHE/go/{mod,build} (shared with the
#                          apiserver and nats scripts)
#   KEVENTS_FORCE_REBUILD  set to 1 to rebuild even if a cached binary exists
#   KEVENTS_GO             the go command (else /usr/local/go/bin/go, else go on PATH; Go >= 1.24)
set -Eeuo pipefail

export LC_ALL=C.UTF-8

CACHE=${KEVENTS_CACHE:-/var/cache/kevents}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MOD="$SCRIPT_DIR/otelcol-0.161"
MODULE=go.opentelemetry.io/collector/otelcol
# Recipe revision: bump it when the build (flags, layout) changes, so older builds are not reused.
RECIPE=r1
SECONDS=0

log() { printf '[otelcol provision +%ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf '[otelcol provision +%ss] ERROR: %s\n' "$SECONDS" "$*" >&2; exit 1; }
on_err() {
    local rc=$? line=${BASH_LINENO[0]:-?}
    printf '[otelcol provision +%ss] FAILED (exit %s) at line %s: %s\n' \
        "$SECONDS" "$rc" "$line" "$BASH_COMMAND" >&2
}
trap on_err ERR

mkdir -p "$CACHE" || die "cannot create $CACHE (run as root, or set KEVENTS_CACHE)"
[ -w "$CACHE" ] || die "$CACHE is not writable (run as root, or set KEVENTS_CACHE)"

# Serialize concurrent runs (two test runs at once, etc.).
exec 9>"$CACHE/.provision-otelcol.lock"
if ! flock -n 9; then
    log "another scripts/otelcol/provision.sh holds $CACHE/.provision-otelcol.lock; waiting for it"
    flock 9
fi

pick_go() {
    local g
    for g in ${KEVENTS_GO:-} /usr/local/go/bin/go "$(command -v go || true)"; do
        [ -n "$g" ] && [ -x "$g" ] || continue
        local v minor
        v=$("$g" env GOVERSION 2>/dev/null || true)      # go1.26.8
        minor=$(printf '%s\n' "$v" | sed -nE 's/^go1\.([0-9]+).*/\1/p')
        if [ -n "$minor" ] && [ "$minor" -ge 21 ]; then echo "$g"; return 0; fi
        log "skipping $g ($v): too old (needs Go >= 1.24, or >= 1.21 to fetch it)"
    done
    return 1
}

# The version the wrapper go.mod pins (v0.161.0).
version=$(awk -v m="$MODULE" '($1 == m && $2 ~ /^v/) {print $2; exit} ($1 == "require" && $2 == m) {print $3; exit}' "$MOD/go.mod")
[ -n "$version" ] || die "cannot read the pinned $MODULE version from $MOD/go.mod"
ver=${version#v}
dest="$CACHE/otelcol-$ver"
stamp=$({ echo "$RECIPE"; cat "$MOD/go.mod" "$MOD/go.sum" "$MOD/main.go"; } | sha256sum | cut -c1-16)
log "otelcol $version from Go modules (recipe $RECIPE, inputs $stamp)"

if [ "${KEVENTS_FORCE_REBUILD:-0}" != 1 ] && [ -x "$dest/otelcol" ] \
   && [ "$(cat "$dest/RECIPE" 2>/dev/null)" = "$stamp" ]; then
    log "cached binary found: $dest/otelcol (skipping the build)"
else
    go=$(pick_go) || die "no usable Go found (set KEVENTS_GO; Debian bookworm's golang-go 1.19 is too old)"
    log "go: $go ($("$go" env GOVERSION))"
    mkdir -p "$CACHE/go/mod" "$CACHE/go/build" "$CACHE/go/tmp"
    tmp="$dest.tmp"
    rm -rf "$tmp"; mkdir -p "$tmp"
    buildlog="$CACHE/go/otelcol-build.log"
    log "go build $MODULE $version (log: $buildlog)"
    t0=$SECONDS
    if ! ( cd "$MOD" && env GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" \
            GOTMPDIR="$CACHE/go/tmp" GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
            GOWORK=off "$go" build -trimpath -ldflags "-s -w" -o "$tmp/otelcol" . ) \
            >"$buildlog" 2>&1; then
        tail -n 30 "$buildlog" >&2 || true
        die "go build failed (see $buildlog)"
    fi
    log "built in $((SECONDS - t0))s"
    "$go" version -m "$tmp/otelcol" >"$tmp/BUILDINFO" 2>&1 || true
    echo "$stamp" >"$tmp/RECIPE"
    rm -rf "$dest"
    mv "$tmp" "$dest"
fi

# The binary must run and say the pinned version.
v=$("$dest/otelcol" --version 2>&1) || die "$dest/otelcol --version failed: $v"
case "$v" in
    *"$ver"*) log "$dest/otelcol: $v" ;;
    *) die "$dest/otelcol --version says '$v', expected $ver" ;;
esac

ln -sfn "otelcol-$ver" "$CACHE/.otelcol-current.tmp"
mv -Tf "$CACHE/.otelcol-current.tmp" "$CACHE/otelcol-current"
log "symlink: $CACHE/otelcol-current -> otelcol-$ver"

log "done in ${SECONDS}s"
echo "$dest/otelcol"
