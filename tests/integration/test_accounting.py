"""CPU accounting (issue 22): a CPU profile's total is the CPU the process
used over its window, the threads that lived for less than a tick included,
and each function's share is what its threads' own clocks say."""
import os
import re
import select
import signal
import subprocess

import threading
import time

import lib  # noqa: E402
from lib import (BUILD, PROCS, Podprof, ProfileInBackground, check, get_profile, pprof, save, test, figures, traces,
                 wait_untraced)

TPR = os.path.join(BUILD, "fixtures", "tpr")
MARK = lib.MARK_UNSAMPLED
UNSEEN = "[exited threads' waits, not seen]"


class Tpr:
    """tests/fixtures/tpr.c: a steady thread beside `rate` threads a second,
    each burning `us` of its own CPU in short_work and ending."""

    def __init__(self, rate, us=300, extra=()):
        r, w = os.pipe()
        self.proc = subprocess.Popen([TPR, "-n", str(rate), "-u", str(us), "-r", str(w)] + list(extra),
                                     pass_fds=(w,),
                                     stdout=subprocess.PIPE, text=True)
        PROCS.append(self.proc)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 10)
        check(ready and os.read(r, 64).startswith(b"ready"), "tpr did not start")
        os.close(r)
        self.pid = self.proc.pid

    def mark(self):
        """The process's utime+stime (ns) and the fixture's own counters."""
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) * 1e9 / os.sysconf("SC_CLK_TCK")
        wall = time.time_ns()
        os.kill(self.pid, signal.SIGUSR1)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline() if ready else ""
        m = {k: float(v) for k, v in (kv.split("=") for kv in line.split())}
        check("short_ns" in m, "tpr gave no truth line: %r" % line)
        m["cpu"] = cpu
        m["wall"] = wall
        return m

    def stop(self):
        self.proc.terminate()
        self.proc.communicate(timeout=20)


