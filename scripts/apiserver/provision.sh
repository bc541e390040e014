#!/usr/bin/env bash
# Provision a real kube-apiserver (Kubernetes v1.20.2, built from Debian's
# `kubernetes` source package) plus etcd, openssl and curl on a Debian bookworm
# machine. Idempotent and non-interactive; needs root.
#
# Result:  ${KEVENTS_CACHE:-/var/cache/kevents}/kube-apiserver-<debian version>-<recipe>/kube-apiserver
#          ${KEVENTS_CACHE:-/var/cache/kevents}/bin/kube-apiserver  (stable symlink)
#
# If the cached binary already exists, nothing is downloaded or built.
# Environment:
#   KEVENTS_CACHE          cache directory (default /var/cache/kevents)
#   KEVENTS_DEBIAN_SUITE   Debian suite to take the source from (default bookworm)
#   KEVENTS_FORCE_REBUILD  set to 1 to rebuild even if a cached binary exists
#   KEVENTS_KEEP_WORK      set to 1 to keep the source tree / Go cache after a build
#   KEVENTS_K8S_VERSION    unset, 1.20 or 1.20.2: the above (default). 1.36 or 1.37 (or the
#                          pinned 1.36.3 / 1.37.2): instead build kube-apiserver v1.3x.N and its
#                          etcd (3.6.8 / 3.7.0) from Go modules (the wrapper modules
#                          scripts/apiserver/k8s-1.3x and etcd-3.x, go.sum committed, built with
#                          -mod=readonly) into $KEVENTS_CACHE/k8s-1.3x.N/{kube-apiserver,etcd},
#                          stable symlink $KEVENTS_CACHE/k8s-1.3x; Go module and build caches in
#                          $KEVENTS_CACHE/go/{mod,build}. Needs Go >= 1.26 (KEVENTS_GO, else
#                          /usr/local/go/bin/go, else go on PATH; a Go >= 1.21 fetches the
#                          go1.26 toolchain through the Go module proxy).
set -Eeuo pipefail

export DEBIAN_FRONTEND=noninteractive
export LC_ALL=C.UTF-8

CACHE=${KEVENTS_CACHE:-/var/cache/kevents}
SUITE=${KEVENTS_DEBIAN_SUITE:-bookworm}
SRC_PKG=kubernetes
DEB_SRC_FILE=/etc/apt/sources.list.d/kevents-deb-src.sources
WORK="$CACHE/work"
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SECONDS=0

log() { printf '[provision +%ss] %s\n' "$SECONDS" "$*" >&2; }
die() { printf '[provision +%ss] ERROR: %s\n' "$SECONDS" "$*" >&2; exit 1; }
on_err() {
    local rc=$? line=${BASH_LINENO[0]:-?}
    printf '[provision +%ss] FAILED (exit %s) at line %s: %s\n' \
        "$SECONDS" "$rc" "$line" "$BASH_COMMAND" >&2
}
trap on_err ERR

[ "$(id -u)" = 0 ] || die "must run as root (installs packages, writes $CACHE)"
command -v apt-get >/dev/null || die "apt-get not found: this script needs Debian"

mkdir -p "$CACHE" "$CACHE/bin"

# Serialize concurrent provisioning runs (two test runs at once, etc.).
exec 9>"$CACHE/.provision.lock"
if ! flock -n 9; then
    log "another provision.sh holds $CACHE/.provision.lock; waiting for it"
    flock 9
fi

# ---------------------------------------------------------------- apt helpers
APT_UPDATED=0
apt_update() {
    [ "$APT_UPDATED" = 1 ] && return 0
    local i
    for i in 1 2 3; do
        log "apt-get update (attempt $i)"
        if apt-get -q update >"$CACHE/apt-update.log" 2>&1; then
            APT_UPDATED=1
            return 0
        fi
        tail -n 20 "$CACHE/apt-update.log" >&2 || true
        sleep $((i * 5))
    done
    die "apt-get update failed 3 times (see $CACHE/apt-update.log)"
}

