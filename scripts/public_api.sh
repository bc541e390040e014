#!/usr/bin/env bash
# The public API of every published crate, listed and checked.
#
# usage: bash scripts/public_api.sh           rewrite the listings in api/
#        bash scripts/public_api.sh --check   compare them with the tree; exit 1 on any difference
#
# Each listing (api/<crate>.txt) is scripts/public_api.py's reading of rustdoc's JSON output
# (`--output-format json`, hidden items included and marked), one item a line, sorted: a new
# `pub fn`, a renamed type, a changed signature or a new `#[doc(hidden)]` item all show as a
# diff. rustdoc's JSON is unstable, so it comes from one pinned nightly toolchain (installed
# by rustup if missing) whatever the stable toolchain is; the listing changes only when the
# code does, or when the pin is moved on purpose (then rewrite the listings).
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLCHAIN=nightly-2026-05-20
check=0
case "${1:-}" in
    --check) check=1 ;;
    "") ;;
    *) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

if ! rustup run "$TOOLCHAIN" rustdoc --version >/dev/null 2>&1; then
    rustup toolchain install "$TOOLCHAIN" --profile minimal >/dev/null
fi
# A target directory of its own (inside the build's, so the tree stays clean): the nightly's
# artifacts do not evict the stable build's.
export CARGO_TARGET_DIR="${KEVENTS_CARGO_TARGET:-${CARGO_TARGET_DIR:-target}}/public-api"
# The sinks' crates leave the Kubernetes version to the final build; pick one for the docs.
export K8S_OPENAPI_ENABLED_VERSION="${K8S_OPENAPI_ENABLED_VERSION:-1.34}"

# crate, then the cargo flags its listing is made with (the facade: every feature).
crates=(
    "kevents-core|"
    "kevents-actors|"
    "kevents-runtime|"
    "kevents-http|"
    "kevents-kube|"
    "kevents-sim|"
    "kevents-export|"
    "kevents|--all-features"
)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mkdir -p api
status=0
for entry in "${crates[@]}"; do
    crate=${entry%%|*}
    flags=${entry#*|}
    # shellcheck disable=SC2086 # flags is a word list
    cargo +"$TOOLCHAIN" rustdoc -q --locked -p "$crate" --lib $flags -- \
        -Z unstable-options --output-format json --document-hidden-items
    json="$CARGO_TARGET_DIR/doc/${crate//-/_}.json"
    python3 scripts/public_api.py "$json" >"$out/$crate.txt"
    if [ "$check" = 1 ]; then
        if ! diff -u "api/$crate.txt" "$out/$crate.txt"; then
            echo "public_api: the public API of $crate differs from api/$crate.txt (above)." >&2
            status=1
        fi
    else
        cp "$out/$crate.txt" "api/$crate.txt"
        echo "api/$crate.txt: $(wc -l <"api/$crate.txt") items"
    fi
done
if [ "$status" != 0 ]; then
    echo "public_api: if the change is meant, run 'bash scripts/public_api.sh' and commit api/." >&2
fi
exit "$status"
