#!/usr/bin/env python3
"""The instruction-count guard (docs/benchmarks.md, "Instruction counts").

Runs each measure of `kevents-icount` (crates/kevents-icount: fixed, deterministic work on a
hot path) under `valgrind --tool=callgrind`, counting only the instructions of the measured
function and everything it calls (`--collect-atstart=no --toggle-collect=FUNCTION`), and
compares each count with the baseline checked in at crates/kevents-icount/baseline.json.
Fails (exit 1) when any count grows by more than the tolerance (5 %), when the work a measure
did (events created, records exported, ...) differs from the baseline's, or when a measure
has no baseline.

usage: python3 scripts/icount.py [--runs N] [--only M[,M...]] [--no-build] [--bin PATH]
       python3 scripts/icount.py --update --why "TEXT"

--update rewrites the baseline with this run's counts and TEXT as the reason. It is meant to
be committed on its own, in a commit that says why (a deliberate cost, a new compiler, a
faster path); the guard never rewrites it by itself.
"""

import argparse
import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BASELINE = os.path.join(ROOT, "crates", "kevents-icount", "baseline.json")
TOLERANCE = 0.05
COMMAND = "python3 scripts/icount.py"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def tool_versions():
    valgrind = run(["valgrind", "--version"]).stdout.strip()
    rustc = run(["rustc", "-V"], cwd=ROOT).stdout.strip()
    return valgrind, rustc


def build():
    cmd = ["cargo", "build", "--release", "--locked", "-p", "kevents-icount"]
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT)
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    return os.path.join(target, "release", "kevents-icount")


def measures(binary):
    out = run([binary, "--list"]).stdout
    return [tuple(line.split(" ", 1)) for line in out.splitlines() if line.strip()]