apt_install() {
    # Keep package maintainer scripts from starting services (etcd-server would
    # otherwise try to start a system-wide etcd on :2379 on some machines).
    local made_policy=0 rc=0
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    log "apt-get install $*"
    apt-get -q -y -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
        install --no-install-recommends "$@" >"$CACHE/apt-install.log" 2>&1 || rc=$?
    [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
    if [ "$rc" != 0 ]; then
        tail -n 30 "$CACHE/apt-install.log" >&2 || true
        die "apt-get install $* failed (exit $rc; see $CACHE/apt-install.log)"
    fi
}

# Install the listed packages unless all the listed commands already exist.
# usage: ensure_tools "cmd1 cmd2" pkg1 pkg2 ...
ensure_tools() {
    local cmds=$1; shift
    local c missing=""
    for c in $cmds; do
        command -v "$c" >/dev/null 2>&1 || missing="$missing $c"
    done
    if [ -z "$missing" ]; then
        log "already installed:$(printf ' %s' $cmds)"
        return 0
    fi
    log "missing commands:$missing"
    apt_update
    apt_install "$@"
    for c in $cmds; do
        command -v "$c" >/dev/null 2>&1 || die "command '$c' still missing after installing $*"
    done
}

# ------------------------------------------------------------ deb-src entry
# Prints "present" if a deb-src entry for $SUITE main already exists; otherwise
# prints "URI<TAB>SIGNED-BY" of the existing deb entry for $SUITE main.
find_deb_entry() {
    local f
    # One-line format (sources.list, *.list).
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        if grep -Eq "^[[:space:]]*deb-src[[:space:]].*[[:space:]]$SUITE[[:space:]].*\bmain\b" "$f"; then
            echo present; return 0
        fi
    done
    # deb822 format (*.sources): look at all files for an existing deb-src
    # entry before settling on the first matching deb entry to copy.
    local out cand822=""
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        out=$(awk -v suite="$SUITE" '
            function flush() {
                if (types != "" && enabled !~ /^[Nn][Oo]/ &&
                    (" " suites " ") ~ (" " suite " ") && (" " comps " ") ~ / main /) {
                    if ((" " types " ") ~ / deb-src /) { print "present"; found = 1; exit }
                    if ((" " types " ") ~ / deb / && cand == "") {
                        split(uris, u, " "); cand = u[1] "\t" signed
                    }
                }
                types = ""; uris = ""; suites = ""; comps = ""; signed = ""; enabled = ""
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            /^[ \t]/   { next }               # continuation line (e.g. inline key)
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "suites") suites = val
                else if (key == "components") comps = val
                else if (key == "signed-by") signed = val
                else if (key == "enabled") enabled = val
            }
            END { if (!found) { flush(); if (!found && cand != "") print cand } }
        ' "$f")
        if [ "$out" = present ]; then echo present; return 0; fi
        if [ -n "$out" ] && [ -z "$cand822" ]; then cand822=$out; fi
    done
    if [ -n "$cand822" ]; then echo "$cand822"; return 0; fi
    # One-line deb entry to copy.
    local line
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        line=$(grep -E "^[[:space:]]*deb[[:space:]].*[[:space:]]$SUITE[[:space:]].*\bmain\b" "$f" | head -n1 || true)
        if [ -n "$line" ]; then
            printf 'LINE\t%s\n' "$line"; return 0
        fi
    done
    return 0
}

ensure_deb_src() {
    if [ -f "$DEB_SRC_FILE" ] || [ -f "${DEB_SRC_FILE%.sources}.list" ]; then
        log "deb-src entry already present ($DEB_SRC_FILE)"
        return 0
    fi
    local entry uri signed
    entry=$(find_deb_entry)
    case "$entry" in
        present)
            log "a deb-src entry for $SUITE main already exists"
            return 0 ;;
        LINE$'\t'*)
            local line=${entry#LINE$'\t'}
            # deb [opts] URI suite comps...  ->  deb-src [opts] URI $SUITE main
            line=$(printf '%s\n' "$line" | sed -E "s/^[[:space:]]*deb[[:space:]]+//; s/[[:space:]]$SUITE[[:space:]].*\$//")
            log "adding deb-src entry: deb-src $line $SUITE main"
            printf '# Added by kevents scripts/apiserver/provision.sh\ndeb-src %s %s main\n' \
                "$line" "$SUITE" >"${DEB_SRC_FILE%.sources}.list"
            APT_UPDATED=0
            return 0 ;;
        "")
            uri=http://deb.debian.org/debian
            signed=/usr/share/keyrings/debian-archive-keyring.gpg
            log "no deb entry for $SUITE main found; falling back to $uri" ;;
        *)
            uri=${entry%%$'\t'*}
            signed=${entry#*$'\t'} ;;
    esac
    log "adding deb-src entry: $uri $SUITE main (Signed-By: ${signed:-none})"
    {
        echo "# Added by kevents scripts/apiserver/provision.sh"
        echo "Types: deb-src"
        echo "URIs: $uri"
        echo "Suites: $SUITE"
        echo "Components: main"
        if [ -n "$signed" ]; then echo "Signed-By: $signed"; fi
    } >"$DEB_SRC_FILE"
    APT_UPDATED=0
}

