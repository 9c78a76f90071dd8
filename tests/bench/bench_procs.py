"""make bench's processes section (issue 25): what a profile of a process
tree costs podprof as the tree grows. The pre-fork fixture (prefork.c) with
1, 8 and 64 workers, each burning CPU; per repetition a 3 s CPU profile of
its tree (tree=1) at 100 Hz: podprof's peak RSS (VmHWM, from start to the
profile's end), the time to attach every process (the log's "attached ...
in X ms" lines, summed), the request's length beyond its 3 s, the
profile's size, and the share of the tree's CPU the profile holds.
Medians over the repetitions. Called by bench.py (--only processes)."""
import os
import re
import select
import statistics
import subprocess
import threading
import time
import urllib.request

WORKERS = (1, 8, 64)


class Prefork:
    def __init__(self, build, workers):
        r, w = os.pipe()
        self.p = subprocess.Popen([os.path.join(build, "fixtures", "prefork"), "-w", str(workers), "-r", str(w)],
                                  pass_fds=(w,), stdout=subprocess.DEVNULL)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 10)
        line = os.read(r, 64).decode() if ready else ""
        os.close(r)
        if not line.startswith("ready"):
            raise SystemExit("prefork did not start: %r" % line)
        self.pid = self.p.pid

    def cpu_ns(self):
        hz = os.sysconf("SC_CLK_TCK")
        total = 0
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    st = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(d) == self.pid:
                total += int(st[11]) + int(st[12]) + int(st[13]) + int(st[14])
            elif int(st[1]) == self.pid:
                total += int(st[11]) + int(st[12])
        return total * 1e9 / hz

    def stop(self):
        self.p.terminate()
        self.p.wait(20)


def one(b, workers):
    """One repetition: a dict of the figures."""
    f = Prefork(b.build, workers)
    pp, port = b.start_podprof(f.pid)
    got, out = {}, {}

    def fetch():
        t0 = time.monotonic()
        got["body"] = urllib.request.urlopen("http://127.0.0.1:%d/debug/pprof/profile?seconds=3&hz=100&tree=1" %
                                             port, timeout=120).read()
        got["secs"] = time.monotonic() - t0

    t = threading.Thread(target=fetch)
    t.start()
    b.wait_log(pp, "profile: started for", 20)
    c0 = f.cpu_ns()
    b.wait_log(pp, "profile: all processes done", 60)
    c1 = f.cpu_ns()
    t.join(120)
    with open("/proc/%d/status" % pp.pid) as fh:
        out["rss_mb"] = int(re.search(r"VmHWM:\s+(\d+)", fh.read()).group(1)) / 1024
    log = b.stop_podprof(pp)
    f.stop()
    if "body" not in got:
        raise SystemExit("processes: the profile of %d workers failed" % workers)
    path = os.path.join(b.tmp, "procs.pb.gz")
    with open(path, "wb") as fh:
        fh.write(got["body"])
    total = sum(v for v, _ in b.traces(path))
    out["attach_ms"] = sum(float(x) for x in re.findall(r"ptrace: attached pid=\d+ threads=\d+ in ([\d.]+) ms",
                                                       log))
    # All of them at once (one line), or the one process's.
    every = re.findall(r"ptrace: detached \d+ processes in ([\d.]+) ms", log)
    out["detach_ms"] = float(every[-1]) if every else \
        sum(float(x) for x in re.findall(r"ptrace: detached pid=\d+ in ([\d.]+) ms", log))
    out["over_s"] = got["secs"] - 3
    out["kb"] = len(got["body"]) / 1024
    out["ratio"] = total / (c1 - c0) if c1 > c0 else float("nan")
    out["procs"] = len(set(re.findall(r"ptrace: attached pid=(\d+)", log)))
    return out


def run(b):
    """b: bench.py's Bench-like object (build, tmp, reps, start_podprof,
    stop_podprof, wait_log, traces)."""
    rows = []
    for n in WORKERS:
        reps = [one(b, n) for _ in range(b.reps)]
        rows.append((n, {k: statistics.median(r[k] for r in reps) for k in reps[0]}))
    print("### Every process of a tree: the pre-fork fixture's master and N workers, a 3 s CPU profile of "
          "its tree (tree=1) at 100 Hz, %d reps; medians\n" % b.reps)
    print("| workers | processes attached | podprof peak RSS MB | attach ms, all | detach ms, all | "
          "request beyond 3 s | profile KB | total / the tree's CPU |")
    print("|---|---|---|---|---|---|---|---|")
    for n, r in rows:
        print("| %d | %d | %.1f | %.1f | %.1f | %.2f s | %.1f | %.3f |" % (
            n, r["procs"], r["rss_mb"], r["attach_ms"], r["detach_ms"], r["over_s"], r["kb"], r["ratio"]))
    print()
