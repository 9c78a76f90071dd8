#!/usr/bin/env python3
"""Helpers of the integration tests: fixture and podprof processes (ready
through pipes and log lines, never sleeps), raw HTTP, go tool pprof, and the
checks of a busy-fixture profile. Tests register with @test."""
import gzip
import json
import os
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
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("PODPROF_BUILD", "build/release"))
PODPROF = os.path.join(BUILD, "podprof")
BUSY = os.path.join(BUILD, "fixtures", "busy")
WAITER = os.path.join(BUILD, "fixtures", "waiter")
GRACE_MS = 300
TMP = None   # a scratch directory, set by the runner
TESTS = []
FIGURES = []   # names of the tests that compare shares, rates or times (make stress runs them)
PROCS = []
PODPROFS = []   # the Podprof instances of the running test (the runner reads their logs)


class Skip(Exception):
    pass


def test(fn):
    TESTS.append(fn)
    return fn


def figures(fn):
    """Marks a test whose checks compare shares, rates or times (against
    the target's own clocks or a client's figures): it must hold with every
    core taken, and make stress runs it again and again beside busy
    processes (tests/stress/figures.py)."""
    FIGURES.append(fn.__name__)
    return fn


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


# ---- processes --------------------------------------------------------------

def nspid(pid):
    """The PID a process has in its own (innermost) PID namespace."""
    with open("/proc/%d/status" % pid) as fh:
        return int(re.search(r"NSpid:\s+([\d\s]+)", fh.read()).group(1).split()[-1])


def find_descendant(root, pred):
    """The first of root and its descendants for which pred(pid) holds."""
    todo = [root]
    while todo:
        p = todo.pop()
        try:
            if pred(p):
                return p
            with open("/proc/%d/task/%d/children" % (p, p)) as fh:
                todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    raise AssertionError("no matching descendant of %d" % root)


class Fixture:
    """The busy fixture; ready when it writes 'ready <pid>' on a pipe."""

    def __init__(self, threads=1, sleepers=0, exe=BUSY, wrap=None, ack=False, extra=(), pass_fds=()):
        r, w = os.pipe()
        argv = [exe, "-t", str(threads), "-s", str(sleepers), "-r", str(w)] + list(extra)
        fds = [w]
        self.ack = None
        if ack:
            self.ack, aw = os.pipe()
            argv += ["-a", str(aw)]
            fds.append(aw)
        if wrap:
            argv = wrap(argv)
        self.proc = subprocess.Popen(argv, pass_fds=fds + list(pass_fds), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        PROCS.append(self.proc)
        for fd in fds:
            os.close(fd)
        ready, _, _ = select.select([r], [], [], 10)
        line = os.read(r, 64).decode() if ready else ""
        os.close(r)
        m = re.match(r"ready (\d+)", line)
        if not m:
            raise AssertionError("fixture did not get ready: %r %s" % (
                line, self.proc.stderr.read() if self.proc.poll() is not None else ""))
        self.pid = int(m.group(1))          # as the fixture sees itself
        # A wrapper may fork (nsenter --pid does): find the fixture by the
        # PID it sees itself as (the last NSpid).
        self.host_pid = find_descendant(self.proc.pid, lambda p: nspid(p) == self.pid) if wrap else self.pid

    def stop(self):
        """SIGTERM; returns the fixture's ground truth (share of hot_a in %)."""
        if self.proc.poll() is None:
            os.kill(self.host_pid, signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=10)
        self.output = out
        m = re.search(r"truth_a=([\d.]+)", out)
        return float(m.group(1)) if m else None


class Podprof:
    """podprof on an ephemeral port; ready when it logs its port."""

    def __init__(self, *args, env=None, prefix=()):
        e = dict(os.environ)
        e.update(env or {})
        self.proc = subprocess.Popen(list(prefix) + [PODPROF, "--listen", "127.0.0.1:0",
                                      "--detach-grace-ms", str(GRACE_MS)] + list(args),
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=e)
        PROCS.append(self.proc)
        PODPROFS.append(self)
        # Named by the test (flag or environment): PODPROF_BACKEND does not change it.
        self.backend_named = "--backend" in args or "PODPROF_BACKEND" in (env or {})
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._reader, daemon=True).start()
        line = self.wait_log(r"\(port (\d+)\)", 10)
        self.port = int(re.search(r"\(port (\d+)\)", line).group(1))

    def _reader(self):
        for raw in self.proc.stderr:
            with self.cv:
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.lines.append(None)
            self.cv.notify_all()

    def wait_log(self, pattern, timeout, start=0):
        """Blocks until a log line (from index start) matches; returns it."""
        deadline = time.monotonic() + timeout
        with self.cv:
            i = start
            while True:
                while i < len(self.lines):
                    l = self.lines[i]
                    if l is None:
                        raise AssertionError("podprof exited; log:\n" + self.log())
                    if re.search(pattern, l):
                        return l
                    i += 1
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no log line /%s/ within %ss; log:\n%s" % (pattern, timeout, self.log()))
                self.cv.wait(left)

    def log(self):
        with self.cv:
            return "\n".join(l for l in self.lines if l is not None)

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self):
        if self.proc.poll() is None:
            # Signal podprof itself, not a wrapper that forked it (nsenter).
            real = find_descendant(self.proc.pid, lambda p: os.readlink("/proc/%d/exe" % p) == PODPROF)
            os.kill(real, signal.SIGTERM)
        rc = self.proc.wait(timeout=15)
        # A clean shutdown (and, under ASan, no leak) is part of every test.
        check(rc == 0, "podprof exited %d on SIGTERM; log:\n%s" % (rc, self.log()[-3000:]))
        return rc


