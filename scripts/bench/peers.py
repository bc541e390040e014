#!/usr/bin/env python3
"""Peers on the same storm: run event exporters side by side against one real kube-apiserver,
drive one storm of core/v1 count increases through it, SIGKILL and restart every exporter once
in the middle, then count what each one kept against what the apiserver stored.

Started by scripts/bench/peers.sh (which builds the peers and starts the apiserver and
nats-server); run by hand only with the same arguments. Standard library only, except nats-py
(`pip install nats-py`) to read kevents' JetStream stream back.

Every exporter sees the same writes: N events created in namespace `storm`, then PATCHes
raising one event's `count` by one (and `lastTimestamp` to now, as kubelet does) at a fixed
rate. The writer logs every (uid, count) it stored with its time; the apiserver's final counts
are read back at the end. For each exporter, every output record names a key uid:count; a
kevents record also carries `delta`, so it covers the keys count-delta+1..count. A key covered
twice is a duplicate. A written key that no record covers is lost; it is "lost in the restart"
when it was written between the kill and the restarted exporter's first output plus a grace.
"""

import argparse
import asyncio
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
from datetime import datetime, timezone

CLK_TCK = os.sysconf("SC_CLK_TCK")
NS = "storm"


def now_rfc3339():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------------ apiserver client
class Api:
    def __init__(self, url, ca, token):
        u = urllib.parse.urlparse(url)
        self.host, self.port = u.hostname, u.port or 443
        self.ctx = ssl.create_default_context(cafile=ca)
        self.token = token
        self.conn = None

    def _conn(self):
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=30)
        return self.conn

    def req(self, method, path, body=None, ctype="application/json"):
        for attempt in range(5):
            try:
                c = self._conn()
                headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
                data = None
                if body is not None:
                    data = json.dumps(body).encode()
                    headers["Content-Type"] = ctype
                c.request(method, path, body=data, headers=headers)
                r = c.getresponse()
                raw = r.read(64 << 20)
                if r.status >= 500 or r.status == 429:
                    time.sleep(0.2 * (attempt + 1))
                    continue
                return r.status, (json.loads(raw) if raw else None)
            except (OSError, http.client.HTTPException):
                self.conn = None
                time.sleep(0.2 * (attempt + 1))
        raise RuntimeError(f"{method} {path}: no answer after 5 tries")


