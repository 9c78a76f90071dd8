"""The target is never harmed: signals, stops, exits, kills, execs, churn."""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import lib
from lib import *  # noqa: F401,F403  (Fixture, Podprof, http, pprof, check, test, ...)


@test
def profile_is_detached_after_and_target_progresses():
    f = Fixture(threads=1, sleepers=8)
    pp = Podprof("--pid", str(f.pid))
    check(tracer_pid(f.pid) == 0, "traced before any request")
    body = get_profile(pp, "seconds=1")
    check_busy_profile(save(body, "d.pb.gz"))
    pp.wait_log(r"ptrace: detached pid=%d" % f.pid, 5)
    for tid in os.listdir("/proc/%d/task" % f.pid):
        with open("/proc/%d/task/%s/status" % (f.pid, tid)) as fh:
            check("TracerPid:\t0\n" in fh.read(), "thread %s still traced" % tid)
    t0 = cpu_ticks(f.pid)
    deadline = time.monotonic() + 5
    while cpu_ticks(f.pid) <= t0 + 5:
        check(time.monotonic() < deadline, "target made no progress after detach")
        time.sleep(0.02)
    # A debugger could attach now.
    r = subprocess.run(["python3", "-c", "import ctypes,sys; l=ctypes.CDLL(None); p=int(sys.argv[1]);"
                        "r=l.ptrace(16,p,0,0); import os; os.waitpid(p, 0x40000000); l.ptrace(17,p,0,0); sys.exit(0 if r==0 else 1)",
                        str(f.pid)], capture_output=True)
    check(r.returncode == 0, "another tracer could not attach after detach")
    pp.stop(), f.stop()


@test
def target_exit_mid_profile_gives_what_was_gathered():
    f = Fixture(threads=2, extra=["-x", "1500"])
    pp = Podprof("--pid", str(f.pid))
    t0 = time.monotonic()
    body = get_profile(pp, "seconds=10")
    check(time.monotonic() - t0 < 6, "the profile outlived its target")
    path = save(body, "exit.pb.gz")
    check_busy_profile(path)          # symbolized although the process is gone
    check(re.search(r"Duration: 1\.\d\d", pprof("-raw", path)), "duration should be ~1.5 s")
    pp.wait_log(r"exited during the profile", 5)
    f.stop()
    st, h, body = http(pp.port, "/debug/pprof/profile?seconds=1")
    check(st == 500 and h.get("x-go-pprof") == "1" and b"target process is gone" in body,
          "after the target exited: %d %r" % (st, body))
    check(http(pp.port, "/healthz")[0] == 200, "podprof should keep serving")
    pp.stop()


def state_of_threads(pid):
    states = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/stat" % (pid, tid)) as fh:
            s = fh.read()
        states.append(s[s.rindex(")") + 2])
    return states


@test
def signals_delivered_exactly_once_while_profiled():
    f = Fixture(threads=2, sleepers=2, ack=True)
    pp = Podprof("--pid", str(f.pid))
    result = {}
    t = threading.Thread(target=lambda: result.update(body=get_profile(pp, "seconds=3&hz=1000")))
    t.start()
    pp.wait_log(r"profile: started", 10)
    sent = 0
    deadline = time.monotonic() + 2.5
    while time.monotonic() < deadline:
        os.kill(f.pid, signal.SIGUSR1)
        sent += 1
        ready, _, _ = select.select([f.ack], [], [], 5)
        check(ready, "SIGUSR1 #%d was not delivered within 5 s" % sent)
        check(os.read(f.ack, 1) == b"u", "ack")
    t.join(30)
    check("body" in result, "profile failed")
    path = save(result["body"], "sig.pb.gz")
    # Thousands of handler runs a second take their share of the CPU.
    check_busy_profile(path, extra=SIGNAL_NAMES, min_hot=0.6)
    # Stacks caught in the handler unwind through the kernel's signal frame,
    # named exactly (__restore_rt), to the code the signal interrupted.
    for value, frames in traces(path):
        if "__restore_rt" in frames:
            i = frames.index("__restore_rt")
            check(i >= 1 and frames[i - 1] in ("on_usr1", "__write", "write") and
                  frames[i + 1] in KNOWN | SIGNAL_NAMES - {"__restore_rt"},
                  "handler stack does not reach the interrupted code: %s" % frames)
    f.stop()
    m = re.search(r"usr1=(\d+)", f.output)
    check(m and int(m.group(1)) == sent, "sent %d SIGUSR1, handler counted %s" % (sent, m and m.group(1)))
    check(sent > 200, "only %d signals sent" % sent)
    print("  info: %d SIGUSR1 sent while profiled at 1000 Hz, %s delivered" % (sent, m.group(1)))
    pp.stop()


@test
def sigstop_while_profiled_is_honoured():
    f = Fixture(threads=2, sleepers=1)
    pp = Podprof("--pid", str(f.pid))
    result = {}
    t = threading.Thread(target=lambda: result.update(body=get_profile(pp, "seconds=3")))
    t.start()
    pp.wait_log(r"profile: started", 10)
    os.kill(f.pid, signal.SIGSTOP)
    deadline = time.monotonic() + 5
    while set(state_of_threads(f.pid)) != {"t"} and set(state_of_threads(f.pid)) != {"T"}:
        check(time.monotonic() < deadline, "threads not stopped: %s" % state_of_threads(f.pid))
        time.sleep(0.01)
    t0 = cpu_ticks(f.pid)
    time.sleep(0.5)  # observe that it stays stopped while the sampler keeps ticking
    check(cpu_ticks(f.pid) == t0, "target ran while group-stopped")
    os.kill(f.pid, signal.SIGCONT)
    t.join(30)
    check("body" in result, "profile failed")
    pp.wait_log(r"ptrace: detached", 5)
    deadline = time.monotonic() + 5
    while cpu_ticks(f.pid) <= t0 + 5:
        check(time.monotonic() < deadline, "target did not resume after SIGCONT: %s" % state_of_threads(f.pid))
        time.sleep(0.01)
    check(not {"t", "T"} & set(state_of_threads(f.pid)), "threads left stopped: %s" % state_of_threads(f.pid))
    pp.stop(), f.stop()