@test
@figures
def short_lived_threads_cpu_adds_up():
    """A thread per request (1000 a second, each 300 us of CPU, less than a
    100 Hz tick, beside a steady thread): the profile's cpu total is the
    process's utime+stime over the window within 5 %, and short_work's and
    steady_work's shares are the fixture's own clocks' within 5 points. What
    no sample carried (threads that ended between ticks) is under its own
    frame, on the stacks of the short threads that were sampled, and the
    comment says how much."""
    f = Tpr(1000)
    pp = Podprof("--pid", str(f.pid))
    bg = ProfileInBackground(pp, "seconds=4")
    m0 = f.mark()
    pp.wait_log(r"profile: done", 40)
    m1 = f.mark()
    path = save(bg.result(), "tpr.pb.gz")
    log = pp.wait_log(r"profile: done", 1)
    pp.stop()
    f.stop()
    tr = traces(path)
    total = sum(v for v, _ in tr)
    used = m1["cpu"] - m0["cpu"]
    print("  info: profile %.2f s, process %.2f s (ratio %.3f); %s" % (
        total / 1e9, used / 1e9, total / used, re.search(r"process_cpu_ms.*", log).group(0)))
    check(abs(total / used - 1) <= 0.05, "the profile holds %.2f s of the process's %.2f s" % (
        total / 1e9, used / 1e9))
    short = sum(v for v, fr in tr if "short_work" in fr)
    steady = sum(v for v, fr in tr if "steady_work" in fr)
    t_short, t_steady = m1["short_ns"] - m0["short_ns"], m1["steady_ns"] - m0["steady_ns"]
    for name, got, want in (("short_work", short, t_short), ("steady_work", steady, t_steady)):
        g, w = 100.0 * got / (short + steady), 100.0 * want / (t_short + t_steady)
        print("  info: %s %.1f%% of short+steady (its threads' clocks: %.1f%%)" % (name, g, w))
        check(abs(g - w) <= 5.0, "%s %.1f%%, its threads' clocks %.1f%%" % (name, g, w))
    # On the stacks the short threads were sampled in, never the steady
    # thread's, the reporter's or main's: mostly short_work, the rest their
    # start (clone's child side) and their end (start_thread's exit path).
    def bare(fr):
        return [f for f in fr if f != MARK]

    def a_short_threads(fr):
        return "short_main" in fr or bare(fr) == ["__clone3"] or (
            "start_thread" in fr and "steady_main" not in fr and "reporter" not in fr)

    backend = re.search(r"sampled with (\w+)", pp.wait_log(r"backend: pid=%d sampled with" % f.pid, 1)).group(1)
    marked = [(v, fr) for v, fr in tr if MARK in fr]
    in_marked = sum(v for v, _ in marked)
    on_short = sum(v for v, fr in marked if "short_work" in fr)
    at_start = sum(v for v, fr in marked if bare(fr) == ["__clone3"])
    print("  info: unsampled CPU %.0f ms: %.1f%% in short_work, %.1f%% at a short thread's first "
          "instruction, %.1f%% elsewhere on short threads' stacks" % (
              in_marked / 1e6, 100.0 * on_short / (in_marked or 1), 100.0 * at_start / (in_marked or 1),
              100.0 * (in_marked - on_short - at_start) / (in_marked or 1)))
    raw = pprof("-raw", path)
    if backend == "ptrace" and not marked:
        # The short threads were drawn by the CPU they used (cpudraw.h),
        # each draw standing for a period: they may carry more than they
        # used, taken off their stacks then, nothing left to add.
        check(re.search(r"overdrawn_ns=\d+ \([\d.]+%\) more than the threads that ended used was drawn", raw),
              "nothing unsampled and nothing overdrawn:\n%s" % raw[:1500])
        return
    check(marked and all(fr[0] == MARK and a_short_threads(fr) for _, fr in marked),
          "the unsampled CPU is not all on the short threads' stacks: %s" % [
              (v, fr) for v, fr in marked if fr[0] != MARK or not a_short_threads(fr)][:5])
    # It rests on the ended short threads' samples, each taking its share:
    # with few of them (a loaded machine catches fewer short threads) the
    # split is as noisy as their count (about 90 % of a short thread's CPU
    # is short_work's; three standard deviations of n samples, 75 % at most).
    n = sum(v for v, fr in traces(path, "samples") if "short_main" in fr and MARK not in fr)
    want = min(0.75, 0.9 - 3 * (0.09 / max(n, 1)) ** 0.5)
    check(on_short >= want * in_marked, "the unsampled CPU is %.1f%% in short_work (%.0f%% wanted from %d "
          "samples of short threads): %s" % (100.0 * on_short / in_marked, 100 * want, n, marked[:5]))
    # Before a new thread's first instruction, at clone3's return (glibc
    # ends a new thread's unwind there: __clone3 alone, the child). The
    # parent back from the same call is there too, for the CPU the call
    # cost it (1-2.6 % here): its stack goes on to pthread_create and main
    # (batch.c, clone's leaf).
    # (samples taken there: the unsampled CPU spread on such a stack is in
    # proportion to them, and a few samples of short threads make it jump)
    unborn = sum(v for v, fr in tr if fr == ["__clone3"])
    kids = sum(v for v, fr in tr if a_short_threads(fr))
    parent = [fr for v, fr in tr if fr[:1] == ["__clone3"] and bare(fr) != ["__clone3"]]
    print("  info: %s: %.2f%% of the profile (%.1f%% of the short threads') at a new thread's first "
          "instruction; %d stacks of the parent at clone3's return" % (
              backend, 100.0 * unborn / total, 100.0 * unborn / kids, len(parent)))
    if backend == "ptrace":
        # A new thread is let go from its birth stop at once: a tick that
        # finds it before it got a core must not sample it there (rule.c
        # unborn).
        check(unborn <= 0.02 * total, "%.1f%% of the profile at clone3's return" % (100.0 * unborn / total))
    else:
        # The kernel samples the CPU a new thread uses before its first
        # instruction, coming back from its birth stop: 1-11 % of a 330 us
        # thread's CPU in 4 s runs here (about 5 % with a Poisson count of
        # a few samples). More would be a thread sampled before it ran.
        check(unborn <= 0.2 * kids, "%.1f%% of the short threads' CPU at clone3's return" % (
            100.0 * unborn / kids))
    check(all("pthread_create" in fr and "main" in fr for fr in parent),
          "the parent's stack at clone3's return ends there: %s" % parent[:3])
    check(re.search(r"unsampled_ns=\d+ \([\d.]+%\) used by threads between samples \(\d+ threads ended\)", raw),
          "no comment on the unsampled CPU:\n%s" % raw[:1500])


