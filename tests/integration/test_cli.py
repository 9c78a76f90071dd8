"""Command line, target selection, privileges, logs."""
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
def cli_help_version_and_bad_flags():
    r = subprocess.run([PODPROF, "--help"], capture_output=True, text=True)
    check(r.returncode == 0 and "--pid" in r.stdout and "PODPROF_LISTEN" in r.stdout
          and "127.0.0.1:8008" in r.stdout, "--help: %r" % r.stdout[:300])
    r = subprocess.run([PODPROF, "--version"], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.startswith("podprof "), "--version: %r" % r.stdout)
    r = subprocess.run([PODPROF, "--hz", "0"], capture_output=True, text=True)
    check(r.returncode == 2 and "--hz" in r.stderr and "1..1000" in r.stderr, "--hz 0: %r" % r.stderr)
    r = subprocess.run([PODPROF, "--listen", "nonsense"], capture_output=True, text=True)
    check(r.returncode == 2 and "--listen: 'nonsense' is not HOST:PORT" in r.stderr, "--listen: %r" % r.stderr)
    r = subprocess.run([PODPROF, "--bogus"], capture_output=True, text=True)
    check(r.returncode == 2 and "unknown option '--bogus'" in r.stderr, "--bogus: %r" % r.stderr)
    r = subprocess.run([PODPROF, "--comm", "no-such-process-xyz"], capture_output=True, text=True)
    check(r.returncode == 1 and "no process matches --comm no-such-process-xyz" in r.stderr, r.stderr)
    r = subprocess.run([PODPROF], capture_output=True, text=True, env=dict(os.environ, PODPROF_PID="999999999"))
    check(r.returncode == 2 or "no process with pid" in r.stderr, "PODPROF_PID: %r" % r.stderr)


@test
def cli_several_candidates_are_listed():
    f1, f2 = Fixture(), Fixture()
    r = subprocess.run([PODPROF, "--exe", BUSY], capture_output=True, text=True)
    check(r.returncode == 1, "exit %d" % r.returncode)
    check("2 processes match" in r.stderr and "pid=%d" % f1.pid in r.stderr and "pid=%d" % f2.pid in r.stderr
          and "comm=busy" in r.stderr, r.stderr)
    f1.stop(), f2.stop()


@test
def log_format_json():
    f = Fixture()
    pp = Podprof("--pid", str(f.pid), "--log-format", "json")
    http(pp.port, "/debug/pprof/profile?seconds=1")
    pp.wait_log(r"profile: done", 10)
    pp.stop()
    for line in pp.log().splitlines():
        obj = json.loads(line)
        check(obj["level"] in ("debug", "info", "warn", "error") and obj["msg"] and obj["ts"], line)
    f.stop()


@test
def without_cap_sys_ptrace_warns_and_answers_clearly():
    if not shutil.which("capsh"):
        raise Skip("capsh (libcap2-bin) not installed")
    if os.geteuid() != 0:
        raise Skip("needs root to drop a capability from the bounding set")
    f = Fixture()
    pp = Podprof("--pid", str(f.pid), prefix=["capsh", "--drop=cap_sys_ptrace", "--", "-c", 'exec "$0" "$@"'])
    pp.wait_log(r"warn .*lacks CAP_SYS_PTRACE", 5)
    # The fixture runs as root with every capability; a tracer lacking one
    # the tracee holds is refused by the kernel (whatever Yama says).
    st, h, body = http(pp.port, "/debug/pprof/profile?seconds=1")
    check(st == 500 and h.get("x-go-pprof") == "1" and b"ptrace not permitted" in body,
          "profile without the capability: %d %r" % (st, body))
    check(tracer_pid(f.pid) == 0, "target traced")
    check(http(pp.port, "/debug/pprof/cmdline")[0] == 200, "other endpoints still work")
    pp.stop(), f.stop()


class PodNamespace:
    """A pod-like PID namespace: PID 1 is a process named `pause` (as in a
    pod with shareProcessNamespace), /proc mounted for it; processes are
    started inside with nsenter."""

    def __init__(self):
        if not shutil.which("unshare") or not shutil.which("nsenter"):
            raise Skip("unshare/nsenter not installed")
        d = tempfile.mkdtemp(dir=lib.TMP)
        pause = os.path.join(d, "pause")
        shutil.copy(shutil.which("sleep"), pause)
        # --kill-child: if unshare is killed, so is PID 1, and with it the
        # whole namespace.
        self.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
                                      pause, "3600"], stderr=subprocess.PIPE)
        PROCS.append(self.proc)
        # unshare forks: the pause process is its child; wait until it runs.
        deadline = time.monotonic() + 10
        self.pid1 = None
        while self.pid1 is None:
            if self.proc.poll() is not None:
                raise AssertionError("cannot create a PID namespace: %s" % self.proc.stderr.read())
            check(time.monotonic() < deadline, "pause did not start")
            for c in open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)).read().split():
                if os.readlink("/proc/%s/exe" % c) == pause:
                    self.pid1 = int(c)
            time.sleep(0.01)

    def enter(self, argv):
        return ["nsenter", "--target", str(self.pid1), "--pid", "--mount", "--"] + argv


@test
def no_selector_picks_the_only_neighbour_in_a_pod():
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot create PID namespaces here: %s" % probe.stderr.decode().strip())
    ns = PodNamespace()
    f = Fixture(threads=1, wrap=ns.enter)   # pid as seen inside: 2
    pp = Podprof(prefix=ns.enter([]))
    line = pp.wait_log(r"profiling pid \d+", 5)
    check("profiling pid %d;" % f.pid in line, "picked the wrong process: %s (fixture is %d)" % (line, f.pid))
    check_busy_profile(save(get_profile(pp, "seconds=1"), "pod.pb.gz"))
    pp.stop()
    # A second neighbour: no guess, a list.
    f2 = Fixture(threads=1, wrap=ns.enter)
    r = subprocess.run(ns.enter([PODPROF]), capture_output=True, text=True, timeout=10)
    check(r.returncode == 1 and "2 processes match" in r.stderr and "pid=%d" % f.pid in r.stderr
          and "pid=%d" % f2.pid in r.stderr and "pause" not in r.stderr, "two neighbours: %r" % r.stderr)
    f.stop(), f2.stop()
