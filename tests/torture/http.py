#!/usr/bin/env python3
"""HTTP scenarios with the Nth allocation failing (make torture).

    python3 tests/torture/http.py build/torture [--max N] [--seed S] [scenario ...]

A podprof of the torture flavour (ASan+UBSan, -DPODPROF_TORTURE) serves a
busy fixture. Each scenario's request is sent once with
"X-Podprof-Fail-Alloc: 0", which only counts the allocations made from its
dispatch to its answer (X-Podprof-Allocs: K), then once for each N in 1..K
(or, past --max, the first max/2 and max/2 more drawn with --seed) with the
Nth of them failing, whichever thread makes it. Every such answer must come,
within the time limit, as a clean 200 (the failure was absorbed, or not
reached) or a 500/503 in Go's error shape (text/plain, X-Go-Pprof, one line
saying what went wrong); after each, podprof must still answer a plain
request. At the end podprof is stopped with SIGTERM: it must exit 0 (under
ASan: no leak), and the fixture must be running and no longer traced.
Prints PASS/FAIL per scenario and a last line "N passed, N failed".
"""
import argparse
import os
import random
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

SCENARIOS = [
    # name, method, path, body
    ("index", "GET", "/debug/pprof/", b""),
    ("metrics", "GET", "/metrics", b""),
    ("cmdline", "GET", "/debug/pprof/cmdline", b""),
    ("symbol", "POST", "/debug/pprof/symbol", b"0x401000+0x402000"),
    ("goroutine", "GET", "/debug/pprof/goroutine", b""),
    ("goroutine-debug2", "GET", "/debug/pprof/goroutine?debug=2", b""),
    ("heap", "GET", "/debug/pprof/heap", b""),
    ("allocs", "GET", "/debug/pprof/allocs", b""),
    ("threadcreate", "GET", "/debug/pprof/threadcreate?debug=1", b""),
    ("profile", "GET", "/debug/pprof/profile?seconds=1&hz=250", b""),
    ("block", "GET", "/debug/pprof/block?seconds=1", b""),
    ("mutex", "GET", "/debug/pprof/mutex?seconds=1", b""),
    ("trace", "GET", "/debug/pprof/trace?seconds=1", b""),
    ("trace-json", "GET", "/debug/pprof/trace?seconds=1&format=json", b""),
    ("bad-seconds", "GET", "/debug/pprof/block?seconds=abc", b""),
    ("unknown-profile", "GET", "/debug/pprof/nosuch", b""),
    # two CPU profiles at once: the first one's allocations fail
    ("concurrent", "GET", "/debug/pprof/profile?seconds=1", b"concurrent"),
    # allocation stacks: the fixture under the allocation agent, recording
    # every allocation (it makes a few: its threads' set-up)
    ("heap-agent", "GET", "/debug/pprof/heap", b"agent"),
    ("heap-agent-debug1", "GET", "/debug/pprof/heap?debug=1", b"agent"),
    ("allocs-agent-delta", "GET", "/debug/pprof/allocs?seconds=1", b"agent"),
]
TIMEOUT = 60


