"""The named profiles beyond the CPU profile and the thread dump: block,
mutex (where threads wait), heap and allocs (where memory lives), judged by
go tool pprof and the pprof-format decoder, against the waiter fixture."""
import os
import re
import select
import time

import lib
from lib import *  # noqa: F401,F403


def waiter(*extra):
    return Fixture(exe=WAITER, threads=0, extra=extra)


def thread_syscalls(pid):
    """{thread name: (syscall number or 'running', state letter)}."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, t)) as fh:
                name = fh.read().strip()
            with open("/proc/%d/task/%s/syscall" % (pid, t)) as fh:
                sc = fh.read().split()[0]
            with open("/proc/%d/task/%s/stat" % (pid, t)) as fh:
                st = fh.read()
        except OSError:
            continue
        out[name] = (sc, st[st.rindex(")") + 2])
    return out


PLACES = {"locker": "202", "reader": "0", "poller": "232"}   # futex, read, epoll_wait


def wait_placed(pid, timeout=10):
    """Until the waiting threads are blocked in their calls (read from /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sc = thread_syscalls(pid)
        if all(sc.get(n, ("", ""))[0] == want and sc[n][1] == "S" for n, want in PLACES.items()):
            return
        time.sleep(0.01)
    raise AssertionError("waiter threads not blocked in place: %r" % thread_syscalls(pid))


def raw_traces(path, index):
    """`go tool pprof -traces`: [(value, unit, [leaf..root], {label: value})]."""
    out = pprof("-traces", "-sample_index=" + index, path)
    result = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        labels, frames, value = {}, [], None
        for line in block.splitlines():
            m = re.match(r"^\s+(\w+):\s+(.*)$", line)
            v = re.match(r"^\s+(-?[\d.]+)([a-zA-Z]*)\s+(\S.*)$", line)
            if v and value is None:
                value = (float(v.group(1)), v.group(2))
                frames = [v.group(3).strip()]
            elif value is not None and line.strip():
                frames.append(line.strip())
            elif m:
                labels[m.group(1)] = m.group(2).strip()
        if value is not None:
            result.append((value[0], value[1], frames, labels))
    return result


def to_ns(v, unit):
    return v * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9, "": 1}[unit]


def waits_by_thread(path):
    """{thread: (delay ns, set of leaf frames, set of callers seen)} of block or mutex."""
    out = {}
    for v, unit, frames, labels in raw_traces(path, "delay"):
        d, leaves, callers = out.get(labels.get("thread", "?"), (0, set(), set()))
        leaves.add(frames[0])
        callers.update(frames[1:])
        out[labels.get("thread", "?")] = (d + to_ns(v, unit), leaves, callers)
    return out


@test
@figures
def block_names_where_each_thread_waits():
    f = waiter("-q")
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid))
    body = get_profile(pp, "seconds=3", name="block", filename="block-delta")
    w = waits_by_thread(save(body, "block.pb.gz"))
    expect = {"locker": ("syscall futex", "mutex_waiter"), "reader": ("syscall read", "pipe_reader"),
              "poller": ("syscall epoll_wait", "epoll_waiter")}
    for name, (leaf, caller) in expect.items():
        check(name in w, "no waits of %s in %s" % (name, sorted(w)))
        d, leaves, callers = w[name]
        check(leaves == {leaf}, "%s: leaves %s, want %s" % (name, leaves, leaf))
        check(caller in callers, "%s: %s not among the callers %s" % (name, caller, sorted(callers)))
        # Blocked for the whole window: its delay is the window's length.
        check(2.4e9 <= d <= 3.6e9, "%s waited %.2f s of a 3 s window" % (name, d / 1e9))
    sleeps = w.get("sleeper", (0, set(), set()))
    check(sleeps[1] <= {"syscall clock_nanosleep", "syscall nanosleep", "syscall restart_syscall"} and
          "sleep_loop" in sleeps[2], "sleeper: %s / %s" % (sleeps[1], sorted(sleeps[2])))
    text = pprof("-top", "-sample_index=contentions", save(body, "block2.pb.gz"))
    check("Type: contentions" in text, text[:300])
    f.stop()


