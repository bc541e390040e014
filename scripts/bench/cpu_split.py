#!/usr/bin/env python3
"""Where the CPU goes during `export_bench`'s first export: runs the benchmark, samples the
CPU time (user + system, /proc/PID/stat) of every process of the servers it starts and of the
exporter every 0.2 s, and prints, for the first-export phase (from the exporter's start for
the `seconds` the benchmark reports), each one's CPU seconds and share of the wall time.

  python3 scripts/bench/cpu_split.py target/release/examples/export_bench \\
      target/release/kevents 50000 1000 5

Prints the benchmark's JSON lines, then one JSON line `{"phase": "cpu", ...}`: per process
name (kube-apiserver, etcd, nats-server, kevents) the CPU seconds in the first export and
`cpu_per_wall` (1.0 = one core busy the whole time; this machine has 2).
"""
import json, os, subprocess, sys, threading, time

NAMES = ("kube-apiserver", "etcd", "nats-server", "kevents")
TICK = os.sysconf("SC_CLK_TCK")


def sample(root, ours):
    """Per process of NAMES: its name and CPU seconds, and the exporter's pid. `ours` (a set
    of pids, kept across samples) gets the processes descending from `root` and those
    naming the benchmark's apiserver directory (the one holding the exporter's
    --kubeconfig; scripts/apiserver/start.sh detaches the apiserver and etcd with setsid):
    other builds' and tests' servers on the machine are left out at the end."""
    out, exporter, procs = {}, None, {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        procs[int(pid)] = (int(fields[1]), comm, fields, cmd)
    for pid, (_, comm, fields, cmd) in procs.items():
        name = next((n for n in NAMES if comm.startswith(n[:15])), None)
        if name is None:
            continue
        up, seen = pid, set()
        while up in procs and up != root and up not in seen:
            seen.add(up)
            up = procs[up][0]
        if name == "kevents":
            if up != root or b"export" not in cmd:
                continue
            exporter = pid
            if b"--kubeconfig" in cmd and not STATE:
                kubeconfig = cmd[cmd.index(b"--kubeconfig") + 1]
                STATE.append(os.path.dirname(os.path.dirname(kubeconfig)))
        if up == root or (STATE and any(STATE[0] in a for a in cmd)):
            ours.add(pid)
        out[pid] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return out, exporter


STATE = []


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    timeline, stop = [], threading.Event()

    bench = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, text=True)

    ours = set()

    def poll():
        while not stop.is_set():
            cpu, exporter = sample(bench.pid, ours)
            timeline.append((time.monotonic(), cpu, exporter))
            time.sleep(0.2)

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    live = None
    for line in bench.stdout:
        print(line, end="", flush=True)
        if line.startswith("{") and '"phase":"live"' in line:
            live = json.loads(line)
    bench.wait()
    stop.set()
    t.join()
    if live is None:
        sys.exit("no live phase in the benchmark's output")
    start = next((i for i, (_, _, e) in enumerate(timeline) if e is not None), None)
    if start is None:
        sys.exit("the exporter was never seen")
    t0, cpu0, _ = timeline[max(start - 1, 0)]
    end = next(
        (i for i, (ts, _, _) in enumerate(timeline) if ts >= t0 + live["seconds"]),
        len(timeline) - 1,
    )
    t1, cpu1, _ = timeline[end]
    wall = t1 - t0
    used = {n: 0.0 for n in NAMES}
    for pid, (name, cpu) in cpu1.items():
        if pid in ours:
            used[name] += cpu - cpu0.get(pid, (name, 0.0))[1]
    split = {
        n: {"cpu_s": round(used[n], 2), "cpu_per_wall": round(used[n] / wall, 3)}
        for n in NAMES
    }
    print(json.dumps({"phase": "cpu", "wall_s": round(wall, 2), "records_per_s": live["records_per_s"], **split}))


if __name__ == "__main__":
    main()
