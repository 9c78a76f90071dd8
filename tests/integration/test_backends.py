"""The two ways of taking CPU samples (issue 24): perf_event, where the
kernel copies each sample's registers and stack into a ring buffer and no
thread stops, and ptrace, where each sample stops its thread. --backend
auto takes perf_event where perf_event_open is allowed and ptrace
elsewhere (tests/fixtures/noperf.c refuses it as Docker's default seccomp
profile does) and for CPython; the log and the profile's comment say which
ran and why."""
import os
import re
import subprocess
import time

import lib
from lib import *  # noqa: F401,F403  (Fixture, Podprof, http, pprof, check, test, ...)
from test_go import CRUNCH, GOHOT, GoFixture
from test_python import PYTHON, PyFixture

NOPERF = os.path.join(BUILD, "fixtures", "noperf")


def comments(path):
    raw = pprof("-raw", path)
    return [l[len("Comment: "):] for l in raw.splitlines() if l.startswith("Comment: podprof:")], raw


def stops(pp):
    st, _, body = http(pp.port, "/metrics")
    check(st == 200, "metrics: %d" % st)
    m = re.search(r"^podprof_stops_total (\d+)", body.decode(), re.M)
    check(m, "no podprof_stops_total in the metrics")
    return int(m.group(1))


def total_and_process(path):
    """The profile's CPU total and the process's CPU over its window (the
    accounting comment), in ns."""
    total = sum(v for v, _ in traces(path))
    m = re.search(r"process_cpu_ns=(\d+)", pprof("-raw", path))
    check(m, "no process_cpu_ns comment")
    return total, int(m.group(1))


@test
@figures
def perf_event_samples_without_stopping_a_thread():
    """--backend perf_event: the busy fixture's names, whole stacks and
    hot_a share (its own clocks' within the sampling noise), the total the
    process's CPU within 5 % (what the kernel's clock counted beyond it
    at most what the host took: lib.check_clock_over), the comment and
    the log saying perf_event and why, and not one thread stopped for it
    (the sampler's stop counter stays where it was)."""
    f = Fixture(threads=2, sleepers=2)
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event")
    pp.wait_log(r"backend: perf_event: perf_event_open allowed", 5)
    before = stops(pp)
    steal = lib.steal_ns()
    path = save(get_profile(pp, "seconds=4&hz=400"), "perf.pb.gz")
    after = stops(pp)
    truth = f.stop()
    share = check_busy_profile(path, truth)
    notes, raw = comments(path)
    check(any("taken with perf_event at 400 Hz" in n and "no thread was stopped" in n for n in notes),
          "comment: %s" % notes)
    check(any(n.startswith("podprof: backend perf_event: perf_event_open allowed") for n in notes),
          "comment: %s" % notes)
    check(after == before, "%d threads stopped during a perf_event profile" % (after - before))
    total, used = total_and_process(path)
    check(abs(total / used - 1) <= 0.05, "total %.3f s, process %.3f s" % (total / 1e9, used / 1e9))
    over = lib.check_clock_over(path, used, steal)
    pp.wait_log(r"backend: pid=%d sampled with perf_event: perf_event_open allowed" % f.pid, 1)
    print("  info: hot_a %.2f%% (truth %.2f%%), total/process %.3f (the kernel's clock over by %.1f ms), "
          "stops %d" % (share, truth, total / used, over / 1e6, after - before))
    pp.stop()


def perf_samples(pp):
    st, _, body = http(pp.port, "/metrics")
    m = re.search(r"^podprof_perf_samples_total (\d+)", body.decode(), re.M)
    check(st == 200 and m, "no podprof_perf_samples_total")
    return int(m.group(1))


@test
def perf_events_sample_only_while_a_profile_does():
    """Between CPU profiles, and during a profile that takes no CPU sample
    (block), the target's threads are not sampled: the kernel's samples
    stop with the last CPU profile (podprof stays attached for its grace)."""
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event", "--detach-grace-ms", "5000")
    get_profile(pp, "seconds=1")
    n0 = perf_samples(pp)
    check(n0 > 0, "no perf sample during the profile")
    st, _, _ = http(pp.port, "/debug/pprof/block?seconds=1")
    check(st == 200, "block: %d" % st)
    n1 = perf_samples(pp)
    check(n1 == n0, "%d samples read while only block ran (2 busy threads)" % (n1 - n0))
    get_profile(pp, "seconds=1")
    check(perf_samples(pp) > n1, "no perf sample in the second profile")
    pp.stop()
    f.stop()


