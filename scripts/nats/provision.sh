#!/usr/bin/env bash
# Provision today's nats-server (v2.15.3, pinned by the wrapper module
# scripts/nats/nats-server-2.15, go.sum committed), built with Go from the Go module proxy:
# `go build -mod=readonly`, CGO_ENABLED=0, -trimpath. Idempotent and non-interactive.
# Debian's nats-server 2.9.10 (installed by scripts/apiserver/provision.sh) is left alone.
#
# Result:  ${KEVENTS_CACHE:-/var/cache/kevents}/nats-<version>/nats-server   (+ RECIPE, BUILDINFO)
#          ${KEVENTS_CACHE:-/var/cache/kevents}/nats-<major.minor>  -> nats-<version>  (symlink)
#          ${KEVENTS_CACHE:-/var/cache/kevents}/nats-current        -> nats-<version>  (symlink)
# The binary's path is printed on stdout at the end (everything else goes to stderr).
#
# If the cached binary exists and its RECIPE stamp (a hash of the recipe revision and the
# wrapper module's go.mod, go.sum and main.go) matches, nothing is downloaded or built.
# Environment:
#   KEVENTS_CACHE          cache directory (default /var/cache/kevents); Go module and build
#                          caches in $KEVENTS_CACHE/go/{mod,build} (shared with the
#                          apiserver script's Kubernetes 1.36 build)
#   KEVENTS_FORCE_REBUILD  set to 1 to rebuild even if a cached binary exists
#   KEVENTS_GO             the go command (else /usr/local/go/bin/go, else go on PATH);
#                          nats-server 2.15 needs Go >= 1.26 (a Go >= 1.21 fetches the go1.26
#                          toolchain through the Go module proxy)
set -Eeuo pipefail

export LC_ALL=C.UTF-8

CACHE=${KEVENTS_CACHE:-/var/cache/kevents}
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MOD="$SCRIPT_DIR/nats-server-2.15"
MODULE=github.com/nats-io/nats-server/v2
# Recipe revision: bump it when the build (flags, layout) changes, so older builds are not reused.
RECIPE=r1
SECONDS=0

log() { printf '[nats provision +%ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf '[nats provision +%ss] ERROR: %s\n' "$SECONDS" "$*" >&2; exit 1; }
on_err() {
    local rc=$? line=${BASH_LINENO[0]:-?}
    printf '[nats provision +%ss] FAILED (exit %s) at line %s: %s\n' \
        "$SECONDS" "$rc" "$line" "$BASH_COMMAND" >&2
}
trap on_err ERR

mkdir -p "$CACHE" || die "cannot create $CACHE (run as root, or set KEVENTS_CACHE)"
[ -w "$CACHE" ] || die "$CACHE is not writable (run as root, or set KEVENTS_CACHE)"

# Serialize concurrent runs (two test runs at once, etc.).
exec 9>"$CACHE/.provision-nats.lock"
if ! flock -n 9; then
    log "another scripts/nats/provision.sh holds $CACHE/.provision-nats.lock; waiting for it"
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
        log "skipping $g ($v): too old (needs Go >= 1.26, or >= 1.21 to fetch it)"
    done
    return 1
}

# The version the wrapper go.mod pins (v2.15.3).
version=$(awk -v m="$MODULE" '($1 == m && $2 ~ /^v/) {print $2; exit} ($1 == "require" && $2 == m) {print $3; exit}' "$MOD/go.mod")
[ -n "$version" ] || die "cannot read the pinned $MODULE version from $MOD/go.mod"
ver=${version#v}
minor=$(printf '%s\n' "$ver" | cut -d. -f1,2)
dest="$CACHE/nats-$ver"
stamp=$({ echo "$RECIPE"; cat "$MOD/go.mod" "$MOD/go.sum" "$MOD/main.go"; } | sha256sum | cut -c1-16)
log "nats-server $version from Go modules (recipe $RECIPE, inputs $stamp)"

if [ "${KEVENTS_FORCE_REBUILD:-0}" != 1 ] && [ -x "$dest/nats-server" ] \
   && [ "$(cat "$dest/RECIPE" 2>/dev/null)" = "$stamp" ]; then
    log "cached binary found: $dest/nats-server (skipping the build)"
else
    go=$(pick_go) || die "no usable Go found (set KEVENTS_GO; Debian bookworm's golang-go 1.19 is too old)"
    log "go: $go ($("$go" env GOVERSION))"
    mkdir -p "$CACHE/go/mod" "$CACHE/go/build" "$CACHE/go/tmp"
    tmp="$dest.tmp"
    rm -rf "$tmp"; mkdir -p "$tmp"
    buildlog="$CACHE/go/nats-server-build.log"
    # As upstream's release (.goreleaser.yml): -trimpath, CGO off, serverVersion set; its
    # gitCommit stays empty (the module proxy does not give the commit).
    ldflags="-s -w -X $MODULE/server.serverVersion=$version"
    log "go build $MODULE $version (log: $buildlog)"
    t0=$SECONDS
    if ! ( cd "$MOD" && env GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" \
            GOTMPDIR="$CACHE/go/tmp" GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 \
            GOWORK=off "$go" build -trimpath -ldflags "$ldflags" -o "$tmp/nats-server" . ) \
            >"$buildlog" 2>&1; then
        tail -n 30 "$buildlog" >&2 || true
        die "go build failed (see $buildlog)"
    fi
    log "built in $((SECONDS - t0))s"
    "$go" version -m "$tmp/nats-server" >"$tmp/BUILDINFO" 2>&1 || true
    echo "$stamp" >"$tmp/RECIPE"
    rm -rf "$dest"
    mv "$tmp" "$dest"
fi

# The binary must run and say the pinned version.
v=$("$dest/nats-server" --version 2>&1) || die "$dest/nats-server --version failed: $v"
case "$v" in
    *"v$ver"*) log "$dest/nats-server: $v" ;;
    *) die "$dest/nats-server --version says '$v', expected v$ver" ;;
esac

for link in "nats-$minor" nats-current; do
    ln -sfn "nats-$ver" "$CACHE/.$link.tmp"
    mv -Tf "$CACHE/.$link.tmp" "$CACHE/$link"
    log "symlink: $CACHE/$link -> nats-$ver"
done

log "done in ${SECONDS}s"
echo "$dest/nats-server"
