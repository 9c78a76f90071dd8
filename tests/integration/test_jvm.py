"""HotSpot JVMs: Debian bookworm's OpenJDK 17 and sid's 21 and 25 (in the
chroot of scripts/runtimes.sh, as another container's files look from
podprof) running tests/fixtures/Hot.java, started with no flags: two
threads whose work splits 70/30 between Hot.hotAlpha and Hot.hotBeta, which
the fixture measures itself. podprof reads the JVM's VMStructs from outside
(no attach, no file written): the CPU profile names the Java methods with
their lines and signatures and reaches their callers (Hot.work, Thread.run,
the JVM's C++ frames that started the thread); the thread dump lists each
Java thread with its Java frames. A JVM that forbids attach and a program
that is no JVM are never sent SIGQUIT (podprof attaches to no JVM)."""
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile

import lib
import runtimes
from lib import *  # noqa: F401,F403  (Podprof, http, pprof, check, test, traces, ...)

HOT = os.path.join(lib.ROOT, "tests", "fixtures", "Hot.java")
JDK17 = os.environ.get("PODPROF_TEST_JDK17", "/usr/lib/jvm/java-17-openjdk-amd64")


def marked_lines(path=HOT):
    """{name: line} of the fixture's "// LINE-name" markers."""
    out = {}
    with open(path) as f:
        for no, text in enumerate(f, 1):
            m = re.search(r"// LINE-([\w-]+)", text)
            if m:
                out[m.group(1)] = no
    return out


LINES = marked_lines()