def request(port, method, path, body=b"", fail=None, timeout=TIMEOUT):
    """(status, headers, body), or None if the connection closed unanswered."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    h = {"Host": "127.0.0.1", "Connection": "close"}
    if fail is not None:
        h["X-Podprof-Fail-Alloc"] = str(fail)
    if method == "POST":
        h["Content-Length"] = str(len(body))
    head = "%s %s HTTP/1.1\r\n" % (method, path) + "".join("%s: %s\r\n" % kv for kv in h.items())
    s.sendall(head.encode() + b"\r\n" + (body if method == "POST" else b""))
    data = b""
    try:
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    finally:
        s.close()
    if b"\r\n\r\n" not in data:
        return None
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode(errors="replace").split("\r\n")
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return int(lines[0].split()[1]), hdrs, rest


def clean_error(r):
    """A 500 or 503 in Go's error shape (text/plain, X-Go-Pprof, one line),
    or the parser's own 503 (text/plain, one line: memory ran out before
    the request was whole)."""
    status, hdrs, body = r
    return (status in (500, 503) and hdrs.get("content-type", "").startswith("text/plain") and
            (hdrs.get("x-go-pprof") == "1" or body == b"503 Service Unavailable\n") and
            body.strip() != b"" and body.count(b"\n") == 1)


def scenario_ok(r, expect):
    return r is not None and (r[0] == expect or clean_error(r))


class Background:
    """The same request, without a failing allocation, on a thread: it
    runs beside the one whose allocation fails (and may be the one that
    meets the failure)."""

    def __init__(self, pp, path):
        self.r, self.problem = None, "no answer"
        self.t = threading.Thread(target=self._run, args=(pp.port, path))
        self.t.start()
        # Its session starts first, unless the failing allocation was one
        # of its own, before that (it then answers an error at once).
        deadline = time.monotonic() + 10
        start = len(pp.lines)
        while self.t.is_alive() and time.monotonic() < deadline:
            try:
                pp.wait_log(r"profile: started", 0.05, start=start)
                break
            except AssertionError:
                continue

    def _run(self, port, path):
        try:
            self.r = request(port, "GET", path)
        except OSError as e:
            self.problem = str(e)

    def finished(self, timeout):
        self.t.join(timeout)
        if self.t.is_alive():
            self.problem = "still running after %d s" % timeout
            return False
        if self.r is None or not (self.r[0] == 200 or clean_error(self.r)):
            self.problem = "answered %r" % (self.r and self.r[:2],)
            return False
        return True


def with_agent(lib):
    agent = os.path.join(lib.BUILD, "libpodprof-alloc.so")
    return lambda argv: ["env", "LD_PRELOAD=" + agent, "PODPROF_ALLOC_RATE=1"] + argv


def run_scenario(lib, name, method, path, body, max_runs, rng):
    agent = body == b"agent"
    if agent:
        body = b""
    fx = lib.Fixture(threads=3, sleepers=2, wrap=with_agent(lib) if agent else None)
    pp = lib.Podprof("--pid", str(fx.pid), "--max-sessions", "8")
    problems, outcomes = [], {"ok": 0, "error": 0}
    concurrent = body == b"concurrent"
    if concurrent:
        body = b""
    try:
        first = request(pp.port, method, path, body, fail=0)
        if first is None or "x-podprof-allocs" not in first[1]:
            return "FAIL", "no counted answer: %r" % (first,), 0, 0, outcomes
        expect = first[0]
        count = int(first[1]["x-podprof-allocs"].split()[0])
        ns = list(range(1, count + 1))
        if count > max_runs:
            ns = list(range(1, max_runs // 2 + 1))
            ns += sorted(rng.sample(range(max_runs // 2 + 1, count + 1), max_runs - max_runs // 2))
        for n in ns:
            other = None
            if concurrent:
                other = Background(pp, path)
            t0 = time.monotonic()
            try:
                r = request(pp.port, method, path, body, fail=n)
            except socket.timeout:
                problems.append("allocation %d: no answer within %d s (a hang)" % (n, TIMEOUT))
                break
            if not scenario_ok(r, expect):
                problems.append("allocation %d of %d: %s" % (
                    n, count, "connection closed without an answer" if r is None else
                    "answered %d %r" % (r[0], r[2][:200])))
            else:
                outcomes["ok" if r[0] == expect else "error"] += 1
            if other and not other.finished(TIMEOUT):
                problems.append("allocation %d: the other profile: %s" % (n, other.problem))
            h = request(pp.port, "GET", "/healthz")
            if not h or h[0] != 200:
                problems.append("allocation %d: podprof unhealthy after: %r" % (n, h and h[:2]))
                break
            if len(problems) >= 5:
                break
        # A plain request still works, with the same answer as before.
        r = request(pp.port, method, path, body)
        if not r or r[0] != expect:
            problems.append("a plain request after the runs answered %r" % (r and r[:2],))
        try:
            pp.stop()
        except AssertionError as e:
            problems.append("podprof's exit: %s" % str(e)[:2000])
        if fx.proc.poll() is not None:
            problems.append("the fixture died (exit %s)" % fx.proc.returncode)
        elif lib.tracer_pid(fx.pid) != 0:
            problems.append("the fixture is still traced after podprof exited")
        return ("FAIL" if problems else "PASS"), "; ".join(problems), count, len(ns), outcomes
    finally:
        # All killed before any is waited for: the fixture is reaped only
        # once its tracer, podprof, has let it go.
        for p in lib.PROCS:
            if p.poll() is None:
                p.kill()
        for p in lib.PROCS:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print("  pid %d (%s) still there 30 s after SIGKILL" % (p.pid, p.args), flush=True)
        lib.PROCS.clear()
        lib.PODPROFS.clear()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--max", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("only", nargs="*")
    a = ap.parse_intermixed_args()
    os.environ["PODPROF_BUILD"] = a.build
    import lib  # noqa: E402  (reads PODPROF_BUILD)
    import tempfile
    lib.TMP = tempfile.mkdtemp(prefix="podprof-torture-")
    rng = random.Random(a.seed)
    print("torture/http: each scenario's Nth allocation failing, at most %d runs a scenario (seed %d)"
          % (a.max, a.seed), flush=True)
    passed = failed = 0
    for name, method, path, body in SCENARIOS:
        if a.only and name not in a.only:
            continue
        t0 = time.monotonic()
        try:
            verdict, why, count, runs, out = run_scenario(lib, name, method, path, body, a.max, rng)
        except Exception as e:   # the scenario itself broke: say so, go on
            verdict, why, count, runs, out = "FAIL", "%s: %s" % (type(e).__name__, str(e)[:2000]), 0, 0, \
                {"ok": 0, "error": 0}
        info = "%d allocations, %d runs%s, %d answered as usual, %d clean errors, %.0f s" % (
            count, runs, ", sampled" if runs < count else "", out["ok"], out["error"],
            time.monotonic() - t0)
        if verdict == "PASS":
            passed += 1
            print("PASS torture/http/%s (%s)" % (name, info), flush=True)
        else:
            failed += 1
            print("FAIL torture/http/%s (%s): %s" % (name, info, why), flush=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