@test
@figures
def short_threads_are_sampled_by_the_cpu_they_use_under_ptrace():
    """Under the ptrace backend (CPython's), a thread per request (1000 a
    second, 300 us of CPU each, beside a steady thread): each new thread is
    stopped by the CPU it used (a counting event's signal, its first after
    a random part of a period), not looked for at the ticks, and each such
    draw stands for a period. So most of short_work's CPU is sampled where
    it ran, not settled on a sampled thread's last stack (before, the ticks
    caught 1.5 %); the draws number what the short threads used, within
    their noise; the total is still the process's CPU; and the threads
    never took the signal, although the fixture catches SIGURG and SIGWINCH
    (so a signal podprof lets through would count)."""
    f = Tpr(1000, extra=("-g",))
    pp = Podprof("--pid", str(f.pid), "--backend", "ptrace")
    bg = ProfileInBackground(pp, "seconds=4")
    m0 = f.mark()
    pp.wait_log(r"profile: done", 40)
    m1 = f.mark()
    path = save(bg.result(), "tpr-drawn.pb.gz")
    counted = metric(pp, "draws_total"), metric(pp, "own_signals_total")
    pp.stop()
    f.stop()
    tr = traces(path)
    raw = pprof("-raw", path)
    total = sum(v for v, _ in tr)
    used = m1["cpu"] - m0["cpu"]
    m = re.search(r"draws=(\d+): the (\d+) threads born in the window were sampled by the CPU they used "
                  r"from their first instruction \(a counting event's signal", raw)
    check(m, "no draws in the profile's comments:\n%s" % raw[:1500])
    draws, born = int(m.group(1)), int(m.group(2))
    short = sum(v for v, fr in tr if "short_work" in fr)
    drawn = sum(v for v, fr in tr if "short_work" in fr and MARK not in fr)
    t_short = m1["short_ns"] - m0["short_ns"]
    # The short threads' whole CPU (short_work is about 90 % of it) at one
    # draw per 10 ms period; Poisson noise, four standard deviations.
    want = (m1["short_cpu_ns"] - m0["short_cpu_ns"]) / 10e6
    print("  info: %d threads born, %d draws (%.0f by their clocks); short_work %.2f s in the profile "
          "(its clocks %.2f s), %.1f%% of it sampled; profile %.2f s, process %.2f s" % (
              born, draws, want, short / 1e9, t_short / 1e9, 100.0 * drawn / max(short, 1), total / 1e9,
              used / 1e9))
    check(born >= 2000, "%d threads born in 4 s at 1000 a second" % born)
    # /metrics: every draw was a signal of podprof's own, taken away
    check(counted[0] >= draws and counted[1] == counted[0],
          "metrics: draws_total %d, own_signals_total %d, the profile's draws %d" % (counted + (draws,)))
    check(abs(draws - want) <= 4 * want ** 0.5 + 0.15 * want,
          "%d draws for %.0f periods of the short threads' CPU" % (draws, want))
    # (64-96 % in ten runs beside two busy processes, fewer draws reaching
    # a capture there; 1.5-3 % without draws)
    check(drawn >= 0.5 * short, "%.1f%% of short_work sampled" % (100.0 * drawn / max(short, 1)))
    check(abs(total / used - 1) <= 0.05, "the profile holds %.2f s of the process's %.2f s" % (
        total / 1e9, used / 1e9))
    check(m1["foreign"] == 0, "the fixture's handlers took %d SIGURG or SIGWINCH" % m1["foreign"])


