"""CPython targets: Debian's python3.11 (and pyenv's 3.12 where installed)
running tests/fixtures/pyhot.py, whose work splits 70/30 between
crunch_alpha and crunch_beta (it measures the split itself and prints it at
exit). Each native _PyEval_EvalFrameDefault frame becomes the Python frames
it runs, with files and lines, in the CPU profile (read by go tool pprof),
the thread dump, the block profile and the trace; --python 0 keeps native
frames only; releases podprof does not know (3.10, 3.13) stay native, said
once in the log."""
import collections
import glob
import gzip
import json
import math
import os
import re
import select
import signal
import subprocess

import lib
from lib import *  # noqa: F401,F403  (Podprof, http, pprof, check, test, traces, ...)

PYTHON = os.environ.get("PODPROF_TEST_PYTHON", "/usr/bin/python3.11")


def pyenv(release):
    """An interpreter of `release` ("3.12") installed by pyenv, or None."""
    found = sorted(glob.glob("/root/.pyenv/versions/%s.*/bin/python%s" % (release, release)))
    return os.environ.get("PODPROF_TEST_PYTHON" + release.replace(".", "")) or (found[-1] if found else None)
PYHOT = os.path.join(lib.ROOT, "tests", "fixtures", "pyhot.py")
PYSPAWN = os.path.join(lib.ROOT, "tests", "fixtures", "pyspawn.py")
EVAL = "_PyEval_EvalFrameDefault"


def marked_lines(path=PYHOT):
    """{name: line} of a fixture's "# LINE-name" markers."""
    out = {}
    with open(path) as f:
        for no, text in enumerate(f, 1):
            m = re.search(r"# LINE-([\w-]+)", text)
            if m:
                out[m.group(1)] = no
    return out


LINES = marked_lines()


class PyFixture:
    """pyhot.py under python (python3.11 by default); ready once it prints
    "ready <pid>"."""

    def __init__(self, python=PYTHON):
        if not python or not os.path.exists(python):
            raise Skip("%s not installed" % (python or "that release"))
        self.proc = subprocess.Popen([python, PYHOT], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        PROCS.append(self.proc)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        m = re.match(r"ready (\d+)", line)
        check(m, "pyhot did not get ready: %r %s" % (line, self.proc.stderr.read() if not ready else ""))
        self.pid = int(m.group(1))

    def spent(self):
        """SIGUSR1; the seconds (alpha, beta) the fixture has measured so far."""
        self.proc.send_signal(signal.SIGUSR1)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        m = re.match(r"spent alpha=([\d.]+) beta=([\d.]+)", line)
        check(m, "pyhot did not say what it spent: %r" % line)
        return float(m.group(1)), float(m.group(2))

    def stop(self):
        """SIGTERM; returns the fixture's own measured alpha share (%)."""
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=30)
        m = re.search(r"truth_alpha=([\d.]+)", out)
        check(m, "pyhot printed no truth: %r %r" % (out, err[-500:]))
        return float(m.group(1))


def count_traces(path, index):
    """`go tool pprof -traces` of a profile counted in units (no time
    suffix): [(count, [leaf..root])], Python frames without " (inline)"."""
    out = pprof("-traces", "-sample_index=" + index, path)
    result = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        rows = [line.strip() for line in block.splitlines() if line.strip()]
        m = re.match(r"^(\d+)\s+(\S.*)$", rows[0]) if rows else None
        if m:
            frames = [m.group(2)] + [r for r in rows[1:] if not re.match(r"^\w+:\s", r)]
            result.append((int(m.group(1)), [re.sub(r" \(inline\)$", "", f) for f in frames]))
    return result


def py_traces(path, index="cpu"):
    """traces(), each frame's name without pprof's " (inline)" (every Python
    frame of an eval call but the outermost is a Line of one location)."""
    return [(v, [re.sub(r" \(inline\)$", "", fr) for fr in frames]) for v, frames in traces(path, index)]


# The fixture's functions (the main thread's).
FIXTURE_FUNCS = {"crunch_alpha", "crunch_beta", "square", "timed", "work"}


def cum_share(tr, name):
    total = sum(v for v, _ in tr)
    return 100.0 * sum(v for v, frames in tr if name in frames) / total


@test
@figures
def python_frames_in_the_cpu_profile():
    check_cpu_profile(PYTHON, "3.11")


@test
@figures
def python312_frames_in_the_cpu_profile():
    check_cpu_profile(pyenv("3.12"), "3.12")


