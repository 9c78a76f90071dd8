#!/usr/bin/env python3
"""podprof benchmark: runs the busy fixture alone and under podprof, side by
side and interleaved (these machines are noisy), and prints one table of
medians over the repetitions.

    python3 tests/bench/bench.py [build/release] [--reps N] [--seconds S]

Per configuration: pause per thread-sample (median and p99 over the run, as
podprof logs them), unwind time per stack and per frame, hot_a share error
against the fixture's own TSC ground truth, and the target's slowdown
(the iterations lost under podprof from just before it starts until the
profile is answered, against the rate alone in the same repetition, over
the profile's seconds of work alone; the fixture's counter is read from
its memory), beside the
slowdown under `perf record -e cpu-clock --call-graph dwarf` at the same rate
in the same repetition, counted alike (until perf record has exited, its
file written); podprof's CPU and peak RSS.

Then: the one-shot thread dump (the sampler's snapshot API, bench-snapshot)
against `eu-stack -p` for 1, 8, 64 and 512 threads; podprof's RSS through a
long profile; HTTP latency under load (wrk); CPython frames: per
interpreter (3.11 and 3.12 by podprof's layouts, 3.13 to 3.15 by their own
table of offsets, Debian unstable's in the sid chroot), the Python frame read
per capture and the pause per sample with --python 1 and 0 side by side on
the same pyhot.py process, and its slowdown under a 100 Hz profile as a
user asks for one, beside a window alone; a JVM (bench_jvm.py: Hot.java under OpenJDK 17,
its slowdown under podprof and perf record at 100 Hz and 1 kHz, the first
answer's extra time, the tables' read and the Java walk);
the allocation agent (bench_allocs.py: a malloc-bound microbenchmark, nginx
under wrk, accuracy on the allocs fixture, the agent's memory and podprof's
cost to read its records); thread per request (tpr: the tpr fixture, a
steady thread beside short-lived threads started at each rate of
--tpr-rates): how much of the process's CPU the profile accounts for,
podprof's and perf's, each function's share against the fixture's own
clocks, and the fixture's throughput and thread start latency alone and
profiled; a Go program's goroutines (bench_go.py: a dump of 10,000
goroutines by podprof and by the program itself, the hot goroutine's
progress under each, pprof labels on CPU samples); the signal-loss soak
(bench_soak.py: podprof SIGKILLed mid-profile, a signal in flight each
time, under each backend: kills, signals sent and delivered).
"""
import argparse
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib as run_it  # noqa: E402  (the integration suite's go tool pprof helpers)
import bench_allocs  # noqa: E402  (the allocation agent's figures)

ap = argparse.ArgumentParser()
ap.add_argument("build", nargs="?", default="build/release")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--continuous-seconds", type=int, default=600, help="continuous: length of the run")
ap.add_argument("--seconds", type=int, default=4)
ap.add_argument("--only", default="", help="comma list of sections: cpu,snapshot,memory,http,views,heap,continuous,"
                "python,jvm,tpr,pytpr,allocs,processes,flame,go,soak (or one of allocs' parts: allocs-micro,allocs-server,"
                "allocs-accuracy,allocs-memory)")
ap.add_argument("--soak-kills", type=int, default=100, help="soak: podprof SIGKILLs a backend (make soak: 1000)")
ap.add_argument("--tpr-rates", default="500,1000,2000", help="tpr: threads started a second, one row each")
ap.add_argument("--tpr-us", type=int, default=300, help="tpr: CPU each short thread burns, in us")
ap.add_argument("--configs", default="", help="cpu: only the configurations whose label contains one of "
                "these ';'-separated strings, e.g. '1 busy, 1000;8 busy, 100 Hz'")
ap.add_argument("--versus", default="", help="cpu, tpr: also profile with this other build (a build "
                "directory), in the same repetitions: an A/B of two builds")
args = ap.parse_args()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, args.build)
BUSY = os.path.join(BUILD, "fixtures", "busy")
PODPROF = os.path.join(BUILD, "podprof")
TMP = tempfile.mkdtemp(prefix="podprof-bench-")

CONFIGS = [(l + ", %d Hz" % hz, t, s, hz) for hz in (100, 1000) for l, t, s in (  # (label, busy, idle, hz)
    ("1 busy", 1, 0), ("8 busy", 8, 0), ("64 busy", 64, 0),
    ("1 busy + 7 idle", 1, 7), ("8 busy + 56 idle", 8, 56))]
if args.configs:
    CONFIGS = [c for c in CONFIGS if any(f.strip() and f.strip() in c[0] for f in args.configs.split(";"))]
VERSUS = os.path.join(ROOT, args.versus, "podprof") if args.versus else None


def start_busy(threads, sleepers):
    r, w = os.pipe()
    p = subprocess.Popen([BUSY, "-t", str(threads), "-s", str(sleepers), "-r", str(w)],
                         pass_fds=(w,), stdout=subprocess.PIPE, text=True)
    os.close(w)
    select.select([r], [], [], 10)
    os.read(r, 64)
    os.close(r)
    return p


def iters_now(p):
    """The fixture's iteration count now, read from its memory (its static
    `iters`, found with nm; /proc/PID/mem reads stop nothing), and the
    monotonic time of the read."""
    import time
    global ITERS_OFF
    if ITERS_OFF is None:
        nm = subprocess.run(["nm", BUSY], capture_output=True, text=True, check=True).stdout
        ITERS_OFF = int(re.search(r"^([0-9a-f]+) [bB] iters$", nm, re.M).group(1), 16)
    if not hasattr(p, "iters_addr"):
        with open("/proc/%d/maps" % p.pid) as f:
            base = next(int(l.split("-")[0], 16) for l in f if l.rstrip().endswith(os.path.realpath(BUSY)))
        p.iters_addr = base + ITERS_OFF
    with open("/proc/%d/mem" % p.pid, "rb", buffering=0) as f:
        f.seek(p.iters_addr)
        n = int.from_bytes(f.read(8), "little")
    return n, time.monotonic()


ITERS_OFF = None


def window_ips(p, w0, length):
    """Iterations a second over the window that began at w0 (iters_now)
    and lasts `length` seconds."""
    import time
    time.sleep(max(0.0, w0[1] + length - time.monotonic()))
    n, t = iters_now(p)
    return (n - w0[0]) / (t - w0[1])


def window_since(p, w0):
    """(iterations, seconds) from w0 (iters_now) until now."""
    n, t = iters_now(p)
    return n - w0[0], t - w0[1]


def lost_pct(alone_ips, run, seconds):
    """The target's slowdown under a sampler: the work it lost from just
    before the sampler started until it was done (podprof: the profile
    answered; perf: perf record exited, its file written), against what it
    did alone in as long, over the work of the profile's `seconds` alone:
    each sampler's whole cost per profile, its start and end included, and
    windows of any length compare."""
    iters, secs = run
    return 100 * (alone_ips * secs - iters) / (alone_ips * seconds)


def stop_busy(p, t0):
    p.terminate()
    out, _ = p.communicate(timeout=20)
    m = re.search(r"truth_a=([\d.]+) truth_b=[\d.]+ iters=(\d+)", out)
    return float(m.group(1)), int(m.group(2))