@test
def draw_threads_0_leaves_new_threads_to_the_ticks():
    """--draw-threads 0: under ptrace, threads born in the window are
    sampled at the ticks as before, no draw is made (the comment says none),
    and their CPU the ticks missed is settled on the sampled short threads'
    stacks; the fixture's SIGURG and SIGWINCH handlers take nothing."""
    f = Tpr(1000, extra=("-g",))
    pp = Podprof("--pid", str(f.pid), "--backend", "ptrace", "--draw-threads", "0")
    path = save(get_profile(pp, "seconds=2"), "tpr-nodraw.pb.gz")
    m = f.mark()
    pp.stop()
    f.stop()
    raw = pprof("-raw", path)
    check("draws=" not in raw, "draws with --draw-threads 0:\n%s" % raw[:1500])
    check(re.search(r"unsampled_ns=\d+ \([\d.]+%\) used by threads between samples", raw),
          "the short threads' CPU is not settled:\n%s" % raw[:1500])
    check(m["foreign"] == 0, "the fixture's handlers took %d SIGURG or SIGWINCH" % m["foreign"])


PENDING = lib.MARK_PENDING


@test
@figures
def cpu_total_is_the_process_cpu_for_every_shape():
    """The profile's total is the process's utime+stime over the window,
    within 5 %, whatever the shape of the work (the thread per request has
    its own test above): one busy thread; eight on two cores; threads in
    bursts shorter than a tick; a churn of short threads created and
    joined; a thread forking children that exit at once (the children's CPU
    is theirs, not the process's)."""
    shapes = (("one busy thread", 1, []), ("eight busy threads", 8, []),
              ("bursts shorter than a tick", 1, ["-P", "4"]), ("thread churn", 1, ["-C", "2"]),
              ("forking", 1, ["-F"]))
    for name, threads, extra in shapes:
        b = lib.Fixture(threads=threads, extra=extra)
        pp = Podprof("--pid", str(b.pid))
        bg = ProfileInBackground(pp, "seconds=3")
        pp.wait_log(r"profile: started", 10)
        c0, t0 = lib.cpu_ticks(b.pid), time.time_ns()
        log = pp.wait_log(r"profile: done", 30)
        c1, t1 = lib.cpu_ticks(b.pid), time.time_ns()
        path = save(bg.result(), "shape.pb.gz")
        pp.stop()
        b.stop()
        total = sum(v for v, _ in traces(path))
        used = (c1 - c0) * 1e9 / os.sysconf("SC_CLK_TCK")
        slack = lib.edge_slack(path, t0, t1, used)
        check(used > 0.2e9, "%s: the fixture used only %.2f s" % (name, used / 1e9))
        print("  info: %s: profile %.2f s, process %.2f s (ratio %.3f, the readings' slack %.3f s); %s" % (
            name, total / 1e9, used / 1e9, total / used, slack / 1e9, re.search(r"process_cpu_ms.*", log).group(0)))
        check(abs(total - used) <= 0.05 * used + slack, "%s: the profile holds %.2f s of the process's %.2f s" % (
            name, total / 1e9, used / 1e9))


