"""make bench's processes section (issues 25, 38): what a profile of a
process tree costs podprof as the tree grows. The pre-fork fixture
(prefork.c) with a master and 1, 7, 63, 127 and 255 workers (2 to 256
processes), each burning CPU; per repetition two 3 s CPU profiles of its
tree (tree=1, --max-processes 256) at 100 Hz, one after the other: the
first (every process attached, its tables read) and the steady one (the
goal: a 3 s profile of 256 processes answered within 4 s), podprof's peak
RSS (VmHWM, from start to the second profile's end; the goal: 32 MB), the
time to attach every process (the log's "attached ...
in X ms" lines, summed), the request's length beyond its 3 s, the
profile's size, and the share of the tree's CPU the profile holds.
Medians over the repetitions. Called by bench.py (--only processes).

tree=1 rather than the issue's pid=all: the bench runs in the machine's own
PID namespace, where pid=all would take every process of the machine.
Both are one group of sessions (ptrace/sampler/group.c) over the processes
listed (sidecar/server/params.c); only the list differs."""
import os
import re
import select
import statistics
import subprocess
import threading
import time
import urllib.request

WORKERS = (1, 7, 63, 127, 255)   # beside the master


# The workload in a cpu cgroup of its own, as a pod's app container is
# beside podprof's: 256 busy processes in podprof's own group would take
# all but 1/257 of the cores from podprof's loop thread (nice 0 among them),
# which no pod gives. Where cgroup v1's cpu controller cannot be written,
# the workload stays in ours and the section says so.
APP_CGROUP = "/sys/fs/cgroup/cpu/podprof-bench-app"


def app_cgroup():
    try:
        os.makedirs(APP_CGROUP, exist_ok=True)
        return APP_CGROUP if os.access(os.path.join(APP_CGROUP, "cgroup.procs"), os.W_OK) else None
    except OSError:
        return None


def enter(cg):
    """preexec_fn: the child joins cg before it execs (its workers follow)."""
    def f():
        with open(os.path.join(cg, "cgroup.procs"), "w") as fp:
            fp.write(str(os.getpid()))
    return f


class Prefork:
    def __init__(self, build, workers):
        r, w = os.pipe()
        cg = app_cgroup()
        self.cgroup = cg
        self.p = subprocess.Popen([os.path.join(build, "fixtures", "prefork"), "-w", str(workers), "-r", str(w)],
                                  pass_fds=(w,), stdout=subprocess.DEVNULL, preexec_fn=enter(cg) if cg else None)
        os.close(w)
        # 60 s: the master forks its workers among those already busy in
        # its group (255 took over 10 s in the cgroup of its own).
        ready, _, _ = select.select([r], [], [], 60)
        line = os.read(r, 64).decode() if ready else ""
        os.close(r)
        if not line.startswith("ready"):
            self.p.terminate()   # the master ends its workers (SIGTERM)
            raise SystemExit("prefork did not start: %r" % line)
        self.pid = self.p.pid

    def cpu_ns(self):
        """The tree's CPU so far, in ns: each thread's schedstat (the
        master's and its workers'; none is reaped here), not
        /proc/PID/stat's clock ticks, 10 ms coarse for each process."""
        total = 0
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if int(d) != self.pid and ppid != self.pid:
                    continue
                for tid in os.listdir("/proc/%s/task" % d):
                    with open("/proc/%s/task/%s/schedstat" % (d, tid)) as f:
                        total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return total

    def stop(self):
        self.p.terminate()
        self.p.wait(20)


def wait_count(pp, text, n, timeout):
    """Waits until podprof's log holds text n times."""
    end = time.monotonic() + timeout
    while sum(text in line for line in list(pp.lines)) < n:
        if time.monotonic() > end:
            raise SystemExit("podprof never logged %r %d times" % (text, n))
        time.sleep(0.001)


def profile(b, f, pp, port, k):
    """The k-th profile (1, 2) of pp: (seconds taken, body, the tree's CPU
    over its window as the log marks it)."""
    got = {}

    def fetch():
        t0 = time.monotonic()
        got["body"] = urllib.request.urlopen("http://127.0.0.1:%d/debug/pprof/profile?seconds=3&hz=100&tree=1" %
                                             port, timeout=120).read()
        got["secs"] = time.monotonic() - t0

    t = threading.Thread(target=fetch)
    t.start()
    wait_count(pp, "profile: started for", k, 60)
    c0 = f.cpu_ns()
    wait_count(pp, "profile: all processes done", k, 60)
    c1 = f.cpu_ns()
    t.join(120)
    if "body" not in got:
        raise SystemExit("processes: a profile of %d processes failed" % (f.workers + 1))
    return got["secs"], got["body"], c1 - c0


def one(b, workers):
    """One repetition: a dict of the figures."""
    f = Prefork(b.build, workers)
    f.workers = workers
    pp, port = b.start_podprof(f.pid, "--max-processes", "256")
    out = {}
    first, _, _ = profile(b, f, pp, port, 1)
    steady, body, cpu = profile(b, f, pp, port, 2)
    with open("/proc/%d/status" % pp.pid) as fh:
        out["rss_mb"] = int(re.search(r"VmHWM:\s+(\d+)", fh.read()).group(1)) / 1024
    log = b.stop_podprof(pp)
    f.stop()
    path = os.path.join(b.tmp, "procs.pb.gz")
    with open(path, "wb") as fh:
        fh.write(body)
    total = sum(v for v, _ in b.traces(path))
    attach = re.findall(r"ptrace: attached pid=(\d+) threads=\d+ in ([\d.]+) ms", log)
    out["attach_ms"] = sum(float(ms) for _, ms in attach[:len(attach) // 2])   # the first profile's
    # All of them at once (one line), or the one process's.
    every = re.findall(r"ptrace: detached \d+ processes in ([\d.]+) ms", log)
    out["detach_ms"] = float(every[-1]) if every else \
        sum(float(x) for x in re.findall(r"ptrace: detached pid=\d+ in ([\d.]+) ms", log))
    out["first_s"] = first
    out["steady_s"] = steady
    out["kb"] = len(body) / 1024
    out["ratio"] = total / cpu if cpu > 0 else float("nan")
    out["procs"] = len(set(pid for pid, _ in attach))
    return out


def run(b):
    """b: bench.py's Bench-like object (build, tmp, reps, start_podprof,
    stop_podprof, wait_log, traces)."""
    rows = []
    for n in WORKERS:
        reps = [one(b, n) for _ in range(b.reps)]
        rows.append((n, {k: statistics.median(r[k] for r in reps) for k in reps[0]}))
    print("### Every process of a tree: the pre-fork fixture's master and N workers, two 3 s CPU profiles of "
          "its tree (tree=1) at 100 Hz one after the other, %d reps; medians (goal at 256 processes: "
          "the steady answer within 4 s, peak RSS within 32 MB)\n" % b.reps)
    print("The workload in %s.\n" % ("a cpu cgroup of its own (%s), as a pod's app container" % APP_CGROUP
                                      if app_cgroup() else "podprof's own cpu cgroup (no cgroup v1 cpu controller "
                                      "to write): podprof's loop shares the cores with every worker"))
    print("| processes | attached | first answer s | steady answer s | podprof peak RSS MB | attach ms, all | "
          "detach ms, all | profile KB | total / the tree's CPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, r in rows:
        print("| %d | %d | %.2f | %.2f | %.1f | %.1f | %.1f | %.1f | %.3f |" % (
            n + 1, r["procs"], r["first_s"], r["steady_s"], r["rss_mb"], r["attach_ms"], r["detach_ms"],
            r["kb"], r["ratio"]))
    print()
