#!/usr/bin/env python3
"""Interleaved runs of `kevents bench apiserver` and the client-go v1.20.2 harness
(`evoracle -mode apiserver`) against the same kube-apiserver, workload `api`.

  python3 scripts/bench/interleave_apiserver.py --oracle /path/to/evoracle \\
      --kubeconfig /tmp/kev-apiserver/admin.kubeconfig [--namespace bench] \\
      [--kevents target/release/kevents] [--pairs 5] [-- extra kevents bench args]

Each pair runs both once, alternating which goes first. Event writes are counted by the
apiserver itself: `apiserver_request_total{resource="events",verb=POST|PATCH}` read from
`/metrics` (`kubectl get --raw /metrics`) before and after each run. The namespace's events
are deleted before each run (the kevents bench does it itself). Prints one JSON line per
pair and a summary with the medians and the median of the per-pair ratios of seconds
(client-go's over kevents').
"""
import argparse, json, os, re, statistics, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interleave import run_json  # noqa: E402

WRITE = re.compile(r'^apiserver_request_total\{[^}]*resource="events"[^}]*verb="(POST|PATCH|CREATE)"[^}]*\} (\S+)$')


def event_writes(kubeconfig):
    text = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "get", "--raw", "/metrics"],
                          check=True, capture_output=True, text=True).stdout
    return sum(int(float(m.group(2))) for m in map(WRITE.match, text.splitlines()) if m)


def counted(kubeconfig, cmd):
    before = event_writes(kubeconfig)
    j = run_json(cmd)
    j["apiserver_event_writes_scraped"] = event_writes(kubeconfig) - before
    return j


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default="bench")
    ap.add_argument("--kevents", default="target/release/kevents")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    kev = [a.kevents, "bench", "apiserver", "--kubeconfig", a.kubeconfig,
           "--namespace", a.namespace] + a.extra
    ora = [a.oracle, "-mode", "apiserver", "-kubeconfig", a.kubeconfig, "-namespace",
           a.namespace, "-n", "3000", "-objects", "100", "-reasons", "3", "-messages", "2"]

    def oracle():
        subprocess.run(["kubectl", "--kubeconfig", a.kubeconfig, "-n", a.namespace, "delete",
                        "events", "--all"], check=True, capture_output=True)
        return counted(a.kubeconfig, ora)

    rows = []
    for i in range(a.pairs):
        if i % 2 == 0:
            k = counted(a.kubeconfig, kev); o = oracle()
        else:
            o = oracle(); k = counted(a.kubeconfig, kev)
        ratio = o["seconds"] / k["seconds"]
        row = {"pair": i + 1, "ratio": round(ratio, 2),
               "kevents": {x: k.get(x) for x in ("seconds", "apiserver_event_writes",
                                                 "apiserver_event_writes_scraped", "stored_events",
                                                 "sum_count", "dropped", "accounting_ok")},
               "client_go": {x: o.get(x) for x in ("seconds", "requests",
                                                   "apiserver_event_writes_scraped", "stored_events",
                                                   "sum_count")}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    med = lambda xs: statistics.median(xs)
    print(json.dumps({
        "pairs": a.pairs,
        "kevents_seconds_median": med([r["kevents"]["seconds"] for r in rows]),
        "client_go_seconds_median": med([r["client_go"]["seconds"] for r in rows]),
        "kevents_writes": sorted({r["kevents"]["apiserver_event_writes_scraped"] for r in rows}),
        "client_go_writes": sorted({r["client_go"]["apiserver_event_writes_scraped"] for r in rows}),
        "median_ratio_sooner": med([r["ratio"] for r in rows]),
    }))


if __name__ == "__main__":
    main()