def podprof_pid(pp):
    return find_descendant(pp.proc.pid, lambda p: os.readlink("/proc/%d/exe" % p) == PODPROF)


def http(port, path, method="GET", body=b"", headers=None, timeout=60):
    """One request on a fresh connection; returns (status, headers, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    h = {"Host": "127.0.0.1", "Connection": "close"}
    h.update(headers or {})
    if body or method == "POST":
        h["Content-Length"] = str(len(body))
    req = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n"
    s.sendall(req.encode() + body)
    return read_response(s, method == "HEAD")


def read_response(s, head=False):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise AssertionError("connection closed before headers: %r" % data)
        data += chunk
    head_raw, rest = data.split(b"\r\n\r\n", 1)
    lines = head_raw.decode().split("\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for l in lines[1:]:
        k, v = l.split(":", 1)
        hdrs[k.strip().lower()] = v.strip()
    if head:
        s.close()
        return status, hdrs, b""
    if "content-length" in hdrs:
        n = int(hdrs["content-length"])
        buf = bytearray(rest)   # appends in place: bodies of 100 MB are read too
        while len(buf) < n:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
        s.close()
        return status, hdrs, bytes(buf[:n])
    # No length (other servers, e.g. pprof's web UI): read to close, de-chunk.
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        rest += chunk
    s.close()
    if hdrs.get("transfer-encoding") == "chunked":
        body, i = b"", 0
        while True:
            j = rest.index(b"\r\n", i)
            size = int(rest[i:j].split(b";")[0], 16)
            if size == 0:
                break
            body += rest[j + 2:j + 2 + size]
            i = j + 2 + size + 2
        rest = body
    return status, hdrs, rest


def per_thread(pid, name):
    """{tid: text of /proc/<pid>/task/<tid>/<name>} of every thread of pid
    (threads that end meanwhile are left out)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/%s" % (pid, tid, name)) as fh:
                out[int(tid)] = fh.read()
        except OSError:
            pass
    return out


def tracer_pid(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"TracerPid:\s+(\d+)", f.read()).group(1))


def read_lines(fd, n, timeout, what):
    """n lines from a pipe's raw fd (several writers may land in one read:
    a select() on a buffered stream after a readline() that took two lines
    would wait for a third), within timeout seconds."""
    buf = b""
    deadline = time.monotonic() + timeout
    while buf.count(b"\n") < n:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        check(ready, "%s: %d of %d lines within %ss: %r" % (what, buf.count(b"\n"), n, timeout, buf))
        chunk = os.read(fd, 4096)
        check(chunk, "%s: the pipe closed after %r" % (what, buf))
        buf += chunk
    return buf.decode(errors="replace").splitlines()[:n]