def perf_counters(pp):
    st, _, body = http(pp.port, "/metrics")
    check(st == 200, "/metrics: %d" % st)
    return {k: int(v) for k, v in re.findall(r"^podprof_(perf_\w+_total) (\d+)", body.decode(), re.M)}


@test
@figures
def perf_event_copies_the_stack_the_unwinds_read():
    """The kernel copies each sample's stack on the target's time (about
    0.15 us per KiB): podprof opens a thread's event with perf's 8 KiB, then
    sizes it to what the thread's unwinds read and a quarter more. Two busy
    threads: the main thread, whose stack from hot_a up to _start is about
    5 KiB (main holds 512 pthread_t), and a thread whose stack up to its
    start is under 1 KiB. From the second profile on the kernel copies 7 KiB
    and 1 KiB (about 4 KiB a sample on average when the two share the
    cores alike; under 7.5 KiB however they share them: perf's default is 8
    KiB, --stack-bytes is at its 64 KiB, and the stop's sizing copied 10.8
    and 16), and the stacks still reach the threads' start."""
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event")
    get_profile(pp, "seconds=1&hz=1000")
    c0 = perf_counters(pp)
    t0 = lib.cpu_ticks(f.pid)
    answer = http(pp.port, "/debug/pprof/profile?seconds=2&hz=1000")
    used = (lib.cpu_ticks(f.pid) - t0) / os.sysconf("SC_CLK_TCK")
    path = save(lib.check_served(answer), "perf-copy.pb.gz")
    c1 = perf_counters(pp)
    pp.stop()
    truth = f.stop()
    n = c1["perf_samples_total"] - c0["perf_samples_total"]
    per = (c1["perf_stack_bytes_total"] - c0["perf_stack_bytes_total"]) / max(n, 1)
    print("  info: %d samples, %.0f bytes of stack copied per sample; the fixture used %.2f s" % (n, per, used))
    # a sample per ms of the threads' CPU (two busy threads: up to 2 s a
    # second, less on a loaded machine), the request's edges aside
    check(n > 0.7 * used * 1000, "%d samples in 2 s at 1 kHz of threads that used %.2f s" % (n, used))
    check(0 < per <= 7680, "%.0f bytes copied per sample" % per)
    check_busy_profile(path, truth)
    whole = total = 0
    for v, fr in traces(path):
        total += v
        whole += v if fr[-1] in ("_start", "__clone3") else 0
    check(whole >= 0.99 * total, "%.1f%% of the stacks reach _start or __clone3:\n%s" % (
        100 * whole / max(total, 1), pprof("-traces", path)[:3000]))


@test
def auto_falls_back_to_ptrace_where_perf_events_are_refused():
    """podprof under a seccomp filter that refuses perf_event_open (EPERM,
    as Docker's default profile without CAP_PERFMON): --backend auto says at
    start-up and in the profile that it samples with ptrace and why, and the
    profile is whole."""
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid), "--backend", "auto", prefix=(NOPERF,))
    line = pp.wait_log(r"backend: auto \(ptrace\)", 5)
    check("perf_event_open refused: Operation not permitted" in line and "seccomp" in line, line)
    path = save(get_profile(pp, "seconds=2"), "noperf.pb.gz")
    truth = f.stop()
    check_busy_profile(path, truth)
    notes, _ = comments(path)
    check(any("taken with ptrace" in n and "each sample stops its thread" in n for n in notes), notes)
    check(any(n.startswith("podprof: backend ptrace: perf_event_open refused") and
              n.endswith("ptrace instead") for n in notes), notes)
    pp.stop()