def check_cpu_profile(python, release):
    """The profile names crunch_alpha, crunch_beta, square, work and
    <module>, each Python stack reaches <module> and then the interpreter's
    native frames (no eval frame left in between), the alpha/beta split is
    the fixture's own within 4 points, lines are those of the source (pprof
    -lines), square's stack crosses the C code of map() back into
    crunch_beta (a second eval call), and go tool pprof -list shows the
    source."""
    f = PyFixture(python)
    pp = Podprof("--pid", str(f.pid))
    # The fixture's own measure over the profile's window (its calls vary in
    # size, so samples at a fixed rate fall at independent points of its loop:
    # ~3000 samples put one standard deviation of the split near 0.8 points).
    a0, b0 = f.spent()
    path = save(get_profile(pp, "seconds=6&hz=500"), "py%s.pb.gz" % release)
    a1, b1 = f.spent()
    truth = 100.0 * (a1 - a0) / ((a1 - a0) + (b1 - b0))
    pp.wait_log(r"python: .* is CPython %s\.\d+: its _PyEval_EvalFrameDefault frames show" %
                re.escape(release), 5)
    pp.stop()
    f.stop()
    tr = py_traces(path)
    check(tr, "no samples")
    py = [(v, fr) for v, fr in tr if "<module>" in fr]
    total = sum(v for v, _ in tr)
    share = 100.0 * sum(v for v, _ in py) / total
    print("  info: %.1f%% of the samples under <module>" % share)
    check(share >= 90.0, "only %.1f%% of the samples reach <module>" % share)
    for v, fr in py:
        i = fr.index("<module>")
        j = min(fr.index(n) for n in FIXTURE_FUNCS | {"<module>"} if n in fr)
        # Between the innermost Python frame and <module>, every eval call
        # shows its Python frames; the interpreter's own entry follows.
        check(EVAL not in fr[j:i], "an eval frame left among Python frames: %s" % fr)
        check(fr[i + 1:i + 2] == ["PyEval_EvalCode"] or EVAL in fr[i + 1:],
              "<module> is not run by the interpreter: %s" % fr)
    # Leafward of them, an eval call with no Python frame of its own stays
    # native: being entered, or returning (3.12 unlinks the frame, then
    # clears it: _PyEvalFrameClearAndPop, its time in the caller's eval
    # call). Real time, 1-3 % quiet, 3-4 % with every core loaded (its
    # decrefs miss the cache); a podprof that lost eval calls' frames
    # shows far more. Counted in samples (the CPU weights add their own
    # noise), held to 5 % plus three standard deviations of a count of
    # the samples taken (5.8 % of ~600 samples once, under load).
    cnt = [(v, fr) for v, fr in py_traces(path, "samples") if "<module>" in fr]
    leaf = collections.Counter()
    for v, fr in cnt:
        j = min(fr.index(n) for n in FIXTURE_FUNCS | {"<module>"} if n in fr)
        if EVAL in fr[:j]:
            leaf[tuple(fr[:fr.index(EVAL) + 1])] += v
    n = sum(v for v, _ in cnt) or 1
    got, bound = sum(leaf.values()) / n, 0.05 + 3 * math.sqrt(0.05 * 0.95 / n)
    print("  info: %.1f%% of %d samples in an eval call with no frame of its own" % (100 * got, n))
    check(got < bound, "%.1f%% of %d samples in a native eval frame (%.1f%% allowed), leafward: %s" %
          (100 * got, n, 100 * bound, leaf.most_common(4)))
    a, b = cum_share(tr, "crunch_alpha"), cum_share(tr, "crunch_beta")
    got = 100.0 * a / (a + b)
    print("  info: crunch_alpha %.1f%% of alpha+beta (fixture: %.1f%%); alpha %.1f%% beta %.1f%%" %
          (got, truth, a, b))
    check(abs(got - truth) <= 4.0, "alpha share %.1f%%, the fixture measured %.1f%%" % (got, truth))
    # The fixture sizes its calls for 70% at start; its own measure decides
    # (above, within 4 points). This only holds the split away from even,
    # where a swap of the two would pass: a busy machine during the
    # fixture's sizing gave 61.5 % (the profile 62.0 %), so not 70 +- 8.
    check(abs(got - 70.0) <= 15.0, "alpha share %.1f%%, not ~70%%" % got)
    # square runs in a second eval call, under map's C code, under crunch_beta.
    sq = [fr for _, fr in tr if "square" in fr]
    check(sq, "no sample in square")
    for fr in sq:
        i, j = fr.index("square"), fr.index("crunch_beta")
        check(i < j and EVAL not in fr[i:j + 1],
              "square not under crunch_beta through native frames: %s" % fr)
        # (Debian's python3.11 has .dynsym only: map's and sum's C
        # functions are unnamed there, "python3.11+0x...".)
        check(j > i + 1, "no native frame (map, sum) between square and crunch_beta: %s" % fr)
    # Files and lines, as go tool pprof -lines reports them.
    top = pprof("-top", "-lines", "-nodecount=200", path)
    for name, mark in (("crunch_alpha", "alpha"), ("square", "square"), ("crunch_beta", "beta")):
        want = "%s %s:%d" % (name, PYHOT, LINES[mark])
        check(want in top, "no %r in pprof -top -lines:\n%s" % (want, top[-3000:]))
    lt = pprof("-traces", "-lines", path)
    check(re.search(r"work %s:%d" % (re.escape(PYHOT), LINES["work-alpha"]), lt) and
          re.search(r"<module> %s:%d" % (re.escape(PYHOT), LINES["module"]), lt),
          "no work/<module> lines in pprof -traces -lines:\n%s" % lt[:3000])
    listing = pprof("-list", "crunch_alpha", path)
    check("x += i * i" in listing, "pprof -list shows no source:\n%s" % listing[:2000])


