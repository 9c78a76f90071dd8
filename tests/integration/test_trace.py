"""/debug/pprof/trace: the Go 1.19 execution trace of a native process,
judged by go tool trace itself (the parser, its four profiles, and the HTTP
viewer whose own checks only run there), and the Chrome JSON form."""
import gzip
import json
import os
import re
import socket
import subprocess
import threading
import time

import lib
from lib import *  # noqa: F401,F403
from test_views import wait_placed


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get_trace(pp, query, save_as):
    st, h, body = http(pp.port, "/debug/pprof/trace?" + query, timeout=120)
    check(st == 200, "trace status %d: %r" % (st, body[:200]))
    check(h.get("content-type") == "application/octet-stream", "content-type %r" % h)
    check(h.get("content-disposition") == 'attachment; filename="trace"', "disposition %r" % h)
    check("content-encoding" not in h, "a trace must not carry Content-Encoding")
    check(body[:16] == b"go 1.19 trace\x00\x00\x00", "header %r" % body[:16])
    # The name wget gives it, as in the user's command.
    return save(body, save_as)


def go_trace(*args):
    env = dict(os.environ, HOME=lib.TMP)
    r = subprocess.run(["go", "tool", "trace"] + list(args), capture_output=True, timeout=120,
                       env=env)
    check(r.returncode == 0, "go tool trace %s: %s" % (" ".join(args), r.stderr.decode()[-500:]))
    return r.stdout


def trace_pprof(path, kind):
    """go tool trace -pprof=KIND, read by go tool pprof: [(ns, [leaf..root])]."""
    prof = save(go_trace("-pprof=" + kind, path), "%s-%s.pb" % (os.path.basename(path), kind))
    return traces(prof, "delay")


class Viewer:
    """go tool trace -http on a file, ready once it says it listens."""

    def __init__(self, path):
        self.port = free_port()
        # The tool's own binary, not `go tool trace`: go runs the tool as its
        # child, which killing go would leave running after the test.
        tool = subprocess.run(["go", "tool", "-n", "trace"], capture_output=True, text=True,
                              check=True).stdout.strip()
        self.proc = subprocess.Popen([tool, "-http=127.0.0.1:%d" % self.port, path],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, HOME=lib.TMP, BROWSER="true"))
        PROCS.append(self.proc)
        deadline = time.monotonic() + 60
        out = b""
        while b"Trace viewer is listening" not in out:
            line = self.proc.stdout.readline()
            check(line and time.monotonic() < deadline, "viewer did not start: %r" % out[-500:])
            out += line
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def get(self, path):
        st, h, body = http(self.port, path, timeout=120)
        check(st == 200 and body, "viewer %s: %d %r" % (path, st, body[:300]))
        return body.decode(errors="replace")


def goroutine_times(viewer, pc):
    """{goroutine id: {column: ms}} of the viewer's /goroutine?id=PC page."""
    page = viewer.get("/goroutine?id=%s" % pc)
    table = page[page.index('<table class="details">'):]
    cols = ["Total", "Execution", "Network wait", "Sync block", "Blocking syscall", "Scheduler wait"]
    out = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)[1:]:
        text = re.sub(r"<[^>]*>", " ", row)
        gid = re.match(r"\s*(\d+)", text)
        durs = re.findall(r"(?<![\w.])([\d.]+(?:ns|µs|us|ms|s))(?!\w)", text)
        if gid and len(durs) >= 6:
            out[gid.group(1)] = dict(zip(cols, [dur_ms(d) for d in durs[:6]]))
    return out


def dur_ms(s):
    m = re.match(r"^([\d.]+)(ns|µs|us|ms|s)$", s)
    check(m, "duration %r" % s)
    return float(m.group(1)) * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1e3}[m.group(2)]


def metric(pp, name):
    st, h, body = http(pp.port, "/metrics")
    return float(re.search(r"^%s (\S+)$" % re.escape(name), body.decode(), re.M).group(1))


def callers(tr):
    return {f for _, frames in tr for f in frames}