# Build recipe revision: bump it when the build changes, so caches of older builds are
# not reused. r2: vendored reflect2 replaced by 1.0.2 (1.0.1 crashes under Go >= 1.18).
RECIPE=r2
REFLECT2_SRC=/usr/share/gocode/src/github.com/modern-go/reflect2

# ------------------------------------------------------------------ helpers
src_version() {
    # Highest version of the source package apt knows about ("" if none).
    { apt-cache showsrc --only-source "$SRC_PKG" 2>/dev/null || true; } \
        | awk '/^Version:/ {print $2}' | sort -V | tail -n1 | sed 's/^[0-9]*://'
}

link_binary() {
    local bin=$1
    ln -sfn "$bin" "$CACHE/bin/.kube-apiserver.tmp"
    mv -Tf "$CACHE/bin/.kube-apiserver.tmp" "$CACHE/bin/kube-apiserver"
    log "symlink: $CACHE/bin/kube-apiserver -> $bin"
}

check_binary() {
    local bin=$1 v
    v=$("$bin" --version 2>&1) || die "$bin --version failed: $v"
    log "$bin: $v"
}

finish() {
    log "done in ${SECONDS}s; kube-apiserver: $CACHE/bin/kube-apiserver"
}


# ------------------------------------- Kubernetes 1.36 and 1.37 from Go modules
# KEVENTS_K8S_VERSION=1.36 or 1.37: kube-apiserver and etcd built with Go from the Go module
# proxy (no Debian source involved). The pinned versions live in the wrapper modules' go.mod:
# k8s-1.36 + etcd-3.6 (v1.36.3, etcd 3.6.8), k8s-1.37 + etcd-3.7 (v1.37.2, etcd 3.7.0).
# Recipe revision of this build (bump when the build flags change).
GO_RECIPE=r1
K8S_MOD="" ETCD_MOD=""

pick_go() {
    local g
    for g in ${KEVENTS_GO:-} /usr/local/go/bin/go "$(command -v go || true)"; do
        [ -n "$g" ] && [ -x "$g" ] || continue
        local v minor
        v=$("$g" env GOVERSION 2>/dev/null || true)      # go1.26.8
        minor=$(printf '%s\n' "$v" | sed -nE 's/^go1\.([0-9]+).*/\1/p')
        if [ -n "$minor" ] && [ "$minor" -ge 21 ]; then echo "$g"; return 0; fi
        log "skipping $g ($v): too old to build Kubernetes 1.36/1.37 (needs Go >= 1.26, or >= 1.21 to fetch it)"
    done
    return 1
}

# The version a wrapper go.mod pins for module $2 (e.g. v1.36.3).
pinned() { awk -v m="$2" '($1 == m && $2 ~ /^v/) {print $2; exit} ($1 == "require" && $2 == m) {print $3; exit}' "$1/go.mod"; }

