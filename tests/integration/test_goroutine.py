"""The thread dump (/debug/pprof/goroutine): every thread once, Go's three
shapes, and blocked threads left alone once their stack is known."""
import os
import re
import time

import lib
from lib import *  # noqa: F401,F403


def ctx_switches(pid, tid):
    with open("/proc/%d/task/%d/status" % (pid, tid)) as fh:
        text = fh.read()
    return sum(int(v) for v in re.findall(r"^(?:non)?voluntary_ctxt_switches:\s+(\d+)", text, re.M))


def in_read(pid, tid):
    try:
        with open("/proc/%d/task/%d/syscall" % (pid, tid)) as fh:
            sc = fh.read().split()
        with open("/proc/%d/task/%d/stat" % (pid, tid)) as fh:
            st = fh.read()
    except OSError:
        return False
    return sc[:1] == ["0"] and st[st.rindex(")") + 2] == "S"


def lib_metric(pp, name):
    st, h, body = http(pp.port, "/metrics")
    return float(re.search(r"^%s (\S+)$" % re.escape(name), body.decode(), re.M).group(1))


def thread_names(pid):
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, t)) as fh:
            out[int(t)] = fh.read().strip()
    return out


def dump(pp, query=""):
    st, h, body = http(pp.port, "/debug/pprof/goroutine?debug=2" + query)
    check(st == 200, "goroutine?debug=2: %d %r" % (st, body[:200]))
    check(h.get("content-type") == "text/plain; charset=utf-8", "content-type %r" % h)
    blocks = {}
    for block in body.decode().strip().split("\n\n"):
        lines = block.split("\n")
        m = re.match(r'^goroutine (\d+) \[(\w+)(?:, syscall (\w+))?, thread "(.*)"\]:$', lines[0])
        check(m, "bad block header %r" % lines[0])
        frames = [ln[:-5] for ln in lines[1::2]]
        for ln in lines[1::2]:
            check(ln.endswith("(...)"), "bad frame line %r in %s" % (ln, block))
        for ln in lines[2::2]:
            check(re.match(r"^\t(\S+ \+0x[0-9a-f]+|\?)$", ln), "bad location line %r" % ln)
        blocks[int(m.group(1))] = (m.group(2), m.group(3), m.group(4), frames)
    return blocks


@test
@figures
def goroutine_dump_lists_every_thread_with_its_stack():
    f = Fixture(threads=2, sleepers=2, extra=["-b", "3"])
    pp = Podprof("--pid", str(f.pid))
    # The fixture is ready once it has created its threads, not once each
    # has got going: wait for the readers to block and names to be set.
    deadline = time.monotonic() + 5
    while sorted(thread_names(f.pid).values()).count("blocked") < 3 or \
            not all(in_read(f.pid, t) for t, n in thread_names(f.pid).items() if n == "blocked"):
        check(time.monotonic() < deadline, "blocked readers never blocked: %s" % thread_names(f.pid))
        time.sleep(0.005)
    names = thread_names(f.pid)
    blocks = dump(pp)
    check(set(blocks) == set(names), "dump tids %s, threads %s" % (sorted(blocks), sorted(names)))
    for tid, (state, syscall, name, frames) in blocks.items():
        check(name == names[tid], "tid %d named %r, comm is %r" % (tid, name, names[tid]))
        if name == "blocked":
            check(state == "sleeping" and syscall == "read", "blocked reader: %s %s" % (state, syscall))
            check("blocked_reader" in frames and frames[-2:] == lib.THREAD_TAIL,
                  "blocked reader stack %s" % frames)
        elif (tid == f.pid or name == "worker-1") and state == "running":   # the busy workers
            # In hot_a or hot_b under level3, or now and then in level3's
            # own code (its TSC reads between them: seen once in a CI run).
            at = frames.index("level3") if "level3" in frames else -1
            check(at in (0, 1) and frames[at:at + 4] == ["level3", "level2", "level1", "worker"],
                  "busy stack %s" % frames)
    st, h, body = http(pp.port, "/debug/pprof/goroutine?debug=1")
    text = body.decode()
    check(text.startswith("goroutine profile: total %d\n" % len(names)), text[:200])
    groups = re.findall(r"^(\d+) @((?: 0x[0-9a-f]+)+)\n((?:#.*\n)+)", text, re.M)
    check(sum(int(g[0]) for g in groups) == len(names), "group counts: %s" % text[:500])
    blocked = [g for g in groups if "\tblocked_reader\t" in g[2]]
    check(len(blocked) == 1 and int(blocked[0][0]) == 3,
          "the 3 blocked readers share one stack: %s" % text)
    counts = [int(g[0]) for g in groups]
    check(counts == sorted(counts, reverse=True), "groups not sorted by count: %s" % counts)
    # debug=0: Go's goroutine profile, read by go tool pprof.
    st, h, body = http(pp.port, "/debug/pprof/goroutine")
    check(h.get("content-disposition") == 'attachment; filename="goroutine"', "disposition %r" % h)
    path = save(body, "goroutine.pb.gz")
    raw = pprof("-raw", path)
    check("PeriodType: goroutine count" in raw and "goroutine/count" in raw, raw[:300])
    tags = pprof("-tags", path)
    check(re.search(r"3\.0 \(.*\): read$", tags, re.M), "syscall label: %s" % tags)
    check(re.search(r": blocked$", tags, re.M) and re.search(r": sleeping$", tags, re.M), tags)
    top = pprof("-top", path)
    check(re.search(r"^\s+3\s+.*\bread\s*$", top, re.M) or "blocked_reader" in top, top)
    pp.stop()
    wait_untraced(f.pid, 5)
    f.stop()


