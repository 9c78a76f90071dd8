"""The goroutines of a Go program, read from its runtime from outside, on
every Go release in support and the one before, plain and stripped (-s -w),
judged against the program's own net/http/pprof at the same moment and by
go tool pprof. The fixture (tests/fixtures/goroutines) parks 100 goroutines
in a channel receive, 50 asleep, 10 on a held mutex, and runs one hot
goroutine under pprof labels."""
import collections
import os
import re
import subprocess

import lib
import runtimes
from lib import BUILD, Podprof, check, http, pprof, save, test, figures
from test_go import GoFixture

SRC = os.path.join(lib.ROOT, "tests", "fixtures", "goroutines")
FIXTURE = os.path.join(BUILD, "fixtures", "goroutines")

# What the fixture's goroutines wait in, by the function they started in.
WANT = {"main.receiver": ("chan receive", 100), "main.sleeper": ("sleep", 50),
        "main.locker": (("semacquire", "sync.Mutex.Lock"), 10)}


def build(release, stripped):
    """The fixture built by Go `release` (bookworm's 1.19: make fixtures;
    1.26, 1.27: scripts/runtimes.sh's toolchains), stripped or not."""
    if release == "1.19":
        return FIXTURE + ("-stripped" if stripped else "")
    out = os.path.join(lib.TMP, "goroutines-%s%s" % (release, "-stripped" if stripped else ""))
    if not os.path.exists(out):
        runtimes.go_build(release, SRC, out, flags=["-ldflags=-s -w"] if stripped else [])
    return out


def states(dump):
    """{goroutine id: (state, [function names], created-by line)} of a
    debug=2 dump."""
    out = {}
    for block in dump.strip().split("\n\n"):
        lines = block.split("\n")
        m = re.match(r"goroutine (\d+) \[([^\],]+)", lines[0])
        if not m:
            continue
        funcs = [re.sub(r"\(.*$", "", x) for x in lines[1:] if x and not x.startswith("\t")]
        created = [x for x in lines[1:] if x.startswith("created by")]
        out[int(m.group(1))] = (m.group(2), funcs, created[0] if created else None)
    return out


def where_lines(dump, fn):
    """The lines "\tfile:line +0x..." of the first goroutine of a debug=2
    dump with fn in its stack."""
    for block in dump.split("\n\n"):
        if "\n%s(" % fn in block:
            return [l for l in block.split("\n") if l.startswith("\t")]
    return None


def by_group(dump):
    """{(started in, state): count} of a debug=2 dump, by the outermost
    main.* frame (the function the goroutine started in)."""
    groups = collections.Counter()
    for state, funcs, _ in states(dump).values():
        mains = [f for f in funcs if f.startswith("main.")]
        groups[(mains[-1] if mains else "-", state)] += 1
    return groups