provision_go_build() {
    local want=$1 kver etcdver dest link stamp
    case "$want" in
        1.36|1.36.*|v1.36|v1.36.*) K8S_MOD="$SCRIPT_DIR/k8s-1.36" ETCD_MOD="$SCRIPT_DIR/etcd-3.6" ;;
        1.37|1.37.*|v1.37|v1.37.*) K8S_MOD="$SCRIPT_DIR/k8s-1.37" ETCD_MOD="$SCRIPT_DIR/etcd-3.7" ;;
    esac
    kver=$(pinned "$K8S_MOD" k8s.io/kubernetes)
    etcdver=$(pinned "$ETCD_MOD" go.etcd.io/etcd/server/v3)
    [ -n "$kver" ] && [ -n "$etcdver" ] || die "cannot read the pinned versions from $K8S_MOD/go.mod and $ETCD_MOD/go.mod"
    case "$want" in
        1.36|v1.36|1.37|v1.37) ;;
        *) [ "v${want#v}" = "$kver" ] || die "KEVENTS_K8S_VERSION=$want, but $K8S_MOD/go.mod pins k8s.io/kubernetes $kver" ;;
    esac
    dest="$CACHE/k8s-${kver#v}"
    link="$CACHE/k8s-$(printf '%s\n' "${kver#v}" | cut -d. -f1,2)"
    # What the binaries are built from: the recipe, both wrapper modules (go.mod, go.sum, main.go).
    stamp=$({ echo "$GO_RECIPE"; cat "$K8S_MOD/go.mod" "$K8S_MOD/go.sum" "$K8S_MOD/main.go" \
        "$ETCD_MOD/go.mod" "$ETCD_MOD/go.sum" "$ETCD_MOD/main.go"; } | sha256sum | cut -c1-16)
    log "Kubernetes $kver + etcd $etcdver from Go modules (recipe $GO_RECIPE, inputs $stamp)"

    if [ "${KEVENTS_FORCE_REBUILD:-0}" != 1 ] && [ -x "$dest/kube-apiserver" ] && [ -x "$dest/etcd" ] \
       && [ "$(cat "$dest/RECIPE" 2>/dev/null)" = "$stamp" ]; then
        log "cached binaries found: $dest (skipping the build)"
    else
        local go gover ldflags p date tmp t0
        go=$(pick_go) || die "no usable Go found (set KEVENTS_GO; Debian bookworm's golang-go 1.19 is too old for Kubernetes 1.36/1.37)"
        gover=$("$go" env GOVERSION)
        log "go: $go ($gover)"
        mkdir -p "$CACHE/go/mod" "$CACHE/go/build" "$CACHE/go/tmp"
        date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
        ldflags="-s -w"
        for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
            ldflags="$ldflags -X $p.gitVersion=$kver -X $p.gitMajor=1 -X $p.gitMinor=$(printf '%s\n' "$kver" | cut -d. -f2)"
            ldflags="$ldflags -X $p.gitTreeState=clean -X $p.buildDate=$date"
        done
        tmp="$dest.tmp"
        rm -rf "$tmp"; mkdir -p "$tmp"
        go_build() {   # usage: go_build MODULE_DIR OUT LOG [go build flags...]
            local mod=$1 out=$2 logf=$3; shift 3
            ( cd "$mod" && env GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTMPDIR="$CACHE/go/tmp" \
                GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0 GOWORK=off \
                "$go" build -trimpath "$@" -o "$out" . ) >"$logf" 2>&1 &
            local pid=$! t0=$SECONDS next=$((SECONDS + 60))
            while kill -0 "$pid" 2>/dev/null; do
                sleep 1
                if [ "$SECONDS" -ge "$next" ]; then
                    log "still building $(basename "$out") ($((SECONDS - t0))s)"
                    next=$((SECONDS + 60))
                fi
            done
            if ! wait "$pid"; then
                tail -n 40 "$logf" >&2 || true
                die "go build of $mod failed (see $logf)"
            fi
            log "built $(basename "$out") in $((SECONDS - t0))s"
        }
        log "building etcd $etcdver (log: $CACHE/go/etcd-build.log)"
        go_build "$ETCD_MOD" "$tmp/etcd" "$CACHE/go/etcd-build.log" -ldflags "-s -w"
        log "building kube-apiserver $kver (log: $CACHE/go/kube-apiserver-build.log; ~10-20 min cold on 2 cores)"
        # The tags and version variables of upstream's hack/lib/golang.sh and version.sh.
        go_build "$K8S_MOD" "$tmp/kube-apiserver" "$CACHE/go/kube-apiserver-build.log" \
            -tags selinux,notest,grpcnotrace -ldflags "$ldflags"
        echo "$stamp" >"$tmp/RECIPE"
        "$go" version -m "$tmp/kube-apiserver" 2>/dev/null | grep -E '^\s+(go|dep\s+k8s\.io/(kubernetes|api|apiserver|client-go)\s)' >"$tmp/BUILDINFO" || true
        rm -rf "$dest"; mv -T "$tmp" "$dest"
    fi
    local v
    v=$("$dest/kube-apiserver" --version 2>&1) || die "$dest/kube-apiserver --version failed: $v"
    [ "$v" = "Kubernetes $kver" ] || die "$dest/kube-apiserver --version says '$v', expected 'Kubernetes $kver'"
    log "$dest/kube-apiserver: $v"
    # Whole output first: `| head -n1` under pipefail fails when etcd is still writing as
    # head exits (SIGPIPE), which made a cached run fail now and then.
    v=$("$dest/etcd" --version 2>&1) || die "$dest/etcd --version failed: $v"
    v=${v%%$'\n'*}
    log "$dest/etcd: $v"
    ln -sfn "$(basename "$dest")" "$link.tmp"
    mv -Tf "$link.tmp" "$link"
    log "symlink: $link -> $(basename "$dest")"
    log "done in ${SECONDS}s; kube-apiserver: $link/kube-apiserver, etcd: $link/etcd"
}