@test
@figures
def live_threads_cpu_since_their_last_sample_is_settled():
    """Four busy threads on the machine's cores, profiled at 2 Hz for 4 s:
    each is due a sample once it has used half a second of CPU and is found
    running at a tick, so at the window's end each holds up to a second or
    so its next sample would carry. That CPU goes to each thread's last
    stack under its own frame (alone for a thread no tick sampled in the
    window), as far as the samples fall short: the total is the process's
    CPU within 5 %, and the comment says how much."""
    b = lib.Fixture(threads=4)
    pp = Podprof("--pid", str(b.pid))
    bg = ProfileInBackground(pp, "seconds=4&hz=2")
    pp.wait_log(r"profile: started", 10)
    c0, t0 = lib.cpu_ticks(b.pid) * 1e9 / os.sysconf("SC_CLK_TCK"), time.time_ns()
    pp.wait_log(r"profile: done", 40)
    c1, t1 = lib.cpu_ticks(b.pid) * 1e9 / os.sysconf("SC_CLK_TCK"), time.time_ns()
    path = save(bg.result(), "busy-hz2.pb.gz")
    pp.stop()
    b.stop()
    tr = traces(path)
    total, used = sum(v for v, _ in tr), c1 - c0
    slack = lib.edge_slack(path, t0, t1, used)
    pend = [(v, fr) for v, fr in tr if PENDING in fr]
    print("  info: profile %.2f s, process %.2f s (ratio %.3f); %.2f s of it on %d stacks under %s" % (
        total / 1e9, used / 1e9, total / used, sum(v for v, _ in pend) / 1e9, len(pend), PENDING))
    raw = pprof("-raw", path)
    m = re.search(r"pending_ns=(\d+) \([\d.]+%\) used by live threads since their last sample", raw)
    print("  info: %s" % " | ".join(re.findall(r"podprof: process_cpu_ns.*", raw)))
    check(abs(total - used) <= 0.05 * used + slack, "the profile holds %.2f s of the process's %.2f s (slack %.3f s)" % (
        total / 1e9, used / 1e9, slack / 1e9))
    on_stacks = sum(v for v, fr in pend if "level3" in fr)
    check(pend and all(fr[0] == PENDING and ("level3" in fr or fr == [PENDING]) for _, fr in pend),
          "the live threads' pending CPU is not on their stacks: %s" % pend[:5])
    # Mostly on their stacks when each thread had the CPU for two samples
    # (a second; a thread with none in the window has its pending CPU alone:
    # on a loaded machine each of the four got less).
    if used >= 4 * 1e9:
        check(on_stacks >= 0.5 * sum(v for v, _ in pend),
              "the live threads' pending CPU is mostly not on their stacks: %s" % pend[:5])
    else:
        print("  info: the threads used %.2f s each: too little for two samples each at 2 Hz, "
              "their pending CPU may be alone" % (used / 4e9))
    check(m and abs(int(m.group(1)) - sum(v for v, _ in pend)) <= 0.01 * int(m.group(1)),
          "the comment does not say the pending CPU settled:\n%s" % raw[:1500])


@test
@figures
def a_process_that_exits_in_the_window_is_settled_to_its_end():
    """Two busy threads profiled at 1 Hz, the process exiting 2.5 s into a
    5 s window: what its threads used after their last samples (about half
    a second each at 1 Hz) is settled against the process's clock read as
    its leader ended (a zombie's clock is its whole CPU), so the profile
    holds what the process used in the window within 5 %, as the kernel's
    own account of the reaped child (wait4's rusage) says."""
    b = lib.Fixture(threads=2, extra=["-x", "2500"])
    pp = Podprof("--pid", str(b.pid))
    bg = ProfileInBackground(pp, "seconds=5&hz=1")
    c0 = lib.cpu_ticks(b.pid) * 1e9 / os.sysconf("SC_CLK_TCK")
    _, status, ru = os.wait4(b.pid, 0)
    b.proc.returncode = os.waitstatus_to_exitcode(status)
    used = (ru.ru_utime + ru.ru_stime) * 1e9 - c0
    path = save(bg.result(), "exits.pb.gz")
    log = pp.wait_log(r"profile: done", 10)
    pp.stop()
    total = sum(v for v, _ in traces(path))
    print("  info: profile %.2f s, the process used %.2f s in the window (%.3f); %s" % (
        total / 1e9, used / 1e9, total / used, re.search(r"process_cpu_ms.*", log).group(0)))
    check(abs(total - used) <= 0.05 * used + 2e9 / os.sysconf("SC_CLK_TCK"),
          "the profile holds %.2f s of the %.2f s the process used in the window" % (total / 1e9, used / 1e9))