def proc_cpu_s(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_alone(threads, sleepers, seconds):
    p = start_busy(threads, sleepers)
    ips = window_ips(p, iters_now(p), seconds + WINDOW_SLACK_S)
    stop_busy(p, None)
    return ips


# Alone, the target's throughput is measured over the sampling time and a
# second more; a view's run over as long.
WINDOW_SLACK_S = 1.0


def vm_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"^%s:\s+(\d+)" % key, f.read(), re.M).group(1))


def run_perf(threads, sleepers, hz, seconds):
    """The kernel's sampler on the same workload: no stops, a stack copy per sample."""
    import time
    p = start_busy(threads, sleepers)
    w0 = iters_now(p)
    pr = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(hz), "--call-graph", "dwarf",
                           "-p", str(p.pid), "-o", os.path.join(TMP, "perf.data"), "--", "sleep", str(seconds)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if pr.wait():
        raise SystemExit("perf record failed")
    run = window_since(p, w0)
    stop_busy(p, None)
    return run


def start_podprof(pid, *extra, binary=None):
    """podprof on an ephemeral port; its log is drained by a thread into
    pp.lines (a pipe nobody reads would fill), each line told to pp.cond's
    waiters (wait_log)."""
    import threading
    pp = subprocess.Popen([binary or PODPROF, "--pid", str(pid), "--listen", "127.0.0.1:0"] + list(extra),
                          stderr=subprocess.PIPE, text=True)
    while True:   # other start-up lines may come first
        line = pp.stderr.readline()
        if not line:
            raise SystemExit("podprof exited before it served")
        m = re.search(r"\(port (\d+)\)", line)
        if m:
            break
    pp.lines = []
    pp.cond = threading.Condition()

    def read():
        for line in iter(pp.stderr.readline, ""):
            with pp.cond:
                pp.lines.append(line)
                pp.cond.notify_all()

    pp.reader = threading.Thread(target=read, daemon=True)
    pp.reader.start()
    return pp, int(m.group(1))


def stop_podprof(pp):
    """Ends a podprof of start_podprof; returns its whole log."""
    pp.terminate()
    pp.wait()
    pp.reader.join()
    return "".join(pp.lines)


def stops_total(port):
    """podprof_stops_total from /metrics."""
    met = subprocess.run(["curl", "-sf", "http://127.0.0.1:%d/metrics" % port], capture_output=True,
                         text=True).stdout
    return float(re.search(r"^podprof_stops_total (\S+)", met, re.M).group(1))


def pause_figures(log):
    """(thread-samples, pause p50, p99, unwind p50, p99) from podprof's
    end-of-profile log line."""
    m = re.search(r"thread_samples=(\d+).*pause_us p50=([\d.]+) p99=([\d.]+) unwind_us p50=([\d.]+) p99=([\d.]+)", log)
    return (int(m.group(1)),) + tuple(float(v) for v in m.group(2, 3, 4, 5))


def run_profiled(threads, sleepers, hz, seconds, binary=None, backend="ptrace"):
    import time
    p = start_busy(threads, sleepers)
    w0 = iters_now(p)
    # (a build to compare with, --versus, may predate --backend: its own default)
    pp, port = start_podprof(p.pid, *(() if binary else ("--backend", backend)), binary=binary)
    out = os.path.join(TMP, "p.pb.gz")
    cpu0, tcpu0 = proc_cpu_s(pp.pid), proc_cpu_s(p.pid)
    subprocess.run(["curl", "-sf", "-o", out,
                    "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d&hz=%d" % (port, seconds, hz)],
                   check=True)
    own_cpu = proc_cpu_s(pp.pid) - cpu0
    target_cpu = proc_cpu_s(p.pid) - tcpu0
    hwm = vm_kb(pp.pid, "VmHWM")
    run = window_since(p, w0)
    truth, iters = stop_busy(p, None)
    log = stop_podprof(pp)
    samples, p50, p99, u50, u99 = pause_figures(log)
    sym = re.search(r"symbolize_us_per_loc=([\d.]+) locs=(\d+) symtabs=(\d+) in ([\d.]+) ms", log)
    run_it.TMP = TMP
    a = b = whole = total = 0.0
    frames = []
    for v, fr in run_it.traces(out):
        frames.append(len(fr))
        total += v
        # A complete stack reaches the thread's first frame: _start (main)
        # or clone3 (start_thread).
        whole += v if fr[-1] in ("_start", "__clone3") else 0
        if fr[0] == "hot_a":
            a += v
        elif fr[0] == "hot_b":
            b += v
    share = 100 * a / (a + b) if a + b else float("nan")
    raw = run_it.pprof("-raw", out)
    lost = re.search(r"samples_lost=(\d+)", raw)
    return dict(run=run, samples=samples, p50=p50, p99=p99, u50=u50, u99=u99,
                own_cpu_pct=100 * own_cpu / seconds, own_us_per_sample=1e6 * own_cpu / max(samples, 1),
                hwm_mb=hwm / 1024.0, sym_us=float(sym.group(1)), symtab_ms=float(sym.group(4)),
                symtabs=int(sym.group(3)),
                expected=threads * hz * seconds, go_expected=target_cpu * hz,
                frames=statistics.mean(frames) if frames else 0, err=share - truth, share=share, truth=truth,
                lost=int(lost.group(1)) if lost else 0, whole_pct=100 * whole / total if total else 0)


def cpu_row(label, reps):
    med = lambda k: statistics.median(r[k] for r in reps)
    ratio = med("slowdown") / med("perf_slowdown") if med("perf_slowdown") > 0.05 else float("nan")
    return (label, med("samples"), med("expected"), med("go_expected"), med("p50"), med("p99"), med("loss_us"),
            med("u50"), med("u99"),
            med("frames"), med("u50") / med("frames") if med("frames") else 0,
            med("share"), med("truth"), max(abs(r["err"]) for r in reps), med("slowdown"),
            min(r["slowdown"] for r in reps), max(r["slowdown"] for r in reps),
            med("perf_slowdown"), ratio,
            # paired, rep by rep (the machine's noise moves both alike)
            statistics.median(r["slowdown"] - r["perf_slowdown"] for r in reps),
            "%d/%d" % (sum(r["slowdown"] <= r["perf_slowdown"] for r in reps), len(reps)),
            med("own_cpu_pct"), med("own_us_per_sample"), max(r["hwm_mb"] for r in reps),
            med("lost"), med("whole_pct"),
            med("sym_us"), med("symtab_ms"), med("symtabs"))


BACKENDS = ("ptrace", "perf_event")


