#!/usr/bin/env bash
# Packages every published crate (kevents-core, kevents-actors, kevents-runtime, kevents-http,
# kevents-sim, kevents-export, kevents-kube and the kevents facade) as `cargo publish` would, and verifies that each .crate
# builds on its own: Cargo packages the workspace members together, in dependency order, and builds the
# dependents against the freshly packaged dependencies through a local registry overlay, so
# nothing has to be on crates.io yet. kevents-testkit, kevents-cli and kevents-icount are `publish = false`.
#
# Usage: bash scripts/package.sh [extra cargo package flags, e.g. --no-verify]
# Result: $CARGO_TARGET_DIR/package/*.crate (default target/package/). The verification
# builds go to a target directory of their own, $CARGO_TARGET_DIR-package.
set -euo pipefail
cd "$(dirname "$0")/.."

# The verification builds the libraries without dev-dependencies, so k8s-openapi (through
# kube) needs its Kubernetes version from the environment; a final binary picks its own.
export K8S_OPENAPI_ENABLED_VERSION="${K8S_OPENAPI_ENABLED_VERSION:-1.37}"

crates=(kevents-core kevents-actors kevents-runtime kevents-http kevents-sim kevents-kube kevents-export kevents)
# The first `version = ` of the root manifest is [workspace.package]'s, shared by all crates.
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)

# Cargo unpacks the packaged dependencies of the verification builds into
# $CARGO_HOME/registry/src/<overlay>/<crate>-<version> and reuses such a directory if it
# exists, even when the .crate changed since (same version, new sources). Remove what an
# earlier run left, so each run verifies against the sources it just packaged.
registry="${CARGO_HOME:-$HOME/.cargo}/registry"
for crate in "${crates[@]}"; do
    rm -rf "$registry"/src/*/"$crate-$version" "$registry"/cache/*/"$crate-$version.crate"
done
# Cargo also treats a registry crate of a given version as immutable in the target
# directory: a kevents-core built from an earlier package run would be linked again. The
# verification therefore builds in a target directory of its own (third-party crates stay
# cached there), from which every kevents artifact is removed first.
dir="${CARGO_TARGET_DIR:-target}/package"
verify="${CARGO_TARGET_DIR:-target}-package"
rm -rf "$verify"/debug/.fingerprint/kevents* "$verify"/debug/deps/*kevents* \
    "$verify"/debug/build/kevents* "$verify"/package

# --allow-dirty: this checks that the crates package and build; it does not publish.
CARGO_TARGET_DIR="$verify" cargo package --workspace --locked --allow-dirty \
    --exclude kevents-testkit --exclude kevents-cli --exclude kevents-icount "$@"
mkdir -p "$dir"
for crate in "${crates[@]}"; do
    cp "$verify/package/$crate-$version.crate" "$dir/"
done
for crate in "${crates[@]}"; do
    file="$dir/$crate-$version.crate"
    # The license text ships with every crate (a symlink to the root LICENSE in each
    # crate directory, which Cargo packages as a file).
    files=$(tar -tzf "$file")
    if ! grep -qx "$crate-$version/LICENSE" <<<"$files"; then
        echo "error: $file has no LICENSE" >&2
        exit 1
    fi
    # Sources only: a crate over 1 MiB has picked up fixtures or build output.
    size=$(stat -c %s "$file")
    if [ "$size" -gt 1048576 ]; then
        echo "error: $file is $size bytes; check the package's include/exclude" >&2
        exit 1
    fi
    printf '%-16s %7d bytes, %3d files\n' "$crate" "$size" "$(wc -l <<<"$files")"
done