@test
@figures
def mutex_is_the_futex_part_of_block():
    f = waiter("-q")
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid))
    body = get_profile(pp, "seconds=2", name="mutex", filename="mutex-delta")
    w = waits_by_thread(save(body, "mutex.pb.gz"))
    check("locker" in w and "mutex_waiter" in w["locker"][2], "locker missing: %r" % w)
    leaves = set().union(*(x[1] for x in w.values()))
    check(leaves == {"syscall futex"}, "mutex holds other waits than futex: %s" % leaves)
    check(not ({"reader", "poller"} & set(w)), "mutex lists non-futex waiters: %s" % sorted(w))
    st, h, text = http(pp.port, "/debug/pprof/mutex?debug=1")
    text = text.decode()
    check(st == 200 and text.startswith("--- mutex:\ncycles/second=1000000000\n"), text[:200])
    check(re.search(r"^\d+ \d+ @( 0x[0-9a-f]+)+$", text, re.M), text[:400])
    check("mutex_waiter" in text, text[:800])
    f.stop()


@test
@figures
def blocked_threads_are_stopped_once_per_wait():
    f = waiter("-q")
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid), "--detach-grace-ms", "60000")
    get_profile(pp, "seconds=1", name="block", filename="block-delta")
    before = lib_metric(pp, "podprof_stops_total")
    get_profile(pp, "seconds=3&hz=100", name="block", filename="block-delta")
    stops = lib_metric(pp, "podprof_stops_total") - before
    # 300 ticks over 5 blocked threads: a stop per thread per tick would be
    # 1500. The sleeper wakes every second, but to block again in the same
    # place (same call, instruction and stack pointer): no stop either.
    check(stops <= 2, "%d stops in a 3 s block profile of threads that stayed blocked" % stops)
    print("  info: %d stops in the second block profile" % stops)
    f.stop()


def lib_metric(pp, name):
    st, h, body = http(pp.port, "/metrics")
    return float(re.search(r"^%s (\S+)$" % re.escape(name), body.decode(), re.M).group(1))


@test
def waiting_profiles_answer_go_errors():
    f = waiter("-q")
    pp = Podprof("--pid", str(f.pid), "--max-seconds", "10")
    cases = [
        ("block?seconds=abc", 400, "invalid value for \"seconds\" - must be a positive integer"),
        ("mutex?seconds=-1", 400, "invalid value for \"seconds\" - must be a positive integer"),
        ("block?seconds=2&debug=1", 400, "seconds and debug params are incompatible"),
        ("heap?seconds=11", 400, "profile duration exceeds the limit of 10 seconds"),
        ("allocs?seconds=1.5", 400, "invalid value for \"seconds\" - must be a positive integer"),
        ("block?hz=0&seconds=1", 400, "invalid value for \"hz\" - must be an integer from 1 to 1000"),
        ("nosuch", 404, "Unknown profile"),
        ("heap?pid=999999999", 404, "no process with pid 999999999 in this pod"),
    ]
    for path, status, msg in cases:
        st, h, body = http(pp.port, "/debug/pprof/" + path)
        check(st == status and body.decode() == msg + "\n", "%s: %d %r" % (path, st, body))
        check(h.get("x-go-pprof") == "1", "%s: no X-Go-Pprof" % path)
    f.stop()


def smaps_rollup_rss(pid):
    with open("/proc/%d/smaps_rollup" % pid) as fh:
        return int(re.search(r"^Rss:\s+(\d+) kB", fh.read(), re.M).group(1)) * 1024


def total(path, index):
    out = pprof("-raw", "-sample_index=" + index, path)
    # -raw lists "Samples:" then one line per sample, values first.
    samples = out.split("Samples:")[1].split("Locations")[0]
    hdr = samples.strip().splitlines()[0].split()
    col = [i for i, t in enumerate(hdr) if t.startswith(index + "/")][0]
    return sum(int(l.split()[col]) for l in samples.strip().splitlines()[1:] if l.strip() and
               re.match(r"^\s*-?\d", l))


