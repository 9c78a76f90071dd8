"""Command line, target selection, privileges, logs."""
import os
import platform
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import lib
from lib import *  # noqa: F401,F403  (Fixture, Podprof, http, pprof, check, test, ...)
from lib import podprof_pid  # noqa: F401


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
def busy_port_exits_at_once_naming_address_and_flag():
    """A port another server holds (Knative's queue-proxy holds 8008):
    podprof exits non-zero at once, naming the address and how to choose
    another, and the target runs on untraced."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    addr = "127.0.0.1:%d" % s.getsockname()[1]
    f = Fixture()
    t0 = time.monotonic()
    r = subprocess.run([PODPROF, "--pid", str(f.pid), "--listen", addr], capture_output=True, text=True,
                       timeout=30)
    took = time.monotonic() - t0
    s.close()
    check(r.returncode == 1 and took < 5, "exit %d after %.1f s" % (r.returncode, took))
    check(("cannot listen on %s: the address is in use" % addr) in r.stderr and "--listen" in r.stderr
          and "PODPROF_LISTEN" in r.stderr, r.stderr[-600:])
    check(lib.tracer_pid(f.pid) == 0 and f.proc.poll() is None, "the target traced or gone")
    f.stop()


@test
def cli_several_candidates_are_listed():
    # A copy at a path of this test's own, so that no other process matches.
    exe = os.path.join(tempfile.mkdtemp(dir=lib.TMP), "busy-candidates")
    shutil.copy(BUSY, exe)
    f1, f2 = Fixture(exe=exe), Fixture(exe=exe)
    r = subprocess.run([PODPROF, "--exe", exe], capture_output=True, text=True)
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


def caps_of(pid):
    with open("/proc/%d/status" % pid) as fh:
        st = fh.read()
    return {k: int(re.search(r"%s:\s+([0-9a-f]+)" % k, st).group(1), 16)
            for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")}


@test
def keeps_only_cap_sys_ptrace():
    if os.geteuid() != 0:
        raise Skip("needs to start with more capabilities than CAP_SYS_PTRACE (root)")
    f = Fixture()
    ptrace_bit = 1 << 19
    # --backend ptrace: CAP_SYS_PTRACE alone; auto (perf_event where it
    # opens) also keeps CAP_PERFMON (38) and CAP_IPC_LOCK (14).
    for backend, want in (("ptrace", ptrace_bit), ("auto", ptrace_bit | 1 << 38 | 1 << 14)):
        pp = Podprof("--pid", str(f.pid), "--backend", backend)
        pp.wait_log(r"kept only the capabilities it needs", 5)
        caps = caps_of(podprof_pid(pp))
        check(caps["CapEff"] == want and caps["CapPrm"] == want and caps["CapInh"] == 0
              and caps["CapAmb"] == 0 and caps["CapBnd"] == want, "%s: capabilities left: %r" % (backend, caps))
        # It can still do its job with that alone.
        path = save(get_profile(pp, "seconds=1"), "caps-%s.pb.gz" % backend)
        check_busy_profile(path)
        check(("taken with %s" % ("ptrace" if backend == "ptrace" else "perf_event")) in pprof("-raw", path),
              "%s: the comment names another backend" % backend)
        pp.stop()
    f.stop()


def nice_of_threads(pid):
    """{tid: nice} of every thread of pid (field 19 of stat)."""
    return {tid: int(text.rsplit(")", 1)[1].split()[16]) for tid, text in per_thread(pid, "stat").items()}


def sampler_tid(pid):
    """The tid of podprof's thread named "sampler"."""
    for tid, comm in per_thread(pid, "comm").items():
        if comm.strip() == "sampler":
            return tid
    raise AssertionError("no thread named sampler in podprof %d" % pid)


def slices_of_threads(pid):
    """{tid: scheduler slice in ns} of every thread of pid (se.slice in
    /proc/<pid>/task/<tid>/sched, EEVDF kernels)."""
    out = {}
    for tid, text in per_thread(pid, "sched").items():
        m = re.search(r"^se\.slice\s*:\s*(\d+)", text, re.M)
        if m:
            out[tid] = int(m.group(1))
    return out


def custom_slices():
    """Linux 6.12 and later honour a SCHED_OTHER thread's slice request."""
    m = re.match(r"(\d+)\.(\d+)", platform.release())
    return m and (int(m.group(1)), int(m.group(2))) >= (6, 12)


def check_sampler_slice(pid):
    """At nice -10 the sampler alone asks for 100 us slices: a waking thread
    with a shorter slice than the running one may preempt it (EEVDF), so the
    sampler's ticks and its takes of stopped threads do not wait for a busy
    target thread's slice to end. Older kernels ignore the request
    (sampler.c, short_slice): every thread keeps the kernel's one slice
    (6.6-6.11), or shows none (CFS, before 6.6)."""
    slices, tid = slices_of_threads(pid), sampler_tid(pid)
    if not custom_slices():
        print("  info: kernel %s has no custom slices (6.12+); slices %r" % (platform.release(), slices))
        check(len(set(slices.values())) <= 1 and 100000 not in slices.values(),
              "kernel %s has no custom slices, yet podprof's threads (sampler %d) differ: %r"
              % (platform.release(), tid, slices))
        return
    check(slices.get(tid) == 100000 and all(v != 100000 for t, v in slices.items() if t != tid),
          "slices of podprof's threads (sampler %d): %r" % (tid, slices))