def check_release(release, stripped):
    exe = build(release, stripped)
    if stripped:
        syms = subprocess.run(["readelf", "-sW", exe], capture_output=True, text=True).stdout
        check("main.receiver" not in syms, "%s still has a symbol table" % exe)
    f = GoFixture(exe, preempt=True)
    pp = Podprof("--pid", str(f.pid))
    tag = "go%s%s" % (release, "-stripped" if stripped else "")
    # Both texts at about the same moment: the fixture's goroutines stay
    # where they wait; only the program's own serving ones come and go.
    st, _, own1 = http(f.port, "/debug/pprof/goroutine?debug=1")
    check(st == 200, "the program's own goroutine profile failed")
    st, _, ours1 = http(pp.port, "/debug/pprof/goroutine?debug=1")
    check(st == 200, "podprof's goroutine?debug=1: %s %r" % (st, ours1[:300]))
    st, _, own2 = http(f.port, "/debug/pprof/goroutine?debug=2")
    st2, _, ours2 = http(pp.port, "/debug/pprof/goroutine?debug=2")
    check(st == 200 and st2 == 200, "debug=2: %s %s" % (st, st2))
    own1, ours1, own2, ours2 = (b.decode() for b in (own1, ours1, own2, ours2))
    total = lambda t: int(re.match(r"goroutine profile: total (\d+)", t).group(1))
    print("  info: %s: podprof total %d, the program's own %d" % (tag, total(ours1), total(own1)))
    # The program's own counts the goroutine writing its profile and the
    # connection's: podprof, from outside, sees neither (nor its own).
    check(abs(total(ours1) - total(own1)) <= 0.05 * total(own1),
          "%s: total %d against the program's own %d" % (tag, total(ours1), total(own1)))
    # The same groups in the same states, wait reasons as this release names them.
    ours, own = by_group(ours2), by_group(own2)
    for fn, (state, n) in WANT.items():
        names = state if isinstance(state, tuple) else (state,)
        got = sum(c for (g, s), c in ours.items() if g == fn and s in names)
        theirs = sum(c for (g, s), c in own.items() if g == fn and s in names)
        check(got == n and theirs == n, "%s: %s in %s: podprof %d, the program's own %d (want %d)" %
              (tag, fn, names, got, theirs, n))
        check(sum(c for (g, s), c in ours.items() if g == fn) == n,
              "%s: %s goroutines in other states: %s" % (tag, fn, ours))
    # created by, as Go prints it (with the creator's goroutine from 1.21)
    spawned = [c for _, (s, fns, c) in states(ours2).items() if "main.receiver" in fns]
    want = r"created by main\.spawn" + (r" in goroutine 1$" if release != "1.19" else "$")
    check(spawned and all(c and re.match(want, c) for c in spawned),
          "%s: created-by lines %s" % (tag, spawned[:3]))
    own_spawned = [c for _, (s, fns, c) in states(own2).items() if "main.receiver" in fns]
    check(own_spawned and own_spawned[0] == spawned[0], "%s: podprof %r, Go %r" %
          (tag, spawned[0], own_spawned[:1]))
    # A receiver's frames where Go prints them ("\tfile:line +0x..."), its
    # creator's too: the same lines as the program's own (both unwind the
    # same parked stack; Go prints the arguments' values, podprof "...").
    ours_where, own_where = where_lines(ours2, "main.receiver"), where_lines(own2, "main.receiver")
    check(own_where and ours_where == own_where,
          "%s: a receiver's frame lines: podprof %s, Go %s" % (tag, ours_where, own_where))
    # debug=1: the groups' frames as Go prints them, the hot one's labels
    check('# labels: {"tier":"gold", "worker":"hot"}' in ours1, "%s: no labels line:\n%s" % (tag, ours1[-2000:]))
    check(re.search(r"^100 @ .*\n(#\t0x[0-9a-f]+\t(main|runtime)\.\S+\t+\S+:\d+\n)+", ours1, re.M),
          "%s: no group of the 100 receivers:\n%s" % (tag, ours1[:2000]))
    for line in ours1.split("\n"):
        if line.startswith("#\t0x") and "main.blockChan" in line:
            check(re.match(r"#\t0x[0-9a-f]+\tmain\.blockChan\+0x[0-9a-f]+\t+\S+/main\.go:\d+$", line),
                  "%s: frame line %r" % (tag, line))
    # debug=0, read by go tool pprof: one goroutine a sample, Go's labels
    path = save(lib.get_profile(pp, "", name="goroutine"), "gr-%s.pb.gz" % tag)
    top = pprof("-top", path)
    check(re.search(r"main\.blockChan", top) and "Type: goroutine" in top, "%s: -top:\n%s" % (tag, top[:1500]))
    tags = pprof("-tags", path)
    check(re.search(r"worker: Total 1\.?0?\s*\n\s+1\.?0? \(\s*100%\): hot", tags), "%s: -tags:\n%s" % (tag, tags))
    pp.stop(), f.stop()


@test
@figures
def go119_goroutines_match_the_programs_own():
    check_release("1.19", False)


@test
def go119_stripped_goroutines_match_the_programs_own():
    check_release("1.19", True)


@test
def go126_goroutines_match_the_programs_own():
    check_release("1.26", False)


@test
def go126_stripped_goroutines_match_the_programs_own():
    check_release("1.26", True)


@test
def go127_goroutines_match_the_programs_own():
    check_release("1.27", False)


@test
def go127_stripped_goroutines_match_the_programs_own():
    check_release("1.27", True)


