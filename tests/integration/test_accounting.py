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

from lib import (BUILD, PROCS, Podprof, ProfileInBackground, check, get_profile, pprof, save, test, traces,
                 wait_untraced)

TPR = os.path.join(BUILD, "fixtures", "tpr")
MARK = "[exited threads' CPU, not sampled]"


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
        os.kill(self.pid, signal.SIGUSR1)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline() if ready else ""
        m = {k: float(v) for k, v in (kv.split("=") for kv in line.split())}
        check("short_ns" in m, "tpr gave no truth line: %r" % line)
        m["cpu"] = cpu
        return m

    def stop(self):
        self.proc.terminate()
        self.proc.communicate(timeout=20)


@test
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
    # On the stacks the short threads were sampled in: short_work, but for
    # the few caught at their start (clone's child side), or ending.
    marked = [(v, fr) for v, fr in tr if MARK in fr]
    on_short = sum(v for v, fr in marked if "short_work" in fr)
    check(marked and all(fr[0] == MARK for _, fr in marked) and
          on_short >= 0.9 * sum(v for v, _ in marked),
          "the unsampled CPU is not on the short threads' stacks: %s" % marked[:5])
    # A new thread is let go from its birth stop at once: a tick that finds
    # it before it got a core must not sample it at clone's return, its
    # first instruction (rule.c unborn).
    unborn = sum(v for v, fr in tr if [f for f in fr if f != MARK][:1] == ["__clone3"])
    print("  info: %.2f%% of the profile at a new thread's first instruction" % (100.0 * unborn / total))
    check(unborn <= 0.02 * total, "%.1f%% of the profile at clone3's return" % (100.0 * unborn / total))
    raw = pprof("-raw", path)
    check(re.search(r"unsampled_ns=\d+ \([\d.]+%\) used by threads between samples \(\d+ threads ended\)", raw),
          "no comment on the unsampled CPU:\n%s" % raw[:1500])


@test
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


@test
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