# --------------------------------------------------------------------- main
log "cache directory: $CACHE"

# Runtime tools (cheap when already installed).
ensure_tools "etcd openssl curl flock" etcd-server openssl curl ca-certificates util-linux
# Tests run `kubectl describe`; the machine image ships kubectl, Debian's client is the fallback.
ensure_tools "kubectl" kubernetes-client
# .ci/run's checks (filecycles.py, docscheck.py) and the bench scripts are Python 3.
ensure_tools "python3" python3
# The export tests (crates/kevents-cli/tests/export_real_apiserver.rs) start a `nats-server -js`
# of their own: Debian's package (its service is not started: see install_pkgs).
ensure_tools "nats-server" nats-server
# .ci/run's instruction-count guard (scripts/icount.py) counts with callgrind.
ensure_tools "valgrind" valgrind

case "${KEVENTS_K8S_VERSION:-}" in
    ""|1.20|1.20.2|v1.20.2) ;;
    1.36|1.36.*|v1.36|v1.36.*|1.37|1.37.*|v1.37|v1.37.*)
        provision_go_build "$KEVENTS_K8S_VERSION"
        exit 0 ;;
    *) die "KEVENTS_K8S_VERSION=$KEVENTS_K8S_VERSION: supported are 1.20 (the default, v1.20.2 from Debian's source), 1.36 and 1.37 (from Go modules)" ;;
esac

if [ "${KEVENTS_FORCE_REBUILD:-0}" != 1 ]; then
    # Prefer the version apt knows about (no network needed); on a machine
    # without deb-src lists, any cached build is good enough.
    version=$(src_version)
    cached=""
    if [ -n "$version" ] && [ -x "$CACHE/kube-apiserver-$version-$RECIPE/kube-apiserver" ]; then
        cached="$CACHE/kube-apiserver-$version-$RECIPE/kube-apiserver"
    elif [ -z "$version" ]; then
        cached=$(ls -1d "$CACHE"/kube-apiserver-*-"$RECIPE"/kube-apiserver 2>/dev/null | sort -V | tail -n1 || true)
    fi
    if [ -n "$cached" ] && [ -x "$cached" ]; then
        log "cached binary found: $cached (skipping source download and build)"
        check_binary "$cached"
        link_binary "$cached"
        finish
        exit 0
    fi
fi

# ------------------------------------------------------------- cold path
log "no cached kube-apiserver; building from Debian source (takes ~6-10 minutes)"
ensure_deb_src
apt_update
if command -v go >/dev/null 2>&1 && command -v rsync >/dev/null 2>&1 \
   && command -v dpkg-source >/dev/null 2>&1 && command -v make >/dev/null 2>&1; then
    log "build tools already installed: $(go version)"
else
    apt_install golang-go rsync dpkg-dev make xz-utils ca-certificates
fi
[ -d "$REFLECT2_SRC" ] || apt_install golang-github-modern-go-reflect2-dev
log "go: $(go version)"

version=$(src_version)
[ -n "$version" ] || die "apt does not know source package '$SRC_PKG' (deb-src for $SUITE main missing? see $DEB_SRC_FILE)"
log "Debian source version: $SRC_PKG $version"
dest_dir="$CACHE/kube-apiserver-$version-$RECIPE"
dest="$dest_dir/kube-apiserver"