# ------------------------------------------------------------------------ processes
class Proc:
    """One exporter process, restarted once; CPU and peak RSS summed/maxed over lifetimes."""

    def __init__(self, name, cmd, env, logdir):
        self.name, self.cmd, self.env, self.logdir = name, cmd, env, logdir
        self.p = None
        self.lifetimes = 0
        self.cpu = 0.0
        self.hwm_kib = 0
        self.last = (0.0, 0)

    def start(self):
        self.lifetimes += 1
        log = open(os.path.join(self.logdir, f"{self.name}.{self.lifetimes}.log"), "wb")
        self.p = subprocess.Popen(self.cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.last = (0.0, 0)

    def sample(self):
        if self.p is None or self.p.poll() is not None:
            return
        try:
            with open(f"/proc/{self.p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
            hwm = 0
            with open(f"/proc/{self.p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = int(line.split()[1])
            self.last = (cpu, hwm)
        except (OSError, IndexError, ValueError):
            pass

    def _close_lifetime(self):
        self.cpu += self.last[0]
        self.hwm_kib = max(self.hwm_kib, self.last[1])
        self.last = (0.0, 0)

    def kill(self, sig=signal.SIGKILL):
        if self.p is None:
            return
        self.sample()
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self._close_lifetime()
        self.p = None

    def alive(self):
        return self.p is not None and self.p.poll() is None


# ------------------------------------------------------------------------ outputs
def otel_keys(path):
    """(uid, count) per log record of the file exporter's OTLP/JSON lines."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                doc = json.loads(line)
            except ValueError:
                continue  # a line cut by SIGKILL
            for rl in doc.get("resourceLogs", []):
                for sl in rl.get("scopeLogs", []):
                    for lr in sl.get("logRecords", []):
                        a = {x["key"]: x["value"] for x in lr.get("attributes", [])}
                        uid = a.get("k8s.event.uid", {}).get("stringValue")
                        cnt = a.get("k8s.event.count", {}).get("intValue")
                        if uid is None:
                            continue
                        out.append((uid, int(cnt) if cnt is not None else 1, 1))
    return out


def kee_keys(path):
    """(uid, count) per line of kubernetes-event-exporter's file sink (EnhancedEvent JSON)."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            uid = (doc.get("metadata") or {}).get("uid")
            if uid:
                out.append((uid, int(doc.get("count") or 1), 1))
    return out


def kevents_keys(nats_url, stream):
    """(uid, count, delta) per record of kevents' JetStream stream, read in stream order."""
    import nats  # nats-py

    async def read():
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        try:
            info = await js.stream_info(stream)
        except Exception:  # noqa: BLE001 - no stream: nothing exported
            await nc.close()
            return []
        total = info.state.messages
        out = []
        if total:
            sub = await js.pull_subscribe(f"{stream}.>", durable=None, stream=stream)
            seen = 0
            while seen < total:
                try:
                    msgs = await sub.fetch(min(500, total - seen), timeout=5)
                except asyncio.TimeoutError:
                    break
                for m in msgs:
                    seen += 1
                    await m.ack()
                    r = json.loads(m.data)
                    if "uid" in r:  # not the fence's {stream}._fence records
                        out.append((r["uid"], int(r["count"]), int(r["delta"])))
        await nc.close()
        return out

    return asyncio.run(read())


def score(records, written, stored, down_windows):
    """Compare an exporter's records with the writer's log.

    records: [(uid, count, delta)]; written: {(uid, count): t}; stored: {uid: final count};
    down_windows: [(t0, t1)] when this exporter could not see writes (kill .. restart+grace)."""
    covered = {}
    dups = 0
    for uid, count, delta in records:
        if uid not in stored:
            continue
        for c in range(max(1, count - delta + 1), count + 1):
            k = (uid, c)
            if k in covered:
                dups += 1
            covered[k] = covered.get(k, 0) + 1
    total = sum(stored.values())
    kept = sum(1 for k in covered if k[0] in stored and k[1] <= stored[k[0]])
    lost = [k for k in written if k not in covered]
    lost_restart = sum(1 for k in lost if any(a <= written[k] < b for a, b in down_windows))
    max_count = {}
    for uid, count, _ in records:
        if uid in stored:
            max_count[uid] = max(max_count.get(uid, 0), count)
    return {
        "records": sum(1 for r in records if r[0] in stored),
        "stored": total,
        "kept": kept,
        "kept_pct": round(100.0 * kept / total, 2) if total else 0.0,
        "duplicates": dups,
        "lost": total - kept,
        "lost_in_restart_window": lost_restart,
        "last_count_sum": sum(max_count.values()),
    }


# ------------------------------------------------------------------------ main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", required=True, help="the apiserver's env file (scripts/apiserver/start.sh)")
    ap.add_argument("--out", required=True, help="a directory for configs, outputs and logs")
    ap.add_argument("--nats", required=True, help="nats://127.0.0.1:PORT of a nats-server -js")
    ap.add_argument("--kevents", required=True, help="the kevents binary (release build)")
    ap.add_argument("--otelcol", help="otelcol-k8sevents (scripts/bench/peers/otelcol-k8sevents)")
    ap.add_argument("--kee", help="kubernetes-event-exporter, if it was built")
    ap.add_argument("--events", type=int, default=50)
    ap.add_argument("--rate", type=float, default=50.0, help="count increases per second")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--kill-at", type=float, default=25.0, help="seconds into the storm")
    ap.add_argument("--down", type=float, default=5.0, help="seconds each exporter stays dead")
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--ha", action="store_true", help="also two leader-elected kevents replicas; the leader is killed")
    a = ap.parse_args()
    if a.ha and a.duration + a.settle < a.kill_at + 20:
        # The standby takes the Lease a lease duration (15 s) after the leader's last renewal.
        print("warning: --ha needs duration + settle >= kill-at + 20 s, or the standby has not "
              "taken over when the stream is read (its records count as lost)", file=sys.stderr)

    env = {}
    with open(a.env) as f:
        for line in f:
            if "=" in line:
                k, v = line.rstrip("\n").split("=", 1)
                env[k] = v.strip("'\"")
    api = Api(env["KEVENTS_APISERVER_URL"], env["KEVENTS_APISERVER_CA"], env["KEVENTS_ADMIN_TOKEN"])
    kc = env["KEVENTS_ADMIN_KUBECONFIG"]
    os.makedirs(a.out, exist_ok=True)
    st, _ = api.req("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    if st not in (201, 409):
        sys.exit(f"create namespace {NS}: HTTP {st}")

    penv = dict(os.environ, KUBECONFIG=kc)
    procs = {}
    procs["kevents"] = [Proc("kevents", [a.kevents, "export", "--kubeconfig", kc, "-n", NS, "--nats", a.nats,
                                         "--stream", "peers", "--progress", "0"], penv, a.out)]
    if a.ha:
        procs["kevents-ha"] = [
            Proc(f"kevents-ha-{i}", [a.kevents, "export", "--kubeconfig", kc, "-n", NS, "--nats", a.nats,
                                     "--stream", "peersha", "--progress", "0", "--leader-elect",
                                     "--lease-name", "peers-ha"], penv, a.out)
            for i in ("a", "b")]
    if a.otelcol:
        cfg = os.path.join(a.out, "otelcol.yaml")
        with open(cfg, "w") as f:
            f.write(f"""receivers:
  k8s_events:
    auth_type: kubeConfig
    namespaces: [{NS}]
exporters:
  file:
    path: {os.path.join(a.out, "otelcol.jsonl")}
    append: true  # the default truncates the file at each start
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [k8s_events]
      exporters: [file]
""")
        procs["otelcol-k8s_events"] = [Proc("otelcol", [a.otelcol, "--config", cfg], penv, a.out)]
    if a.kee:
        cfg = os.path.join(a.out, "kee.yaml")
        # kubeQPS/kubeBurst raised from client-go's 5/10: each event costs it a GET of the
        # object it is about (for labels), and at 5/s it falls behind maxEventAgeSeconds.
        with open(cfg, "w") as f:
            f.write(f"""logLevel: warn
logFormat: json
kubeQPS: 100
kubeBurst: 200
namespace: {NS}
route:
  routes:
    - match:
        - receiver: dump
receivers:
  - name: dump
    file:
      path: {os.path.join(a.out, "kee.jsonl")}
""")
        procs["kubernetes-event-exporter"] = [Proc("kee", [a.kee, "-conf", cfg, "-kubeconfig", kc,
                                                           "-metrics-address", "127.0.0.1:0"], penv, a.out)]

    allp = [p for ps in procs.values() for p in ps]
    try:
        run(a, api, procs, allp)
    finally:
        for p in allp:
            p.kill(signal.SIGTERM)


def run(a, api, procs, allp):
    for p in allp:
        p.start()
    time.sleep(8)  # every exporter's first list and watch
    for p in allp:
        if not p.alive():
            sys.exit(f"{p.name} exited at start (see {a.out}/{p.name}.1.log)")

    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            for p in allp:
                p.sample()
            time.sleep(0.5)

    threading.Thread(target=sampler, daemon=True).start()

    # The storm.
    written = {}
    uids = []
    t_start = time.time()
    prefix = f"storm-{int(t_start)}"
    for i in range(a.events):
        ts = now_rfc3339()
        st, obj = api.req("POST", f"/api/v1/namespaces/{NS}/events", {
            "metadata": {"name": f"{prefix}-{i}", "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": f"pod-{i}", "namespace": NS, "apiVersion": "v1"},
            "reason": "BackOff", "message": f"Back-off restarting failed container {i}", "type": "Warning",
            "count": 1, "firstTimestamp": ts, "lastTimestamp": ts,
            "source": {"component": "peers-writer"}})
        if st != 201:
            sys.exit(f"create event {i}: HTTP {st}: {obj}")
        uid = obj["metadata"]["uid"]
        uids.append(uid)
        written[(uid, 1)] = time.time()
    counts = {u: 1 for u in uids}
    killed = {}
    restarted = {}
    ha_killed = None
    ha_holder = None
    n = 0
    period = 1.0 / a.rate
    t0 = time.time()
    next_t = t0
    while True:
        now = time.time()
        el = now - t0
        if el >= a.duration:
            break
        if el >= a.kill_at and not killed:
            for name, ps in procs.items():
                if name == "kevents-ha":
                    st, lease = api.req("GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/peers-ha")
                    holder = (lease or {}).get("spec", {}).get("holderIdentity", "")
                    for p in ps:  # the default identity is <hostname>_<pid>, new on a restart
                        if p.alive() and holder.endswith(f"_{p.p.pid}"):
                            ha_killed = p
                            ha_holder = holder
                    ha_killed = ha_killed or ps[0]
                    ha_killed.kill()
                else:
                    for p in ps:
                        p.kill()
                killed[name] = time.time()
        if killed and not restarted and el >= a.kill_at + a.down:
            for name, ps in procs.items():
                if name == "kevents-ha":
                    ha_killed.start()
                else:
                    for p in ps:
                        p.start()
                restarted[name] = time.time()
        uid = uids[n % len(uids)]
        c = counts[uid] + 1
        st, _ = api.req("PATCH", f"/api/v1/namespaces/{NS}/events/{prefix}-{n % len(uids)}",
                        {"count": c, "lastTimestamp": now_rfc3339()}, "application/merge-patch+json")
        if st != 200:
            sys.exit(f"PATCH: HTTP {st}")
        counts[uid] = c
        written[(uid, c)] = time.time()
        n += 1
        next_t += period
        delay = next_t - time.time()
        if delay > 0:
            time.sleep(delay)
    t_end = time.time()
    time.sleep(a.settle)
    for p in allp:
        p.kill(signal.SIGTERM)
    stop.set()

    # What the apiserver stored.
    st, lst = api.req("GET", f"/api/v1/namespaces/{NS}/events?limit=10000")
    stored = {e["metadata"]["uid"]: int(e.get("count") or 1) for e in lst["items"] if e["metadata"]["uid"] in counts}
    if stored != counts:
        print(f"warning: the apiserver's counts differ from the writer's ({sum(stored.values())} vs {sum(counts.values())})",
              file=sys.stderr)

    grace = 3.0
    results = {}
    for name, ps in procs.items():
        if name == "kevents":
            recs = kevents_keys(a.nats, "peers")
        elif name == "kevents-ha":
            recs = kevents_keys(a.nats, "peersha")
        elif name == "otelcol-k8s_events":
            recs = otel_keys(os.path.join(a.out, "otelcol.jsonl"))
        else:
            recs = kee_keys(os.path.join(a.out, "kee.jsonl"))
        # Output a peer buffered when it was killed (the file exporter flushes every second)
        # counts in the restart too: the window opens 2 s before the kill.
        windows = [(killed[name] - 2.0, restarted[name] + grace)] if name in killed else []
        r = score(recs, written, stored, windows)
        r["peak_rss_mib"] = round(max(p.hwm_kib for p in ps) / 1024.0, 1)
        r["cpu_s"] = round(sum(p.cpu for p in ps), 2)
        r["processes"] = len(ps)
        results[name] = r

    summary = {
        "storm": {"events": a.events, "rate": a.rate, "duration_s": round(t_end - t0, 1),
                  "patches": n, "achieved_rate": round(n / (t_end - t0), 1),
                  "occurrences_stored": sum(stored.values()),
                  "kill_at_s": a.kill_at, "down_s": a.down,
                  "ha_killed": ha_killed.name if ha_killed else None,
                  "ha_killed_held_the_lease": ha_holder},
        "exporters": results,
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary, indent=2))
    print()
    print("| exporter | records | occurrences kept / stored | duplicates | lost (in the restart window) | peak RSS | CPU |")
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['records']} | {r['kept']} / {r['stored']} ({r['kept_pct']} %) | {r['duplicates']} | "
              f"{r['lost']} ({r['lost_in_restart_window']}) | {r['peak_rss_mib']} MiB | {r['cpu_s']} s |")


if __name__ == "__main__":
    main()
