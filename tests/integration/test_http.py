"""HTTP behaviour in Go's shape: routing, errors, limits, cmdline, symbol, clients."""
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import lib
from lib import *  # noqa: F401,F403  (Fixture, Podprof, http, pprof, check, test, ...)
from lib import podprof_pid  # noqa: F401


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
def pprof_web_ui_reads_the_profile():
    f = Fixture(threads=1)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=1"), "web.pb.gz")
    pp.stop(), f.stop()
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    env = dict(os.environ, PPROF_TMPDIR=lib.TMP, HOME=lib.TMP)
    # `go tool pprof` runs the real pprof as a child: own session, killed as a group.
    web = subprocess.Popen(["go", "tool", "pprof", "-no_browser", "-http=127.0.0.1:%d" % port, path],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                           start_new_session=True)
    PROCS.append(web)
    try:
        line = web.stdout.readline()   # "Serving web UI on http://127.0.0.1:PORT"
        check("Serving web UI" in line, "pprof web UI did not start: %r" % line)
        port = int(re.search(r":(\d+)\s*$", line).group(1))
        # pprof prints that line before it listens: wait for the port to open.
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except ConnectionRefusedError:
                check(time.monotonic() < deadline, "pprof web UI never listened on %d" % port)
                time.sleep(0.02)
        web_pages(port)
    finally:
        os.killpg(web.pid, signal.SIGKILL)
        web.wait()