@test
def sampler_thread_alone_runs_at_a_higher_priority():
    """With CAP_SYS_NICE at start, the sampler thread (and only it) runs at
    nice -10, so a thread stopped between ticks is taken at once even when
    the target's threads hold every core; without it, podprof says so and
    samples at nice 0. At nice -10 the sampler alone asks for short slices."""
    if os.geteuid() != 0:
        raise Skip("needs CAP_SYS_NICE (root)")
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid))
    pp.wait_log(r"serving http", 5)
    nice = nice_of_threads(podprof_pid(pp))
    check(nice[sampler_tid(podprof_pid(pp))] == -10 and sorted(nice.values()).count(-10) == 1,
          "nice values of podprof's threads: %r" % nice)
    check_busy_profile(save(get_profile(pp, "seconds=1"), "nice.pb.gz"))
    check_sampler_slice(podprof_pid(pp))   # set as its loop began: it has served since
    pp.stop()
    if not shutil.which("capsh"):
        raise Skip("capsh (libcap2-bin) not installed")
    pp = Podprof("--pid", str(f.pid), prefix=["capsh", "--drop=cap_sys_nice", "--", "-c", 'exec "$0" "$@"'])
    pp.wait_log(r"the sampler runs at nice 0, not -10", 5)
    check(set(nice_of_threads(podprof_pid(pp)).values()) == {0}, "nice without CAP_SYS_NICE")
    check_busy_profile(save(get_profile(pp, "seconds=1"), "nice0.pb.gz"))
    check(100000 not in slices_of_threads(podprof_pid(pp)).values(), "a short slice at nice 0")
    pp.stop(), f.stop()


@test
def refuses_to_profile_itself():
    r = subprocess.run(["sh", "-c", 'exec "$0" --pid $$', PODPROF], capture_output=True, text=True)
    check(r.returncode == 1 and "is podprof itself" in r.stderr, "--pid self: %r" % r.stderr)


@test
def says_why_a_process_whose_main_thread_exited_is_refused():
    """A main thread that called pthread_exit leaves a zombie leader while the
    other threads run on; its /proc entries have no address space, so podprof
    refuses it, saying so rather than "no such process"."""
    f = Fixture(threads=2, extra=("-L",))
    deadline = time.monotonic() + 5
    while "Z" not in open("/proc/%d/stat" % f.pid).read().split(")")[-1].split()[0]:
        check(time.monotonic() < deadline, "the fixture's main thread did not exit")
        time.sleep(0.01)
    r = subprocess.run([PODPROF, "--pid", str(f.pid), "--listen", "127.0.0.1:0"], capture_output=True,
                       text=True, timeout=10)
    check(r.returncode == 1 and "main thread has exited" in r.stderr, "exit %d: %r" % (r.returncode, r.stderr))
    f.stop()


@test
def bearer_token_protects_everything_but_healthz():
    token = "s3cr3t-t0ken-%d" % os.getpid()
    tf = os.path.join(tempfile.mkdtemp(dir=lib.TMP), "token")
    with open(tf, "w") as fh:
        fh.write(token + "\n")
    f = Fixture()
    pp = Podprof("--pid", str(f.pid), "--auth-token-file", tf, "--log-level", "debug")
    for path in ("/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/profile?seconds=1",
                 "/debug/pprof/symbol", "/debug/pprof/nonesuch", "/metrics",
                 "/debug/pprof/goroutine?debug=2"):
        for hdr in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Bearer " + token + "x"},
                    {"Authorization": token}, {"Authorization": "Bearer " + "x" * 3000}):
            st, h, body = http(pp.port, path, headers=hdr)
            check(st == 401 and h.get("www-authenticate", "").startswith("Bearer") and body == b"unauthorized\n",
                  "%s with %r: %d" % (path, hdr, st))
    check(http(pp.port, "/healthz")[0] == 200, "/healthz needs no token")
    st, h, body = http(pp.port, "/debug/pprof/cmdline", headers={"Authorization": "Bearer " + token})
    check(st == 200 and body.startswith(BUSY.encode()), "with the token: %d" % st)
    st, h, body = http(pp.port, "/debug/pprof/profile?seconds=1", headers={"authorization": "bearer " + token})
    check(st == 200, "scheme and header name are case-insensitive: %d" % st)
    pp.stop(), f.stop()
    check(token not in pp.log(), "the token must never be logged")
    r = subprocess.run([PODPROF, "--pid", str(os.getpid()), "--auth-token-file", "/nonexistent"],
                       capture_output=True, text=True)
    check(r.returncode == 1 and "cannot read --auth-token-file /nonexistent" in r.stderr, r.stderr)


# ---- the documents say what the binary does ---------------------------------------