@test
def heap_is_memory_by_mapping_and_adds_up():
    f = waiter("-q")
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid))
    body = get_profile(pp, "", name="heap")
    path = save(body, "heap.pb.gz")
    top = pprof("-top", path)
    check("Type: inuse_space" in top, "heap's default type is not inuse_space: %s" % top[:300])
    rss = total(path, "inuse_space")
    want = smaps_rollup_rss(f.pid)
    check(abs(rss - want) <= 64 * 1024, "heap RSS %d B, smaps_rollup %d B" % (rss, want))
    raw = pprof("-raw", path)
    for t in ("inuse_space/bytes", "pss/bytes", "private_dirty/bytes", "swap/bytes"):
        check(t in raw, "sample type %s missing: %s" % (t, raw[:300]))
    tr = raw_traces(path, "inuse_space")
    classes = {frames[-1] for _, _, frames, _ in tr}
    check({"code", "data", "thread stacks"} <= classes, "classes %s" % classes)
    check(any(frames[0].endswith("libc.so.6") and frames[-1] == "code" for _, _, frames, _ in tr),
          "no code mapping of libc: %r" % tr[:5])
    st, h, text = http(pp.port, "/debug/pprof/heap?debug=1")
    lines = text.decode().splitlines()
    check(st == 200 and lines[0].split()[:5] == ["class", "rss", "pss", "private_dirty", "swap"],
          lines[:2])
    check(lines[-1].startswith("total") and abs(int(lines[-1].split()[1]) - want) <= 64 * 1024,
          lines[-1])
    f.stop()


@test
def heap_delta_and_allocs_find_a_growing_mapping():
    gr, gw = os.pipe()
    ar, aw = os.pipe()
    f = Fixture(exe=WAITER, threads=0, extra=("-q", "-g", str(gr), "-G", str(aw)), pass_fds=(gr, aw))
    os.close(gr)
    os.close(aw)
    pp = Podprof("--pid", str(f.pid))
    first = get_profile(pp, "", name="allocs")

    def grow(n):
        for _ in range(n):
            os.write(gw, b"g")
            r, _, _ = select.select([ar], [], [], 10)
            check(r and os.read(ar, 1) == b"g", "the fixture did not grow")

    bg = NamedInBackground(pp, "heap", "seconds=3", "heap-delta")
    grow(3)   # 48 MiB while the window is open
    delta = save(bg.result(), "heap-delta.pb.gz")
    tr = raw_traces(delta, "inuse_space")
    # Named where the kernel names anonymous memory, else its group (256 MiB, rw-).
    grown = [(v, u, fr) for v, u, fr, _ in tr
             if fr[-1] == "[anon:podprof-grow]" or fr[0] == "anonymous rw- 262144 kB"]
    check(grown, "the growing mapping is not in the delta heap: %r" % tr[:8])
    mb = sum(to_bytes(v, u) for v, u, _ in grown) / 2**20
    check(47 <= mb <= 49.5, "delta heap shows %.1f MiB of growth, the fixture grew 48" % mb)
    grow(1)
    second = save(get_profile(pp, "", name="allocs"), "allocs2.pb.gz")
    top = pprof("-top", second)
    check("Type: alloc_space" in top, top[:300])
    a1 = total(save(first, "allocs1.pb.gz"), "alloc_space")
    a2 = total(second, "alloc_space")
    check(a2 - a1 >= 63 * 2**20, "allocs grew %d B for 64 MiB made resident" % (a2 - a1))
    f.stop()


def to_bytes(v, unit):
    return v * {"B": 1, "kB": 1024, "MB": 2**20, "GB": 2**30, "": 1}[unit]


class NamedInBackground:
    """A named profile with seconds= fetched on a thread; returns once its
    session started (podprof's log)."""

    def __init__(self, pp, name, query, filename):
        import threading
        self.body = None
        self.err = None
        self.thread = threading.Thread(target=self._fetch, args=(pp, name, query, filename))
        self.thread.start()
        pp.wait_log(r"%s: started" % name, 10)

    def _fetch(self, pp, name, query, filename):
        try:
            self.body = get_profile(pp, query, name=name, filename=filename)
        except Exception as e:   # reported by result()
            self.err = e

    def result(self, timeout=30):
        self.thread.join(timeout)
        check(self.body is not None, "profile failed: %s" % self.err)
        return self.body


@test
def index_lists_every_profile_with_counts():
    f = waiter("-q")
    pp = Podprof("--pid", str(f.pid))
    st, h, body = http(pp.port, "/debug/pprof/")
    page = body.decode()
    for name in ("allocs", "block", "cmdline", "goroutine", "heap", "mutex", "profile", "symbol",
                 "trace"):
        check("href='%s?debug=1'" % name in page or "href='%s" % name in page,
              "index lacks %s" % name)
    counts = {m.group(2): int(m.group(1)) for m in
              re.finditer(r"<tr><td>(\d+)</td><td><a href='(\w+)[?']", page)}
    threads = len(os.listdir("/proc/%d/task" % f.pid))
    # -q: every thread waits (the sleeper wakes once a second, briefly);
    # only the locker is sure to be in futex (main may join in futex too).
    check(threads - 1 <= counts.get("block", -1) <= threads, "block count %s of %d threads" %
          (counts.get("block"), threads))
    check(1 <= counts.get("mutex", -1) <= 2, "mutex count %s" % counts.get("mutex"))
    check(counts.get("goroutine") == threads, "goroutine count %s" % counts.get("goroutine"))
    f.stop()