@test
@figures
def signals_raised_by_new_threads_all_delivered():
    """Each new thread (1000 a second) raises a signal at its first
    instruction while a CPU profile and a threadcreate profile (clone
    stacks: its parent stays stopped longer) run: every signal is handled,
    once. A new thread is let go at its parent's clone event; its birth
    stop, if already reaped by then, must not be answered again (it would
    resume whatever stop the thread is in now, a signal's, without the
    signal)."""
    f = Tpr(1000, us=50, extra=["-s"])
    pp = Podprof("--pid", str(f.pid))
    got = []
    tc = threading.Thread(target=lambda: got.append(
        get_profile(pp, "seconds=3", name="threadcreate", filename="threadcreate-delta")))
    tc.start()
    bg = ProfileInBackground(pp, "seconds=3")
    bg.result(60)
    tc.join(60)
    check(got, "the threadcreate profile failed")
    pp.wait_log(r"ptrace: detached", 10)
    wait_untraced(f.pid, 2)
    # A thread between its count and its handler is in flight, not lost:
    # the least difference over a few looks.
    lost = []
    for _ in range(5):
        m = f.mark()
        lost.append(m["raised"] - m["handled"])
        time.sleep(0.02)
    print("  info: %d signals raised by new threads, raised - handled %s" % (m["raised"], lost))
    check(m["raised"] > 1000, "only %d threads raised their signal" % m["raised"])
    check(min(lost) == 0, "signals lost: raised - handled %s" % lost)
    pp.stop()
    f.stop()


def metric(pp, name):
    st, _, body = lib.http(pp.port, "/metrics")
    check(st == 200, "metrics: %d" % st)
    m = re.search(r"^podprof_%s (\d+)" % name, body.decode(), re.M)
    check(m, "no podprof_%s in /metrics" % name)
    return int(m.group(1))


@test
@figures
def threads_that_end_at_once_are_not_kept():
    """Threads that end as soon as they start (2000 a second, 1 us of CPU
    each) while a CPU profile runs: none is kept once it has ended (a
    thread that is no more, followed for good). The threads followed
    (podprof_threads_traced) against the process's, at a few moments: the
    exits not yet taken by the sampler come and go, what is kept for good
    stays in every look."""
    f = Tpr(2000, us=1)
    pp = Podprof("--pid", str(f.pid))
    bg = ProfileInBackground(pp, "seconds=4")
    looks = []
    for _ in range(6):
        time.sleep(0.4)
        traced = metric(pp, "threads_traced")
        live = len(os.listdir("/proc/%d/task" % f.pid))
        looks.append((traced, live))
    bg.result(60)
    created = metric(pp, "threads_created_total")
    print("  info: %d threads created; (followed, the process's) %s" % (created, looks))
    check(created > 3000, "only %d threads created" % created)
    # Ended threads wait for the sampler's next poll: under ptrace, a tick's
    # worth (2000 a second at 100 Hz: 20; 14-21 in every look of one CI
    # rehearsal), under perf_event a few. A thread kept for good stays: 1 in
    # 100 of the 3000 or more ended by the last three looks keeps each of
    # them above 30 plus the backlog.
    bound = 2000 // 100 * 3 // 2
    check(min(t - l for t, l in looks[3:]) <= bound,
          "threads followed past the process's by over %d in each of the last looks: %s" % (bound, looks))
    pp.stop()
    f.stop()


@test
@figures
def settling_past_max_stacks_keeps_the_profile():
    """With the stack table full (--max-stacks 64), the CPU no sample
    carried is settled as far as it fits: the profile is served all the
    same (a stack refused is counted as dropped), never an error."""
    f = Tpr(1000)
    pp = Podprof("--pid", str(f.pid), "--max-stacks", "64")
    path = save(get_profile(pp, "seconds=2"), "tpr-max64.pb.gz")
    raw = pprof("-raw", path)
    check(re.search(r"dropped_stacks=[1-9]", raw) or "unsampled_ns=" in raw,
          "neither stacks dropped nor CPU settled:\n%s" % raw[:1000])
    check(traces(path), "no samples")
    pp.stop()
    f.stop()