def section_cpu():
    """Every configuration under both backends and under perf record, side
    by side in each repetition (one alone run as the baseline)."""
    rows = []
    for label, t, s, hz in CONFIGS:
        reps = {b: [] for b in BACKENDS}
        vreps = []
        for _ in range(args.reps):
            alone = run_alone(t, s, args.seconds)
            prof = {b: run_profiled(t, s, hz, args.seconds, backend=b) for b in BACKENDS}
            vprof = run_profiled(t, s, hz, args.seconds, VERSUS) if VERSUS else None
            perf = run_perf(t, s, hz, args.seconds)
            for r, rs in [(prof[b], reps[b]) for b in BACKENDS] + [(vprof, vreps)]:
                if r:
                    r["slowdown"] = lost_pct(alone, r["run"], args.seconds)
                    r["perf_slowdown"] = lost_pct(alone, perf, args.seconds)
                    # The target's loss per sample as the target sees it: its
                    # lost throughput in CPU time (busy threads use at most
                    # every core) over the samples taken.
                    r["loss_us"] = (r["slowdown"] / 100 * min(t, os.cpu_count()) * args.seconds * 1e6
                                    / max(r["samples"], 1))
                    rs.append(r)
        for b in BACKENDS:
            rows.append(cpu_row("%s, %s" % (label, b), reps[b]))
        if vreps:
            rows.append(cpu_row(label + " (versus %s)" % args.versus, vreps))
        print("  done: %s" % label, file=sys.stderr, flush=True)
    print("### CPU profile: %d reps x %d s per configuration; medians over reps (slowdown: min..max)\n" % (args.reps, args.seconds))
    print("| target | thread-samples | busy x Hz x s | target CPU s x Hz | pause us p50 | pause us p99 | target loss us/sample | unwind us/stack p50 | p99 | frames/stack | unwind us/frame | hot_a % | truth % | max share err (pp) | target slowdown % | perf slowdown % | podprof / perf | podprof - perf (pp), median of reps | reps at or below perf | podprof CPU % of a core | podprof CPU us/sample | podprof peak RSS MB | lost samples | complete stacks % | symbolize us/location warm | symbol tables read (cold) ms | tables |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %d | %d | %.1f | %.1f | %.0f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f (%.1f..%.1f) | %.1f | %.2f | %+.2f | %s | %.2f | %.1f | %.1f | %d | %.1f | %.2f | %.1f | %d |" % r)
    print()


