"""Where a Go program's goroutines wait: block and mutex of a Go target
that never called SetBlockProfileRate, read from its runtime from outside
(ptrace/sessions/gowaits.c), on Go 1.19, 1.26 (stripped) and 1.27. The
fixture (tests/fixtures/goroutines, -churn -blockrate) parks 100
goroutines in a channel receive, 50 asleep and 10 on a held mutex for good,
and keeps three busy with short waits: main.pinger (a tick every 10 ms),
main.contender (a mutex main.holder holds 15 ms of every 20). Its own block
profile, on for the reference, is compared over the same window."""
import os
import re
import threading
import time

import lib
from lib import Podprof, check, http, save, test, figures, traces
from test_go import GoFixture
from test_goroutines import build

SECONDS = 3
LOCK = ("semacquire", "sync.Mutex.Lock")   # Go 1.19's wait reason, 1.20 on
FOR_GOOD = {"main.receiver": (("chan receive",), 100), "main.sleeper": (("sleep",), 50),
            "main.locker": (LOCK, 10)}


def fetch(port, name, out, key):
    st, _, body = http(port, "/debug/pprof/%s?seconds=%d" % (name, SECONDS), timeout=SECONDS + 60)
    check(st == 200, "%s on port %d: %s %r" % (name, port, st, body[:300]))
    out[key] = body


def metric(pp, name):
    st, _, body = http(pp.port, "/metrics")
    m = re.search(r"^podprof_%s (\d+)" % name, body.decode(), re.M)
    check(st == 200 and m, "no podprof_%s in /metrics: %s" % (name, st))
    return int(m.group(1))


def delay(path, fn, reasons=None, index="delay"):
    """The sum of index over the samples with fn in their stack, under one
    of the wait reasons (label wait) if given."""
    extra = ["-tagfocus=wait=%s" % "|".join("^%s$" % re.escape(r) for r in reasons)] if reasons else []
    return sum(v for v, fr in traces(path, index, extra) if any(x == fn or x.startswith(fn + " ") for x in fr))


def check_release(release, stripped):
    tag = "go%s%s" % (release, "-stripped" if stripped else "")
    f = GoFixture(build(release, stripped), ["-churn", "-blockrate", "-hot=false"], preempt=True)
    pp = Podprof("--pid", str(f.pid), "--wait-seconds", "1")
    # The three windows at once: podprof's block and mutex, the program's own block.
    got, ts = {}, []
    for port, name, key in ((pp.port, "block", "block"), (pp.port, "mutex", "mutex"),
                            (f.port, "block", "own_block")):
        ts.append(threading.Thread(target=fetch, args=(port, name, got, key)))
    for t in ts:
        t.start()
    for t in ts:
        t.join(SECONDS + 90)
    check(len(got) == 3, "%s: a window failed: %s" % (tag, sorted(got)))
    paths = {k: save(v, "waits-%s-%s.pb.gz" % (tag, k)) for k, v in got.items()}
    # The goroutines are looked at, never a thread stopped (the threads'
    # waits would stop each thread once per wait).
    stops = metric(pp, "stops_total")
    check(stops == 0, "%s: %d threads stopped for the goroutines' waits" % (tag, stops))
    st, _, threads = http(pp.port, "/debug/pprof/block?seconds=1&view=threads")
    st2, _, text = http(pp.port, "/debug/pprof/block?debug=1")   # --wait-seconds
    pp.stop(), f.stop()
    # The two windows look at the same ticks: one reads the goroutines,
    # the other takes its read (not a second read of every goroutine).
    shares = []
    for l in pp.log().splitlines():
        m = re.search(r"(block|mutex): pid=%d .*: (\d+) looks at the goroutines \((\d+) on another" % f.pid, l)
        if m and len(shares) < 2:   # the 3 s windows end first
            print("  info: %s: %s" % (tag, l[l.index(m.group(1) + ":"):]))
            shares.append((int(m.group(2)), int(m.group(3))))
    check(len(shares) == 2 and max(sh for _, sh in shares) >= 0.8 * min(n for n, _ in shares),
          "%s: the windows' looks (looks, on another's read): %s" % (tag, shares))

    block, mutex, own = paths["block"], paths["mutex"], paths["own_block"]
    comment = lib.pprof("-raw", block)
    check(re.search(r"goroutines of pid %d \(go%s" % (f.pid, re.escape(release)), comment),
          "%s: block does not say it is the goroutines': %s" % (tag, comment[:600]))
    # Parked for good: each goroutine credited the whole window, one wait each.
    for fn, (reasons, n) in FOR_GOOD.items():
        d = delay(block, fn, reasons) / 1e9
        c = delay(block, fn, reasons, "contentions")
        print("  info: %s: %s: %.1f s parked in %s (want %d x %d s), %d waits" %
              (tag, fn, d, "/".join(reasons), n, SECONDS, c))
        check(abs(d - n * SECONDS) <= 0.1 * n * SECONDS, "%s: %s parked %.1f s, want %d s" %
              (tag, fn, d, n * SECONDS))
        check(c == n, "%s: %s: %d waits, want %d" % (tag, fn, c, n))
    # Short waits, many: as the program's own block profile has them.
    for fn, reasons in (("main.pinger", ("chan receive",)), ("main.contender", LOCK)):
        ours, theirs = delay(block, fn, reasons) / 1e9, delay(own, fn) / 1e9
        print("  info: %s: %s: podprof %.2f s, the program's own %.2f s (%.2f)" %
              (tag, fn, ours, theirs, ours / theirs if theirs else 0))
        check(theirs > 0.3 * SECONDS and abs(ours - theirs) <= 0.25 * theirs,
              "%s: %s waited %.2f s, the program's own says %.2f s" % (tag, fn, ours, theirs))
    waits = delay(block, "main.pinger", ("chan receive",), "contentions")
    check(waits >= 20, "%s: main.pinger's short waits counted %d times" % (tag, waits))
    # mutex: the lock waits only, the waiters' stacks.
    d = delay(mutex, "main.locker") / 1e9
    check(abs(d - 10 * SECONDS) <= 0.1 * 10 * SECONDS, "%s: mutex: main.locker %.1f s" % (tag, d))
    check(delay(mutex, "main.contender") > 0.3 * SECONDS, "%s: mutex: no main.contender" % tag)
    for fn in ("main.receiver", "main.sleeper", "main.pinger"):
        check(delay(mutex, fn) == 0, "%s: mutex has %s, which waits for no lock" % (tag, fn))
    # go tool pprof's view of it, by wait reason
    tags = lib.pprof("-tags", block)
    check(re.search(r"wait: Total", tags) and "chan receive" in tags and "sleep" in tags,
          "%s: -tags:\n%s" % (tag, tags[:1500]))
    # The threads, still there; Go's text format.
    check(st == 200, "%s: view=threads: %s %r" % (tag, st, threads[:300]))
    raw = lib.pprof("-raw", save(threads, "waits-%s-threads.pb.gz" % tag))
    check("threads of" in raw and "goroutines of" not in raw, "%s: view=threads: %s" % (tag, raw[:600]))
    text = text.decode()
    check(st2 == 200 and text.startswith("--- contention:\ncycles/second=") and
          re.search(r"^\d+ 100 @ (0x[0-9a-f]+ ?)+$", text, re.M),
          "%s: debug=1: %s %r" % (tag, st2, text[:600]))


