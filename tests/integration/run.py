#!/usr/bin/env python3
"""Black-box tests of the built podprof against fixture targets, judged by
the real client (go tool pprof from Debian's golang-go).

    python3 tests/integration/run.py build/release [test-name ...]

Prints PASS/FAIL/SKIP <name> per test and a tally. Every process a test
starts is killed when it ends, and so is every process those left behind
(the runner is their subreaper: cleanup()). A test still running after
PODPROF_TEST_TIMEOUT seconds (default 240; the slowest take 20 s on a quiet
machine) fails as timed out (the alarm comes again every 10 s while the
test's own finally still waits), so a hang is named instead of stalling the
run.

With PODPROF_BACKEND set (tests/run.sh: ptrace, the second pass) and no
test named, only the tests whose podprof sampled with another backend in
the first pass run again: the first pass lists them in
<build>/it-backend-tests.txt (a test counts when a podprof it started
without naming a backend said "sampled with perf_event", or when it started
podprof by other means). The others would run exactly as they did.

With PODPROF_IT_FIGURES_LEFT_TO_STRESS set and no test named
(scripts/check.sh's release stage), neither pass runs the tests marked
@figures: its stress stage does (tests/stress/figures.py). With
PODPROF_IT_SAMPLED_LIST naming a file and no PODPROF_BACKEND (figures.py),
the name of each test that passed and sampled as above is added to that
file (figures.py adds those that did not pass itself).
"""
import ctypes
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) > 1:
    os.environ["PODPROF_BUILD"] = sys.argv[1]
import lib  # noqa: E402
import test_cli, test_http, test_cpu, test_safety, test_goroutine, test_loop, test_views, test_trace, test_ops, test_go, test_goroutines, test_gowaits, test_python, test_gunicorn, test_allocs, test_accounting, test_processes, test_formats, test_backends, test_jvm  # noqa: E402,F401,E501  (they register tests)
from lib import PODPROFS, PROCS, TESTS, Skip  # noqa: E402

TIMEOUT = float(os.environ.get("PODPROF_TEST_TIMEOUT", "240"))
# The tests that sampled with perf_event where PODPROF_BACKEND is unset.
BACKEND_LIST = os.path.join(lib.BUILD, "it-backend-tests.txt")
PR_SET_CHILD_SUBREAPER = 36
ARMED = False   # the alarm raises only while a test's own code runs


class TimedOut(BaseException):
    """Raised in the test by the alarm: a BaseException, so that no test's
    own "except Exception" swallows it."""


def on_alarm(signum, frame):
    # Again every 10 s after the first (the timer's interval): a test's own
    # finally that waits without a limit gets another. Never in the
    # runner's own code (this file), which disarms it first thing.
    if ARMED and frame is not None and frame.f_code.co_filename != __file__:
        raise TimedOut("still running after %.0f s (PODPROF_TEST_TIMEOUT)" % TIMEOUT)


def disarm():
    global ARMED
    ARMED = False
    signal.setitimer(signal.ITIMER_REAL, 0)


def run_test(t):
    """Runs t with the alarm armed."""
    global ARMED
    try:
        ARMED = True
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT, 10)
        t()
    finally:
        disarm()


def sampled_with_default_backend():
    """Whether the test just run would run differently under another
    PODPROF_BACKEND: a podprof it started without naming a backend sampled
    with perf_event, or it started podprof other than through lib.Podprof."""
    for pp in PODPROFS:
        if not pp.backend_named and re.search(r"backend: pid=\d+ sampled with perf_event", pp.log()):
            return True
    ours = {pp.proc.pid for pp in PODPROFS}
    return any(p.pid not in ours and isinstance(p.args, (list, tuple)) and lib.PODPROF in p.args
               for p in PROCS)


def tell_podprofs(lines=25):
    """After a failure: each podprof the test started, whether it still
    runs or how it ended (a crash or a sanitizer's report shows there),
    and its log's last lines, unless the failure already quoted them."""
    for i, pp in enumerate(PODPROFS):
        rc = pp.proc.poll()
        state = "still running" if rc is None else ("killed by signal %d" % -rc if rc < 0 else "exited %d" % rc)
        tail = pp.log().splitlines()[-lines:]
        print("  podprof %d of %d (pid %d): %s; its log's last %d lines:" % (i + 1, len(PODPROFS), pp.proc.pid,
                                                                           state, len(tail)), flush=True)
        for l in tail:
            print("    | " + l, flush=True)


def adopt_orphans():
    """Makes this process the subreaper of every process a test starts: a
    child's children that outlive it (sh -c "a & b & wait", a wrapper
    killed first) are reparented here, not to init, so cleanup() finds
    them. Left running, they would hold the runner's stdout and stderr, and
    a stage that pipes them (tests/run.sh) would wait for them forever."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("run.py: prctl(PR_SET_CHILD_SUBREAPER): %s" % os.strerror(ctypes.get_errno()), flush=True)


def children():
    """The pids whose parent is this process."""
    me, kids = os.getpid(), []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == me:
                        kids.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return kids


def reap(k, proc, deadline):
    """Waits for k, killed, until deadline: Popen's wait for one of
    PROCS, else waitid polled (a killed process that is still traced is a
    zombie its parent can reap only once the tracer has let it go: nothing
    to be woken by). One not reaped by then is found by cleanup's next round."""
    if proc is not None:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0))
        except subprocess.TimeoutExpired:
            pass
        return
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, k, os.WEXITED | os.WNOHANG) is not None:
                return
        except ChildProcessError:
            return
        time.sleep(0.01)


