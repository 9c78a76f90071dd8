"""make bench's JVM section (issue 36): what profiling a JVM costs it, and
what reading it costs podprof. Debian's OpenJDK 17 runs tests/fixtures/
Hot.java (two threads of ~1 ms rounds, counted), started with no flags.
Per repetition, on the same JVM, in turns (the order alternating): its
rounds a second alone; under a CPU profile of podprof (from just before
podprof starts, so its attach and its reading of the JVM's tables count,
until the profile is answered: the rounds lost against the rate alone,
over the profile's seconds of work alone); under `perf record -e cpu-clock
--call-graph dwarf` at the same rate (until it has exited, its file
written), counted alike; and the workers' CPU a round against alone's (the
cores are shared with others here: what the machine gives the JVM moves
the rounds a second, not the CPU a round). Then podprof's figures: the first answer's time
beyond its seconds, a second answer's on the same podprof (the target
attached again, its tables read again), the tables' read time as logged,
the unwind (and Java walk) per stack, and the share of Hot.hotAlpha's
samples that reach Hot.work and Thread.run. Medians over the
repetitions. Called by bench.py (--only jvm)."""
import os
import re
import select
import shutil
import statistics
import subprocess
import time
import urllib.request

JDK = "/usr/lib/jvm/java-17-openjdk-amd64"


class Hot:
    def __init__(self, classes):
        self.p = subprocess.Popen([os.path.join(JDK, "bin", "java"), "-cp", classes, "Hot"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        ready, _, _ = select.select([self.p.stdout], [], [], 300)
        if not ready or not self.p.stdout.readline().startswith("ready"):
            raise SystemExit("Hot did not get ready")
        self.pid = self.p.pid

    def rounds(self):
        self.p.stdin.write("spent\n")
        self.p.stdin.flush()
        return int(re.search(r"rounds=(\d+)", self.p.stdout.readline()).group(1))

    def stop(self):
        self.p.kill()
        self.p.wait()


def worker_cpu(pid):
    """CPU seconds of the fixture's two workers (utime + stime)."""
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        if "(hot-worker-num" in st:
            fields = st[st.rindex(")") + 2:].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def window(hot, fn):
    """Rounds done, seconds taken and the workers' CPU while fn runs."""
    r0, t0, c0 = hot.rounds(), time.monotonic(), worker_cpu(hot.pid)
    out = fn()
    r1, t1, c1 = hot.rounds(), time.monotonic(), worker_cpu(hot.pid)
    hot.cpu = c1 - c0
    return r1 - r0, t1 - t0, out


def fetch(port, seconds, hz, out):
    t0 = time.monotonic()
    with urllib.request.urlopen("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d&hz=%d" % (port, seconds, hz),
                                timeout=seconds + 120) as r, open(out, "wb") as f:
        f.write(r.read())
    return time.monotonic() - t0 - seconds


def profiled(b, hot, hz, seconds):
    """podprof's profile, from its start to the answer; then a second one
    on the same podprof (attached again: the grace is short)."""
    out = os.path.join(b.tmp, "jvm.pb.gz")
    pp = port = None

    def first():
        nonlocal pp, port
        pp, port = b.start_podprof(hot.pid, "--detach-grace-ms", "1")
        return fetch(port, seconds, hz, out)

    n, took, extra = window(hot, first)
    cpu = hot.cpu
    again = fetch(port, seconds, hz, os.path.join(b.tmp, "jvm2.pb.gz"))
    log = b.stop_podprof(pp)
    tables = [float(v) for v in re.findall(r"VMStructs read in ([\d.]+) ms", log)]
    unwind = re.search(r"unwind_us p50=([\d.]+) p99=([\d.]+)", log)
    tr = b.traces(out)
    alpha = [(v, fr) for v, fr in tr if "Hot.hotAlpha" in fr]
    reach = sum(v for v, fr in alpha if "Hot.work" in fr and "java.lang.Thread.run" in fr)
    return dict(rounds=n, took=took, cpu=cpu, extra_ms=1e3 * extra, again_ms=1e3 * again,
                tables_ms=statistics.median(tables) if tables else float("nan"),
                u50=float(unwind.group(1)), u99=float(unwind.group(2)),
                reach=100.0 * reach / max(sum(v for v, _ in alpha), 1))


def perf(b, hot, hz, seconds):
    def rec():
        subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), "--call-graph", "dwarf",
                        "-p", str(hot.pid), "-o", os.path.join(b.tmp, "jvm-perf.data"), "--", "sleep", str(seconds)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    n, took, _ = window(hot, rec)
    return dict(rounds=n, took=took, cpu=hot.cpu)


def run(b):
    if not os.path.exists(os.path.join(JDK, "bin", "javac")):
        print("## JVM\n\nOpenJDK 17 not installed (%s): skipped\n" % JDK)
        return
    classes = os.path.join(b.tmp, "jvm-classes")
    os.makedirs(classes, exist_ok=True)
    shutil.copy(os.path.join(b.root, "tests", "fixtures", "Hot.java"), classes)
    subprocess.run([os.path.join(JDK, "bin", "javac"), "-d", classes, os.path.join(classes, "Hot.java")], check=True)
    seconds = b.seconds
    print("## JVM (Hot.java under OpenJDK 17, no flags: 2 busy threads; %d s windows, %d reps; medians)\n" %
          (seconds, b.reps))
    print("| rate | slowdown % under podprof (min-max) | under perf record --call-graph dwarf | CPU a round, "
          "+% under podprof | under perf | first answer beyond its seconds, ms | a second answer's, ms | "
          "VMStructs read, ms | unwind + Java walk us p50 | p99 | Hot.hotAlpha's CPU under Hot.work and "
          "Thread.run % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for hz in (100, 1000):
        rows = []
        for rep in range(b.reps):
            hot = Hot(classes)
            try:
                # warm: the first rounds after ready still compile
                window(hot, lambda: time.sleep(1))
                res = {}
                for kind in (("alone", "podprof", "perf") if rep % 2 == 0 else ("perf", "podprof", "alone")):
                    if kind == "alone":
                        n, took, _ = window(hot, lambda: time.sleep(seconds))
                        res[kind] = dict(rounds=n, took=took, cpu=hot.cpu)
                    elif kind == "podprof":
                        res[kind] = profiled(b, hot, hz, seconds)
                    else:
                        res[kind] = perf(b, hot, hz, seconds)
            finally:
                hot.stop()
            rate = res["alone"]["rounds"] / res["alone"]["took"]
            per = res["alone"]["cpu"] / max(res["alone"]["rounds"], 1)
            lost = lambda r: 100.0 * (rate * r["took"] - r["rounds"]) / (rate * seconds)
            dearer = lambda r: 100.0 * (r["cpu"] / max(r["rounds"], 1) / per - 1)
            rows.append(dict(res["podprof"], slow=lost(res["podprof"]), perf=lost(res["perf"]),
                             cpu_pp=dearer(res["podprof"]), cpu_perf=dearer(res["perf"])))
        med = lambda k: statistics.median(r[k] for r in rows)
        print("| %d Hz | %.1f (%.1f to %.1f) | %.1f | %.1f | %.1f | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f |" % (
            hz, med("slow"), min(r["slow"] for r in rows), max(r["slow"] for r in rows), med("perf"),
            med("cpu_pp"), med("cpu_perf"), med("extra_ms"), med("again_ms"), med("tables_ms"), med("u50"),
            med("u99"), med("reach")))
    print()