@test
@figures
def go119_block_and_mutex_are_where_goroutines_wait():
    check_release("1.19", False)


@test
@figures
def go126_stripped_block_and_mutex_are_where_goroutines_wait():
    check_release("1.26", True)


@test
@figures
def go127_block_and_mutex_are_where_goroutines_wait():
    check_release("1.27", False)


@test
def go_continuous_watch_keeps_goroutines_waits():
    """--continuous: block and mutex without seconds= answer with the
    goroutines' waits since the watch began, as Go's own cumulative ones;
    the threads' need a window then (Go's 400, named)."""
    f = GoFixture(build("1.19", False), ["-hot=false"], preempt=True)
    pp = Podprof("--pid", str(f.pid), "--continuous", "--continuous-hz", "20")
    pp.wait_log(r"watch: started pid=%d" % f.pid, 10)
    t_watch = time.monotonic()

    def receivers():
        t0 = time.monotonic()
        path = save(lib.get_profile(pp, "", name="block"), "watch-block.pb.gz")
        return t0, time.monotonic(), path, delay(path, "main.receiver", ("chan receive",)) / 1e9

    deadline = t_watch + 10
    while receivers()[3] < 100 and time.monotonic() < deadline:
        time.sleep(0.1)
    t0, t1, path, d = receivers()
    raw = lib.pprof("-raw", path)
    check("since the continuous watch began" in raw and "goroutines of" in raw,
          "not the watch's goroutines: %s" % raw[:600])
    print("  info: the watch %.2f-%.2f s old: main.receiver parked %.1f s" % (t0 - t_watch, t1 - t_watch, d))
    # Credited from the watch's first look (before its log line, so before
    # t_watch) up to a look the request makes, unless one came in the 10 ms
    # before: not up to the watch's last look, which a busy machine can
    # leave a period (0.2 s) behind.
    check(100 * (t0 - t_watch - 0.01) <= d <= 100 * (t1 - t_watch + 0.05),
          "receivers parked %.1f s, the watch %.2f-%.2f s old" % (d, t0 - t_watch, t1 - t_watch))
    check(delay(path, "main.receiver", ("chan receive",), "contentions") == 100, "receivers' waits")
    check(abs(delay(path, "main.sleeper", ("sleep",)) / 1e9 - d / 2) < 1e-6 * d + 0.01,
          "sleepers not credited as the receivers")
    st, _, body = http(pp.port, "/debug/pprof/mutex?view=threads")
    check(st == 400 and b"seconds=N" in body, "threads without a window: %s %r" % (st, body[:300]))
    pp.stop(), f.stop()