@test
@figures
def trace_opens_in_go_tool_trace_with_every_view():
    f = Fixture(exe=WAITER, threads=3)
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid))
    path = get_trace(pp, "seconds=3", "trace?seconds=3")
    go_trace("-d", path)
    net, sync, sysc, sched = (trace_pprof(path, k) for k in ("net", "sync", "syscall", "sched"))
    check(any(fr[0] == "epoll_wait" and "epoll_waiter" in fr for _, fr in net),
          "net: no epoll_wait under epoll_waiter: %r" % net[:3])
    check("mutex_waiter" in callers(sync) and "cycle_lock" in callers(sync),
          "sync: %s" % sorted(callers(sync))[:40])
    check(any(fr[0] == "syscall read" and "pipe_reader" in fr for _, fr in sysc) and
          any(fr[0] == "syscall read" and "cycle_read" in fr for _, fr in sysc),
          "syscall: %r" % sysc[:4])
    check(sched and all(len(fr) > 1 for _, fr in sched), "sched: %r" % sched[:3])
    v = Viewer(path)
    js = json.loads(v.get("/jsontrace"))
    names = {e.get("args", {}).get("name") for e in js["traceEvents"] if e.get("ph") == "M"}
    check(any(n and n.startswith("Proc ") for n in names), "no Proc rows: %s" % sorted(map(str, names))[:10])
    page = v.get("/goroutines")
    groups = dict((name, pc) for pc, name in re.findall(r'href="/goroutine\?id=(\d+)">([^<]+)<', page))
    for t in ("thread cycler", "thread poller", "thread locker", "thread reader", "thread spinner-1"):
        check(t in groups, "goroutine analysis lacks %s: %s" % (t, sorted(groups)))
    # The known schedule, within a tolerance: each waiting thread spent its
    # window in its kind of wait; the cycler split its time between them.
    share = lambda g, col: sum(x[col] for x in g.values()) / max(1, sum(x["Total"] for x in g.values()))
    check(share(goroutine_times(v, groups["thread poller"]), "Network wait") > 0.9, "poller")
    check(share(goroutine_times(v, groups["thread locker"]), "Sync block") > 0.9, "locker")
    check(share(goroutine_times(v, groups["thread reader"]), "Blocking syscall") > 0.9, "reader")
    cyc = goroutine_times(v, groups["thread cycler"])
    run = share(cyc, "Execution") + share(cyc, "Scheduler wait")
    check(0.1 < run < 0.5 and 0.08 < share(cyc, "Sync block") < 0.45 and
          0.08 < share(cyc, "Blocking syscall") < 0.45,
          "cycler (200 ms each of spin, lock, read, sleep, join): %r" % cyc)
    f.stop()