@test
@figures
def goroutine_dump_does_not_stop_blocked_threads_again():
    """A thread blocked since the last dump is not stopped again: its
    context-switch counters do not move (a stop would wake it), and the
    profile says how many threads were stopped."""
    f = Fixture(threads=1, extra=["-b", "4"])
    pp = Podprof("--pid", str(f.pid))
    blocked = [t for t, n in thread_names(f.pid).items() if n == "blocked"]
    check(len(blocked) == 4, "blocked threads %s" % blocked)

    def all_in_read(what):
        # State S, in syscall 0 (polled: the fixture says nothing when it is).
        deadline = time.monotonic() + 5
        while not all(in_read(f.pid, t) for t in blocked):
            check(time.monotonic() < deadline, "blocked threads did not %s" % what)
            time.sleep(0.005)

    # The fixture is ready before its blocked threads reach their read(): a
    # thread the first dump finds still on its way there is (rightly) not
    # known as blocked, and the second dump stops it again (CI: 2 -> 4).
    all_in_read("reach read()")
    before = {t: ctx_switches(f.pid, t) for t in blocked}
    dump(pp)
    # Each stopped thread resumes and goes back into its read(): wait until
    # every one has before taking the counters.
    all_in_read("go back to read()")
    after1 = {t: ctx_switches(f.pid, t) for t in blocked}
    check(all(after1[t] > before[t] for t in blocked), "the first dump stops every thread")
    for round_ in (2, 3):
        stops0 = lib_metric(pp, "podprof_stops_total")
        blocks = dump(pp)
        stops = lib_metric(pp, "podprof_stops_total") - stops0
        now = {t: ctx_switches(f.pid, t) for t in blocked}
        check(now == after1, "dump %d woke blocked threads: %s -> %s" % (round_, after1, now))
        check(stops == 1, "dump %d stopped %d threads, only the busy one should be" % (round_, stops))
        for t in blocked:
            check("blocked_reader" in blocks[t][3], "cached stack of %d: %s" % (t, blocks[t]))
    st, h, body = http(pp.port, "/debug/pprof/goroutine")
    raw = pprof("-raw", save(body, "goroutine2.pb.gz"))
    m = re.search(r"threads=(\d+) stopped=(\d+)", raw)
    check(m and int(m.group(1)) == 5 and int(m.group(2)) == 1,
          "5 threads, only the busy one stopped: %s" % (m.group(0) if m else raw[:400]))
    pp.stop()
    f.stop()