def cleanup(name):
    """Kills every process the test left, its Popen children and whatever
    they left behind (reparented here: adopt_orphans), round after round
    until none is left, and reaps them. In each round every one is killed
    before any is waited for: a killed target is reaped by its parent only
    once its tracer (a podprof of the test, killed too) has let it go.
    Returns 1 (a failure, named) if some are still there after 30 s, else 0."""
    byp = {p.pid: p for p in PROCS}
    strays = 0
    deadline = time.monotonic() + 30
    while True:
        kids = set(children()) | {p.pid for p in PROCS if p.poll() is None}
        kids = {k for k in kids if k not in byp or byp[k].returncode is None}
        if not kids:
            break
        if time.monotonic() > deadline:
            print("FAIL %s/cleanup: still there 30 s after SIGKILL: %s" % (
                name, ", ".join("%d (%s)" % (k, byp[k].args if k in byp else "left behind")
                                for k in sorted(kids))), flush=True)
            PROCS.clear()
            return 1
        # By pidfds, opened before a second look at which are still ours:
        # a pid reaped meanwhile and reused is not signalled.
        fds = {}
        for k in kids:
            try:
                fds[k] = os.pidfd_open(k)
            except ProcessLookupError:
                pass
        ours = set(children())
        for k, fd in fds.items():
            try:
                if k in byp or k in ours:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            finally:
                os.close(fd)
        for k in kids:
            strays += k not in byp
            reap(k, byp.get(k), deadline)
    if strays:
        print("  cleanup: %s: %d processes left behind by its processes, killed and reaped" % (name, strays),
              flush=True)
    PROCS.clear()
    return 0


def main():
    lib.TMP = tempfile.mkdtemp(prefix="podprof-it-")
    wanted = sys.argv[2:]
    backend = os.environ.get("PODPROF_BACKEND")
    again = None
    if backend and not wanted and os.path.exists(BACKEND_LIST):
        with open(BACKEND_LIST) as fh:
            again = set(fh.read().split())
    listed = [] if not backend and not wanted else None
    if listed is not None and os.path.exists(BACKEND_LIST):
        os.unlink(BACKEND_LIST)   # a first pass that dies leaves no list: the second runs every test
    # tests/stress/figures.py: the tests it names that passed and sampled
    # with the default backend are added to this file, to be run again
    # under ptrace as the suite's second pass would (it adds the others
    # that did not pass itself).
    sampled_out = os.environ.get("PODPROF_IT_SAMPLED_LIST")
    signal.signal(signal.SIGALRM, on_alarm)
    adopt_orphans()
    passed = failed = skipped = 0
    same = []
    name_of_pass = "it-%s" % backend if backend else "it"
    # scripts/check.sh runs every @figures test in its stress stage, beside
    # busy processes, with the default backend and again under ptrace where
    # that sampled with perf_event: its release passes leave them to that
    # stage, so that no test runs twice under one backend in one suite.
    left = [] if not wanted and os.environ.get("PODPROF_IT_FIGURES_LEFT_TO_STRESS") else None
    for t in TESTS:
        if wanted and t.__name__ not in wanted:
            continue
        if left is not None and t.__name__ in lib.FIGURES:
            left.append(t.__name__)
            continue
        if again is not None and t.__name__ not in again:
            same.append(t.__name__)
            continue
        # A second pass under another default backend (tests/run.sh:
        # PODPROF_BACKEND=ptrace) is named for it.
        name = ("it-%s/" % backend if backend else "it/") + t.__name__
        t0 = time.monotonic()
        ok = False
        try:
            run_test(t)
            print("PASS %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
            passed += 1
            ok = True
        except Skip as e:
            disarm()
            print("SKIP %s: %s" % (name, e), flush=True)
            skipped += 1
        except (Exception, TimedOut) as e:
            disarm()
            print("FAIL %s: %s" % (name, e), flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc()
            tell_podprofs()
            failed += 1
        finally:
            disarm()
            # One that did not pass may not have come to sample: listed too.
            if listed is not None and (not ok or sampled_with_default_backend()):
                listed.append(t.__name__)
            if sampled_out and not backend and ok and sampled_with_default_backend():
                with open(sampled_out, "a") as fh:
                    fh.write(t.__name__ + "\n")
            failed += cleanup(name)
            PODPROFS.clear()
    shutil.rmtree(lib.TMP, ignore_errors=True)
    if listed is not None:
        with open(BACKEND_LIST + ".new", "w") as fh:
            fh.write("".join(n + "\n" for n in listed))
        os.rename(BACKEND_LIST + ".new", BACKEND_LIST)
    if same:
        print("it-%s: %d tests not run again: in the first pass they passed, and their podprof named "
              "its backend or sampled without perf_event (%s lists the %d others)" % (
                  backend, len(same), BACKEND_LIST, len(again)))
    if left:
        print("%s: %d tests marked @figures left to the stress stage, which runs them beside busy "
              "processes (%s/)" % (name_of_pass, len(left), "stress-" + backend if backend else "stress"))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
