#!/usr/bin/env python3
"""A/B runs of two kevents builds, interleaved: what docs/benchmarks.md reports as "A/B
rounds" (the machines are noisy, so only ratios of runs made in the same minute count).

  python3 scripts/bench/ab.py ROUNDS BASE,NEW ["bench arguments"] [key,key,...]

Each round runs BASE and NEW once each with the same arguments (default: `bench emit --runs
1`), alternating which goes first, and takes the last JSON line of each. Prints the median of
each key per build and the median of the per-round ratios NEW/BASE.
"""
import json, statistics, subprocess, sys

rounds = int(sys.argv[1])
bins = sys.argv[2].split(",")
args = sys.argv[3].split() if len(sys.argv) > 3 else ["bench", "emit", "--runs", "1"]
keys = (sys.argv[4].split(",") if len(sys.argv) > 4
        else ["core_emit_ns", "bound_emit_ns", "v1_emit_ns", "core_emit_with_args_ns"])
res = {b: {k: [] for k in keys} for b in bins}
ratios = {k: [] for k in keys}
for r in range(rounds):
    got = {}
    for b in (bins if r % 2 == 0 else bins[::-1]):
        out = subprocess.run([b] + args, capture_output=True, text=True, check=True).stdout
        d = json.loads([l for l in out.splitlines() if l.startswith("{")][-1])
        got[b] = d
        for k in keys:
            res[b][k].append(d[k])
    for k in keys:
        ratios[k].append(got[bins[1]][k] / got[bins[0]][k])
for b in bins:
    print(b, {k: round(statistics.median(res[b][k]), 1) for k in keys})
print("ratio new/base", {k: round(statistics.median(v), 3) for k, v in ratios.items()})