@test
def threadcreate_counts_the_stacks_that_create_threads():
    f = waiter("-q", "-n", "1")
    pp = Podprof("--pid", str(f.pid), "--detach-grace-ms", "60000")
    first = save(get_profile(pp, "", name="threadcreate"), "tc1.pb.gz")
    tags = pprof("-tags", first)
    check(re.search(r"creation: Total [\d.]+\s*\n\s*[\d.]+ \(\s*100%\): not seen", tags), tags[:600])
    starts = {fr[0] for _, _, fr, lab in raw_traces(first, "threadcreate")}
    check({"locker", "reader", "poller"} <= starts, "start routines: %s" % sorted(starts))
    # The churner creates threads while podprof stays attached: their
    # creation stack is counted once podprof watches creations.
    deadline, made = time.monotonic() + 20, 0
    while made < 20 and time.monotonic() < deadline:
        path = save(get_profile(pp, "", name="threadcreate"), "tc2.pb.gz")
        made = sum(v for v, _, fr, lab in raw_traces(path, "threadcreate")
                   if "churn_loop" in fr and "pthread_create" in fr and "creation" not in lab)
    check(made >= 20, "%d creations under pthread_create <- churn_loop" % made)
    st, h, text = http(pp.port, "/debug/pprof/threadcreate?debug=1")
    check(st == 200 and text.decode().startswith("threadcreate profile: total "), text[:100])
    f.stop()


@test
def goroutine_and_threadcreate_deltas_like_go():
    """seconds= on goroutine and threadcreate: the end less the start, by
    stack; unchanged stacks dropped (go tool pprof -seconds N sends it)."""
    f = waiter("-q", "-n", "1")
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid), "--detach-grace-ms", "60000")
    get_profile(pp, "", name="threadcreate")   # from here on creations are watched
    d = save(get_profile(pp, "seconds=2", name="goroutine", filename="goroutine-delta"), "gd.pb.gz")
    tr = raw_traces(d, "goroutine")
    # The blocked threads did not move: not in the delta. Threads of the churn
    # come and go (short-job), the churner moves between create and join.
    blocked = [lab.get("thread") for _, _, _, lab in tr if lab.get("thread") in ("locker", "reader", "poller")]
    check(not blocked, "unchanged threads in the delta: %s" % blocked)
    check(tr and all(abs(v) == 1 for v, _, _, _ in tr), "delta values: %r" % [t[0] for t in tr][:10])
    t = save(get_profile(pp, "seconds=2", name="threadcreate", filename="threadcreate-delta"), "td.pb.gz")
    made = sum(v for v, _, fr, lab in raw_traces(t, "threadcreate") if "churn_loop" in fr)
    check(made >= 10, "%d creations in 2 s of churn" % made)
    check(all("creation" not in lab for _, _, _, lab in raw_traces(t, "threadcreate")),
          "a delta lists threads whose creation was not seen")
    f.stop()


def tracer_of(pid):
    """The process tracing pid (TracerPid names the tracer thread), or 0."""
    with open("/proc/%d/status" % pid) as fh:
        tid = int(re.search(r"^TracerPid:\s+(\d+)", fh.read(), re.M).group(1))
    if not tid:
        return 0
    with open("/proc/%d/status" % tid) as fh:
        return int(re.search(r"^Tgid:\s+(\d+)", fh.read(), re.M).group(1))


