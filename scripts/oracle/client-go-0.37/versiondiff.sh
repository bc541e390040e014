#!/usr/bin/env bash
# Replay trace directories through two client-go harnesses and list every trace whose outputs
# differ (byte for byte), and every trace whose output differs from its checked-in .expected.
#
# usage: versiondiff.sh OLD_HARNESS NEW_HARNESS DIR...
#   e.g. versiondiff.sh /tmp/evoracle-modern "$(scripts/oracle/client-go-0.37/build.sh)" \
#            tests/fixtures/traces* ../shared/traces*
# A directory holds NAME.jsonl, NAME.flags and NAME.expected. Lines with "regarding" or "tick"
# mark an events.k8s.io/v1 trace (run with -mode series FLAGS), others core/v1 (-mode correlate
# FLAGS). Outputs are kept in $VERSIONDIFF_OUT (default a temporary directory, printed).
# Exit 0 when the two harnesses agree on every trace, 1 otherwise.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
old=$1 new=$2; shift 2
out=${VERSIONDIFF_OUT:-$(mktemp -d)}
mkdir -p "$out"
traces=0 differ=0 lines=0
for dir in "$@"; do
    [ -d "$dir" ] || continue
    for f in "$dir"/*.jsonl; do
        [ -e "$f" ] || continue
        n=$(basename "$f" .jsonl)
        flags=$(cat "$dir/$n.flags" 2>/dev/null || true)
        if grep -qE '"(regarding|tick)"' "$f"; then mode=series; else mode=correlate; fi
        tag="$(basename "$dir")__$n"
        # shellcheck disable=SC2086
        "$old" -mode "$mode" $flags <"$f" >"$out/$tag.old" 2>"$out/$tag.old.err"
        # shellcheck disable=SC2086
        "$new" -mode "$mode" $flags <"$f" >"$out/$tag.new" 2>"$out/$tag.new.err"
        traces=$((traces + 1)); lines=$((lines + $(wc -l <"$out/$tag.new")))
        exp=same
        [ -f "$dir/$n.expected" ] && ! cmp -s "$dir/$n.expected" "$out/$tag.old" && exp="old-vs-expected-differs"
        if cmp -s "$out/$tag.old" "$out/$tag.new"; then
            printf '%-52s %-9s same (%s lines) %s\n' "$dir/$n" "$mode" "$(wc -l <"$out/$tag.new")" "${exp/same/}"
        else
            differ=$((differ + 1))
            printf '%-52s %-9s DIFFERS: %s of %s lines %s\n' "$dir/$n" "$mode" \
                "$(diff "$out/$tag.old" "$out/$tag.new" | grep -c '^>' || true)" "$(wc -l <"$out/$tag.new")" "${exp/same/}"
        fi
    done
done
echo "$traces traces, $lines output lines, $differ differ (outputs in $out)"
[ "$differ" = 0 ]