@test
def backend_perf_event_refused_exits_naming_why():
    """--backend perf_event where perf_event_open is refused: podprof exits
    1 at once, naming the reason and what to grant; the target runs on,
    never traced."""
    f = Fixture(threads=1)
    t0 = time.monotonic()
    r = subprocess.run([NOPERF, PODPROF, "--pid", str(f.pid), "--listen", "127.0.0.1:0",
                        "--backend", "perf_event"], capture_output=True, text=True, timeout=20)
    check(r.returncode == 1, "exit %d: %s" % (r.returncode, r.stderr[-600:]))
    check(time.monotonic() - t0 < 5, "took %.1f s" % (time.monotonic() - t0))
    check(re.search(r"--backend perf_event cannot sample pid %d: perf_event_open refused: "
                    r"Operation not permitted .*seccomp.*CAP_PERFMON" % f.pid, r.stderr), r.stderr[-600:])
    check(tracer_pid(f.pid) == 0 and os.path.exists("/proc/%d" % f.pid), "target traced or gone")
    f.stop()
    r = subprocess.run([PODPROF, "--backend", "fast"], capture_output=True, text=True, timeout=20)
    check(r.returncode == 2 and "--backend must be auto, perf_event or ptrace, not 'fast'" in r.stderr,
          "exit %d: %s" % (r.returncode, r.stderr))


@test
@figures
def perf_event_follows_threads_born_and_ended_in_the_window():
    """A thread per request (500 a second, 300 us of CPU each) beside a
    steady one, under perf_event: the new threads are sampled (their
    short_work in the profile) and the total is the process's CPU within
    5 %: what a thread used before its event opened is carried by its first
    sample, what ended unsampled is settled as under ptrace. The process's
    CPU is the kernel's over the profile's window (its comment), which lies
    inside the request's: around the request, read by the test, it is up
    to a tenth more on a loaded machine (the profile starts at a tick after
    the request arrives, and 500 threads a second run on meanwhile)."""
    from test_accounting import Tpr
    f = Tpr(500)
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event")
    m0 = f.mark()
    answer = http(pp.port, "/debug/pprof/profile?seconds=4")
    m1 = f.mark()   # (before the decoder's check, which takes a while on a loaded machine)
    path = save(lib.check_served(answer), "perf-tpr.pb.gz")
    pp.stop()
    f.stop()
    tr = traces(path)
    total, used = total_and_process(path)
    outer = m1["cpu"] - m0["cpu"]
    short = sum(v for v, fr in tr if "short_work" in fr and lib.MARK_UNSAMPLED not in fr)
    print("  info: total %.2f s, process %.2f s (%.3f), %.2f s around the request; short_work sampled %.2f s" % (
        total / 1e9, used / 1e9, total / used, outer / 1e9, short / 1e9))
    check(abs(total / used - 1) <= 0.05, "the profile holds %.2f s of the process's %.2f s" % (
        total / 1e9, used / 1e9))
    # the profile's window lies inside the request's (the kernel's counts)
    check(0.8 * outer <= used <= outer * 1.01, "process CPU %.2f s in the profile's window, %.2f s around it" % (
        used / 1e9, outer / 1e9))
    check(short > 0, "no sample of a short-lived thread's short_work")


@test
@figures
def perf_event_follows_new_threads_without_a_stop():
    """Under perf_event a new thread is not stopped at its birth: its
    parent's FORK record wakes podprof, which seizes it and opens its event
    as it runs (issue 38, item 2). 1000 threads a second of 300 us beside a
    steady thread, a profile at 1000 Hz: no thread stops at its birth but
    the few born before the backend took over (threads_created_total less
    threads_adopted_total: the attach and the choice of backend take a few
    milliseconds quiet, ten threads or fewer, and longer beside busy
    processes, 19 of 2 826 once beside four: at most 2 % of those
    followed; with birth stops all along it would be all of them), most
    of the fixture's threads are followed
    (adopted: those that end before podprof gets a core are settled
    instead), enough of them early that part of short_work's CPU is carried
    by samples where it runs rather than settled, and the total is the
    process's CPU within 5 %."""
    from test_accounting import Tpr, metric
    f = Tpr(1000)
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event")
    m0 = f.mark()
    answer = http(pp.port, "/debug/pprof/profile?seconds=3&hz=1000")
    m1 = f.mark()
    path = save(lib.check_served(answer), "perf-adopt.pb.gz")
    created, adopted = metric(pp, "threads_created_total"), metric(pp, "threads_adopted_total")
    pp.stop()
    f.stop()
    done = m1["done"] - m0["done"]
    tr = traces(path)
    total, used = total_and_process(path)
    short = sum(v for v, fr in tr if "short_work" in fr)
    sampled = sum(v for v, fr in tr if "short_work" in fr and lib.MARK_UNSAMPLED not in fr and
                  lib.MARK_PENDING not in fr)
    print("  info: %d threads done around the request; %d followed, %d adopted without a stop; total %.2f s, "
          "process %.2f s (%.3f); short_work %.2f s, %.1f%% of it sampled" % (
              done, created, adopted, total / 1e9, used / 1e9, total / used, short / 1e9,
              100.0 * sampled / (short or 1)))
    check(created - adopted <= max(10, 0.02 * created), "%d of %d threads stopped at their birth" % (
        created - adopted, created))
    check(adopted >= 0.5 * done, "only %d of %d threads followed" % (adopted, done))
    check(abs(total / used - 1) <= 0.05, "the profile holds %.2f s of the process's %.2f s" % (
        total / 1e9, used / 1e9))
    check(sampled >= 0.05 * short, "%.1f%% of short_work's %.2f s sampled" % (
        100.0 * sampled / (short or 1), short / 1e9))