def section_snapshot():
    """The thread dump vs eu-stack -p: N threads = 1 busy + N-1 blocked in read()."""
    import time
    snap = os.path.join(BUILD, "bench-snapshot")
    print("### One-shot thread dump vs eu-stack -p (1 busy thread + the rest blocked in read(); medians of %d)\n" % max(args.reps, 3))
    print("| threads | eu-stack -p ms | podprof cold ms (attach, dump, symbolize, detach) | speed-up | podprof warm ms (attached) | threads stopped warm | frames |")
    print("|---|---|---|---|---|---|---|")
    for n in (1, 8, 64, 512):
        r, w = os.pipe()
        p = subprocess.Popen([BUSY, "-t", "1", "-b", str(n - 1), "-r", str(w)], pass_fds=(w,),
                             stdout=subprocess.DEVNULL)
        os.close(w)
        select.select([r], [], [], 10)
        os.read(r, 64)
        os.close(r)
        eu = []
        for _ in range(max(args.reps, 3)):
            t0 = time.monotonic()
            subprocess.run(["eu-stack", "-p", str(p.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            eu.append(1e3 * (time.monotonic() - t0))
        out = subprocess.run([snap, str(p.pid), str(max(args.reps, 3))], capture_output=True, text=True).stdout
        m = dict(kv.split("=") for kv in out.split())
        p.terminate()
        p.wait()
        e, c = statistics.median(eu), float(m["cold_ms"])
        print("| %d | %.1f | %.1f | %.1fx | %.2f | %s | %s |" % (n, e, c, e / c, float(m["warm_ms"]), m["stopped_warm"], m["frames"]))
    print()


def section_memory():
    """podprof's RSS through a long profile: it must not grow with duration."""
    import time
    secs = 6 * args.seconds
    p = start_busy(8, 56)
    pp, port = start_podprof(p.pid)
    c = subprocess.Popen(["curl", "-sf", "-o", os.path.join(TMP, "long.pb.gz"),
                          "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d&hz=1000" % (port, secs)])
    rss = []
    for _ in range(6):
        time.sleep(args.seconds)
        rss.append(vm_kb(pp.pid, "VmRSS") / 1024.0)
    c.wait()
    stop_podprof(pp)
    p.terminate()
    p.communicate()
    print("### podprof RSS through one %d s profile (8 busy + 56 idle threads, 1000 Hz), every %d s\n" % (secs, args.seconds))
    print("| " + " | ".join("%d s" % (args.seconds * (i + 1)) for i in range(6)) + " |")
    print("|" + "---|" * 6)
    print("| " + " | ".join("%.1f MB" % v for v in rss) + " |\n")


def section_http():
    """Latency of the index and the thread dump under load, then with 1000
    keep-alive connections open."""
    p = start_busy(1, 63)
    pp, port = start_podprof(p.pid, "--max-conns", "2000")
    print("### HTTP under load (wrk, %d s each; target: 1 busy + 63 idle threads)\n" % args.seconds)
    print("| path | connections | requests/s | latency p50 | p99 |")
    print("|---|---|---|---|---|")
    for path in ("/debug/pprof/", "/debug/pprof/goroutine?debug=1"):
        for conns in (8, 1000):
            out = subprocess.run(["wrk", "-t", "2", "-c", str(conns), "-d", "%ds" % args.seconds, "--latency",
                                  "http://127.0.0.1:%d%s" % (port, path)], capture_output=True, text=True).stdout
            rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
            l50 = re.search(r"^\s+50%\s+(\S+)", out, re.M)
            l99 = re.search(r"^\s+99%\s+(\S+)", out, re.M)
            errs = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors: (.*)", out)
            print("| %s | %d | %s | %s | %s |%s" % (path, conns, rps.group(1) if rps else "?", l50.group(1) if l50 else "?",
                                                   l99.group(1) if l99 else "?", " " + errs.group(0) if errs else ""))
    print()
    stop_podprof(pp)
    p.terminate()
    p.communicate()


def run_view(threads, sleepers, path, seconds):
    """One request of `path` against busy: the target's throughput, podprof's
    CPU and peak RSS, the body's size and the stops it cost."""
    import time
    p = start_busy(threads, sleepers)
    w0 = iters_now(p)
    pp, port = start_podprof(p.pid, "--detach-grace-ms", "60000")
    out = os.path.join(TMP, "view.out")
    cpu0 = proc_cpu_s(pp.pid)
    subprocess.run(["curl", "-sf", "-o", out, "http://127.0.0.1:%d%s" % (port, path)], check=True)
    own_cpu = proc_cpu_s(pp.pid) - cpu0
    hwm = vm_kb(pp.pid, "VmHWM")
    stops = stops_total(port)
    ips = window_ips(p, w0, seconds + WINDOW_SLACK_S)
    stop_busy(p, None)
    stop_podprof(pp)
    return dict(ips=ips, own_cpu_pct=100 * own_cpu / seconds, hwm_mb=hwm / 1024.0,
                bytes=os.path.getsize(out), stops=stops)


def section_views():
    """The trace and the waiting profile beside the CPU profile at the same
    rate, on 8 busy + 56 idle threads: size, podprof's CPU and RSS, the
    target's slowdown, stops."""
    secs = 5
    rows = []
    for hz in (100, 1000):
        for label, path in (("CPU profile", "/debug/pprof/profile?seconds=%d&hz=%d" % (secs, hz)),
                            ("trace", "/debug/pprof/trace?seconds=%d&hz=%d" % (secs, hz)),
                            ("trace json", "/debug/pprof/trace?seconds=%d&hz=%d&format=json" % (secs, hz)),
                            ("block", "/debug/pprof/block?seconds=%d&hz=%d" % (secs, hz))):
            reps = []
            for _ in range(args.reps):
                alone = run_alone(8, 56, secs)
                r = run_view(8, 56, path, secs)
                r["slowdown"] = 100 * (1 - r["ips"] / alone)
                reps.append(r)
            med = lambda k: statistics.median(x[k] for x in reps)
            rows.append((label, hz, med("bytes") / 1e6, med("own_cpu_pct"), max(x["hwm_mb"] for x in reps),
                         med("slowdown"), min(x["slowdown"] for x in reps), max(x["slowdown"] for x in reps),
                         med("stops")))
        print("  done: views %d Hz" % hz, file=sys.stderr, flush=True)
    print("### Views beside the CPU profile (8 busy + 56 idle threads, %d s, %d reps; medians, slowdown min..max)\n"
          % (secs, args.reps))
    print("| view | Hz | output MB | podprof CPU % of a core | podprof peak RSS MB | target slowdown % | stops |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %.2f | %.1f | %.1f | %.1f (%.1f..%.1f) | %d |" % r)
    print()


def section_heap():
    """heap of a target with 10 000 mappings: time and bytes."""
    import time
    r, w = os.pipe()
    p = subprocess.Popen([os.path.join(BUILD, "fixtures", "waiter"), "-q", "-m", "10000", "-r", str(w)],
                         pass_fds=(w,), stdout=subprocess.DEVNULL)
    os.close(w)
    select.select([r], [], [], 10)
    os.read(r, 64)
    os.close(r)
    pp, port = start_podprof(p.pid)
    print("### heap of a target with 10 000 mappings (medians of %d)\n" % max(args.reps, 3))
    print("| form | seconds | bytes |")
    print("|---|---|---|")
    for q in ("", "debug=1"):
        t, n = [], 0
        for _ in range(max(args.reps, 3)):
            t0 = time.monotonic()
            out = subprocess.run(["curl", "-sf", "http://127.0.0.1:%d/debug/pprof/heap?%s" % (port, q)],
                                 capture_output=True, check=True).stdout
            t.append(time.monotonic() - t0)
            n = len(out)
        print("| heap%s | %.3f | %d |" % ("?" + q if q else "", statistics.median(t), n))
    print()
    stop_podprof(pp)
    p.terminate()
    p.wait()


def section_continuous():
    """A continuous watch (--continuous, default rate) over a long run on
    8 busy + 56 idle threads: the target's slowdown against a run alone of
    the same length, podprof's CPU and its RSS along the way (it must stay
    flat), a block and an allocs request at each step."""
    import time
    secs = args.continuous_seconds
    steps = 10
    alone = run_alone(8, 56, secs)
    p = start_busy(8, 56)
    w0 = iters_now(p)
    pp, port = start_podprof(p.pid, "--continuous")
    cpu0 = proc_cpu_s(pp.pid)
    rss = []
    for i in range(steps):
        time.sleep(secs / steps)
        for path in ("/debug/pprof/block", "/debug/pprof/allocs", "/debug/pprof/threadcreate"):
            subprocess.run(["curl", "-sf", "-o", os.devnull, "http://127.0.0.1:%d%s" % (port, path)],
                           check=True)
        rss.append(vm_kb(pp.pid, "VmRSS") / 1024.0)
    own = proc_cpu_s(pp.pid) - cpu0
    stops = stops_total(port)
    ips = window_ips(p, w0, secs + WINDOW_SLACK_S)
    stop_busy(p, None)
    stop_podprof(pp)
    print("### Continuous mode, %d s (8 busy + 56 idle threads, --continuous at 10 Hz; block, allocs and "
          "threadcreate fetched every %d s)\n" % (secs, secs // steps))
    print("| target slowdown % | podprof CPU % of a core | stops | podprof RSS MB at each step |")
    print("|---|---|---|---|")
    print("| %.1f | %.2f | %d | %s |\n" % (100 * (1 - ips / alone), 100 * own / secs, stops,
                                           " ".join("%.1f" % r for r in rss)))


PYTHON = "/usr/bin/python3.11"
PYHOT = os.path.join(ROOT, "tests", "fixtures", "pyhot.py")


def profile_python(pid, flag, hz, seconds):
    """One CPU profile of pid by podprof --python flag: its log's pause and
    unwind medians (unwind includes naming the Python frames), and the
    Python frames' read in each capture (inside the pause)."""
    pp, port = start_podprof(pid, "--python", str(flag), "--backend", "ptrace")
    out = os.path.join(TMP, "py%d.pb.gz" % flag)
    subprocess.run(["curl", "-sf", "-o", out,
                    "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d&hz=%d" % (port, seconds, hz)],
                   check=True)
    log = stop_podprof(pp)
    samples, p50, p99, u50, u99 = pause_figures(log)
    pc = re.search(r"python_captures=(\d+) python_us_per_capture=([\d.]+)", log)
    run_it.TMP = TMP
    tr = run_it.traces(out)
    total = sum(v for v, _ in tr)
    py = sum(v for v, fr in tr if any(f.startswith("<module>") for f in fr))
    return dict(samples=samples, p50=p50, p99=p99, u50=u50, u99=u99, py=100.0 * py / total if total else 0.0,
                pycap=float(pc.group(2)))


def pythons():
    """The CPythons of the Python section: (label, argv before the script,
    chroot root or None). Debian's 3.11, pyenv's 3.12 and 3.13 where
    installed, Debian unstable's 3.13, 3.14 and 3.15 in the sid chroot of
    scripts/runtimes.sh (run inside it, as another container's process)."""
    import glob
    out = [("3.11 (Debian)", [PYTHON], None)]
    for rel in ("3.12", "3.13"):
        found = sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python%s" % (rel, rel)))
        if found:
            out.append(("%s (pyenv %s)" % (rel, found[-1].split("/")[4]), found[-1:], None))
    try:
        import runtimes
        root = runtimes.sid()
    except Exception as e:   # noqa: BLE001  (Skip, or the chroot cannot be made)
        print("(the sid chroot of scripts/runtimes.sh is not there: %s)\n" % e)
        return out
    for rel in ("3.13", "3.14", "3.15"):
        if os.path.exists(root + "/usr/bin/python" + rel):
            out.append(("%s (Debian unstable)" % rel, ["chroot", root, "python" + rel], root))
    return out


def start_pyhot(argv, root):
    """pyhot.py under argv (in the chroot root: the script copied there);
    the process and its pid once it is ready."""
    script = PYHOT
    if root:
        import shutil
        os.makedirs(root + TMP, exist_ok=True)
        shutil.copy(PYHOT, root + TMP + "/pyhot.py")
        script = TMP + "/pyhot.py"
    p = subprocess.Popen(argv + [script], stdout=subprocess.PIPE, text=True)
    ready, _, _ = select.select([p.stdout], [], [], 30)
    m = re.match(r"ready (\d+)", p.stdout.readline() if ready else "")
    if not m:
        raise SystemExit("pyhot did not get ready under %s" % argv)
    return p, int(m.group(1))


def py_rounds(p, pid):
    """pyhot's rounds of work() so far (it prints them on SIGUSR1), the
    monotonic time and the process's CPU seconds."""
    import time
    os.kill(pid, signal.SIGUSR1)
    ready, _, _ = select.select([p.stdout], [], [], 30)
    m = re.search(r"rounds=(\d+)", p.stdout.readline() if ready else "")
    if not m:
        raise SystemExit("pyhot did not say its rounds")
    return int(m.group(1)), time.monotonic(), proc_cpu_s(pid)


def py_window(p, pid, fn):
    """(rounds, seconds, CPU seconds) while fn runs."""
    r0, t0, c0 = py_rounds(p, pid)
    fn()
    r1, t1, c1 = py_rounds(p, pid)
    return r1 - r0, t1 - t0, c1 - c0


def py_slowdown(p, pid, seconds, order):
    """pyhot alone, and under a 100 Hz CPU profile of podprof as a user
    starts it (no flags: the backend podprof picks, Python frames read),
    from just before podprof starts until the profile is answered, in turns
    (the order alternating by the caller). Returns {kind: (rounds, seconds,
    CPU seconds)}; `order` is the kinds' order."""
    import time
    out = {}

    def profiled():
        pp, port = start_podprof(pid)
        subprocess.run(["curl", "-sf", "-o", os.path.join(TMP, "py100.pb.gz"),
                        "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d&hz=100" % (port, seconds)], check=True)
        stop_podprof(pp)
    for kind in order:
        out[kind] = py_window(p, pid, profiled if kind == "podprof" else lambda: time.sleep(seconds))
    return out


def section_python():
    """CPython frames: for each interpreter, the same pyhot.py process
    profiled by --python 1 and --python 0 in turn (the order alternating per
    repetition; ptrace stops both, as --python 1 needs): the pause per
    sample, the Python frames' read in each capture (inside the pause), the
    unwind and naming after it, and the samples that reach <module>. One
    table: 3.11 and 3.12 (podprof's own layouts) beside 3.13 to 3.15 (their
    own table of offsets)."""
    import shutil
    hz = 250
    rows = []
    for label, argv, root in pythons():
        if not os.path.exists(argv[-1]) and not root:
            print("(%s: %s not installed)" % (label, argv[-1]))
            continue
        res = {0: [], 1: [], "slow": [], "dearer": []}
        for rep in range(args.reps):
            p, pid = start_pyhot(argv, root)
            for flag in ((1, 0) if rep % 2 == 0 else (0, 1)):
                res[flag].append(profile_python(pid, flag, hz, args.seconds))
            w = py_slowdown(p, pid, args.seconds, ("alone", "podprof") if rep % 2 == 0 else ("podprof", "alone"))
            p.kill()
            p.wait()
            (ra, ta, ca), (rp, tp, cp) = w["alone"], w["podprof"]
            rate = ra / ta
            res["slow"].append(100.0 * (rate * tp - rp) / (rate * args.seconds))
            res["dearer"].append(100.0 * ((cp / max(rp, 1)) / (ca / max(ra, 1)) - 1))
        rows.append((label, res))
        if root:
            shutil.rmtree(root + TMP, ignore_errors=True)
    print("## Python frames (pyhot.py, 1 busy thread, %d Hz, %d s, %d reps, --backend ptrace; medians)\n" %
          (hz, args.seconds, args.reps))
    print("| CPython | thread-samples | Python frame read per capture, us (mean) | pause us p50 | pause us p99 | "
          "pause us p50 / p99 with --python 0 | unwind (+ Python names) us p50 | p99 | samples under <module> % | "
          "slowdown % at 100 Hz, no flags (min..max) | CPU a round, +% |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for label, res in rows:
        def med(flag, k):
            return statistics.median(r[k] for r in res[flag])
        print("| %s | %d | %.2f | %.1f | %.1f | %.1f / %.1f | %.1f | %.1f | %.1f | %.1f (%.1f..%.1f) | %.1f |" % (
            label, med(1, "samples"), med(1, "pycap"), med(1, "p50"), med(1, "p99"), med(0, "p50"), med(0, "p99"),
            med(1, "u50"), med(1, "u99"), med(1, "py"), statistics.median(res["slow"]), min(res["slow"]),
            max(res["slow"]), statistics.median(res["dearer"])))
    print("(slowdown: pyhot's rounds of work lost from just before podprof starts until the 100 Hz profile "
          "is answered, against its rate alone in a window beside it, over the profile's seconds; CPU a round: "
          "the process's CPU over its rounds, against alone's)\n")


TPR = os.path.join(BUILD, "fixtures", "tpr")
TPR_WARM_S = 1.0   # from the fixture's start to the window's: its threads settled


class Tpr:
    """The thread-per-request fixture (tests/fixtures/tpr.c), started at
    `rate` threads a second; mark() reads its counters."""

    def __init__(self, rate):
        r, w = os.pipe()
        self.p = subprocess.Popen([TPR, "-n", str(rate), "-u", str(args.tpr_us), "-r", str(w)], pass_fds=(w,),
                                  stdout=subprocess.PIPE, text=True)
        os.close(w)
        select.select([r], [], [], 10)
        os.read(r, 64)
        os.close(r)
        self.pid = self.p.pid

    def mark(self):
        """Now: the time, the process's utime+stime (s) and the fixture's
        truth line (its SIGUSR1 answer; lat_* cover the time since the
        mark before)."""
        import signal
        import time
        t, cpu = time.monotonic(), proc_cpu_s(self.pid)
        os.kill(self.pid, signal.SIGUSR1)
        ready, _, _ = select.select([self.p.stdout], [], [], 10)
        line = self.p.stdout.readline() if ready else ""
        m = {k: float(v) for k, v in (kv.split("=") for kv in line.split())}
        if "short_ns" not in m:
            raise SystemExit("tpr gave no truth line: %r" % line)
        return dict(m, t=t, cpu=cpu)

    def stop(self):
        self.p.terminate()
        self.p.communicate(timeout=20)


def tpr_window(m0, m1, seconds):
    """What the fixture did between two marks, and `scale`: seconds over the
    marks' distance, to bring the process's CPU to a profiler's window."""
    dt = m1["t"] - m0["t"]
    cpu = m1["cpu"] - m0["cpu"]
    return dict(dt=dt, cpu=cpu, cores=cpu / dt, scale=seconds / dt, done_s=(m1["done"] - m0["done"]) / dt,
                truth_short=100 * (m1["short_ns"] - m0["short_ns"]) / 1e9 / cpu if cpu else float("nan"),
                truth_steady=100 * (m1["steady_ns"] - m0["steady_ns"]) / 1e9 / cpu if cpu else float("nan"),
                lat50=m1["lat_p50_us"], lat99=m1["lat_p99_us"])


def tpr_account(w, total_ns, short_ns, steady_ns):
    """A profiler's accounting over window w: its total over the process's
    CPU (utime+stime) brought to the profile's length, and each function's
    share of the profile."""
    w["ratio"] = total_ns / 1e9 / (w["cpu"] * w["scale"]) if w["cpu"] else float("nan")
    w["short"] = 100 * short_ns / total_ns if total_ns else float("nan")
    w["steady"] = 100 * steady_ns / total_ns if total_ns else float("nan")
    return w


def tpr_alone(rate, seconds):
    import time
    f = Tpr(rate)
    time.sleep(TPR_WARM_S)
    m0 = f.mark()
    time.sleep(seconds)
    m1 = f.mark()
    f.stop()
    return tpr_window(m0, m1, seconds)


def wait_log(pp, text, timeout):
    """Until podprof logs a line holding text: woken by each line, not by a
    loop waking every millisecond beside the fixtures it measures."""
    with pp.cond:
        if not pp.cond.wait_for(lambda: any(text in line for line in pp.lines), timeout):
            raise SystemExit("podprof never logged %r" % text)


def resume_start(tracer_tid, seconds):
    """Clone to resume, measured from outside: perf's scheduler tracepoints
    for `seconds` (all CPUs), read by resume_us."""
    data = os.path.join(TMP, "tpr-sched.data")
    return subprocess.Popen(["perf", "record", "-q", "-a", "-e", "sched:sched_process_fork", "-e",
                             "sched:sched_waking", "-o", data, "--", "sleep", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), data, tracer_tid


def resume_us(rec, tpr_pid):
    """From each thread the fixture's main thread created (sched_process_fork)
    to the tracer thread's first wake-up of it (sched_waking: the PTRACE_CONT
    that lets it go from its birth stop), in us: the stop a new thread gets,
    including its own way to that stop. Returns the list (empty if perf could
    not record)."""
    p, data, tracer = rec
    if p.wait() != 0:
        return []
    out = subprocess.run(["perf", "script", "-i", data, "-F", "tid,time,event,trace"], capture_output=True,
                         text=True).stdout
    born, took = {}, []
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+([\d.]+):\s+sched:(\w+):\s+(.*)", line)
        if not m:
            continue
        tid, t, ev, rest = int(m.group(1)), float(m.group(2)), m.group(3), m.group(4)
        if ev == "sched_process_fork" and re.search(r"\bpid=%d\b" % tpr_pid, rest):
            born[int(re.search(r"child_pid=(\d+)", rest).group(1))] = t
        elif ev == "sched_waking" and tid == tracer:
            child = int(re.search(r"\bpid=(\d+)", rest).group(1))
            if child in born:
                took.append((t - born.pop(child)) * 1e6)
    return took


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * q))] if v else float("nan")


def sampler_tid(pid):
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            if f.read().strip() == "sampler":
                return int(tid)
    raise SystemExit("podprof %d has no sampler thread" % pid)


def tpr_mintrace(rate, seconds):
    """The fixture under bench-mintrace, which lets every stop go at once:
    the least any ptrace tracer costs a new thread."""
    import time
    f = Tpr(rate)
    time.sleep(TPR_WARM_S)
    mt = subprocess.Popen([os.path.join(BUILD, "bench-mintrace"), str(f.pid), str(seconds + 2)],
                          stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    m0 = f.mark()
    rec = resume_start(mt.pid, 1)
    time.sleep(seconds)
    m1 = f.mark()
    mt.wait()
    f.stop()
    w = tpr_window(m0, m1, seconds)
    w["resume"] = resume_us(rec, f.pid)
    return w


def tpr_podprof(rate, seconds, hz, binary=None, extra=()):
    """A CPU profile of the fixture at hz, the fixture's marks taken as
    podprof logs the session's start and end; `sampled`: the part of the
    profile its samples carried (not settled under podprof's own frames),
    and of short_work's."""
    import time
    f = Tpr(rate)
    pp, port = start_podprof(f.pid, *extra, binary=binary)
    time.sleep(TPR_WARM_S)
    out = os.path.join(TMP, "tpr.pb.gz")
    c = subprocess.Popen(["curl", "-sf", "-o", out, "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d&hz=%d"
                          % (port, seconds, hz)])
    wait_log(pp, "profile: started", 10)
    m0 = f.mark()
    rec = resume_start(sampler_tid(pp.pid), 1)
    wait_log(pp, "profile: done", seconds + 30)
    m1 = f.mark()
    if c.wait() != 0:
        raise SystemExit("tpr: the profile request failed")
    f.stop()
    log = stop_podprof(pp)
    run_it.TMP = TMP
    tr = run_it.traces(out)
    w = tpr_account(tpr_window(m0, m1, seconds), sum(v for v, _ in tr),
                    sum(v for v, fr in tr if "short_work" in fr), sum(v for v, fr in tr if "steady_work" in fr))
    w["resume"] = resume_us(rec, f.pid)
    marks = (run_it.MARK_UNSAMPLED, run_it.MARK_PENDING)
    total = sum(v for v, _ in tr) or 1
    short = sum(v for v, fr in tr if "short_work" in fr) or 1
    w["sampled"] = 100.0 * sum(v for v, fr in tr if not any(m in fr for m in marks)) / total
    w["short_sampled"] = 100.0 * sum(v for v, fr in tr if "short_work" in fr and
                                     not any(m in fr for m in marks)) / short
    # the pause a stop cost its thread, as podprof logs it (perf_event's
    # samples stop nobody: its figure is that of any stop it still made)
    pm = re.search(r"pause_us p50=([\d.]+) p99=([\d.]+)", log)
    w["pause50"], w["pause99"] = (float(pm.group(1)), float(pm.group(2))) if pm else (float("nan"),) * 2
    return w


PERF_HEAD = re.compile(r"^\s*(\d+)/(\d+)\s+[\d.]+:\s+(\d+)")


def tpr_perf(rate, seconds, hz, system_wide):
    """The same with perf record at hz on cpu-clock: `-p PID` (counters per
    thread, inherited by new threads) or `-a` (counters per CPU, the
    fixture's samples picked by pid). Dwarf call graphs: the fixture has no
    frame pointers, and short_work's clock reads are system calls."""
    import time
    f = Tpr(rate)
    time.sleep(TPR_WARM_S)
    data = os.path.join(TMP, "tpr-perf.data")
    m0 = f.mark()
    subprocess.run(["perf", "record", "-q", "-B", "-e", "cpu-clock", "-F", str(hz), "--call-graph", "dwarf"] +
                   (["-a"] if system_wide else ["-p", str(f.pid)]) + ["-o", data, "--", "sleep", str(seconds)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    m1 = f.mark()
    f.stop()
    out = subprocess.run(["perf", "script", "-i", data, "-F", "pid,tid,time,period,ip,sym"], capture_output=True,
                         text=True).stdout
    total = short = steady = 0
    period, mine, names = 0, False, set()

    def flush():
        nonlocal total, short, steady
        if mine:
            total += period
            short += period if "short_work" in names else 0
            steady += period if "steady_work" in names else 0

    for line in out.splitlines():
        m = PERF_HEAD.match(line)
        if m:
            flush()
            period, mine, names = int(m.group(3)), int(m.group(1)) == f.pid, set()
        elif line.strip():
            names.add(line.split()[-1])
    flush()
    return tpr_account(tpr_window(m0, m1, seconds), total, short, steady)


def section_tpr():
    """Thread per request: a steady thread beside RATE short threads a
    second, each burning --tpr-us of CPU and exiting, alone, under podprof
    at 100 Hz, under perf -p and perf -a at 100 Hz, one after the other in
    each repetition."""
    hz, secs = 100, args.seconds
    rows = []
    for rate in [int(x) for x in args.tpr_rates.split(",") if x]:
        runs = {"alone": [], "mintrace": [], "podprof": [], "podprof ptrace": [], "perf -p": [], "perf -a": []}
        if VERSUS:
            runs["versus"] = []
        for _ in range(args.reps):
            runs["alone"].append(tpr_alone(rate, secs))
            runs["mintrace"].append(tpr_mintrace(rate, secs))
            runs["podprof"].append(tpr_podprof(rate, secs, hz))
            runs["podprof ptrace"].append(tpr_podprof(rate, secs, hz, extra=("--backend", "ptrace")))
            if VERSUS:
                runs["versus"].append(tpr_podprof(rate, secs, hz, binary=VERSUS))
            runs["perf -p"].append(tpr_perf(rate, secs, hz, False))
            runs["perf -a"].append(tpr_perf(rate, secs, hz, True))
        med = {k: {f: statistics.median(r[f] for r in v) for f in v[0] if f != "resume"} for k, v in runs.items()}
        for k in ("mintrace", "podprof", "podprof ptrace", "versus"):   # every rep's threads pooled
            if k in runs:
                med[k]["resume"] = [x for r in runs[k] for x in r["resume"]]
        rows.append((rate, med))
        print("  done: tpr %d/s" % rate, file=sys.stderr, flush=True)
    print("### Thread per request: 1 steady thread + N short threads a second, each %d us of CPU (tpr), "
          "%d Hz, %d s, %d reps; medians\n" % (args.tpr_us, hz, secs, args.reps))
    print("Accounting: the profile's total CPU over the process's utime+stime in the same window (1.00: all of "
          "it). Shares: each function's part of the profile, beside (in brackets) the fixture's own clocks' "
          "part of the process's CPU in the same run.\n")
    print("| threads/s | process CPU cores alone | podprof total / CPU | perf -p | perf -a "
          "| short_work % podprof (truth) | perf -p (truth) | perf -a (truth) "
          "| steady_work % podprof (truth) | perf -p (truth) | perf -a (truth) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rate, r in rows:
        pp, pe, pa = r["podprof"], r["perf -p"], r["perf -a"]
        print("| %d | %.2f | %.2f | %.2f | %.2f | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) | %.1f (%.1f) "
              "| %.1f (%.1f) | %.1f (%.1f) |" % (
                  rate, r["alone"]["cores"], pp["ratio"], pe["ratio"], pa["ratio"],
                  pp["short"], pp["truth_short"], pe["short"], pe["truth_short"], pa["short"], pa["truth_short"],
                  pp["steady"], pp["truth_steady"], pe["steady"], pe["truth_steady"], pa["steady"],
                  pa["truth_steady"]))
    print()
    print("What podprof's samples carried, not settled under its own frames (`[exited threads' CPU, not "
          "sampled]`, `[CPU since the thread's last sample]`): of the whole profile, and of short_work's part. "
          "Under ptrace (CPython's backend) each new thread is stopped by the CPU it used and each such draw "
          "stands for a period (ptrace/rule/cpudraw.h); under perf_event the kernel samples it from its birth, "
          "each sample weighing the CPU since the one before.\n")
    print("| threads/s | sampled % perf_event | ptrace | short_work sampled % perf_event | ptrace "
          "| podprof ptrace total / CPU | short_work % ptrace (truth) | done/s ptrace "
          "| start latency us p50/p99 ptrace | pause a sample us p50/p99 perf_event | ptrace |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for rate, r in rows:
        pp, pt = r["podprof"], r["podprof ptrace"]
        print("| %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.1f (%.1f) | %.0f | %.0f / %.0f | %.0f / %.0f "
              "| %.0f / %.0f |" % (
                  rate, pp["sampled"], pt["sampled"], pp["short_sampled"], pt["short_sampled"], pt["ratio"],
                  pt["short"], pt["truth_short"], pt["done_s"], pt["lat50"], pt["lat99"], pp["pause50"],
                  pp["pause99"], pt["pause50"], pt["pause99"]))
    print()
    print("Throughput: short threads done a second. Start latency: from pthread_create to the thread's first "
          "instruction (the fixture's clock), which holds a traced thread's stop at its birth and its "
          "parent's at the clone event; podprof itself measures neither.\n")
    print("| threads/s | done/s alone | podprof | perf -p | perf -a | start latency us p50/p99 alone | podprof "
          "| perf -p | perf -a |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, r in rows:
        print("| %d | %.0f | %.0f | %.0f | %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f |" % (
            (rate,) + tuple(r[k]["done_s"] for k in ("alone", "podprof", "perf -p", "perf -a")) +
            tuple(x for k in ("alone", "podprof", "perf -p", "perf -a") for x in (r[k]["lat50"], r[k]["lat99"]))))
    print()
    print("The stop a new thread gets, beside its floor: bench-mintrace (tests/bench/mintrace.c) traces the "
          "fixture as podprof does (PTRACE_O_TRACECLONE, woken by SIGCHLD on a signalfd) and lets every stop go "
          "at once, doing nothing else. *Clone to resume*: from the thread's creation (perf's "
          "sched_process_fork) to the tracer thread's first wake-up of it (sched_waking: its PTRACE_CONT), "
          "all CPUs traced for 1 s of each window (the tracepoints cost the start latency of those runs a "
          "little), every rep's threads pooled.\n")
    print("| threads/s | start latency us p50/p99 alone | mintrace | podprof | clone to resume us p50/p99 "
          "mintrace (threads) | podprof (threads) |")
    print("|---|---|---|---|---|---|")
    for rate, r in rows:
        mt, pp = r["mintrace"]["resume"], r["podprof"]["resume"]
        print("| %d | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f (%d) | %.0f / %.0f (%d) |" % (
            rate, r["alone"]["lat50"], r["alone"]["lat99"], r["mintrace"]["lat50"], r["mintrace"]["lat99"],
            r["podprof"]["lat50"], r["podprof"]["lat99"], pct(mt, .5), pct(mt, .99), len(mt),
            pct(pp, .5), pct(pp, .99), len(pp)))
    print()
    if VERSUS:
        print("The same for podprof of --versus %s, in the same repetitions:\n" % args.versus)
        print("| threads/s | start latency us p50/p99 podprof | versus | clone to resume us p50/p99 podprof "
              "| versus | accounting podprof | versus | done/s podprof | versus |")
        print("|---|---|---|---|---|---|---|---|---|")
        for rate, r in rows:
            pp, vs = r["podprof"], r["versus"]
            print("| %d | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.2f | %.2f | %.0f | %.0f |" % (
                rate, pp["lat50"], pp["lat99"], vs["lat50"], vs["lat99"], pct(pp["resume"], .5),
                pct(pp["resume"], .99), pct(vs["resume"], .5), pct(vs["resume"], .99), pp["ratio"], vs["ratio"],
                pp["done_s"], vs["done_s"]))
        print()


PYSERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyserver.py")


def pytpr_run(seconds, profiled, extra=()):
    """One wrk run (2 threads, 8 connections, a connection per request)
    against a fresh pyserver.py; profiled: a CPU profile of the server over
    the same seconds. Returns rps and, profiled, the profile's figures."""
    import time
    srv = subprocess.Popen([sys.executable, PYSERVER], stdout=subprocess.PIPE, text=True)
    port = int(srv.stdout.readline().split()[1])
    pp = out = c = None
    if profiled:
        pp, pport = start_podprof(srv.pid, *extra)
        out = os.path.join(TMP, "pytpr.pb.gz")
        c = subprocess.Popen(["curl", "-sf", "-o", out, "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d"
                              % (pport, seconds)])
        wait_log(pp, "profile: started", 10)
    w = subprocess.run(["wrk", "-t", "2", "-c", "8", "-d", "%ds" % seconds, "-H", "Connection: close",
                        "http://127.0.0.1:%d/" % port], capture_output=True, text=True)
    m = re.search(r"Requests/sec:\s+([\d.]+)", w.stdout)
    r = {"rps": float(m.group(1)) if m else float("nan")}
    if profiled:
        wait_log(pp, "profile: done", seconds + 30)
        if c.wait() != 0:
            raise SystemExit("pytpr: the profile request failed")
        log = "".join(pp.lines)
        stop_podprof(pp)
        run_it.TMP = TMP
        tr = run_it.traces(out)
        marks = (run_it.MARK_UNSAMPLED, run_it.MARK_PENDING)
        total = sum(v for v, _ in tr) or 1
        def in_work(fr):
            return any(f.startswith("handle_work") for f in fr)

        work = sum(v for v, fr in tr if in_work(fr)) or 1
        r["sampled"] = 100.0 * sum(v for v, fr in tr if not any(k in fr for k in marks)) / total
        r["work"] = 100.0 * work / total
        r["work_sampled"] = 100.0 * sum(v for v, fr in tr if in_work(fr) and
                                        not any(k in fr for k in marks)) / work
        d = re.search(r"draws=(\d+)", run_it.pprof("-raw", out))
        r["draws"] = int(d.group(1)) if d else 0
        p = re.search(r"profile: done.*pause_us p50=([\d.]+) p99=([\d.]+)", log)
        r["p50"], r["p99"] = (float(p.group(1)), float(p.group(2))) if p else (float("nan"),) * 2
    srv.terminate()
    srv.wait(timeout=20)
    time.sleep(0.2)   # its port and threads gone before the next run
    return r


def section_pytpr():
    """A thread per request in Python (the standard library's
    ThreadingHTTPServer under wrk): requests a second alone and profiled, in
    alternating runs, and what the profile's samples carried."""
    secs = args.seconds
    runs = {"alone": [], "profiled": [], "no draws": []}
    for _ in range(args.reps):
        runs["alone"].append(pytpr_run(secs, False))
        runs["profiled"].append(pytpr_run(secs, True))
        runs["no draws"].append(pytpr_run(secs, True, ("--draw-threads", "0")))
    med = {k: {f: statistics.median(r[f] for r in v) for f in v[0]} for k, v in runs.items()}
    a = med["alone"]
    print("### Thread per request in Python: ThreadingHTTPServer, a connection and a thread per request, "
          "wrk -t2 -c8, %d s, %d reps alternating; medians\n" % (secs, args.reps))
    print("Profiled: a CPU profile at 100 Hz over the whole run (ptrace: CPython's backend). *Sampled*: "
          "what the samples carried, not settled under podprof's own frames; of handle_work's part too. "
          "*Draws*: stops of threads born in the window by the CPU they used (ptrace/rule/cpudraw.h). "
          "Pause: the sampler's stops, its log's p50/p99.\n")
    print("| podprof | rps alone | rps profiled | change | sampled % | handle_work % of the profile "
          "| its sampled % | draws | pause us p50 / p99 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k, label in (("profiled", "default"), ("no draws", "--draw-threads 0")):
        p = med[k]
        print("| %s | %.0f | %.0f | %+.1f %% | %.1f | %.1f | %.1f | %.0f | %.1f / %.1f |" % (
            label, a["rps"], p["rps"], 100.0 * (p["rps"] / a["rps"] - 1), p["sampled"], p["work"],
            p["work_sampled"], p["draws"], p["p50"], p["p99"]))
    print()


def main():
    only = set(args.only.split(",")) if args.only else {"cpu", "snapshot", "memory", "http", "views", "heap",
                                                        "continuous", "python", "jvm", "tpr", "pytpr", "allocs",
                                                        "processes", "flame", "go", "soak"}
    print("podprof bench (%s)\n" % subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %s"],
                                                 capture_output=True, text=True).stdout.strip())
    if "snapshot" in only:
        section_snapshot()
    if "http" in only:
        section_http()
    if "memory" in only:
        section_memory()
    if "heap" in only:
        section_heap()
    if "continuous" in only:
        section_continuous()
    if "views" in only:
        section_views()
    if "python" in only:
        section_python()
    if "jvm" in only:
        import types
        import bench_jvm
        run_it.TMP = TMP
        bench_jvm.run(types.SimpleNamespace(build=BUILD, root=ROOT, tmp=TMP, reps=args.reps, seconds=args.seconds,
                                            start_podprof=start_podprof, stop_podprof=stop_podprof,
                                            traces=run_it.traces))
    if "tpr" in only:
        section_tpr()
    if "pytpr" in only:
        section_pytpr()
    if "processes" in only:
        import types
        import bench_procs
        run_it.TMP = TMP
        bench_procs.run(types.SimpleNamespace(build=BUILD, tmp=TMP, reps=args.reps, start_podprof=start_podprof,
                                              stop_podprof=stop_podprof, wait_log=wait_log,
                                              traces=run_it.traces))
    if "flame" in only:
        import types
        import bench_flame
        bench_flame.run(types.SimpleNamespace(build=BUILD, tmp=TMP, reps=args.reps))
    if "go" in only:
        import types
        import bench_go
        bench_go.run(types.SimpleNamespace(build=BUILD, root=ROOT, tmp=TMP, reps=args.reps,
                                           start_podprof=start_podprof, stop_podprof=stop_podprof))
    if "soak" in only:
        import types
        import bench_soak
        bench_soak.run(types.SimpleNamespace(build=BUILD, root=ROOT, kills=args.soak_kills))
    parts = [p for p in bench_allocs.PARTS if "allocs" in only or "allocs-" + p in only]
    if parts:
        bench_allocs.run(bench_allocs.Bench(BUILD, ROOT, TMP, args.reps, args.seconds, start_podprof, stop_podprof),
                         parts)
    if "cpu" in only:
        section_cpu()


main()