def web_pages(port):
    # /ui/ (the graph view) needs graphviz on the client; the rest read only the profile.
    for page in ("/ui/top", "/ui/flamegraph", "/ui/peek?f=hot_a", "/ui/source?f=level3"):
        st, h, body = http(port, page)
        check(st == 200, "%s: %d" % (page, st))
        check(page == "/ui/source?f=level3" or b"hot_a" in body, "%s does not show hot_a" % page)


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
def slow_clients_and_limits():
    """Slowloris: headers not complete within --header-timeout-ms get a 408
    and the connection closed; an idle keep-alive connection is closed after
    --idle-timeout-ms; past --max-conns a client gets 503 with Retry-After;
    past --max-sessions a profile request gets a Go-shaped 503 with
    Retry-After. After all that podprof still serves a correct profile."""
    f = Fixture(threads=1)
    pp = Podprof("--pid", str(f.pid), "--header-timeout-ms", "300", "--idle-timeout-ms", "400",
                 "--max-conns", "4", "--max-sessions", "1")
    # Slowloris: a request line, then nothing.
    s = socket.create_connection(("127.0.0.1", pp.port), timeout=5)
    s.sendall(b"GET /debug/pprof/ HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    t0 = time.monotonic()
    st, h, body = read_response(s)
    waited = time.monotonic() - t0
    check(st == 408 and 0.25 < waited < 2.5, "slowloris: %d after %.2fs" % (st, waited))
    # Idle keep-alive: one request, then silence; the server closes.
    s = socket.create_connection(("127.0.0.1", pp.port), timeout=5)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    data = b""
    while not data.endswith(b"ok\n"):
        data += s.recv(4096)
    t0 = time.monotonic()
    check(s.recv(4096) == b"", "idle connection not closed")
    check(0.3 < time.monotonic() - t0 < 2.5, "idle close after %.2fs" % (time.monotonic() - t0))
    s.close()
    # Connection cap: 4 open, the 5th is refused politely.
    held = [socket.create_connection(("127.0.0.1", pp.port), timeout=5) for _ in range(4)]
    s = socket.create_connection(("127.0.0.1", pp.port), timeout=5)
    st, h, body = read_response(s)
    check(st == 503 and h.get("retry-after"), "5th connection: %d %r" % (st, h))
    for c in held:
        c.close()
    # The server frees their slots when it notices the closes: wait for that.
    deadline = time.monotonic() + 5
    while True:
        s = socket.create_connection(("127.0.0.1", pp.port), timeout=5)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        st = read_response(s)[0]
        if st == 200:
            break
        check(time.monotonic() < deadline, "connection slots never freed: %d" % st)
        time.sleep(0.02)
    # Session cap: a second concurrent profile gets a Go-shaped 503.
    bg = ProfileInBackground(pp, "seconds=2")
    deadline = time.monotonic() + 5
    while True:   # the held connections' slots free up as the server notices their close
        st, h, body = http(pp.port, "/debug/pprof/profile?seconds=1")
        if st != 503 or b"too many profiles" in body or time.monotonic() > deadline:
            break
    check(st == 503 and h.get("x-go-pprof") == "1" and h.get("retry-after") and
          body == b"too many profiles running at once\n", "second session: %d %r %r" % (st, h, body))
    check_busy_profile(save(bg.result(), "limits.pb.gz"))
    pp.stop(), f.stop()


@test
def pid_parameter_chooses_another_process():
    f1, f2 = Fixture(threads=1), Fixture(threads=1, sleepers=1)
    pp = Podprof("--pid", str(f1.pid))

    def go_err(q, status, msg):
        st, h, body = http(pp.port, "/debug/pprof/profile?seconds=1&" + q)
        check(st == status and h.get("x-go-pprof") == "1" and body.decode() == msg + "\n",
              "%s: %d %r" % (q, st, body))

    go_err("pid=abc", 400, 'invalid value for "pid" - must be a positive integer')
    go_err("pid=0", 400, 'invalid value for "pid" - must be a positive integer')
    go_err("pid=-5", 400, 'invalid value for "pid" - must be a positive integer')
    go_err("pid=99999999999", 400, 'invalid value for "pid" - must be a positive integer')
    go_err("pid=999999999", 404, "no process with pid 999999999 in this pod")
    go_err("pid=%d" % podprof_pid(pp), 400, "pid is podprof itself")
    go_err("pid=2", 400, "pid 2 is a kernel thread")   # kthreadd, outside any pod's reach
    # The other fixture, through pid=: its own cmdline and its own profile.
    st, h, body = http(pp.port, "/debug/pprof/cmdline?pid=%d" % f2.pid)
    check(st == 200 and b"-s\x001\x00-r" in body, "cmdline of pid=: %r" % body)
    path = save(get_profile(pp, "seconds=1&pid=%d" % f2.pid), "pid2.pb.gz")
    check_busy_profile(path)
    check("tid:[%d]" % f2.pid in pprof("-raw", path), "profile of pid= should be of that process")
    st, h, body = http(pp.port, "/debug/pprof/?pid=%d" % f2.pid)
    text = body.decode()
    check(st == 200 and "<tr><td>pid</td><td>%d</td></tr>" % f2.pid in text and
          "href='profile?debug=1&pid=%d'" % f2.pid in text and
          "<a href='?pid=%d'>%d</a>" % (f1.pid, f1.pid) in text, "index of pid=")
    pp.stop(), f1.stop(), f2.stop()


BAD_REQUESTS = [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"GET /debug/pprof/ HTTP/9.9\r\n\r\n",
    b"GET /debug/pprof/%00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /debug/pprof/%zz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET debug/pprof/ HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /debug/pprof/profile?hz=99999999999999999999 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /debug/pprof/profile?hz=-1 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /debug/pprof/profile?seconds=1e99&hz=0 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /debug/pprof/profile?pid=1%00 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /debug/pprof/cmdline?pid=-1 HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /debug/pprof/symbol?0xzzzz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n",
    b"POST /debug/pprof/symbol HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"DELETE /debug/pprof/profile HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X: y\r\n" * 5000 + b"\r\n",
    b"GET /debug/pprof/ HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
]


@test
def flood_of_bad_requests_then_a_correct_profile():
    """Hostile requests of every kind, many times: each gets a 4xx (or the
    connection closed on garbage), none crashes or hangs podprof, and then it
    serves a correct profile. A body over --max-body-bytes gets 413."""
    f = Fixture(threads=1)
    pp = Podprof("--pid", str(f.pid), "--max-body-bytes", "4096", "--header-timeout-ms", "500")
    st, h, body = http(pp.port, "/debug/pprof/symbol", method="POST", body=b"0x1+" * 2000)
    check(st == 413, "oversized body: %d" % st)
    # Blank lines before a request are allowed (RFC 9112): podprof waits for
    # the request, then closes the connection at the header timeout.
    s = socket.create_connection(("127.0.0.1", pp.port), timeout=5)
    s.sendall(b"\r\n\r\n\r\n")
    check(s.recv(100) == b"", "blank lines: expected a quiet close")
    s.close()
    tried = 0
    statuses = {}
    for rnd in range(int(os.environ.get("PODPROF_FLOOD_ROUNDS", "20"))):
        for raw in BAD_REQUESTS:
            s = socket.create_connection(("127.0.0.1", pp.port), timeout=10)
            try:
                s.sendall(raw)
                st = read_response(s)[0]
            except (AssertionError, ConnectionResetError, BrokenPipeError):
                st = "closed"
            s.close()
            check(st == "closed" or 400 <= st < 500, "%r... answered %s" % (raw[:60], st))
            statuses[st] = statuses.get(st, 0) + 1
            tried += 1
    check(pp.proc.poll() is None, "podprof died")
    check_busy_profile(save(get_profile(pp, "seconds=1"), "after-flood.pb.gz"))
    print("  info: %d bad requests tried, answers %s" % (tried, dict(sorted(statuses.items(), key=str))))
    pp.stop(), f.stop()