def wait_untraced(pid, timeout):
    deadline = time.monotonic() + timeout
    while tracer_pid(pid) != 0:
        check(time.monotonic() < deadline, "pid %d still traced after %ss" % (pid, timeout))
        time.sleep(0.02)


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def pprof(*args):
    env = dict(os.environ, PPROF_TMPDIR=TMP, HOME=TMP)
    r = subprocess.run(["go", "tool", "pprof"] + list(args), capture_output=True, text=True,
                       timeout=120, env=env)
    check(r.returncode == 0, "go tool pprof %s failed: %s" % (" ".join(args), r.stderr))
    return r.stdout


def save(body, name):
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(body)
    return path


def get_profile(pp, query, name="profile", filename=None):
    """A gzipped profile.proto download, held to Go's headers and to the
    scrapers' rules by another vendor's decoder."""
    return check_served(http(pp.port, "/debug/pprof/%s?%s" % (name, query)), name, filename)


def check_served(answer, name="profile", filename=None):
    """get_profile's checks of an answer (status, headers, body) already
    fetched: for a test that reads the target's clock right after the
    answer, before the decoder (node) runs."""
    st, h, body = answer
    check(st == 200, "%s status %d: %r" % (name, st, body[:200]))
    check(h.get("content-type") == "application/octet-stream", "content-type %r" % h.get("content-type"))
    check(h.get("content-disposition") == 'attachment; filename="%s"' % (filename or name),
          "disposition %r" % h)
    check("content-encoding" not in h, "profile must not carry Content-Encoding")
    check(body[:2] == b"\x1f\x8b", "profile body is not gzip")
    # Every served profile is also decoded by another vendor's decoder and
    # held to the scrapers' rules (Parca: IDs 1..n; Alloy: non-zero addresses).
    path = save(body, "served-%d.pb.gz" % threading.get_ident())
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "integration", "check_profile.mjs"), path],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and r.stdout.startswith("ok"), "pprof-format check: %s%s" % (r.stdout, r.stderr))
    return body


class ProfileInBackground:
    """A CPU profile fetched on a thread; returns once podprof has logged
    that the session started. result() waits for the body."""

    def __init__(self, pp, query):
        self.body = None
        self.thread = threading.Thread(target=self._fetch, args=(pp, query))
        self.thread.start()
        pp.wait_log(r"profile: started", 10)

    def _fetch(self, pp, query):
        self.body = get_profile(pp, query)

    def result(self, timeout=30):
        self.thread.join(timeout)
        check(self.body is not None, "profile failed")
        return self.body


def traces(path, index="cpu", extra=()):
    """Parses `go tool pprof -traces`: list of (value_ns, [leaf..root])
    (a count for an index without unit, "samples"); extra: more options
    (-tagfocus=...)."""
    out = pprof("-traces", "-sample_index=" + index, *extra, path)
    result = []
    for block in out.split("-----------+-------------------------------------------------------"):
        frames, value = [], None
        for line in block.splitlines():
            m = re.match(r"^\s+([\d.]+)(ns|us|ms|s)?\s+(\S.*)$", line)
            if m:
                mult = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, None: 1}[m.group(2)]
                value = float(m.group(1)) * mult
                frames = [m.group(3).strip()]
            elif value is not None and line.strip():
                frames.append(line.strip())
        if value is not None:
            result.append((value, frames))
    return result


def profile_window(path):
    """(time_nanos, duration_nanos) of a gzipped profile.proto: when its
    window began (wall clock) and how long it lasted (fields 9 and 10)."""
    with gzip.open(path, "rb") as fh:
        b = fh.read()
    i, got = 0, {}

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7f) << shift
            shift += 7
            if c < 0x80:
                return v
    while i < len(b):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            got[field] = varint()
        elif wire == 2:
            n = varint()
            i += n
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise AssertionError("profile.proto: wire type %d" % wire)
    return got.get(9, 0), got.get(10, 0)


