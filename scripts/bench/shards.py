#!/usr/bin/env python3
"""The same storm exported by 1 and by 3 replicas of `kevents export --shards 8 --leader-elect`
(docs/benchmarks.md, "Shards: 1 replica against 3").

  python3 scripts/bench/shards.py [--pairs 5] [--events 4000] [--kevents PATH]

Starts one real kube-apiserver (scripts/apiserver/start.sh; KEVENTS_K8S_VERSION picks the
version, v1.20.2 by default) and one nats-server (`-js`, its store in a temporary directory,
monitoring on `-m` for /jsz). Each run: a fresh namespace holding EVENTS core/v1 events (count
1 each, created beforehand by 8 writer threads), a fresh stream and Lease name; then the
replicas start (lease 6 s, renew 4 s, retry 1 s) and the run's time is from their start until
the 8 shard streams hold a subject per event (one record each; /jsz's num_subjects, less the
8 fence subjects). A pair runs both, the order alternating; the figure is the median of the
per-pair ratios (3-replica throughput over 1-replica). Prints one JSON line per run, then the
summary.
"""
import argparse, json, os, shutil, signal, socket, ssl, statistics, subprocess, sys, tempfile, time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARDS = 8


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, env):
        self.url = env["KEVENTS_APISERVER_URL"]
        self.token = env["KEVENTS_ADMIN_TOKEN"]
        self.ctx = ssl.create_default_context(cafile=env["KEVENTS_APISERVER_CA"])

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": "Bearer " + self.token,
                                              "Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self.ctx, timeout=30) as r:
            r.read()


def seed(api, ns, n):
    api.post("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def one(i):
        api.post(f"/api/v1/namespaces/{ns}/events", {
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"storm-{i}", "namespace": ns},
            "involvedObject": {"kind": "Pod", "namespace": ns, "name": f"pod-{i}"},
            "reason": "Storm", "message": "bench", "type": "Normal", "count": 1,
            "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "bench"}})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def subjects(mon, stream):
    with urllib.request.urlopen(f"http://127.0.0.1:{mon}/jsz?streams=true", timeout=10) as r:
        jsz = json.load(r)
    total = 0
    for acc in jsz.get("account_details", []):
        for s in acc.get("stream_detail", []):
            if s["name"].startswith(stream + "-") and "of" in s["name"]:
                total += max(0, s["state"].get("num_subjects", 0) - 1)
    return total


def run(kevents, kubeconfig, nats, mon, api, replicas, events, tag, logdir):
    ns, stream, lease = f"bench-{tag}", f"b{tag}", f"bench-{tag}"
    seed(api, ns, events)
    procs = []
    start = time.monotonic()
    for r in range(replicas):
        log = open(os.path.join(logdir, f"{tag}-{r}.log"), "w")
        procs.append(subprocess.Popen([
            kevents, "export", "--kubeconfig", kubeconfig, "--namespace", ns, "--nats", nats,
            "--stream", stream, "--shards", str(SHARDS), "--leader-elect", "--lease-name", lease,
            "--identity", f"r{r}", "--lease-duration", "6", "--renew-deadline", "4",
            "--retry-period", "1", "--progress", "0"], stdout=subprocess.DEVNULL, stderr=log))
    deadline = start + 300
    while subjects(mon, stream) < events:
        if time.monotonic() > deadline:
            sys.exit(f"run {tag}: the streams did not fill in 300 s (logs in {logdir})")
        time.sleep(0.05)
    secs = time.monotonic() - start
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        p.wait(timeout=60)
    out = {"run": tag, "replicas": replicas, "events": events, "secs": round(secs, 3),
           "records_per_s": round(events / secs, 1)}
    print(json.dumps(out), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--events", type=int, default=4000)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ap.add_argument("--kevents", default=os.path.join(target, "release", "kevents"))
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kevents-shards-bench-")
    apidir = os.path.join(work, "apiserver")
    os.mkdir(apidir)
    subprocess.run(["bash", os.path.join(ROOT, "scripts/apiserver/start.sh"), apidir], check=True,
                   stdout=subprocess.DEVNULL)
    env = {}
    for line in open(os.path.join(apidir, "env")):
        if "=" in line:
            k, v = line.rstrip("\n").split("=", 1)
            env[k] = v.strip("'\"")
    api = Api(env)
    port, mon = free_port(), free_port()
    nats_bin = os.environ.get("KEVENTS_NATS_SERVER") or shutil.which("nats-server")
    nats = subprocess.Popen([nats_bin, "-js", "-sd", os.path.join(work, "nats"), "-a", "127.0.0.1",
                             "-p", str(port), "-m", str(mon)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        time.sleep(1)
        ratios, results = [], []
        for pair in range(args.pairs):
            order = [1, 3] if pair % 2 == 0 else [3, 1]
            got = {}
            for replicas in order:
                got[replicas] = run(args.kevents, env["KEVENTS_ADMIN_KUBECONFIG"], f"nats://127.0.0.1:{port}",
                                    mon, api, replicas, args.events, f"{pair}x{replicas}", work)
            ratio = got[3]["records_per_s"] / got[1]["records_per_s"]
            ratios.append(ratio)
            results.append(got)
            print(json.dumps({"pair": pair, "ratio_3_over_1": round(ratio, 3)}), flush=True)
        print(json.dumps({
            "summary": True, "pairs": args.pairs, "events": args.events, "shards": SHARDS,
            "median_records_per_s_1": statistics.median(g[1]["records_per_s"] for g in results),
            "median_records_per_s_3": statistics.median(g[3]["records_per_s"] for g in results),
            "median_ratio_3_over_1": round(statistics.median(ratios), 3),
            "apiserver": env.get("KEVENTS_APISERVER_VERSION"), "cpus": os.cpu_count()}))
    finally:
        nats.terminate()
        nats.wait()
        subprocess.run(["bash", os.path.join(ROOT, "scripts/apiserver/stop.sh"), apidir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
