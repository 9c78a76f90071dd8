#!/usr/bin/env python3
"""Black-box tests of the built podprof against fixture targets, judged by
the real client (go tool pprof from Debian's golang-go).

    python3 tests/integration/run.py build/release [test-name ...]

Prints PASS/FAIL/SKIP <name> per test and a tally. Every process started is
killed at the end; readiness comes from pipes and log lines, never sleeps.
"""
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
BUILD = os.path.join(ROOT, sys.argv[1] if len(sys.argv) > 1 else "build/release")
PODPROF = os.path.join(BUILD, "podprof")
BUSY = os.path.join(BUILD, "fixtures", "busy")
GRACE_MS = 300
TESTS = []
PROCS = []


class Skip(Exception):
    pass


def test(fn):
    TESTS.append(fn)
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

    def __init__(self, threads=1, sleepers=0, exe=BUSY, wrap=None, ack=False, extra=()):
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
        self.proc = subprocess.Popen(argv, pass_fds=fds, stdout=subprocess.PIPE,
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
        while len(rest) < n:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
        s.close()
        return status, hdrs, rest[:n]
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


def tracer_pid(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(re.search(r"TracerPid:\s+(\d+)", f.read()).group(1))


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


def get_profile(pp, query):
    st, h, body = http(pp.port, "/debug/pprof/profile?" + query)
    check(st == 200, "profile status %d: %r" % (st, body[:200]))
    check(h.get("content-type") == "application/octet-stream", "content-type %r" % h.get("content-type"))
    check(h.get("content-disposition") == 'attachment; filename="profile"', "disposition %r" % h)
    check("content-encoding" not in h, "profile must not carry Content-Encoding")
    check(body[:2] == b"\x1f\x8b", "profile body is not gzip")
    # Every served profile is also decoded by another vendor's decoder and
    # held to the scrapers' rules (Parca: IDs 1..n; Alloy: non-zero addresses).
    path = save(body, "served-%d.pb.gz" % threading.get_ident())
    r = subprocess.run(["node", os.path.join(ROOT, "tests", "integration", "check_profile.mjs"), path],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and r.stdout.startswith("ok"), "pprof-format check: %s%s" % (r.stdout, r.stderr))
    return body


def traces(path):
    """Parses `go tool pprof -traces`: list of (value_ns, [leaf..root])."""
    out = pprof("-traces", "-sample_index=cpu", path)
    result = []
    for block in out.split("-----------+-------------------------------------------------------"):
        frames, value = [], None
        for line in block.splitlines():
            m = re.match(r"^\s+([\d.]+)(ns|us|ms|s)\s+(\S.*)$", line)
            if m:
                mult = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[m.group(2)]
                value = float(m.group(1)) * mult
                frames = [m.group(3).strip()]
            elif value is not None and line.strip():
                frames.append(line.strip())
        if value is not None:
            result.append((value, frames))
    return result


# Unnamed frames are "module+0xoffset"; the dynamic loader may show up
# resolving a lazy binding (_dl_runtime_resolve_xsave, _dl_fixup, ...).
LIBC_RE = re.compile(r"^(libc\.so\.6|ld-linux-x86-64\.so\.2)\+0x[0-9a-f]+$|^_dl_[a-z_]+$")
MAIN_TAIL = ["main", "__libc_start_call_main", "__libc_start_main", "_start"]
THREAD_TAIL = ["start_thread", "__clone3"]
KNOWN = {"hot_a", "hot_b", "level3", "level2", "level1", "worker",
         # a sleeper caught while it runs between naps
         "sleeper", "clock_nanosleep", "__clock_nanosleep", "__nanosleep", "nanosleep"} | \
    set(MAIN_TAIL) | set(THREAD_TAIL)
# What threads run while handling SIGUSR1 (the handler, its write, sleepers).
SIGNAL_NAMES = {"on_usr1", "__restore_rt", "__write", "write", "sleeper", "clock_nanosleep", "__nanosleep"}


def check_busy_profile(path, truth_a=None, tol=3.0, extra=(), min_hot=0.9):
    """Names, complete stacks and the hot_a share of a busy fixture profile."""
    tr = traces(path)
    check(tr, "no samples")
    a = b = total = 0.0
    for value, frames in tr:
        total += value
        for f in frames:
            check(f in KNOWN or f in extra or LIBC_RE.match(f) or f.startswith("[vdso]") or f.startswith("linux-vdso"),
                  "unexpected frame name %r in %s" % (f, frames))
        if frames[0] in ("hot_a", "hot_b"):
            want = [frames[0], "level3", "level2", "level1", "worker"]
            check(frames[:5] == want, "incomplete stack %s" % frames)
            tail = frames[5:]
            check(tail in (MAIN_TAIL, THREAD_TAIL), "stack does not reach main/start_thread: %s" % frames)
            if frames[0] == "hot_a":
                a += value
            else:
                b += value
    check(a + b > min_hot * total, "hot_a+hot_b only %.1f%% of samples" % (100 * (a + b) / total))
    share = 100 * a / (a + b)
    if truth_a is not None:
        check(abs(share - truth_a) <= tol, "hot_a share %.2f%% vs truth %.2f%%" % (share, truth_a))
    return share


# ---- tests ------------------------------------------------------------------

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
def http_index_redirect_and_head():
    f = Fixture(threads=1, sleepers=3)
    pp = Podprof("--pid", str(f.pid))
    st, h, body = http(pp.port, "/debug/pprof")
    check(st == 301 and h.get("location") == "/debug/pprof/", "redirect: %d %r" % (st, h))
    st, h, body = http(pp.port, "/debug/pprof/")
    text = body.decode()
    check(st == 200 and h["content-type"] == "text/html; charset=utf-8", "index: %d %r" % (st, h))
    check(h.get("x-content-type-options") == "nosniff", "nosniff missing")
    for s in ("<title>/debug/pprof/</title>", "Types of profiles available:",
              "<tr><td>0</td><td><a href='profile?debug=1'>profile</a></td></tr>",
              "<a href='cmdline?debug=1'>cmdline</a>", "Profile Descriptions:",
              "<tr><td>pid</td><td>%d</td></tr>" % f.pid, "<tr><td>threads</td><td>4</td></tr>",
              "<tr><td>comm</td><td>busy</td></tr>"):
        check(s in text, "index lacks %r" % s)
    st, h, body = http(pp.port, "/debug/pprof/", method="HEAD")
    check(st == 200 and body == b"" and int(h["content-length"]) > 500, "HEAD: %d %r" % (st, h))
    st, h, body = http(pp.port, "/healthz")
    check(st == 200 and body == b"ok\n", "healthz")
    pp.stop(), f.stop()


@test
def http_errors_in_go_shape():
    f = Fixture()
    pp = Podprof("--pid", str(f.pid), "--max-header-bytes", "2048")

    def go_err(path, status, msg, method="GET"):
        st, h, body = http(pp.port, path, method=method)
        check(st == status, "%s: status %d, want %d (%r)" % (path, st, status, body))
        check(h.get("x-go-pprof") == "1" and h.get("content-type") == "text/plain; charset=utf-8",
              "%s: not Go-shaped: %r" % (path, h))
        check(body.decode() == msg + "\n", "%s: body %r" % (path, body))

    go_err("/debug/pprof/nonesuch", 404, "Unknown profile")
    go_err("/debug/pprof/profile/", 404, "Unknown profile")
    go_err("/debug/pprof/profile?hz=0", 400, 'invalid value for "hz" - must be an integer from 1 to 1000')
    go_err("/debug/pprof/profile?hz=abc", 400, 'invalid value for "hz" - must be an integer from 1 to 1000')
    go_err("/debug/pprof/profile?hz=1001", 400, 'invalid value for "hz" - must be an integer from 1 to 1000')
    go_err("/debug/pprof/profile?seconds=99999999", 400, "profile duration exceeds the limit of 86400 seconds")
    st, h, body = http(pp.port, "/nothing/here")
    check(st == 404 and body == b"404 page not found\n" and "x-go-pprof" not in h, "mux 404")
    st, h, body = http(pp.port, "/debug/pprof/profile", method="POST")
    check(st == 405 and h.get("allow") == "GET, HEAD" and body == b"Method Not Allowed\n", "405")
    st, h, body = http(pp.port, "/debug/pprof/", headers={"X-Big": "x" * 4000})
    check(st == 431, "oversized headers: %d" % st)
    s = socket.create_connection(("127.0.0.1", pp.port))
    s.sendall(b"\x16\x03\x01garbage that is not http\r\n\r\n")
    st, h, body = read_response(s)
    check(st == 400, "garbage: %d" % st)
    # Pipelined requests on one connection are answered in order.
    s = socket.create_connection(("127.0.0.1", pp.port), timeout=10)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /debug/pprof/nonesuch HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while data.count(b"HTTP/1.1 ") < 2 or not data.endswith(b"Unknown profile\n"):
        chunk = s.recv(65536)
        check(chunk, "pipelined: connection closed early: %r" % data)
        data += chunk
    check(data.index(b"200 OK") < data.index(b"404 Not Found"), "pipelined order")
    s.close()
    # Still serves after all that.
    check(http(pp.port, "/healthz")[0] == 200, "server unhealthy after bad requests")
    pp.stop(), f.stop()


@test
def http_pipelined_flood():
    """A megabyte of pipelined requests is answered in order, one by one."""
    f = Fixture()
    pp = Podprof("--pid", str(f.pid))
    s = socket.create_connection(("127.0.0.1", pp.port), timeout=20)
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    n = (1 << 20) // len(req)
    s.sendall(req * n)
    got = b""
    while got.count(b"\r\n\r\nok\n") < n:
        chunk = s.recv(1 << 20)
        check(chunk, "closed after %d of %d answers" % (got.count(b"ok\n"), n))
        got += chunk
    s.close()
    pp.stop(), f.stop()


@test
def cmdline_like_go():
    f = Fixture(threads=1, sleepers=2)
    pp = Podprof("--pid", str(f.pid))
    st, h, body = http(pp.port, "/debug/pprof/cmdline")
    with open("/proc/%d/cmdline" % f.pid, "rb") as fh:
        want = fh.read()
    check(st == 200 and h["content-type"] == "text/plain; charset=utf-8", "cmdline %d %r" % (st, h))
    check(body == want[:-1] and not body.endswith(b"\0") and body.split(b"\0")[0] == BUSY.encode(),
          "cmdline body %r" % body)
    pp.stop(), f.stop()


@test
def cpu_profile_names_stacks_and_shares():
    f = Fixture(threads=2, sleepers=2)
    pp = Podprof("--pid", str(f.pid))
    # 2 threads x 400 Hz x 5 s = 4000 samples: a 3-point tolerance is over 4
    # standard deviations of the sampling noise (at 100 Hz it would be 2).
    body = get_profile(pp, "seconds=5&hz=400")
    path = save(body, "cpu.pb.gz")
    truth = f.stop()
    share = check_busy_profile(path, truth)
    raw = pprof("-raw", path)
    check("PeriodType: cpu nanoseconds" in raw, "period type")
    check(re.search(r"Duration: [45]\.\d\d", raw), "duration: %s" % raw[:400])
    check("Period: 2500000" in raw, "hz=400 gives a 2.5 ms period")
    check("samples/count cpu/nanoseconds" in raw, "sample types")
    build_id = subprocess.run(["readelf", "-n", BUSY], capture_output=True, text=True).stdout
    bid = re.search(r"Build ID: ([0-9a-f]+)", build_id).group(1)
    check(re.search(r"^\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x[0-9a-f]+ %s %s \[FN\]$" % (re.escape(BUSY), bid), raw, re.M),
          "no mapping of %s with build-id %s and [FN]:\n%s" % (BUSY, bid, raw[-1500:]))
    check(re.search(r"libc\.so\.6 [0-9a-f]{40} \[FN\]", raw), "libc mapping with build-id")
    top = pprof("-top", path)
    check(re.search(r"hot_a\s*$", top, re.M) and re.search(r"hot_b\s*$", top, re.M), top)
    print("  info: hot_a share %.2f%% (truth %.2f%%)" % (share, truth))
    pp.stop()


@test
def every_running_thread_gets_its_turn():
    """More running threads than may be stopped per tick (--max-stopped 1):
    the selection rotates, so each thread is sampled about equally, and each
    sample is labelled with its thread's name and tid."""
    f = Fixture(threads=4)
    pp = Podprof("--pid", str(f.pid), "--max-stopped", "1")
    path = save(get_profile(pp, "seconds=3&hz=500"), "rr.pb.gz")
    tags = pprof("-tags", path)
    shares = {int(t): float(p) for p, t in re.findall(r"\(\s*([\d.]+)%\): (\d+)$", tags, re.M)}
    tids = set(int(t) for t in os.listdir("/proc/%d/task" % f.pid))
    check(set(shares) == tids, "sampled tids %s, threads %s" % (sorted(shares), sorted(tids)))
    for tid, share in shares.items():
        check(10 <= share <= 40, "tid %d has %.1f%% of the samples:\n%s" % (tid, share, tags))
    for name in ("busy", "worker-1", "worker-2", "worker-3"):
        check(re.search(r"%%\): %s$" % name, tags, re.M), "no thread label %s:\n%s" % (name, tags))
    pp.stop(), f.stop()


def libc_debug_symbols():
    """FUNC symbols of libc's debug file (libc6-dbg), or None if absent."""
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    m = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(["readelf", "-n", libc], capture_output=True,
                                                           text=True).stdout)
    dbg = m and "/usr/lib/debug/.build-id/%s/%s.debug" % (m.group(1)[:2], m.group(1)[2:])
    if not dbg or not os.path.exists(dbg):
        return None
    syms = []
    for line in subprocess.run(["readelf", "-sW", dbg], capture_output=True, text=True).stdout.splitlines():
        p = line.split()
        if len(p) >= 8 and p[3] == "FUNC":
            syms.append((int(p[1], 16), int(p[2], 0), p[7]))
    return syms


@test
def dynsym_only_libc_is_honestly_unnamed():
    """Without libc's debug file, Debian's libc has only .dynsym: internal
    functions (start_thread, __clone3, __libc_start_call_main) must come out
    as libc.so.6+0x... at their true offsets, never as the nearest export."""
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid), env={"PODPROF_DEBUG_DIR": "/nonexistent"})
    path = save(get_profile(pp, "seconds=2"), "dynsym.pb.gz")
    pp.stop(), f.stop()
    tails = set()
    for value, frames in traces(path):
        if frames[0] in ("hot_a", "hot_b"):
            tails.add(tuple(frames[5:]))
    check(tails, "no hot stacks")
    syms = libc_debug_symbols()
    want = {"main": ["main", "__libc_start_call_main", "__libc_start_main", "_start"],
            "thread": ["start_thread", "__clone3"]}
    for tail in tails:
        shape = ["main", "LIBC", "__libc_start_main", "_start"] if tail[0] == "main" else ["LIBC", "LIBC"]
        got = ["LIBC" if LIBC_RE.match(fr) else fr for fr in tail]
        check(got == shape, "tail %s is not %s" % (list(tail), shape))
        if syms is None:
            continue
        truth = want["main" if tail[0] == "main" else "thread"]
        for fr, true_name in zip(tail, truth):
            if not LIBC_RE.match(fr):
                continue
            off = int(fr.split("+")[1], 16)
            names = [n for a, sz, n in syms if a <= off < a + max(sz, 1)]
            check(true_name in names, "%s is really %s, expected %s" % (fr, names, true_name))
    if syms is None:
        raise Skip("checked shapes only: libc6-dbg is not installed to verify the offsets")


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
def bare_url_with_go_tool_pprof():
    f = Fixture(threads=1)
    pp = Podprof("--pid", str(f.pid))
    out = pprof("-seconds", "2", "-top", "http://127.0.0.1:%d" % pp.port)
    check(re.search(r"hot_a\s*$", out, re.M) and "worker" in out, out)
    check("Duration: 2" in out, "bare URL should fetch a 2 s /debug/pprof/profile: %s" % out[:300])
    pp.stop(), f.stop()