def edge_slack(path, t0, t1, amount):
    """What of `amount` (a clock's count between two readings at wall times
    t0 and t1, ns) may lie outside the window of the profile at path: its
    rate over the readings times their distances from the window's edges.
    Readings taken as podprof logs a session's start and end come late on a
    loaded machine, the end's after the profile is built."""
    start, length = profile_window(path)
    return amount / max(t1 - t0, 1) * (abs(t0 - start) + abs(t1 - (start + length)))


# Unnamed frames are "module+0xoffset"; the dynamic loader may show up
# resolving a lazy binding (_dl_runtime_resolve_xsave, _dl_fixup, ...).
LIBC_RE = re.compile(r"^(libc\.so\.6|ld-linux-x86-64\.so\.2)\+0x[0-9a-f]+$|^_dl_[a-z_]+$")
MAIN_TAIL = ["main", "__libc_start_call_main", "__libc_start_main", "_start"]
THREAD_TAIL = ["start_thread", "__clone3"]
# The leaf frames podprof puts over CPU no sample carried (ptrace/profile/profile.h).
MARK_UNSAMPLED = "[exited threads' CPU, not sampled]"
MARK_PENDING = "[CPU since the thread's last sample]"
PODPROF_MARKS = {MARK_UNSAMPLED, MARK_PENDING}
KNOWN = {"hot_a", "hot_b", "level3", "level2", "level1", "worker",
         # a sleeper caught while it runs between naps
         "sleeper", "clock_nanosleep", "__clock_nanosleep", "__nanosleep", "nanosleep"} | \
    set(MAIN_TAIL) | set(THREAD_TAIL)
# What threads run while handling SIGUSR1 (the handler, its write and the
# cancellation point write is, named with libc's debug file; sleepers).
SIGNAL_NAMES = {"on_usr1", "__restore_rt", "__write", "write", "sleeper", "clock_nanosleep", "__nanosleep",
                "__pthread_enable_asynccancel", "__GI___pthread_enable_asynccancel",
                "__pthread_disable_asynccancel", "__GI___pthread_disable_asynccancel"}


LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
_LIBC_NAMES = None


def elf_functions(path, types=("FUNC",)):
    """(value, size, name) of the symbols of those types in path's symbol
    tables (readelf -sW; a .dynsym name keeps its @version)."""
    syms = []
    for line in subprocess.run(["readelf", "-sW", path], capture_output=True, text=True).stdout.splitlines():
        p = line.split()
        if len(p) >= 8 and p[3] in types:
            syms.append((int(p[1], 16), int(p[2], 0), p[7]))
    return syms


def libc_debug_file():
    """libc6-dbg's file for LIBC, found by its build-id (scripts/packages.txt),
    or None if absent."""
    m = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(["readelf", "-n", LIBC], capture_output=True,
                                                           text=True).stdout)
    dbg = m and "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1)[:2], m.group(1)[2:])
    return dbg if dbg and os.path.exists(dbg) else None


def libc_function_names():
    """The function names podprof can give a frame in libc: its .dynsym and
    its debug file's symbol table."""
    global _LIBC_NAMES
    if _LIBC_NAMES is None:
        _LIBC_NAMES = set()
        for f in filter(None, (LIBC, libc_debug_file())):
            _LIBC_NAMES.update(name.split("@")[0] for _, _, name in elf_functions(f, ("FUNC", "IFUNC")))
    return _LIBC_NAMES


class PltFrames:
    """Unnamed frames in an executable's PLT ("busy+0x2020"): lazy binding
    of an imported function's first call runs there, without a symbol."""

    def __init__(self, exe):
        self.name = os.path.basename(exe)
        out = subprocess.run(["readelf", "-SW", exe], capture_output=True, text=True).stdout
        self.ranges = []
        for m in re.finditer(r"\]\s+\.plt(?:\.sec|\.got)?\s+PROGBITS\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", out):
            lo = int(m.group(1), 16)
            self.ranges.append((lo, lo + int(m.group(2), 16)))

    def __contains__(self, frame):
        m = re.match(r"^(.+)\+0x([0-9a-f]+)$", frame)
        return bool(m and m.group(1) == self.name and
                    any(lo <= int(m.group(2), 16) < hi for lo, hi in self.ranges))