def count(binary, name, function, tmp, run_no):
    """Instructions of `function` (inclusive) in one run of measure `name`, and its work."""
    out_file = os.path.join(tmp, f"callgrind.{name}.{run_no}")
    cmd = [
        "valgrind", "--tool=callgrind", "--quiet",
        f"--callgrind-out-file={out_file}",
        "--collect-atstart=no", f"--toggle-collect={function}",
        binary, name,
    ]
    p = subprocess.run(cmd, text=True, capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{name}: {' '.join(cmd)} exited {p.returncode}:\n{p.stderr}")
    work = json.loads(p.stdout.strip().splitlines()[-1])
    total = None
    with open(out_file) as f:
        for line in f:
            m = re.match(r"^(?:summary|totals):\s+(\d+)", line)
            if m:
                total = int(m.group(1))
    if not total:
        raise RuntimeError(
            f"{name}: callgrind counted nothing in {function!r} (renamed, or inlined?)")
    return total, work


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true",
                    help="rewrite the baseline with this run's counts (needs --why)")
    ap.add_argument("--why", help="why the baseline is rewritten (kept in the file)")
    ap.add_argument("--runs", type=int, default=1,
                    help="runs of each measure (the spread is reported; the highest is compared)")
    ap.add_argument("--only", help="comma-separated measures (default: all)")
    ap.add_argument("--no-build", action="store_true", help="use the binary as built")
    ap.add_argument("--bin", help="the kevents-icount binary (implies --no-build)")
    ap.add_argument("--jobs", type=int, default=2, help="valgrind processes at once (2)")
    args = ap.parse_args()
    if args.update and not (args.why and args.why.strip()):
        ap.error("--update needs --why \"...\": the baseline records why it was rewritten")
    if args.runs < 1 or args.jobs < 1:
        ap.error("--runs and --jobs must be at least 1")

    if args.bin:
        binary = args.bin
    else:
        target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
        binary = (os.path.join(target, "release", "kevents-icount")
                  if args.no_build else build())
    valgrind, rustc = tool_versions()
    all_measures = measures(binary)
    if args.only:
        wanted = args.only.split(",")
        unknown = set(wanted) - {n for n, _ in all_measures}
        if unknown:
            ap.error(f"unknown measure(s): {', '.join(sorted(unknown))}")
        all_measures = [(n, f) for n, f in all_measures if n in wanted]

    results = {}
    with tempfile.TemporaryDirectory(prefix="icount.") as tmp, \
            concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        jobs = {pool.submit(count, binary, n, f, tmp, r): (n, f)
                for r in range(args.runs) for n, f in all_measures}
        for job in concurrent.futures.as_completed(jobs):
            n, f = jobs[job]
            total, work = job.result()
            results.setdefault(n, {"function": f, "counts": [], "works": []})
            results[n]["counts"].append(total)
            results[n]["works"].append(work)

    baseline = {}
    if os.path.exists(BASELINE):
        with open(BASELINE) as f:
            baseline = json.load(f)
    base_measures = baseline.get("measures", {})

    print(f"{valgrind}, {rustc}; tolerance {TOLERANCE:.0%}; baseline "
          f"{os.path.relpath(BASELINE, ROOT)} ({baseline.get('valgrind', '-')}, "
          f"{baseline.get('rustc', '-')})")
    if baseline and (baseline.get("valgrind") != valgrind or baseline.get("rustc") != rustc):
        print("note: the baseline was made with another valgrind or rustc: a change in the "
              "counts may be the tools'")
    print(f"{'measure':<16} {'baseline':>14} {'now':>14} {'now/base':>9} {'spread':>8}  verdict")
    failed = []
    for n, _ in all_measures:
        r = results[n]
        counts = r["counts"]
        now = max(counts)
        spread = (max(counts) - min(counts)) / min(counts)
        works = r["works"]
        b = base_measures.get(n)
        if any(w != works[0] for w in works):
            verdict = "FAIL: the work differs between runs"
            failed.append(n)
        elif b is None:
            verdict = "no baseline"
            if not args.update:
                failed.append(n)
        elif b.get("work") != works[0]:
            verdict = f"FAIL: the work changed (baseline {b.get('work')}, now {works[0]})"
            failed.append(n)
        else:
            ratio = now / b["instructions"]
            if ratio > 1 + TOLERANCE:
                verdict = f"FAIL: +{(ratio - 1):.2%} (more than {TOLERANCE:.0%})"
                failed.append(n)
            elif ratio < 1 - TOLERANCE:
                verdict = f"ok, {(1 - ratio):.2%} fewer: worth a deliberate --update"
            else:
                verdict = "ok"
        base_s = f"{b['instructions']:,}" if b else "-"
        ratio_s = f"{now / b['instructions']:.4f}" if b else "-"
        print(f"{n:<16} {base_s:>14} {now:>14,} {ratio_s:>9} {spread:>8.4%}  {verdict}")

    if args.update:
        if any("differs between runs" in n for n in failed):
            print("not updated: a measure's work is not deterministic", file=sys.stderr)
            return 1
        new = {
            "comment": "Instructions counted by callgrind in each measured function (inclusive) "
                       "of kevents-icount; rewritten only by `python3 scripts/icount.py --update "
                       "--why ...`, in a commit that says why (docs/benchmarks.md).",
            "command": COMMAND,
            "valgrind": valgrind,
            "rustc": rustc,
            "tolerance": TOLERANCE,
            "updated": datetime.date.today().isoformat(),
            "why": args.why.strip(),
            "measures": dict(base_measures),
        }
        for n, _ in all_measures:
            r = results[n]
            new["measures"][n] = {
                "function": r["function"],
                "instructions": max(r["counts"]),
                "work": r["works"][0],
            }
        with open(BASELINE, "w") as f:
            json.dump(new, f, indent=2, sort_keys=False)
            f.write("\n")
        print(f"baseline rewritten: {os.path.relpath(BASELINE, ROOT)} (commit it, saying why)")
        return 0
    if failed:
        print(f"FAILED: {', '.join(failed)} (a deliberate cost: python3 scripts/icount.py "
              f"--update --why \"...\", committed with the reason)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