@test
def go_threads_stay_reachable():
    """?view=threads gives a Go program's threads (the dump of every
    target that is not Go), the index says how; a bad view is Go's 400."""
    f = GoFixture(FIXTURE, preempt=True)
    pp = Podprof("--pid", str(f.pid))
    st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=2&view=threads")
    check(st == 200 and re.search(rb'^goroutine %d \[[^\]]*thread "goroutines"\]:' % f.pid, body, re.M),
          "view=threads: %s %r" % (st, body[:500]))
    st, _, body = http(pp.port, "/debug/pprof/goroutine?view=lines")
    check(st == 400 and b"must be goroutines or threads" in body, "bad view: %s %r" % (st, body))
    st, _, body = http(pp.port, "/debug/pprof/")
    check(b"view=threads" in body, "the index does not say how to get the threads")
    pp.stop(), f.stop()


@test
def signal_heavy_go_program_is_let_go_after_its_dump():
    """A Go program's running goroutine gets SIGURG every 10 ms from its
    runtime, and each signal to a traced thread is a round trip through
    podprof: a target that gets a signal after its last profile is let go
    then, not after the detach grace (here a minute), while a target that
    gets none stays traced for the grace as before."""
    go = GoFixture(FIXTURE, preempt=True)   # its hot loop is preempted by SIGURG
    quiet = lib.Fixture(threads=1, sleepers=2)
    pp = Podprof("--pid", str(go.pid), "--detach-grace-ms", "60000")
    st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=1&pid=%d" % quiet.pid)
    check(st == 200 and lib.tracer_pid(quiet.pid) != 0,
          "the quiet fixture is not traced after its dump: %s %r" % (st, body[:200]))
    st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=1")
    check(st == 200 and b"main.hotLoop" in body, "the Go dump: %s %r" % (st, body[:300]))
    lib.wait_untraced(go.pid, 10)
    check(lib.tracer_pid(quiet.pid) != 0, "the quiet fixture was let go before its grace")
    # Its signals are still its own: the program runs on, and answers.
    st, _, body = http(go.port, "/rounds")
    check(st == 200 and int(body) > 0, "the Go program after: %s %r" % (st, body))
    pp.stop(), go.stop(), quiet.stop()


def labelled_traces(path):
    """[(labels {k: v}, value in ns, [frames leaf first])] of a CPU profile,
    from go tool pprof -traces."""
    out = []
    for block in pprof("-traces", path).split("-----------+")[1:]:
        labels, frames, value = {}, [], 0
        for line in block.split("\n")[1:]:
            m = re.match(r"\s+(\w+):\s+(.*)$", line)
            if m and not frames and not re.match(r"\s+[\d.]+[mun]?s\s", line):
                labels[m.group(1)] = m.group(2).strip()
                continue
            m = re.match(r"\s+([\d.]+)(m|u|n)?s\s+(\S.*)$", line)
            if m:
                value = float(m.group(1)) * {"m": 1e6, "u": 1e3, "n": 1, None: 1e9}[m.group(2)]
                frames.append(m.group(3).strip())
            elif line.strip() and frames:
                frames.append(line.strip())
        if frames:
            out.append((labels, value, frames))
    return out


def check_cpu_labels(backend, release="1.19"):
    exe = build(release, False)
    f = GoFixture(exe, ["-recv", "5", "-sleep", "5", "-lock", "2"], preempt=True)
    pp = Podprof("--pid", str(f.pid), "--backend", backend)
    path = save(lib.get_profile(pp, "seconds=3&hz=200"), "labels-%s-%s.pb.gz" % (backend, release))
    pp.stop(), f.stop()
    tr = labelled_traces(path)
    hot = [(l, v) for l, v, fr in tr if "main.hotLoop" in fr]
    total = sum(v for _, v in hot)
    carried = sum(v for l, v in hot if l.get("worker") == "hot" and l.get("tier") == "gold")
    check(total > 0, "no sample in main.hotLoop: %s" % tr[:3])
    share = 100.0 * carried / total
    print("  info: %s, go%s: %.1f%% of main.hotLoop's CPU carries its goroutine's labels" %
          (backend, release, share))
    bare = [(l, fr[:6]) for l, v, fr in tr if "main.hotLoop" in fr and l.get("worker") != "hot"]
    check(share >= 99.0, "%s: only %.1f%% of the labelled goroutine's CPU carries its labels: %s" %
          (backend, share, bare[:3]))
    # Nothing else was labelled: the labels are the goroutine's, not the thread's.
    # A sample whose walk stops in the runtime before any goroutine's code
    # (in Go's signal handler as the hot goroutine is preempted, its walk
    # ending at runtime.asyncPreempt; on the system stack nanotime switches
    # to for the vDSO) ran for its m's current goroutine: Go's own profile
    # labels it by m.curg, which was the hot goroutine. A stack that reaches
    # another goroutine's code or root must not carry the labels.
    def cut_in_runtime(fr):
        return (not any(x.startswith("main.") for x in fr) and
                fr[-1] not in ("runtime.goexit", "runtime.main", "runtime.mstart", "runtime.rt0_go"))
    other = [(l, fr[:6]) for l, v, fr in tr if "main.hotLoop" not in fr and "worker" in l and
             not any(x.startswith("main.hotWorker") for x in fr) and not cut_in_runtime(fr)]
    check(not other, "labels on samples of other code: %s" % other[:3])