def steal_ns():
    """The time the host took from this machine's CPUs (all of them, /proc/stat's steal), in ns."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) * 1e9 / os.sysconf("SC_CLK_TCK")


def check_clock_over(path, used, steal):
    """A perf_event profile's clock_over_ns (the kernel's cpu-clock past
    the process's CPU clock, taken off its stacks) is mostly time the host
    took from its threads: at most the machine's steal over the window
    (steal, from steal_ns() before it to now), and 1 % and 5 ms (quiet, a
    busy thread's two clocks part by 0.1-0.4 %; one that forks and waits
    a thousand times a second, by 2 %). More would be a thread's CPU
    counted twice, which the rescaling would hide. Returns it in ns."""
    m = re.search(r"clock_over_ns=(\d+)", pprof("-raw", path))
    over = int(m.group(1)) if m else 0
    took = steal_ns() - steal
    check(over <= took + 0.01 * used + 5e6,
          "the samples carried %.1f ms more than the process used, the host took %.1f ms" % (
              over / 1e6, took / 1e6))
    return over


def share_bound(share, n, tol, windows=1):
    """How far a share (in %) of n samples may be from another's: tol,
    or 4.5 standard deviations of its sampling noise, if more; windows=2
    for the difference of two windows of n samples each."""
    p = share / 100
    return max(tol, 4.5 * 100 * (windows * p * (1 - p) / n) ** 0.5 if n else 100.0)


def check_busy_profile(path, truth_a=None, tol=3.0, extra=(), min_hot=0.9, main_tails=(MAIN_TAIL,),
                       exe=None):
    """Names, complete stacks and the hot_a share of a busy fixture profile."""
    tr = traces(path)
    check(tr, "no samples")
    plt = PltFrames(exe) if exe else ()
    a = b = total = 0.0
    for value, frames in tr:
        total += value
        if frames and frames[0] in PODPROF_MARKS:
            frames = frames[1:]   # CPU settled on a sampled stack: that stack's, as the user reads it
            if not frames:
                continue          # settled on no stack: a thread no tick sampled
        if len(frames) > 2 and frames[1] == "__restore_rt" and frames[0] == frames[2]:
            # perf_event: a sample the kernel took while it set up or took
            # down a signal frame has the interrupted PC with the frame's SP
            # (seen once in four runs of signals_delivered_exactly_once_...
            # at 1 kHz): the interrupted function, twice around the
            # trampoline. Read as the interrupted stack (known, left as it is).
            frames = frames[2:]
        for f in frames:
            check(f in KNOWN or f in extra or f in plt or LIBC_RE.match(f) or f.startswith("[vdso]") or f.startswith("linux-vdso"),
                  "unexpected frame name %r in %s" % (f, frames))
        if frames[0] in ("hot_a", "hot_b"):
            want = [frames[0], "level3", "level2", "level1", "worker"]
            check(frames[:5] == want, "incomplete stack %s" % frames)
            tail = frames[5:]
            check(tail in list(main_tails) + [THREAD_TAIL], "stack does not reach main/start_thread: %s" % frames)
            if frames[0] == "hot_a":
                a += value
            else:
                b += value
    check(a + b > min_hot * total, "hot_a+hot_b only %.1f%% of samples" % (100 * (a + b) / total))
    share = 100 * a / (a + b)
    if truth_a is not None:
        # tol, or 4.5 standard deviations of the sampling noise of the
        # samples actually taken, if more: on a machine whose cores other
        # processes take, the fixture runs less and is sampled less.
        n = sum(v for v, fr in traces(path, "samples") if fr[0] in ("hot_a", "hot_b"))
        lim = share_bound(share, n, tol)
        check(abs(share - truth_a) <= lim, "hot_a share %.2f%% vs truth %.2f%% (%d samples: within %.2f)" % (
            share, truth_a, n, lim))
    return share


# ---- tests ------------------------------------------------------------------