class Jdk:
    """A JDK: bookworm's on the host, or sid's in the chroot (root: the
    chroot's directory, paths as the chroot sees them)."""

    def __init__(self, release):
        self.release = release
        if release == 17:
            self.root, self.home = "", JDK17
            if not os.path.exists(os.path.join(JDK17, "bin", "javac")):
                raise Skip("OpenJDK 17 not installed at %s (openjdk-17-jdk-headless, scripts/deps.sh)" % JDK17)
        else:
            self.root = runtimes.sid()
            self.home = "/usr/lib/jvm/java-%d-openjdk-amd64" % release
            if not os.path.exists(self.root + self.home + "/bin/javac"):
                raise Skip("OpenJDK %d not in the sid chroot (scripts/runtimes.sh)" % release)

    def run(self, argv, cwd, **kw):
        """Popen of argv (a JDK tool by its name, paths as the JDK sees
        them) in cwd; its pid is the tool's own (exec)."""
        argv = [os.path.join(self.home, "bin", argv[0])] + list(argv[1:])
        if not self.root:
            proc = subprocess.Popen(argv, cwd=cwd, **kw)
            PROCS.append(proc)
            return proc
        return runtimes.sid_popen(["/bin/sh", "-c", 'cd "$0" && exec "$@"', cwd] + argv, **kw)

    def scratch(self, name):
        """A new directory for name: (as podprof sees it, as the JDK does)."""
        if not self.root:
            d = tempfile.mkdtemp(prefix="jdk%d-%s-" % (self.release, name), dir=lib.TMP)
            return d, d
        # the chroot's scratch directory (with a copy of Hot.java)
        base = os.path.dirname(runtimes.sid_copy(HOT))
        d = tempfile.mkdtemp(prefix="jdk%d-%s-" % (self.release, name), dir=self.root + base)
        return d, d[len(self.root):]

    def compile(self):
        """Hot.class for this JDK: the directory it is in, as the JDK sees it."""
        outer, inner = self.scratch("classes")
        shutil.copy(HOT, os.path.join(outer, "Hot.java"))
        p = self.run(["javac", "-d", inner, os.path.join(inner, "Hot.java")], inner,
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = p.communicate(timeout=300)
        check(p.returncode == 0, "javac %d failed:\n%s" % (self.release, out))
        return inner


class HotJvm:
    """Hot under a JDK, in a directory of its own; ready once it prints
    "ready <pid>" (its warm-up: the JIT compiled its work)."""

    def __init__(self, jdk, flags=()):
        classes = jdk.compile()
        self.cwd, cwd = jdk.scratch("cwd")
        self.proc = jdk.run(["java"] + list(flags) + ["-cp", classes, "Hot"], cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = self.readline(300)   # a few seconds, unless every core is taken
        m = re.match(r"ready (\d+)", line)
        if not m:
            raise AssertionError("Hot under JDK %d did not get ready: %r" % (jdk.release, line + self.rest()))
        self.pid = self.proc.pid
        check(nspid(self.pid) == int(m.group(1)), "Hot's pid %s is not the process's" % m.group(1))
        self.dirs = self.listing()

    def readline(self, timeout):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        return self.proc.stdout.readline() if ready else ""

    def rest(self):
        """Its output to the end (killed first if it runs: for a failure's
        message only)."""
        if self.proc.poll() is None:
            self.proc.kill()
        return self.proc.stdout.read()

    def spent(self):
        """The CPU nanoseconds (alpha, beta) the fixture has measured so far."""
        self.proc.stdin.write("spent\n")
        self.proc.stdin.flush()
        line = self.readline(30)
        m = re.match(r"spent alpha=(\d+) beta=(\d+)", line)
        check(m, "Hot did not say what it spent: %r" % line)
        return int(m.group(1)), int(m.group(2))

    def listing(self):
        """What podprof could leave in the JVM's directories: its working
        directory's entries, and the attach protocol's and perf map's names
        in its /tmp (which others share)."""
        ns = nspid(self.pid)
        tmp = "/proc/%d/root/tmp" % self.pid
        names = {".java_pid%d" % ns, ".attach_pid%d" % ns, "perf-%d.map" % ns}
        return (sorted(os.listdir("/proc/%d/cwd" % self.pid)),
                sorted(n for n in os.listdir(tmp) if n in names))

    def stop(self):
        """The JVM ran on (and has nothing new in its directories); ends it
        (end of stdin) and returns its output."""
        if self.proc.poll() is not None:
            raise AssertionError("the JVM ended:\n%s" % self.rest())
        check(self.listing() == self.dirs, "the JVM's directories changed: %s -> %s" % (self.dirs, self.listing()))
        out, _ = self.proc.communicate(timeout=30)   # its stdin closed: it ends
        return out


def share_of(tr, name):
    """CPU of the samples whose stack holds name."""
    return sum(v for v, frames in tr if name in frames)


def check_cpu_profile(release, backend=None):
    """The CPU profile of Hot: Hot.hotAlpha's share of alpha and beta within
    2 points of the fixture's own measure over the window (3 under ptrace); Hot.work above
    Hot.hotAlpha (at the line that calls it) in at least 90% of its
    samples, and Thread.run and the JVM's thread entry above that; lines as
    the source has them and signatures as system names. The JVM runs on,
    nothing left in its directories."""
    jdk = Jdk(release)
    f = HotJvm(jdk)
    pp = Podprof("--pid", str(f.pid), *(["--backend", backend] if backend else []))
    # ~2 threads x 1000 Hz x 8 s: a standard deviation of the split well
    # under a point, even with the machine's cores shared.
    a0, b0 = f.spent()
    answer = http(pp.port, "/debug/pprof/profile?seconds=8&hz=1000")
    a1, b1 = f.spent()   # (before the decoder's check: its time is not the window's)
    path = save(check_served(answer), "jvm%d%s.pb.gz" % (release, backend or ""))
    truth = 100.0 * (a1 - a0) / ((a1 - a0) + (b1 - b0))
    pp.wait_log(r"jvm: \S+/libjvm\.so is HotSpot %d[.+]" % release, 5)
    log = pp.log()
    pp.stop()
    f.stop()
    m = re.search(r"backend: pid=%d sampled with (\S+):" % f.pid, log)
    check(m and (not backend or m.group(1) == backend), "not sampled with %s:\n%s" % (backend, log))
    # perf_event (the default where the pod allows it) is held to 2 points
    # of the fixture; ptrace's stops to 3, as the C fixtures are (its
    # weights, the thread's CPU since its last sample, ran 0.6 to 2.6
    # points high here, the fixture's clock reads at each call's ends).
    tol = 2.0 if m.group(1) == "perf_event" else 3.0
    tr = traces(path)
    check(tr, "no samples")
    a, b = share_of(tr, "Hot.hotAlpha"), share_of(tr, "Hot.hotBeta")
    check(a and b, "no Hot.hotAlpha or Hot.hotBeta: %s" % tr[:3])
    got = 100.0 * a / (a + b)
    ts = traces(path, "samples")
    n = sum(v for v, fr in ts if "Hot.hotAlpha" in fr or "Hot.hotBeta" in fr)
    # and the split's sampling noise: with the cores taken the threads get
    # fewer samples (three standard deviations and a point)
    sd = 100.0 * (truth / 100 * (1 - truth / 100) / max(n, 1)) ** 0.5
    tol = max(tol, 1.0 + 3 * sd)
    print("  info: JDK %d: Hot.hotAlpha %.1f%% of alpha+beta (the fixture: %.1f%%), %d samples, allowed %.1f points" %
          (release, got, truth, n, tol))
    check(abs(got - truth) <= tol, "Hot.hotAlpha %.1f%%, the fixture measured %.1f%% (%s)" %
          (got, truth, m.group(1)))
    # The fixture sizes its calls for 70% at start (its own measure decides,
    # above): this only holds the split away from even, where a swap of the
    # two names would pass.
    check(abs(got - 70.0) <= 15.0, "Hot.hotAlpha %.1f%%, not ~70%%" % got)
    # The callers of the JIT's code, through interpreted Thread.run and
    # the call stub, to the thread's native start.
    under = sum(v for v, fr in tr if "Hot.hotAlpha" in fr and
                fr.index("Hot.hotAlpha") < (fr.index("Hot.work") if "Hot.work" in fr else -1) <
                (fr.index("java.lang.Thread.run") if "java.lang.Thread.run" in fr else -1) <
                (fr.index("thread_native_entry") if "thread_native_entry" in fr else -1))
    print("  info: %.1f%% of Hot.hotAlpha's CPU under Hot.work, Thread.run and thread_native_entry" %
          (100.0 * under / a))
    check(under >= 0.9 * a, "only %.1f%% of Hot.hotAlpha's CPU reaches Hot.work, Thread.run and the "
          "thread's start: %s" % (100.0 * under / a, [fr for _, fr in tr if "Hot.hotAlpha" in fr][:3]))
    # Lines: the loops' own, and the call's in Hot.work.
    top = pprof("-top", "-lines", "-nodecount=200", path)
    for name, mark in (("Hot.hotAlpha", "alpha"), ("Hot.hotBeta", "beta")):
        want = "%s Hot.java:%d" % (name, LINES[mark])
        check(want in top, "no %r in pprof -top -lines:\n%s" % (want, top[-3000:]))
    lt = traces_lines(path)
    calls = sum(v for v, fr in lt if fr[0].startswith("Hot.hotAlpha ") and len(fr) > 1 and
                fr[1] == "Hot.work Hot.java:%d" % LINES["work-alpha"])
    leaf_a = sum(v for v, fr in lt if fr[0].startswith("Hot.hotAlpha "))
    check(calls >= 0.9 * leaf_a, "Hot.work is at its call of hotAlpha (line %d) in %.1f%% of its samples" %
          (LINES["work-alpha"], 100.0 * calls / leaf_a))
    raw = pprof("-raw", path)
    check(re.search(r"Hot\.hotAlpha Hot\.java:%d s=\d+\(Hot\.hotAlpha\(I\)J\)" % LINES["alpha"], raw),
          "no signature (system name) Hot.hotAlpha(I)J in pprof -raw:\n%s" % raw[:3000])


def traces_lines(path):
    """`go tool pprof -traces -lines`: (value, [leaf "func file:line" ..])."""
    out = pprof("-traces", "-lines", path)
    result = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        frames, value = [], None
        for line in block.splitlines():
            m = re.match(r"^\s+([\d.]+)(ns|us|ms|s)\s+(\S.*)$", line)
            if m:
                value = float(m.group(1)) * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]
                frames = [m.group(3).strip()]
            elif value is not None and line.strip() and not re.match(r"^\s+\w+:\s", line):
                frames.append(line.strip())
        if value is not None:
            result.append((value, frames))
    return result


@test
@figures
def jvm17_java_frames_in_the_cpu_profile():
    check_cpu_profile(17)


@test
@figures
def jvm17_java_frames_under_ptrace():
    check_cpu_profile(17, "ptrace")


@test
@figures
def jvm21_java_frames_in_the_cpu_profile():
    check_cpu_profile(21)


@test
@figures
def jvm25_java_frames_in_the_cpu_profile():
    check_cpu_profile(25)


@test
def jvm_threads_in_the_thread_dump():
    """goroutine?debug=2 of Hot (JDK 17 and 25): each worker under its
    Java name ("hot-worker-number-1": the kernel keeps 15 characters) with
    its Java frames and lines (Hot.work, Hot$Worker.run at its loop,
    Thread.run); the main thread ("main", "java" to the kernel), blocked
    reading stdin, with the interpreted frames of BufferedReader.readLine
    under Hot.main at its loop."""
    missing = []
    for release in (17, 25):
        try:
            jdk = Jdk(release)
        except Skip as e:
            missing.append(str(e))
            continue
        f = HotJvm(jdk)
        pp = Podprof("--pid", str(f.pid))
        # A thread that does not stop within the dump's wait (every core
        # taken, ASan) is listed without its stack: such a dump is taken
        # again.
        for _ in range(10):
            st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=2")
            check(st == 200, "dump status %d" % st)
            dump = body.decode()
            if "(stack not captured)" not in dump:
                break
        pp.stop()
        f.stop()
        workers = [g for g in dump.split("\n\n") if "\nHot.work(...)\n" in g]
        check(len(workers) == 2, "JDK %d: %d threads in Hot.work:\n%s" % (release, len(workers), dump[:4000]))
        # The JVM's names of its threads, not the kernel's 15 characters.
        names = sorted(re.match(r'goroutine \d+ \[[^\]]*thread "([^"]*)"\]', g).group(1) for g in workers)
        check(names == ["hot-worker-number-1", "hot-worker-number-2"],
              "JDK %d: the workers are named %s" % (release, names))
        for g in workers:
            check(re.search(r"\nHot\$Worker\.run\(\.\.\.\)\n\tHot\.java:%d\n" % LINES["run"], g) and
                  re.search(r"\njava\.lang\.Thread\.run\(\.\.\.\)\n\tjava/lang/Thread\.java:\d+\n", g),
                  "JDK %d: a worker without Hot$Worker.run or Thread.run:\n%s" % (release, g))
        main = [g for g in dump.split("\n\n") if "\nHot.main(...)\n" in g]
        check(main and re.match(r'goroutine \d+ \[[^\]]*thread "main"\]', main[0]),
              "JDK %d: the main thread is not named main:\n%s" % (release, main[:1]))
        check(main and re.search(r"\njava\.io\.BufferedReader\.readLine\(\.\.\.\)\n\tjava/io/BufferedReader\.java:\d+\n"
                                 r"(.*\n)*Hot\.main\(\.\.\.\)\n\tHot\.java:%d\n" % LINES["main"], main[0]),
              "JDK %d: no main thread in BufferedReader.readLine under Hot.main:\n%s" % (release, dump[:4000]))
    if missing:
        raise Skip("; ".join(missing))


@test
def jvm_forbidding_attach_is_never_sent_sigquit():
    """A JVM started with -XX:+DisableAttachMechanism (SIGQUIT would print
    a thread dump to its output): profiled, dumped and profiled again, its
    Java frames named all the same, and its output holds no thread dump."""
    jdk = Jdk(17)
    f = HotJvm(jdk, ["-XX:+DisableAttachMechanism"])
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=2&hz=200"), "jvm-noattach.pb.gz")
    st, _, _ = http(pp.port, "/debug/pprof/goroutine?debug=2")
    check(st == 200, "dump status %d" % st)
    get_profile(pp, "seconds=1&hz=200")
    pp.stop()
    out = f.stop()
    check("Full thread dump" not in out, "the JVM printed a thread dump (SIGQUIT):\n%s" % out[-2000:])
    check(share_of(traces(path), "Hot.hotAlpha") > 0, "no Hot.hotAlpha without attach")


QUIT_CATCHER = r"""
import os, signal, sys
signal.signal(signal.SIGQUIT, lambda s, f: print("SIGQUIT", flush=True))
print("ready %d" % os.getpid(), flush=True)
while sys.stdin.readline():
    pass
"""


@test
def no_sigquit_to_a_process_that_is_no_jvm():
    """A program that is no JVM but catches SIGQUIT (as a JVM does, and
    says so in SigCgt): profiled, dumped, its heap asked for, never sent
    SIGQUIT."""
    proc = subprocess.Popen(["python3", "-c", QUIT_CATCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    PROCS.append(proc)
    check(re.match(r"ready \d+", proc.stdout.readline()), "the catcher did not get ready")
    with open("/proc/%d/status" % proc.pid) as fh:
        cgt = int(re.search(r"SigCgt:\s+([0-9a-f]+)", fh.read()).group(1), 16)
    check(cgt & (1 << (signal.SIGQUIT - 1)), "the catcher does not catch SIGQUIT")
    pp = Podprof("--pid", str(proc.pid))
    get_profile(pp, "seconds=1&hz=200")
    st, _, _ = http(pp.port, "/debug/pprof/goroutine?debug=2")
    check(st == 200, "dump status %d" % st)
    st, _, _ = http(pp.port, "/debug/pprof/heap")
    pp.stop()
    proc.stdin.close()
    out = proc.stdout.read()
    proc.wait(10)
    check("SIGQUIT" not in out, "the program was sent SIGQUIT")
