#!/usr/bin/env python3
"""Interleaved side-by-side runs of kevents and the client-go v1.20.2 harness (evoracle).

The machines are noisy (the same binary swings 2x from one minute to the next), so only
ratios of runs made in the same minute mean anything: each pair runs kevents once and
client-go once, alternating which goes first, and the median of the per-pair ratios is
reported.

  python3 scripts/bench/interleave.py --oracle /path/to/evoracle \\
      [--kevents target/release/kevents] [--pairs 5] [--workload hot|wide] \\
      [--what correlator|pipeline|emit] [--policy drop|backpressure|coalesce] \\
      [--emit-source emit|pipeline] [--emit-figure with-args|call|bound|pod|eventf] \\
      [--kevents-args "--sink-thread false"]

Prints one JSON line per pair and a summary line with the medians.

`--what emit`: client-go's figure (`emit_ns_per_event`) is the time of its harness's emit loop
divided by n: building the pod (`fmt.Sprintf` of name and uid), reason and message, then
`recorder.Event`, with the pipeline running. kevents' like-for-like figure is `kevents bench
emit`'s `core_emit_with_args_ns` (the same strings built the same way inside the timed loop,
then `Recorder::event`; the default); `--emit-figure call` takes `core_emit_ns` (the call
alone, arguments built beforehand), `--emit-figure bound` `bound_emit_ns` (the call on an
`ObjectRecorder` bound to the object beforehand), `--emit-figure pod` `pod_emit_ns` (the call
on a k8s-openapi `Pod` built beforehand, as a kube-rs controller holds its objects),
`--emit-figure eventf` `eventf_emit_ns` (`eventf!` formatting its message, as client-go's
`Eventf`), and `--emit-source pipeline` the emit figure of `kevents
bench pipeline` (the call alone, during the pipeline benchmark).
"""
import argparse, json, shlex, statistics, subprocess, sys

WORKLOADS = {
    "hot": dict(n=200000, objects=1000, reasons=5, messages=3),
    "wide": dict(n=200000, objects=100000, reasons=1, messages=1),
}


def run_json(cmd):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    lines = [l for l in out.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"no JSON from {' '.join(cmd)}:\n{out}")
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--oracle", required=True)
    ap.add_argument("--kevents", default="target/release/kevents")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--workload", default="hot", choices=sorted(WORKLOADS))
    ap.add_argument("--what", default="correlator", choices=["correlator", "pipeline", "emit"])
    ap.add_argument("--policy", default="backpressure", choices=["drop", "backpressure", "coalesce"])
    ap.add_argument("--emit-source", default="emit", choices=["emit", "pipeline"])
    ap.add_argument("--emit-figure", default="with-args", choices=["with-args", "call", "bound", "pod", "eventf"])
    ap.add_argument("--kevents-args", default="",
                    help="more arguments for the kevents bench command, e.g. \"--sink-thread false\"")
    a = ap.parse_args()
    w = WORKLOADS[a.workload]
    oracle = [a.oracle, "-mode", "bench"] + [x for k, v in w.items() for x in (f"-{k}", str(v))]
    if a.what == "correlator":
        kev = [a.kevents, "bench", "correlator", "--workload", a.workload, "--runs", "1"]
        key, okey, higher = "correlator_events_per_s", "correlator_events_per_s", True
    elif a.what == "pipeline":
        kev = [a.kevents, "bench", "pipeline", "--workload", a.workload, "--policy", a.policy, "--runs", "1"]
        key, okey, higher = "pipeline_events_per_s", "pipeline_events_per_s", True
        if a.policy == "coalesce":
            # Occurrences reflected in stored counts per second: client-go writes one event
            # per occurrence it keeps, so its delivered/s is the same figure.
            key = "pipeline_counted_per_s"
    elif a.emit_source == "pipeline":
        kev = [a.kevents, "bench", "pipeline", "--workload", a.workload, "--policy", a.policy, "--runs", "1"]
        key, okey, higher = "emit_ns_per_event", "emit_ns_per_event", False
    else:
        kev = [a.kevents, "bench", "emit", "--workload", a.workload, "--runs", "1"]
        key = {"with-args": "core_emit_with_args_ns", "call": "core_emit_ns",
               "bound": "bound_emit_ns", "pod": "pod_emit_ns",
               "eventf": "eventf_emit_ns"}[a.emit_figure]
        okey, higher = "emit_ns_per_event", False
    kev += shlex.split(a.kevents_args)
    ratios, kv, ov = [], [], []
    for i in range(a.pairs):
        first_kevents = i % 2 == 0
        if first_kevents:
            k = run_json(kev); o = run_json(oracle)
        else:
            o = run_json(oracle); k = run_json(kev)
        kval, oval = float(k[key]), float(o[okey])
        ratio = kval / oval if higher else oval / kval
        ratios.append(ratio); kv.append(kval); ov.append(oval)
        print(json.dumps({"pair": i + 1, "kevents": kval, "client_go": oval, "ratio": round(ratio, 2),
                          "kevents_json": k, "client_go_delivered": o.get("pipeline_delivered")}))
    policy = a.policy if a.what == "pipeline" or (a.what == "emit" and a.emit_source == "pipeline") else None
    print(json.dumps({"what": a.what, "workload": a.workload, "policy": policy,
                      "metric": key, "pairs": a.pairs,
                      "kevents_median": statistics.median(kv), "client_go_median": statistics.median(ov),
                      "median_ratio": round(statistics.median(ratios), 2),
                      "ratios": [round(r, 2) for r in ratios]}))


if __name__ == "__main__":
    main()