@test
@figures
def go_stacks_under_perf_event():
    """gohot under perf_event: Go's stacks unwound from the kernel's copy
    (frame pointers and .gopclntab), crunchAlpha and crunchBeta under
    main.work with their leaves, split 70/30 within 6 points."""
    f = GoFixture(GOHOT)
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event")
    path = save(get_profile(pp, "seconds=4&hz=400"), "go-perf.pb.gz")
    pp.stop()
    f.stop()
    tr = traces(path)
    by = {c: 0 for c in CRUNCH}
    for v, fr in tr:
        for c, leaf in CRUNCH.items():
            if c in fr:
                check("main.work" in fr[fr.index(c):], "%s without main.work: %s" % (c, fr))
                by[c] += v
    a, b = by["main.crunchAlpha"], by["main.crunchBeta"]
    check(a and b, "crunch functions missing: %s" % by)
    share = 100.0 * a / (a + b)
    print("  info: crunchAlpha %.1f%%" % share)
    check(abs(share - 70) <= 6, "crunchAlpha %.1f%% of the two" % share)
    check(any(fr[0] in CRUNCH.values() for _, fr in tr), "no leaf function")


@test
def python_keeps_ptrace_under_auto():
    """A CPython target under --backend auto is sampled with ptrace (its
    frame chain is read in the stop): its Python functions are named, and
    the profile says why. Asked for perf_event, it is sampled without stops
    and the profile says CPython's frames are not read."""
    if not PYTHON or not os.path.exists(PYTHON):
        raise Skip("%s not installed" % PYTHON)
    f = PyFixture(PYTHON)
    pp = Podprof("--pid", str(f.pid), "--backend", "auto")
    path = save(get_profile(pp, "seconds=2&hz=200"), "py-auto.pb.gz")
    notes, _ = comments(path)
    check(any(n.startswith("podprof: backend ptrace: the target runs CPython") for n in notes), notes)
    top = pprof("-top", path)
    check("crunch_alpha" in top, "no Python frames:\n%s" % top[:800])
    pp.stop()
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event")
    path = save(get_profile(pp, "seconds=2&hz=200"), "py-perf.pb.gz")
    notes, _ = comments(path)
    check(any("CPython's frames are not read" in n for n in notes), notes)
    top = pprof("-top", path)
    check("_PyEval_EvalFrameDefault" in top and "crunch_alpha" not in top, top[:800])
    pp.stop()
    f.stop()


@test
def trace_under_perf_event_opens_in_go_tool_trace():
    """Traces under perf_event: go tool trace reads the Go form, the JSON
    form's CPU samples name hot_a and hot_b, and no thread was stopped
    for a CPU sample (the busy threads never block, so no state's stack
    needed a stop either)."""
    import gzip
    import json
    from test_trace import get_trace, go_trace
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid), "--backend", "perf_event")
    before = stops(pp)
    path = get_trace(pp, "seconds=2", "trace-perf")
    go_trace("-d", path)
    st, _, body = http(pp.port, "/debug/pprof/trace?seconds=2&format=json&gz=1")
    check(st == 200, "json trace: %d" % st)
    after = stops(pp)
    ev = json.loads(gzip.decompress(body))["traceEvents"]
    names = {n["callFrame"]["functionName"] for e in ev if e["ph"] == "P" and e["name"] == "ProfileChunk"
             for n in e["args"]["data"]["cpuProfile"]["nodes"]}
    check({"hot_a", "hot_b", "level3"} <= names, "sample frames: %s" % sorted(names)[:30])
    check(after == before, "%d stops during traces of busy threads" % (after - before))
    pp.stop()
    f.stop()