@test
def trace_json_is_chrome_trace_events_with_v8_samples():
    f = Fixture(exe=WAITER, threads=1)
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid))
    st, h, body = http(pp.port, "/debug/pprof/trace?seconds=1.5&format=json&gz=1")
    check(st == 200 and body[:2] == b"\x1f\x8b", "gz json: %d %r" % (st, body[:20]))
    text = gzip.decompress(body).decode()
    check(text.startswith('{"traceEvents":['), text[:40])
    d = json.loads(text)
    ev = d["traceEvents"]
    check(all(k in ev[0] for k in ("pid", "tid", "ph", "cat")), ev[0])
    names = {e["tid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    check(any(n.startswith("cycler ") for n in names.values()), names)
    # State slices do not overlap within a thread.
    by_tid = {}
    for e in ev:
        if e["ph"] == "X":
            by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for tid, xs in by_tid.items():
        xs.sort()
        for a, b in zip(xs, xs[1:]):
            check(a[1] <= b[0] + 1e-3, "overlapping slices on %d: %r %r" % (tid, a, b))
    check(any(n.startswith("Network epoll_wait") for xs in by_tid.values() for _, _, n in xs),
          "no network slice")
    check(any(e["ph"] == "C" and e["name"] == "RSS" for e in ev), "no RSS counter")
    profiles = {e["id"]: e for e in ev if e["ph"] == "P" and e["name"] == "Profile"}
    chunks = [e for e in ev if e["ph"] == "P" and e["name"] == "ProfileChunk"]
    check(chunks, "no V8 samples")
    for c in chunks:
        check(c["id"] in profiles and "startTime" in profiles[c["id"]]["args"]["data"], c["id"])
        cp = c["args"]["data"]["cpuProfile"]
        ids = [n["id"] for n in cp["nodes"]]
        check(ids[0] == 1 and len(ids) == len(set(ids)), "node ids %r" % ids[:10])
        seen = set()
        for n in cp["nodes"]:
            check(n["id"] == 1 or n["parent"] in seen, "parent after child: %r" % n)
            seen.add(n["id"])
        check(len(cp["samples"]) == len(c["args"]["data"]["timeDeltas"]), "samples vs deltas")
        check(set(cp["samples"]) <= seen, "a sample names no node")
    spin = [n for c in chunks for n in c["args"]["data"]["cpuProfile"]["nodes"]
            if n["callFrame"]["functionName"] in ("spin_for", "cycle_spin", "spin_loop")]
    check(spin, "no spin_* frame among the samples")
    f.stop()


@test
def trace_parameters_like_go():
    f = Fixture(exe=WAITER, threads=0, extra=("-q",))
    pp = Podprof("--pid", str(f.pid), "--max-seconds", "5")
    st, h, body = http(pp.port, "/debug/pprof/trace?seconds=6")
    check(st == 400 and body.decode() == "profile duration exceeds the limit of 5 seconds\n",
          "%d %r" % (st, body))
    t0 = time.monotonic()
    path = get_trace(pp, "seconds=abc", "trace-default")   # Go: invalid gives 1 s
    check(0.8 < time.monotonic() - t0 < 4, "seconds=abc took %.1f s" % (time.monotonic() - t0))
    go_trace("-d", path)
    t0 = time.monotonic()
    get_trace(pp, "seconds=0.3", "trace-short")
    check(time.monotonic() - t0 < 2, "seconds=0.3 took %.1f s" % (time.monotonic() - t0))
    f.stop()


@test
def trace_of_a_target_that_exits_is_valid_with_the_exits():
    f = Fixture(exe=WAITER, threads=1, extra=("-n", "1"))
    pp = Podprof("--pid", str(f.pid))
    result = {}

    def fetch():
        result["path"] = get_trace(pp, "seconds=5", "trace-exit")
    t = threading.Thread(target=fetch)
    t.start()
    pp.wait_log(r"trace: started", 10)
    # A second of the target's life recorded (100 ticks), then it exits.
    deadline = time.monotonic() + 10
    while metric(pp, "podprof_ticks_total") < 100 and time.monotonic() < deadline:
        time.sleep(0.02)
    f.proc.terminate()
    t.join(30)
    check("path" in result, "no trace of the exiting target")
    out = go_trace("-d", result["path"]).decode()
    check(out.count("GoEnd") >= 2, "thread exits missing: %d GoEnd" % out.count("GoEnd"))
    trace_pprof(result["path"], "sync")


@test
@figures
def trace_and_cpu_profile_share_the_sampler():
    f = Fixture(exe=WAITER, threads=2)
    pp = Podprof("--pid", str(f.pid))
    bg = ProfileInBackground(pp, "seconds=3")
    path = get_trace(pp, "seconds=2", "trace-shared")
    go_trace("-d", path)
    prof = save(bg.result(), "shared.pb.gz")
    check(any("spin_for" in fr for _, fr in traces(prof)), "CPU profile lost its samples")
    check(len(re.findall(r"ptrace: attached", "\n".join(l for l in pp.lines if l))) == 1,
          "attached more than once")
    f.stop()


@test
def trace_of_a_target_that_execs_ends_valid_at_the_exec():
    f = Fixture(threads=2, extra=["-e", "1000", "-E", BUSY])
    pp = Podprof("--pid", str(f.pid))
    t0 = time.monotonic()
    path = get_trace(pp, "seconds=10", "trace-exec")
    check(time.monotonic() - t0 < 6, "the trace did not end at the exec")
    pp.wait_log(r"trace: pid=\d+ exec'd a new program", 5)
    go_trace("-d", path)
    # What the old program ran is there: its busy threads' samples, named.
    with open(path, "rb") as fh:
        check(b"hot_a" in fh.read(), "no sample of the old program's hot_a")
    f.stop()


@test
def trace_client_that_leaves_ends_the_session():
    f = Fixture(exe=WAITER, threads=1)
    pp = Podprof("--pid", str(f.pid))
    s = socket.create_connection(("127.0.0.1", pp.port))
    s.sendall(b"GET /debug/pprof/trace?seconds=30 HTTP/1.1\r\nHost: x\r\n\r\n")
    pp.wait_log(r"trace: started", 10)
    s.close()
    pp.wait_log(r"trace: done .*\(client gone\)", 5)
    pp.wait_log(r"ptrace: detached", 5)
    f.stop()


@test
def trace_past_its_cap_ends_early_and_valid():
    f = Fixture(exe=WAITER, threads=2, extra=("-n", "1"))
    pp = Podprof("--pid", str(f.pid), "--max-trace-events", "2000")
    path = get_trace(pp, "seconds=3&hz=1000", "trace-capped")
    line = pp.wait_log(r"trace: pid=\d+: 2000 events, the cap", 5)
    end = float(re.search(r"the trace ends at ([\d.]+) s", line).group(1))
    check(end < 2.9, "the cap was hit at %.3f s of a 3 s trace" % end)
    go_trace("-d", path)
    v = Viewer(path)
    check("thread cycler" in v.get("/goroutines"), "goroutines page of a capped trace")
    f.stop()