mkdir -p "$WORK/src"
cd "$WORK/src"
# apt-get source reuses already downloaded (and verified) files; dpkg-source
# refuses to unpack over an existing tree, so remove any partial tree first.
find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name "$SRC_PKG-*" -exec rm -rf {} +
log "apt-get source $SRC_PKG=$version (into $WORK/src)"
if ! apt-get -q -y source "$SRC_PKG=$version" >"$WORK/apt-source.log" 2>&1; then
    tail -n 30 "$WORK/apt-source.log" >&2 || true
    die "apt-get source $SRC_PKG=$version failed (see $WORK/apt-source.log)"
fi
tree=$(find "$WORK/src" -mindepth 1 -maxdepth 1 -type d -name "$SRC_PKG-*" | head -n1)
[ -n "$tree" ] && [ -f "$tree/Makefile" ] || die "unpacked source tree not found under $WORK/src"
log "source tree: $tree ($(du -sh "$tree" | cut -f1))"

# Kubernetes 1.20 vendors reflect2 1.0.1, whose unsafe map iteration breaks under Go 1.18+
# (the apiserver then panics while encoding some objects, e.g. on Namespace or ConfigMap
# creates). 1.0.2 has the same API and works; Debian ships it.
[ -d "$tree/vendor/github.com/modern-go/reflect2" ] || die "vendored reflect2 not found in $tree"
rm -rf "$tree/vendor/github.com/modern-go/reflect2"
cp -r "$REFLECT2_SRC" "$tree/vendor/github.com/modern-go/reflect2"
log "vendored reflect2 replaced by $(dpkg-query -W -f='${Version}' golang-github-modern-go-reflect2-dev 2>/dev/null || echo the Debian copy)"

# The build expects a GOPATH layout with the tree at src/k8s.io/kubernetes.
mkdir -p "$tree/.go/src/k8s.io" "$WORK/home" "$WORK/gocache" "$WORK/tmp"
ln -sfn "$tree" "$tree/.go/src/k8s.io/kubernetes"

# Upstream version string: the tree has no .git, so tell the build scripts.
kube_version=${version#*really}          # 1.20.5+really1.20.2-1 -> 1.20.2-1
kube_version=v${kube_version%%-*}        # -> v1.20.2
log "building cmd/kube-apiserver ($kube_version), log: $WORK/build.log"
build_start=$SECONDS
(
    cd "$tree/.go/src/k8s.io/kubernetes"
    env HOME="$WORK/home" \
        GOPATH="$tree/.go" \
        GOCACHE="$WORK/gocache" \
        GOTMPDIR="$WORK/tmp" \
        GOFLAGS="" \
        GOPROXY=off \
        CGO_ENABLED=0 \
        KUBE_GIT_VERSION="$kube_version" \
        KUBE_GIT_TREE_STATE=clean \
        make WHAT=cmd/kube-apiserver
) >"$WORK/build.log" 2>&1 &
build_pid=$!
# Progress heartbeat while the (long, quiet) build runs.
while kill -0 "$build_pid" 2>/dev/null; do
    sleep 30
    kill -0 "$build_pid" 2>/dev/null || break
    log "still building ($((SECONDS - build_start))s): $(tail -n1 "$WORK/build.log" 2>/dev/null | cut -c1-120)"
done
if ! wait "$build_pid"; then
    tail -n 40 "$WORK/build.log" >&2 || true
    die "make WHAT=cmd/kube-apiserver failed (see $WORK/build.log)"
fi
log "build finished in $((SECONDS - build_start))s"

built="$tree/_output/local/bin/linux/amd64/kube-apiserver"
[ -x "$built" ] || built=$(find "$tree/_output" -type f -name kube-apiserver -perm -u+x | head -n1)
[ -n "$built" ] && [ -x "$built" ] || die "build succeeded but no kube-apiserver binary under $tree/_output"

mkdir -p "$dest_dir"
cp "$built" "$dest.tmp"
chmod 0755 "$dest.tmp"
mv -f "$dest.tmp" "$dest"
check_binary "$dest"
link_binary "$dest"

if [ "${KEVENTS_KEEP_WORK:-0}" = 1 ]; then
    log "KEVENTS_KEEP_WORK=1: keeping $WORK"
else
    log "removing build tree and Go cache ($(du -sh "$WORK" | cut -f1)) at $WORK"
    rm -rf "$WORK"
fi
finish