@test
@figures
def go_cpu_samples_carry_pprof_labels_under_perf_event():
    """pprof.Do's labels on every CPU sample of the goroutine that runs
    under them, as Go's own CPU profile carries them (the kernel's sample:
    the goroutine from R14, its labels read as the sample is reported)."""
    check_cpu_labels("perf_event")


@test
@figures
def go_cpu_samples_carry_pprof_labels_under_ptrace():
    """The same with ptrace's stops (g from R14 or the thread's TLS)."""
    check_cpu_labels("ptrace")


@test
@figures
def go127_cpu_samples_carry_pprof_labels():
    """Go 1.24 and later keep labels in a sorted list, not a map."""
    check_cpu_labels("auto", "1.27")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@test
@figures
def real_go_service_prometheus_goroutines_match_its_own():
    """Debian's prometheus (a Go 1.19 program without a symbol table, with
    its own net/http/pprof) scraping itself: podprof's goroutine dump
    against the program's own at the same moment. Totals within 5 % (the
    program counts the goroutines serving its own profile); every goroutine
    both list by id, bar the ones serving HTTP, is in the same state with
    the same frames; the groups of debug=1 (by stack) the same, bar those."""
    import shutil
    import time
    exe = shutil.which("prometheus")
    if not exe:
        raise lib.Skip("prometheus not installed (Debian package prometheus, scripts/packages.txt)")
    port, work = free_port(), os.path.join(lib.TMP, "prometheus")
    os.makedirs(work, exist_ok=True)
    with open(os.path.join(work, "prom.yml"), "w") as fh:
        fh.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: self\n"
                 "    static_configs:\n      - targets: ['127.0.0.1:%d']\n" % port)
    proc = subprocess.Popen([exe, "--config.file=" + os.path.join(work, "prom.yml"),
                             "--storage.tsdb.path=" + os.path.join(work, "data"),
                             "--web.listen-address=127.0.0.1:%d" % port],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lib.PROCS.append(proc)
    deadline = time.monotonic() + 60
    for line in proc.stderr:
        if "Server is ready to receive web requests" in line:
            break
        check(time.monotonic() < deadline, "prometheus did not get ready")
    threading_drain(proc)
    # Its scrape of itself done once: the scrape loop's goroutines exist.
    while b'"health":"up"' not in http(port, "/api/v1/targets")[2]:
        check(time.monotonic() < deadline, "prometheus never scraped itself")
        time.sleep(0.1)
    pp = Podprof("--pid", str(proc.pid))
    serving = ("net/http.(*conn).serve", "net/http.(*connReader).backgroundRead", "runtime/pprof.",
               "net/http.(*persistConn)", "net/http.(*Transport)")
    for attempt in range(3):
        st, _, own2 = http(port, "/debug/pprof/goroutine?debug=2")
        st2, _, ours2 = http(pp.port, "/debug/pprof/goroutine?debug=2")
        check(st == 200 and st2 == 200, "debug=2: %s %s %r" % (st, st2, ours2[:300]))
        own2, ours2 = own2.decode(), ours2.decode()
        own, ours = states(own2), states(ours2)
        # The program's own counts the goroutines serving this very
        # request (its connection's, its handler's): podprof sees neither.
        core = lambda d: [g for g in d if not any(s in f for f in d[g][1] for s in serving)]
        print("  info: prometheus: podprof %d goroutines (%d not serving HTTP), the program's own %d (%d)" %
              (len(ours), len(core(ours)), len(own), len(core(own))))
        check(abs(len(core(ours)) - len(core(own))) <= max(1, 0.05 * len(core(own))),
              "totals %d and %d" % (len(core(ours)), len(core(own))))
        steady = [g for g in core(own) if g in ours and g in core(ours)]
        differ = [(g, own[g][:2], ours[g][:2]) for g in steady
                  if own[g][0].split(",")[0] != ours[g][0].split(",")[0] or own[g][1] != ours[g][1]]
        # A goroutine that woke between the two dumps (a scrape, a tick)
        # differs; a second look at the same moment settles it.
        if len(differ) <= 0.1 * len(steady):
            break
    print("  info: %d goroutines in both, %d differ (moved between the two dumps)" % (len(steady), len(differ)))
    check(len(steady) >= 0.9 * len(core(own)), "only %d of %d goroutines in both" % (len(steady), len(core(own))))
    check(len(differ) <= 0.1 * len(steady), "goroutines in other states or stacks: %s" % differ[:3])
    # Every goroutine's own line "created by" is the program's.
    created = sum(1 for g in steady if own[g][2] == ours[g][2])
    check(created == len(steady), "created-by lines differ on %d goroutines" % (len(steady) - created))
    pp.stop()
    proc.kill()
    proc.wait(20)


def threading_drain(proc):
    """Reads proc's stderr on a thread (a pipe nobody reads would fill)."""
    import threading
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()


@test
def go_labels_and_threads_over_several_processes():
    """Two Go programs under one parent, profiled as a tree (tree=1): the
    CPU profile carries each one's pprof labels on its labelled goroutine's
    samples (the parts' labels kept through the merge); goroutine gives each
    process's threads and says how to get a Go program's goroutines."""
    args = "-recv 5 -sleep 5 -lock 2"
    sh = subprocess.Popen(["sh", "-c", "%s %s & %s %s & wait" % (FIXTURE, args, FIXTURE, args)],
                          stdout=subprocess.PIPE)
    lib.PROCS.append(sh)
    kids = []
    for line in lib.read_lines(sh.stdout.fileno(), 2, 20, "the two Go programs' ready lines"):
        m = re.match(r"ready (\d+)", line)
        check(m, "not a ready line: %r" % line)
        kids.append(int(m.group(1)))
    pp = Podprof("--pid", str(sh.pid))
    path = save(lib.get_profile(pp, "seconds=3&hz=200&tree=1"), "labels-tree.pb.gz")
    by_pid = {}
    for labels, v, fr in labelled_traces(path):
        if "main.hotLoop" in fr and "pid" in labels:
            tot, lab = by_pid.get(int(labels["pid"]), (0, 0))
            by_pid[int(labels["pid"])] = (tot + v, lab + (v if labels.get("worker") == "hot" else 0))
    print("  info: main.hotLoop's CPU carrying worker=hot, by process: %s" %
          {p: "%.1f%%" % (100.0 * lab / tot) for p, (tot, lab) in by_pid.items()})
    check(set(by_pid) == set(kids), "hotLoop samples of %s, the programs are %s" % (sorted(by_pid), kids))
    for p, (tot, lab) in by_pid.items():
        check(lab >= 0.99 * tot, "pid %d: %.1f%% of hotLoop's CPU carries its labels" % (p, 100.0 * lab / tot))
    raw = pprof("-raw", save(lib.get_profile(pp, "tree=1", name="goroutine"), "gr-tree.pb.gz"))
    check("several processes: every one's threads; a Go program's goroutines: pid=N" in raw,
          "no note of what several processes give:\n%s" % raw[:800])
    st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=2&pid=%d" % kids[0])
    check(st == 200 and b"main.receiver" in body and b"[chan receive" in body,
          "pid=N: not the program's goroutines: %r" % body[:300])
    pp.stop()
    sh.kill()
    for k in kids:
        os.kill(k, 9)
    sh.wait(10)