README = os.path.join(lib.ROOT, "README.md")
# Environment variables the README may name that are not podprof's flags: the
# allocation agent's, read in the application (agent/).
AGENT_ENV = {"PODPROF_ALLOC_RATE"}
# Flags of other programs (kubectl, helm, podman) the README names: none today.
# A new one goes here, or better into docs/.
OTHER_FLAGS = set()
# Windowed endpoints, asked for a short window so the test stays short.
SHORT = {"/debug/pprof/profile": "?seconds=1", "/debug/pprof/trace": "?seconds=1",
         "/debug/pprof/block": "?seconds=1", "/debug/pprof/mutex": "?seconds=1"}
PATH_RE = re.compile(r"(/debug/pprof(?:/[a-z]*)?|/healthz|/readyz|/metrics)(?![\w/-])")


def help_sections():
    """podprof --help: (its flags, its environment variables, the paths its
    Endpoints section lists, the --auth-token-file line)."""
    r = subprocess.run([PODPROF, "--help"], capture_output=True, text=True)
    check(r.returncode == 0, "--help exited %d" % r.returncode)
    text = r.stdout
    endpoints, options = text.split("\nOptions", 1)
    flags = set(re.findall(r"^  (--[a-z][a-z0-9-]*)", options, re.M))
    env = set(re.findall(r"\[(PODPROF_[A-Z_]+)", options))
    paths = set(re.findall(r"^  (/\S*)\s", endpoints, re.M))
    auth = next(l for l in options.splitlines() if l.startswith("  --auth-token-file"))
    return flags, env, paths, auth


@test
def flags_doc_is_what_help_prints():
    """docs/flags.md is generated from --help (scripts/gen-flags.py): it must
    be what this build prints, flag for flag."""
    r = subprocess.run([sys.executable, os.path.join(lib.ROOT, "scripts", "gen-flags.py"), "--check", PODPROF],
                       capture_output=True, text=True)
    check(r.returncode == 0, "docs/flags.md is not what %s --help prints:\n%s%s" % (
        PODPROF, r.stdout[-4000:], r.stderr[-1000:]))
    flags, env, _, _ = help_sections()
    with open(os.path.join(lib.ROOT, "docs", "flags.md")) as fh:
        doc = fh.read()
    missing = sorted(x for x in flags | env if "`%s" % x not in doc)
    check(not missing, "docs/flags.md lacks %s" % missing)


@test
def readme_names_only_what_the_binary_does():
    """Every flag, environment variable, endpoint path and repository path the
    README names exists: flags in --help, paths answered by a running podprof
    (not 404), files in the tree; the paths it says answer without the token
    are exactly those that do, and --help's --auth-token-file line says the
    same."""
    with open(README) as fh:
        text = fh.read()
    flags, env, listed, auth_line = help_sections()

    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))
    check(not named - flags - OTHER_FLAGS, "README names flags --help does not list: %s"
          % sorted(named - flags - OTHER_FLAGS))
    named_env = set(re.findall(r"\bPODPROF_[A-Z_]+\b", text))
    check(not named_env - env - AGENT_ENV, "README names variables --help does not list: %s"
          % sorted(named_env - env - AGENT_ENV))

    files = set(re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text))
    files |= set(re.findall(r"`((?:docs|scripts|charts|tests|sidecar|ptrace|encoder|base|agent)/[\w./-]*\w"
                            r"|Dockerfile|Makefile|LICENSE)`", text))
    gone = sorted(p for p in files if not os.path.exists(os.path.join(lib.ROOT, p)))
    check(not gone, "README names files that do not exist: %s" % gone)

    paths = set(PATH_RE.findall(text))
    check(paths, "no endpoint path found in the README")
    public_said = set()
    for line in text.splitlines():
        if re.search(r"without (the|a) token", line):
            public_said |= set(PATH_RE.findall(line))
    check(public_said, "the README says nowhere which endpoints answer without the token")

    token = "readme-token-%d" % os.getpid()
    tf = os.path.join(tempfile.mkdtemp(dir=lib.TMP), "token")
    with open(tf, "w") as fh:
        fh.write(token + "\n")
    f = Fixture()
    pp = Podprof("--pid", str(f.pid), "--auth-token-file", tf)
    try:
        # Which endpoints answer without the token: every one --help lists.
        public = set()
        for p in sorted(listed | paths):
            st, _, _ = http(pp.port, p + SHORT.get(p, ""))
            if st != 401:
                public.add(p)
        check(public == public_said, "endpoints that answer without the token: %s; the README says %s"
              % (sorted(public), sorted(public_said)))
        said_by_help = set(PATH_RE.findall(auth_line))
        check(said_by_help == public, "--help's --auth-token-file says %s need no token; they are %s"
              % (sorted(said_by_help), sorted(public)))
        # Every path the README names is served.
        for p in sorted(paths):
            st, _, body = http(pp.port, p + SHORT.get(p, ""), headers={"Authorization": "Bearer " + token})
            check(st != 404 and b"Unknown profile" not in body[:64],
                  "README names %s: podprof answers %d %r" % (p, st, body[:80]))
        check(not paths - listed - {"/debug/pprof"}, "README names paths --help does not list: %s"
              % sorted(paths - listed - {"/debug/pprof"}))
    finally:
        pp.stop()
        f.stop()