def in_window(pp, f, kind, fetch):
    """fetch() on a thread (a request of a `kind` session), with the
    fixture's marks at the session's start and end as podprof logs them:
    (its result, mark at start, mark at end)."""
    got = []
    t = threading.Thread(target=lambda: got.append(fetch()))
    t.start()
    pp.wait_log(r"%s: started" % kind, 10)
    m0 = f.mark()
    pp.wait_log(r"%s: done" % kind, 20)
    m1 = f.mark()
    t.join(60)
    check(got, "the %s request failed" % kind)
    return got[0], m0, m1


@test
@figures
def trace_running_time_is_each_threads_cpu_time():
    """The trace of a thread per request (1000 threads a second, 300 us of
    CPU each, beside a steady thread): each thread's running time in the
    timeline is drawn from its own CPU clock (at each tick, and at its end,
    read before it is reaped), not from the state a tick saw. All running
    slices add up to the process's CPU over the window, the steady thread's
    to its own clock, within 10 %; the short threads' to their short_work
    and a little more; most short threads, born and ended between two
    ticks, are seen running; go tool trace reads it."""
    import gzip
    import json
    from lib import http
    from test_trace import go_trace
    f = Tpr(1000)
    pp = Podprof("--pid", str(f.pid))
    (st, h, body), m0, m1 = in_window(pp, f, "trace", lambda: http(
        pp.port, "/debug/pprof/trace?seconds=3&format=json&gz=1"))
    check(st == 200, "trace: %d %r" % (st, body[:200]))
    ev = json.loads(gzip.decompress(body))["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    run = {}
    for e in ev:
        if e["ph"] == "X" and e["name"] == "Running":
            run[e["tid"]] = run.get(e["tid"], 0) + e["dur"] * 1e3
    # The short threads: all but main, steady and reporter (a thread born
    # and ended between two ticks has no name of its own: "?").
    shorts = {tid for tid, n in names.items()
              if tid != f.pid and not n.startswith(("steady ", "reporter "))}
    short = sum(v for tid, v in run.items() if tid in shorts)
    steady = sum(v for tid, v in run.items() if names.get(tid, "").startswith("steady "))
    t_short, t_steady = m1["short_ns"] - m0["short_ns"], m1["steady_ns"] - m0["steady_ns"]
    born, seen = len(shorts), sum(1 for tid in shorts if run.get(tid))
    total, used = sum(run.values()), m1["cpu"] - m0["cpu"]
    print("  info: running in the trace %.2f s, the process's CPU %.2f s; short threads %.2f s "
          "(short_work on their clocks %.2f s), steady %.2f s (%.2f s); %d of %d short threads "
          "seen running" % (total / 1e9, used / 1e9, short / 1e9, t_short / 1e9, steady / 1e9,
                            t_steady / 1e9, seen, born))
    check(abs(total / used - 1) <= 0.10, "the threads run %.2f s in the trace, the process used %.2f s" % (
        total / 1e9, used / 1e9))
    # A short thread's CPU is its short_work and its start and end (clone,
    # exit: about 15 % more on a quiet machine, 50 % on a busy one, where
    # each runs cache-cold): at least short_work, at most what the process
    # used beside the steady thread.
    check(0.95 * t_short <= short <= 1.10 * (used - t_steady),
          "short threads run %.2f s, short_work took %.2f s, the process beside the steady thread %.2f s" % (
              short / 1e9, t_short / 1e9, (used - t_steady) / 1e9))
    check(abs(steady / t_steady - 1) <= 0.10, "the steady thread runs %.2f s, its clock says %.2f s" % (
        steady / 1e9, t_steady / 1e9))
    check(born > 1000 and seen >= 0.9 * born, "%d of %d short threads seen running" % (seen, born))
    path = os.path.join(lib.TMP, "tpr.trace")
    st, h, body = http(pp.port, "/debug/pprof/trace?seconds=1")
    with open(path, "wb") as fh:
        fh.write(body)
    check(st == 200, "trace: %d" % st)
    go_trace("-d", path)
    pp.stop()
    f.stop()


@test
@figures
def block_waits_of_short_threads_add_up():
    """A thread per request that sleeps (300 threads a second, each 100 us
    of CPU then a 3 ms nanosleep in short_nap): the block profile's time in
    short_nap is the time the fixture's threads were blocked there (its own
    measure: the sleep less the run delay after it) within 15 %. A thread
    born in the window counts from its birth (it counted from the window's
    start: 346 s of naps for 2.7 s), waits no tick saw are known from the
    ended threads' clocks and go under their own frame, and the comment
    says how much."""
    f = Tpr(300, us=100, extra=["-w", "3000"])
    pp = Podprof("--pid", str(f.pid))
    body, m0, m1 = in_window(pp, f, "block", lambda: get_profile(
        pp, "seconds=3", name="block", filename="block-delta"))
    path = save(body, "tpr-block.pb.gz")
    pp.stop()
    f.stop()
    tr = traces(path, "delay")
    nap = sum(v for v, fr in tr if "short_nap" in fr)
    unseen = sum(v for v, fr in tr if "short_nap" in fr and fr[0] == UNSEEN)
    truth = m1["nap_ns"] - m0["nap_ns"]
    print("  info: short_nap %.3f s in the profile (%.3f s of it unseen by a tick), the fixture's "
          "threads were blocked there %.3f s (%d threads)" % (
              nap / 1e9, unseen / 1e9, truth / 1e9, m1["done"] - m0["done"]))
    slack = lib.edge_slack(path, m0["wall"], m1["wall"], truth)
    check(abs(nap - truth) <= 0.15 * truth + slack, "short_nap %.3f s, the threads' truth %.3f s (slack %.3f s)" % (
        nap / 1e9, truth / 1e9, slack / 1e9))
    check(unseen > 0 and all(fr[0] == UNSEEN for v, fr in tr if UNSEEN in fr),
          "no wait settled under its own leaf frame: %s" % [fr for _, fr in tr if UNSEEN in fr][:3])
    raw = pprof("-raw", path)
    check(re.search(r"unseen_ns=\d+ waited by threads that ended where no tick saw", raw),
          "no comment on the unseen waits:\n%s" % raw[:1500])


@test
@figures
def back_to_back_profiles_hold_only_their_own_windows_cpu():
    """Three 1 s CPU profiles of the busy fixture one after the other, the
    target kept attached between them, under each backend: each one's
    total at most the process's CPU over its window (the comment's
    process_cpu_ns) and within 3 % of it. A thread's first sample of a
    window carries what it used since its last sample, before the window
    too (the profile before settled some of it as pending): under ptrace
    the second and third once held 1.1-1.4 % more than the process used,
    and 256 pre-fork workers' steady profile 8-18 % more. (Under perf_event
    the kernel's cpu-clock runs 1-4 % ahead of the threads' own clocks
    beside another guest's disk writes, time the host took: that excess
    comes off every stack, and the comment's clock_over_ns says how much:
    at most what the host took from the machine in the window.)"""
    from lib import Fixture
    from test_backends import total_and_process
    for backend in ("ptrace", "perf_event"):
        f = Fixture(threads=2)
        pp = Podprof("--pid", str(f.pid), "--backend", backend)
        for k in range(3):
            steal = lib.steal_ns()
            path = save(get_profile(pp, "seconds=1&hz=100"), "b2b-%s-%d.pb.gz" % (backend, k))
            total, used = total_and_process(path)
            over = lib.check_clock_over(path, used, steal)
            print("  info: %s profile %d: total %.3f s, the process's %.3f s (%.4f), the kernel's "
                  "clock over by %.1f ms, the host took %.1f ms" % (
                      backend, k + 1, total / 1e9, used / 1e9, total / used, over / 1e6,
                      (lib.steal_ns() - steal) / 1e6))
            check(not over or backend == "perf_event", "a ptrace profile's samples rescaled: %.1f ms" % (
                over / 1e6))
            check(total <= used * 1.002 + 2000000 and total >= 0.97 * used,
                  "%s profile %d holds %.3f s, the process used %.3f s" % (backend, k + 1, total / 1e9, used / 1e9))
        pp.stop()
        f.stop()