@test
def python_frames_in_the_thread_dump():
    check_thread_dump(PYTHON)


@test
def python312_frames_in_the_thread_dump():
    check_thread_dump(pyenv("3.12"))


def check_thread_dump(python):
    """goroutine?debug=2 shows both threads' Python frames with file:line
    (the parked thread in park, under threading's frames; the main thread
    under <module>); debug=1 groups them with their lines too."""
    f = PyFixture(python)
    pp = Podprof("--pid", str(f.pid))
    park = "park(...)\n\t%s:%d\n" % (PYHOT, LINES["park"])
    # The fixture is ready just before its thread calls Event.wait(): that
    # thread is parked in its wait once a dump shows it there (or never).
    # The main thread runs its functions but for a moment between calls
    # (<module>'s own line: once in a suite run), so a dump that caught it
    # there is taken again.
    fn = re.compile(r"^(crunch_alpha|crunch_beta|square|work|timed)\(", re.M)
    for _ in range(20):
        st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=2")
        check(st == 200, "dump status %d" % st)
        dump = body.decode()
        main = [b for b in dump.split("\n\n") if b.startswith("goroutine %d " % f.pid)]
        if park in dump and main and fn.search(main[0]):
            break
    st, _, body1 = http(pp.port, "/debug/pprof/goroutine?debug=1")
    pp.stop()
    f.stop()
    check(park in dump, "no %r in the dump:\n%s" % (park, dump[-3000:]))
    check(re.search(r"Event\.wait\(\.\.\.\)\n\t\S+/threading\.py:\d+\n(.*\n)*park\(", dump),
          "park's caller chain lacks threading's Event.wait:\n%s" % dump[-3000:])
    check(main and re.search(r"^<module>\(\.\.\.\)\n\t%s:\d+$" % re.escape(PYHOT), main[0], re.M),
          "no <module> with its line in the main thread's stack:\n%s" % dump[:3000])
    check(fn.search(main[0]),
          "the main thread's stack names none of its functions:\n%s" % main[0])
    check(st == 200 and re.search(r"#\t0x[0-9a-f]+\tpark\t%s:%d\n" % (re.escape(PYHOT), LINES["park"]),
                                  body1.decode()),
          "debug=1 lacks park's line:\n%s" % body1.decode()[-2000:])


@test
@figures
def python_frames_in_block_profile_and_trace():
    """The parked thread waits in a futex: the block profile's stack for it
    and the trace's samples name park and its callers, with lines."""
    f = PyFixture()
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=2", name="block", filename="block-delta"), "pyblock.pb.gz")
    st, _, body = http(pp.port, "/debug/pprof/trace?seconds=1.5&format=json&gz=1")
    pp.stop()
    f.stop()
    tr = py_traces(path, "delay")
    check(any("park" in fr and fr.index("park") < fr.index("<module>") if "<module>" in fr else "park" in fr
              for _, fr in tr), "no park in the block profile: %s" % tr[:5])
    check(st == 200, "trace status %d" % st)
    ev = json.loads(gzip.decompress(body).decode())["traceEvents"]
    frames = [n["callFrame"] for e in ev if e["ph"] == "P" and e["name"] == "ProfileChunk"
              for n in e["args"]["data"]["cpuProfile"]["nodes"]]
    alpha = [c for c in frames if c["functionName"] == "crunch_alpha"]
    check(alpha, "no crunch_alpha among the trace's samples")
    check(all(c["url"] == PYHOT and c["lineNumber"] >= 0 for c in alpha),
          "crunch_alpha without its file or line: %s" % alpha[:3])


