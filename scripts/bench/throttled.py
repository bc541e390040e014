#!/usr/bin/env python3
"""Workload `api` against a real kube-apiserver under EventRateLimit, kevents beside client-go.

For each limit it starts an apiserver with the limit (scripts/apiserver/start.sh with
KEVENTS_EVENT_RATE_LIMITS), then runs, interleaved, `kevents bench apiserver` and the client-go
harness's `-mode apiserver` (each in a namespace of its own, so the Namespace and
SourceAndObject limits do not carry over between runs), and prints one line per run and a
summary: stored count sum (of 2 500), event writes answered 429, seconds, and the bound the
limit sets, (writes - burst) / qps.

  python3 scripts/bench/throttled.py --kevents target/release/kevents \
      --oracle /tmp/evoracle-modern --runs 3 [--limit Namespace:50:100 ...] [--fleet 8]

--fleet N runs N kevents processes at once (each in a namespace of its own, all as one user)
against every --limit given together (default Server:100:200; e.g. --limit Server:100:200
--limit User:50:100 for both at once), --runs times, and prints each process's stored sum and
time, then per run: all exact, the share of writes answered 429, the slowest process against
the bound (the accepted writes past the tightest limit's burst over its qps) and the fastest
against the slowest:

  python3 scripts/bench/throttled.py --kevents target/release/kevents --fleet 8 --runs 3 \
      --limit Server:100:200

--together starts the fleet's processes recording at once (each prepares, says READY, and
waits for a line on its standard input: `kevents bench apiserver --start-on-input`), as
`kevents bench fleet` starts its pipelines; without it they begin as they come up (0.4-1.1 s
apart with 8 processes).

--share-law makes the fleet's processes share their write law through one Lease,
`default/kevents-fleet` (`kevents bench apiserver --fleet-lease default/kevents-fleet`:
`WriteBudget::join_fleet` linked by `FleetLease`); without it each adapts alone.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
START = os.path.join(HERE, "..", "apiserver", "start.sh")
STOP = os.path.join(HERE, "..", "apiserver", "stop.sh")
DEFAULT_LIMITS = ["Namespace:50:100", "User:20:50", "SourceAndObject:1:5"]


def start(limit):
    d = tempfile.mkdtemp(prefix="kevents-throttled-")
    state = os.path.join(d, "state")
    env = dict(os.environ, KEVENTS_EVENT_RATE_LIMITS=limit)
    subprocess.run(["bash", START, state], env=env, check=True, stdout=subprocess.DEVNULL)
    return d, state


def stop(d, state):
    subprocess.run(["bash", STOP, state], check=False, stdout=subprocess.DEVNULL)
    shutil.rmtree(d, ignore_errors=True)


def kubectl(kc, *args):
    subprocess.run(["kubectl", "--kubeconfig", kc, *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def apiserver_writes(kc):
    """429s and writes of events as the apiserver counted them (apiserver_request_total)."""
    out = subprocess.run(["kubectl", "--kubeconfig", kc, "get", "--raw", "/metrics"],
                         check=True, capture_output=True, text=True).stdout
    writes = throttled = 0
    for line in out.splitlines():
        if not line.startswith("apiserver_request_total{") or 'resource="events"' not in line:
            continue
        if not any(f'verb="{v}"' in line for v in ("POST", "PATCH", "CREATE")):
            continue
        n = int(float(line.rsplit(" ", 1)[1]))
        writes += n
        if 'code="429"' in line:
            throttled += n
    return writes, throttled


def run_kevents(binary, kc, ns):
    t = time.monotonic()
    p = subprocess.run([binary, "bench", "apiserver", "--kubeconfig", kc, "--namespace", ns],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["exit"] = p.returncode
    r["wall"] = time.monotonic() - t
    return r


def run_oracle(binary, kc, ns):
    p = subprocess.run([binary, "-mode", "apiserver", "-kubeconfig", kc, "-namespace", ns,
                        "-n", "3000", "-objects", "100", "-reasons", "3", "-messages", "2"],
                       capture_output=True, text=True)
    line = [l for l in p.stdout.splitlines() if l.startswith("{")][-1]
    return json.loads(line)


def stored_sum(kc, ns):
    out = subprocess.run(["kubectl", "--kubeconfig", kc, "get", "events", "-n", ns, "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    items = json.loads(out)["items"]
    return len(items), sum(i.get("count", 0) for i in items)


def bound(writes, qps, burst):
    return max(0.0, (writes - burst) / qps)


def measure(args, limit):
    kind, qps, burst = limit.split(":")
    qps, burst = float(qps), float(burst)
    d, state = start(limit)
    kc = os.path.join(state, "admin.kubeconfig")
    rows = []
    try:
        for i in range(args.runs):
            for impl in ("kevents", "client-go"):
                ns = f"{impl.replace('-', '')}-{i}"
                kubectl(kc, "create", "namespace", ns)
                w0, t0 = apiserver_writes(kc)
                if impl == "kevents":
                    r = run_kevents(args.kevents, kc, ns)
                    # Until the shutdown wrote the last counts (deferred spam tails).
                    secs = r.get("final_seconds", r["seconds"])
                else:
                    r = run_oracle(args.oracle, kc, ns)
                    secs = r["seconds"]
                w1, t1 = apiserver_writes(kc)
                events, total = stored_sum(kc, ns)
                writes, throttled = w1 - w0, t1 - t0
                accepted = writes - throttled
                # The bound: the accepted writes the limit lets through after its burst. A
                # SourceAndObject limit is per object: its bound is the busiest object's.
                b = bound(accepted, qps, burst)
                if kind == "SourceAndObject":
                    b = None
                # kevents (deferred spam tails, its default) stores every occurrence: 3 000;
                # client-go's exact answer is the 2 500 its spam filter lets through.
                want = 3000 if impl == "kevents" else 2500
                row = dict(limit=limit, impl=impl, run=i, events=events, sum=total,
                           writes=writes, throttled=throttled, seconds=round(secs, 2),
                           bound=None if b is None else round(b, 2),
                           exact=(total == want and events == 600))
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        stop(d, state)
    return rows


def fleet(args, limits, n, run):
    # Every process writes as the same user, so a Server and a User limit both cover the
    # whole fleet: the tightest one sets the bound.
    parsed = [(k, float(q), float(b)) for k, q, b in (l.split(":") for l in limits)]
    qps = min(q for _, q, _ in parsed)
    burst = min(b for _, q, b in parsed if q == qps)
    limit = " ".join(limits)
    d, state = start(limit)
    kc = os.path.join(state, "admin.kubeconfig")
    try:
        for i in range(n):
            kubectl(kc, "create", "namespace", f"fleet-{i}")
        w0, t0 = apiserver_writes(kc)
        together = ["--start-on-input"] if args.together else []
        shared = ["--fleet-lease", "default/kevents-fleet"] if args.share_law else []
        procs = [subprocess.Popen([args.kevents, "bench", "apiserver", "--kubeconfig", kc,
                                   "--namespace", f"fleet-{i}"] + together + shared,
                                  stdin=subprocess.PIPE if together else subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for i in range(n)]
        if together:
            # Every process prepared (probed, namespace cleared, pipeline built), then all go.
            for i, p in enumerate(procs):
                line = p.stdout.readline()
                if line.strip() != "READY":
                    for q in procs:
                        q.kill()  # not left waiting to start against a stopped apiserver
                    sys.exit(f"process {i} did not get ready: {line!r} {p.stderr.read()}")
            for p in procs:
                p.stdin.write("\n")
                p.stdin.flush()
            for p in procs:
                p.stdin.close()
                p.stdin = None  # communicate() below must not flush it
        # The 429s of the first 5 s (the fleet's descent from its configured rates), from
        # when the processes were told to go (or launched).
        time.sleep(5)
        throttled_early = apiserver_writes(kc)[1] - t0
        results = []
        for i, p in enumerate(procs):
            out, err = p.communicate()
            r = json.loads(out.strip().splitlines()[-1])
            if p.returncode != 0 or not r.get("stored_counts_ok"):
                # What went wrong, in the process's own words (its last lines).
                tail = "\n".join(err.strip().splitlines()[-15:])
                sys.stderr.write(f"process {i} exited {p.returncode}:\n{tail}\n{out.strip()}\n")
            results.append(r)
        w1, t1 = apiserver_writes(kc)
        writes, throttled = w1 - w0, t1 - t0
        b = bound(writes - throttled, qps, burst)
        for i, r in enumerate(results):
            print(json.dumps(dict(limit=limit, run=run, process=i, sum=r["sum_count"],
                                  events=r["stored_events"], ok=r["stored_counts_ok"],
                                  seconds=round(r["final_seconds"], 2),
                                  throttled=r["throttled"])))
        slowest = max(r["final_seconds"] for r in results)
        fastest = min(r["final_seconds"] for r in results)
        exact = sum(r["sum_count"] == r["expected_sum_count"] and r["stored_counts_ok"]
                    for r in results)
        # By the wall clock: each process's first recording, and `key` milliseconds after it.
        def first(key=None):
            return [r["began_unix_ms"] + (r[key] if key else 0) for r in results
                    if "began_unix_ms" in r and (key is None or r.get(key) is not None)]

        def spread(times, digits=3):
            return round((max(times) - min(times)) / 1000, digits) if times else None
        summary = dict(limit=limit, run=run, processes=n, exact=f"{exact} of {n}",
                       share_law=bool(args.share_law),
                       # The last process's first recording after the first's.
                       began_spread=spread(first(), 2),
                       # The last process's first write sent after the first's, and the
                       # last first answer after the first.
                       first_write_spread=spread(first("first_write_ms")),
                       first_answer_spread=spread(first("first_answer_ms")),
                       all_exact=exact == n, writes=writes, throttled=throttled,
                       throttled_share=round(throttled / writes, 4) if writes else None,
                       throttled_first_5s=throttled_early,
                       bound=round(b, 2), slowest=round(slowest, 2),
                       slowest_over_bound=round(slowest / b, 3) if b else None,
                       fastest=round(fastest, 2),
                       fastest_over_slowest=round(fastest / slowest, 3) if slowest else None)
        print("FLEET " + json.dumps(summary), flush=True)
        return summary
    finally:
        stop(d, state)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kevents", required=True)
    ap.add_argument("--oracle", help="the client-go harness (evoracle or evoracle-modern)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", action="append")
    ap.add_argument("--fleet", type=int, default=0)
    ap.add_argument("--together", action="store_true",
                    help="with --fleet: every process starts recording at once")
    ap.add_argument("--share-law", action="store_true",
                    help="with --fleet: the processes share their write law through one Lease")
    args = ap.parse_args()
    if args.fleet:
        for run in range(args.runs):
            fleet(args, args.limit or ["Server:100:200"], args.fleet, run)
        return
    if not args.oracle:
        ap.error("--oracle is required without --fleet")
    for limit in args.limit or DEFAULT_LIMITS:
        rows = measure(args, limit)
        for impl in ("kevents", "client-go"):
            rs = [r for r in rows if r["impl"] == impl]
            line = dict(limit=limit, impl=impl, runs=len(rs),
                        sum_median=statistics.median(r["sum"] for r in rs),
                        exact=sum(r["exact"] for r in rs),
                        throttled_median=statistics.median(r["throttled"] for r in rs),
                        writes_median=statistics.median(r["writes"] for r in rs),
                        seconds_median=statistics.median(r["seconds"] for r in rs))
            bounds = [r["seconds"] / r["bound"] for r in rs if r["bound"]]
            if bounds:
                line["over_bound_median"] = round(statistics.median(bounds), 3)
            print("SUMMARY " + json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