@test
def pprof_web_ui_reads_the_profile():
    f = Fixture(threads=1)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=1"), "web.pb.gz")
    pp.stop(), f.stop()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, PPROF_TMPDIR=TMP, HOME=TMP)
    web = subprocess.Popen(["go", "tool", "pprof", "-no_browser", "-http=127.0.0.1:%d" % port, path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    PROCS.append(web)
    line = web.stdout.readline()   # "Serving web UI on http://127.0.0.1:PORT"
    check("Serving web UI" in line, "pprof web UI did not start: %r" % line)
    # /ui/ (the graph view) needs graphviz on the client; the rest read only the profile.
    for page in ("/ui/top", "/ui/flamegraph", "/ui/peek?f=hot_a", "/ui/source?f=level3"):
        st, h, body = http(port, page)
        check(st == 200, "%s: %d" % (page, st))
        check(page == "/ui/source?f=level3" or b"hot_a" in body, "%s does not show hot_a" % page)
    web.kill()


@test
def overlapping_sessions_share_one_sampler():
    f = Fixture(threads=2)
    pp = Podprof("--pid", str(f.pid))
    results = {}

    def fetch(name, q):
        try:
            results[name] = get_profile(pp, q)
        except Exception as e:  # reported below
            results[name] = e

    # A at 500 Hz takes every other tick of B's 1000 Hz; both get ~4000
    # samples so the share check is far above sampling noise.
    ta = threading.Thread(target=fetch, args=("a", "seconds=4&hz=500"))
    ta.start()
    pp.wait_log(r"profile: started .*seconds=4", 10)
    tb = threading.Thread(target=fetch, args=("b", "seconds=2&hz=1000"))
    tb.start()
    pp.wait_log(r"profile: started .*seconds=2 hz=1000 sessions=2", 10)
    ta.join(30), tb.join(30)
    truth = f.stop()
    for name, dur in (("a", r"Duration: [34]\.\d\d"), ("b", r"Duration: [12]\.\d\d")):
        check(isinstance(results.get(name), bytes), "session %s: %r" % (name, results.get(name)))
        path = save(results[name], name + ".pb.gz")
        check_busy_profile(path, truth)
        check(re.search(dur, pprof("-raw", path)), "session %s duration" % name)
    check("Period: 1000000" in pprof("-raw", os.path.join(TMP, "b.pb.gz")), "hz=1000 period")
    check("Period: 2000000" in pprof("-raw", os.path.join(TMP, "a.pb.gz")), "hz=500 period")
    pp.stop()


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


@test
def client_disconnect_ends_session():
    f = Fixture(threads=1)
    pp = Podprof("--pid", str(f.pid))
    s = socket.create_connection(("127.0.0.1", pp.port))
    s.sendall(b"GET /debug/pprof/profile?seconds=30 HTTP/1.1\r\nHost: x\r\n\r\n")
    pp.wait_log(r"profile: started", 10)
    t0 = time.monotonic()
    s.close()
    pp.wait_log(r"profile: done .*\(client gone\)", 5)
    wait_untraced(f.pid, 5)
    check(time.monotonic() - t0 < 10, "session outlived its client")
    check(http(pp.port, "/healthz")[0] == 200, "server after disconnect")
    pp.stop(), f.stop()


@test
def symbol_get_and_post():
    f = Fixture(threads=1)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=1"), "sym.pb.gz")
    raw = pprof("-raw", path)
    m = re.search(r"^\s+\d+: (0x[0-9a-f]+) M=\d+ hot_a ", raw, re.M)
    check(m, "no hot_a location in %s" % raw)
    addr = m.group(1)
    st, h, body = http(pp.port, "/debug/pprof/symbol?%s+0x10" % addr)
    check(st == 200 and body.decode() == "num_symbols: 1\n%s hot_a\n" % addr, "GET symbol: %r" % body)
    st, h, body = http(pp.port, "/debug/pprof/symbol", method="POST", body=("%s+%d" % (addr, int(addr, 16))).encode())
    check(st == 200 and body.decode() == "num_symbols: 1\n%s hot_a\n%s hot_a\n" % (addr, addr), "POST: %r" % body)
    st, h, body = http(pp.port, "/debug/pprof/symbol")
    check(st == 200 and body == b"num_symbols: 1\n", "empty GET: %r" % body)
    st, h, body = http(pp.port, "/debug/pprof/symbol?0xzz")
    check(st == 400 and h.get("x-go-pprof") == "1", "bad symbol: %d" % st)
    pp.stop(), f.stop()


@test
def deleted_binary_still_symbolized():
    d = tempfile.mkdtemp(dir=TMP)
    exe = os.path.join(d, "busy-deleted")
    shutil.copy(BUSY, exe)
    f = Fixture(threads=1, exe=exe)
    os.unlink(exe)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=2"), "del.pb.gz")
    check_busy_profile(path)
    raw = pprof("-raw", path)
    check(re.search(r" %s [0-9a-f]{40} \[FN\]$" % re.escape(exe), raw, re.M), "mapping path of deleted exe:\n%s" % raw[-800:])
    pp.stop(), f.stop()


@test
def private_mount_namespace_target():
    if not shutil.which("unshare"):
        raise Skip("unshare not installed")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot create a mount namespace here: %s" % probe.stderr.decode().strip())
    d = tempfile.mkdtemp(dir=TMP)
    hidden = os.path.join(d, "hidden")
    os.mkdir(hidden)
    exe = os.path.join(hidden, "busy-private")

    def wrap(argv):
        return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount -t tmpfs none "$1" && cp "$2" "$3" && shift 3 && exec "$@"', "sh",
                hidden, BUSY, exe, exe] + argv[1:]

    f = Fixture(threads=1, wrap=wrap)
    check(not os.path.exists(exe), "the binary should not be visible from our mount namespace")
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=2"), "ns.pb.gz")
    check_busy_profile(path)
    check(exe in pprof("-raw", path), "mapping should name the path as the target sees it")
    pp.stop(), f.stop()


@test
def minidebuginfo_binary_symbolized():
    exe = BUSY + "-minidebug"
    if not os.path.exists(exe):
        raise Skip("%s not built" % exe)
    f = Fixture(threads=1, exe=exe)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=2"), "mini.pb.gz")
    check_busy_profile(path)
    pp.stop(), f.stop()


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


@test
def vdso_frames_unwind_to_their_callers():
    """clock_gettime runs in the vDSO, which has no file: its unwind table is
    read from target memory, so stacks continue to the caller."""
    f = Fixture(threads=1, extra=["-v", "2"])
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=3&hz=500"), "vdso.pb.gz")
    in_vdso = 0
    for value, frames in traces(path):
        if "vdso_level" not in frames:
            continue
        i = frames.index("vdso_level")
        check(frames[i:] == ["vdso_level", "vdso_worker"] + THREAD_TAIL, "vdso stack incomplete: %s" % frames)
        if any("vdso" in fr and fr not in ("vdso_level", "vdso_worker") for fr in frames[:i]):
            in_vdso += 1
    check(in_vdso > 0, "no sample had a leaf in the vDSO")
    raw = pprof("-raw", path)
    check(re.search(r"^\d+: 0x[0-9a-f]+/0x[0-9a-f]+/0x0 \[vdso\] [0-9a-f]+ \[FN\]$", raw, re.M),
          "no [vdso] mapping with a build-id:\n%s" % raw[-600:])
    pp.stop(), f.stop()


@test
def threads_created_after_attach_are_followed():
    f = Fixture(threads=1, extra=["-c"])
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=3&hz=500"), "spawn.pb.gz")
    spawned = [frames for value, frames in traces(path) if "spawned_worker" in frames]
    check(spawned, "no sample from threads created during the profile")
    for frames in spawned:
        check(frames[-3:] == ["spawned_worker"] + THREAD_TAIL, "spawned stack: %s" % frames)
    pp.wait_log(r"ptrace: detached", 5)
    wait_untraced(f.pid, 2)
    for tid in os.listdir("/proc/%d/task" % f.pid):
        with open("/proc/%d/task/%s/status" % (f.pid, tid)) as fh:
            check("TracerPid:\t0\n" in fh.read(), "thread %s still traced" % tid)
    pp.stop(), f.stop()


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
        d = tempfile.mkdtemp(dir=TMP)
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


def main():
    global TMP
    TMP = tempfile.mkdtemp(prefix="podprof-it-")
    wanted = sys.argv[2:]
    passed = failed = skipped = 0
    for t in TESTS:
        if wanted and t.__name__ not in wanted:
            continue
        name = "it/" + t.__name__
        t0 = time.monotonic()
        try:
            t()
            print("PASS %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
            passed += 1
        except Skip as e:
            print("SKIP %s: %s" % (name, e), flush=True)
            skipped += 1
        except Exception as e:
            print("FAIL %s: %s" % (name, e), flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc()
            failed += 1
        finally:
            for p in PROCS:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            PROCS.clear()
    shutil.rmtree(TMP, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