@test
def python_off_gives_native_frames():
    """--python 0: the interpreter's frames as they are, no Python name."""
    f = PyFixture()
    pp = Podprof("--pid", str(f.pid), "--python", "0")
    path = save(get_profile(pp, "seconds=2&hz=200"), "py-native.pb.gz")
    log = pp.log()
    pp.stop()
    f.stop()
    tr = py_traces(path)
    names = {n for _, fr in tr for n in fr}
    check(EVAL in names, "no %s with --python 0" % EVAL)
    for n in ("crunch_alpha", "crunch_beta", "work", "<module>"):
        check(n not in names, "%s in a --python 0 profile" % n)
    check("python:" not in log, "--python 0 still looked for Python:\n%s" % log)


@test
def python_unknown_releases_stay_native_said_once():
    """CPython 3.13 (a Py_Version podprof has no layout for) and 3.10 (no
    Py_Version): native frames, and one log line each saying so, however
    many times podprof attaches."""
    missing = []
    for release, why in (("3.13", r"is CPython 3\.13\.\d+, a release whose layout podprof does not know"),
                         ("3.10", r"is a CPython without Py_Version \(before 3\.11\)")):
        python = pyenv(release)
        if not python:
            missing.append(release)
            continue
        f = PyFixture(python)
        pp = Podprof("--pid", str(f.pid))
        for i in range(2):
            path = save(get_profile(pp, "seconds=1&hz=200"), "py%s-%d.pb.gz" % (release, i))
            pp.wait_log(r"ptrace: detached pid=%d" % f.pid, 10)
        log = pp.log()
        pp.stop()
        f.stop()
        notes = [l for l in log.splitlines() if "python: " in l]
        check(len(notes) == 1 and re.search(why, notes[0]), "%s: log lines %r" % (release, notes))
        check(log.count("ptrace: attached pid=%d" % f.pid) == 2, "%s: not attached twice:\n%s" % (release, log))
        names = {n for _, fr in py_traces(path) for n in fr}
        check(EVAL in names and "crunch_alpha" not in names and "<module>" not in names,
              "%s: not native: %s" % (release, sorted(names)[:20]))
    if missing:
        raise Skip("CPython %s not installed (pyenv): unchecked" % " and ".join(missing))


@test
def python_frames_in_threadcreate():
    """threadcreate of a Python program: each creation's stack (the
    parent's, copied at its clone event) shows the Python code that started
    the thread: Thread.start, under spawn_workers at the line that calls it,
    under <module>."""
    if not os.path.exists(PYTHON):
        raise Skip("%s not installed" % PYTHON)
    proc = subprocess.Popen([PYTHON, PYSPAWN], stdout=subprocess.PIPE, text=True)
    PROCS.append(proc)
    m = re.match(r"ready (\d+)", proc.stdout.readline())
    check(m, "pyspawn did not get ready")
    lines = marked_lines(PYSPAWN)
    pp = Podprof("--pid", m.group(1), "--detach-grace-ms", "60000")
    get_profile(pp, "", name="threadcreate")   # creations are watched from here on
    want = ["Thread.start", "spawn_workers", "<module>"]
    deadline, made, lt = time.monotonic() + 20, 0, ""
    while made < 5 and time.monotonic() < deadline:
        path = save(get_profile(pp, "", name="threadcreate"), "pytc.pb.gz")
        made = sum(v for v, fr in count_traces(path, "threadcreate")
                   if [f for f in fr if f in want] == want)
    check(made >= 5, "%d creations under Thread.start <- spawn_workers <- <module>: %s" %
          (made, count_traces(path, "threadcreate")[:3]))
    lt = pprof("-traces", "-lines", "-sample_index=threadcreate", path)
    for fn, line in (("spawn_workers", lines["spawn"]), ("<module>", lines["module"])):
        check(re.search(r"%s .*pyspawn\.py:%d" % (re.escape(fn), line), lt),
              "no %s at pyspawn.py:%d in:\n%s" % (fn, line, lt[-2000:]))
    pp.stop()
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)