@test
@figures
def continuous_mode_counts_since_podprof_started():
    """--continuous: the target stays traced at a low rate, and block, mutex,
    threadcreate and allocs without seconds= answer at once with what
    accumulated since podprof started, never decreasing; running threads
    are not stopped by the watch."""
    f = waiter("-n", "1", "-t", "2")
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid), "--continuous", "--continuous-hz", "20")
    t_start = time.monotonic()
    pp.wait_log(r"watch: started pid=%d" % f.pid, 10)
    check(tracer_of(f.pid) == podprof_pid(pp), "the target is not traced by podprof")

    def locker_delay():
        t0 = time.monotonic()
        answer = http(pp.port, "/debug/pprof/block")
        took = time.monotonic() - t0   # (the answer's time, not the decoder's check after it)
        body = check_served(answer, "block")
        check(took < 2, "block without seconds= waited for a window: %.1f s" % took)
        w = waits_by_thread(save(body, "cont-block.pb.gz"))
        return w.get("locker", (0, set(), set()))

    deadline = time.monotonic() + 10
    while locker_delay()[0] < 1e9 and time.monotonic() < deadline:
        time.sleep(0.1)
    d1, leaves, callers = locker_delay()
    check(d1 >= 1e9 and leaves == {"syscall futex"} and "mutex_waiter" in callers,
          "locker: %.2f s, %s, %s" % (d1 / 1e9, leaves, sorted(callers)))
    mutex = waits_by_thread(save(get_profile(pp, "", name="mutex"), "cont-mutex.pb.gz"))
    check("locker" in mutex and "reader" not in mutex, "mutex: %s" % sorted(mutex))
    # threadcreate: the churner's creations since podprof started, no
    # request needed before.
    tc = raw_traces(save(get_profile(pp, "", name="threadcreate"), "cont-tc.pb.gz"), "threadcreate")
    made = sum(v for v, _, fr, lab in tc if "churn_loop" in fr and "creation" not in lab)
    check(made >= 5, "%d creations counted since start" % made)
    a1 = total(save(get_profile(pp, "", name="allocs"), "cont-a1.pb.gz"), "alloc_space")
    d2 = locker_delay()[0]
    check(d2 >= d1, "block decreased: %.2f then %.2f s" % (d1 / 1e9, d2 / 1e9))
    a2 = total(save(get_profile(pp, "", name="allocs"), "cont-a2.pb.gz"), "alloc_space")
    check(a2 >= a1, "allocs decreased: %d then %d" % (a1, a2))
    # The watch never stops a running thread: the two spinners run on. It
    # stops a waiting thread once per new wait: the cycler, about 5 a second
    # (its count grows with the test's length, longer on a loaded machine);
    # a spinner stopped at each of the watch's 20 ticks a second would add 20.
    stops = lib_metric(pp, "podprof_stops_total")
    secs = time.monotonic() - t_start
    print("  info: %d stops under the watch in %.1f s" % (stops, secs))
    check(stops < 12 * secs, "%d stops under the watch in %.1f s (2 spinners, 9 waiting threads)" % (stops, secs))
    # It stays attached between requests, and a CPU profile runs beside it.
    check_busy_like = get_profile(pp, "seconds=1&hz=200")
    check(any("spin_for" in fr for _, fr in traces(save(check_busy_like, "cont-cpu.pb.gz"))),
          "CPU profile beside the watch lost its samples")
    check(tracer_of(f.pid) == podprof_pid(pp), "detached after the requests")
    f.stop()


@test
def continuous_watch_follows_an_exec():
    f = Fixture(threads=1, sleepers=2, extra=["-e", "500", "-E", BUSY])
    pp = Podprof("--pid", str(f.pid), "--continuous")
    pp.wait_log(r"watch: started pid=%d" % f.pid, 10)
    pp.wait_log(r"watch: pid %d runs a new program: watching it from now on" % f.pid, 10)
    pp.wait_log(r"watch: started pid=%d" % f.pid, 10, start=len(pp.lines) - 1)
    # The new program (busy -t 1: only running threads) is watched: block
    # answers at once from the new watch.
    t0 = time.monotonic()
    answer = http(pp.port, "/debug/pprof/block")
    took = time.monotonic() - t0
    top = pprof("-top", save(check_served(answer, "block"), "exec-block.pb.gz"))
    check(took < 2 and "since the continuous watch began" in top, "%.1f s: %s" % (took, top[:600]))
    f.stop()


@test
def a_window_cut_short_by_the_target_says_so():
    f = waiter("-q")
    wait_placed(f.pid)
    pp = Podprof("--pid", str(f.pid))
    bg = NamedInBackground(pp, "block", "seconds=10", "block-delta")
    deadline = time.monotonic() + 10
    while lib_metric(pp, "podprof_ticks_total") < 50 and time.monotonic() < deadline:
        time.sleep(0.02)
    t0 = time.monotonic()
    f.proc.kill()
    path = save(bg.result(), "cut.pb.gz")
    check(time.monotonic() - t0 < 3, "the window did not end with the target")
    top = pprof("-top", path)
    check(re.search(r"the target exited [\d.]+ s into the window", top), top[:800])
    check("mutex_waiter" in pprof("-traces", "-sample_index=delay", path), "what was gathered is there")
