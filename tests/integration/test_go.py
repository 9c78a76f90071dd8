"""Go targets: stacks unwound with .gopclntab, held to the Go program's own
net/http/pprof profile taken at the same time, a stripped binary, and cgo
crossings between Go and C frames."""
import os
import re
import select
import subprocess
import threading
import time

import lib
import runtimes
from lib import *  # noqa: F401,F403  (Podprof, http, pprof, check, test, traces, ...)

GOHOT = os.path.join(BUILD, "fixtures", "gohot")
GOCGO = os.path.join(BUILD, "fixtures", "gocgo")
GOALLOC = os.path.join(BUILD, "fixtures", "goalloc")

# main.work's two callers, as Go's profiles show them: the main goroutine,
# and the one main starts (through a generated wrapper, main.main.func2,
# that Go leaves out, as it leaves out runtime.goexit at the top of every
# goroutine).
WORK_TAILS = [["main.work", "main.main", "runtime.main"], ["main.work"]]
CRUNCH = {"main.crunchAlpha": "main.leafAlpha", "main.crunchBeta": "main.leafBeta"}


class GoFixture:
    """A Go fixture that prints "ready <pid> [port]" (or "listening <port>":
    the pid is then the process's own) on stdout.

    Async preemption is off: with it, Go 1.19's own profile of a busy
    goroutine puts 15-30% of the samples on runtime.asyncPreempt (the
    profiling signal lands right after sysmon's preemption signal moved
    the PC there, both every 10 ms), attributed to whatever code the
    preemption hit rather than to where the time went. The loops call
    functions, so they are still preempted at their prologues. A fixture
    whose hot loop has no prologue to stop at (goroutines' hotLoop) keeps
    async preemption (preempt=True): the program's own goroutine profile
    stops the world, which would wait for that loop for ever."""

    def __init__(self, exe, args=(), preempt=False):
        check(os.path.exists(exe), "%s not built (make fixtures; Go is a declared dependency)" % exe)
        env = dict(os.environ)
        if not preempt:
            env["GODEBUG"] = "asyncpreemptoff=1"
        self.proc = subprocess.Popen([exe] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        PROCS.append(self.proc)
        ready, _, _ = select.select([self.proc.stdout], [], [], 10)
        line = self.proc.stdout.readline() if ready else ""
        m = re.match(r"ready (\d+)(?: (\d+))?", line)
        listening = re.match(r"listening (\d+)", line)
        check(m or listening, "Go fixture %s did not get ready: %r" % (exe, line))
        if m:
            self.pid = int(m.group(1))
            self.port = int(m.group(2)) if m.group(2) else None
        else:
            self.pid, self.port = self.proc.pid, int(listening.group(1))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


def flat_shares(tr):
    total = sum(v for v, _ in tr)
    shares = {}
    for v, frames in tr:
        shares[frames[0]] = shares.get(frames[0], 0.0) + 100.0 * v / total
    return shares


def cum_share(tr, name):
    total = sum(v for v, _ in tr)
    return 100.0 * sum(v for v, frames in tr if name in frames) / total


def callers(tr, name):
    """The distinct caller chains of `name` (the frames after it)."""
    return {tuple(frames[frames.index(name) + 1:]) for _, frames in tr if name in frames}


def through_signal(frames):
    """A stack that runs through Go's signal handler (Go's own profiler
    handles its SIGPROF there)."""
    return "runtime.sigreturn" in frames or "runtime.sigreturn__sigaction" in frames


def interrupted(frames):
    """The frames a signal interrupted: those after the restorer."""
    i = max(i for i, f in enumerate(frames) if f.startswith("runtime.sigreturn"))
    return frames[i + 1:]


def line_shares(path):
    """{(function, file:line): flat %} of main.* functions, from go tool
    pprof -lines -top."""
    out = pprof("-lines", "-top", "-nodecount=200", path)
    rows = re.findall(r"^\s*\S+\s+([\d.]+)%\s+\S+\s+\S+\s+\S+\s+(main\.\S+) (\S+:\d+)(?: \(inline\))?$",
                      out, re.M)
    return {(fn, where): float(share) for share, fn, where in rows}


@test
@figures
def go_stacks_match_gos_own_profile():
    """gohot profiled by podprof and by Go's own profiler at once: the
    top functions' flat shares agree within 5 points (both sample at 400 Hz:
    about 6000 samples each in 8 s, so a share wanders by under a point;
    Go's 100 Hz left it most of the difference), crunchAlpha/crunchBeta
    split 70/30 in both, and every stack through main.crunchAlpha or
    main.crunchBeta has the callers Go's own profile gives it (frameless
    leaves included, which frame pointers lose); the inlined main.scramble
    is a Line of its caller's location, as in Go's profile. With ptrace:
    Go's own profiler's SIGPROF puts many samples in Go's signal handler,
    whose interrupted stack only a stop can copy (a perf_event sample's
    stack ends at the handler; go_stacks_under_perf_event covers Go there)."""
    f = GoFixture(GOHOT)
    pp = Podprof("--pid", str(f.pid), "--backend", "ptrace")
    bodies = {}

    def fetch_go():
        st, _, body = http(f.port, "/debug/pprof/profile-hz?seconds=8&hz=400")
        bodies["go"] = body if st == 200 else None

    t = threading.Thread(target=fetch_go)
    t.start()
    bodies["pp"] = get_profile(pp, "seconds=8&hz=400")
    t.join(30)
    check(bodies.get("go"), "Go's own profile failed")
    gotr = traces(save(bodies["go"], "go-own.pb.gz"))
    pptr = traces(save(bodies["pp"], "go-pp.pb.gz"))
    # Every busy thread is sampled to the end: Go's SIGPROF (a trap of its
    # own) used to spend podprof's interrupt of a thread, which then waited
    # for that interrupt's stop for ever, unsampled (20-35 % of the CPU no
    # sample carried, settled at the end on its last stack).
    raw = pprof("-raw", os.path.join(lib.TMP, "go-pp.pb.gz"))
    m = re.search(r"process_cpu_ns=(\d+) over the window; pending_ns=(\d+)", raw)
    check(m, "no accounting comment:\n%s" % raw[:1000])
    pend = 100.0 * int(m.group(2)) / int(m.group(1))
    print("  info: %.1f%% of the process's CPU in no sample at the end (pending)" % pend)
    check(pend <= 5.0, "%.1f%% of the process's CPU was in no sample at the window's end" % pend)
    sig = [(v, interrupted(frames)) for v, frames in pptr if through_signal(frames)]
    in_handler = 100 * sum(v for v, _ in sig) / sum(v for v, _ in pptr)
    print("  info: %.1f%% of podprof's samples in Go's signal handler" % in_handler)
    # The handler takes microseconds per SIGPROF (well under 1 % of the
    # CPU at 400 Hz). A thread resumed with its signal and stopped before
    # it got a core again stops at the handler's first instruction: when
    # podprof sampled such threads, 0.4-11 % of its samples lay there.
    check(in_handler < 2.0, "%.1f%% of podprof's samples in Go's signal handler" % in_handler)
    # A thread stopped in its handler has the interrupted goroutine's stack
    # copied in the same stop, once an earlier unwind found its signal
    # stack: all but a thread's first such stack go on to its callers.
    crossed = [frames for _, frames in sig if frames and frames[-1] in ("runtime.main", "main.work")]
    print("  info: %d stacks through the handler, %d reach the interrupted goroutine's top" %
          (len(sig), len(crossed)))
    check(len(sig) < 10 or len(crossed) >= len(sig) // 2,
          "stacks through Go's signal handler stop there: %s" % [f for _, f in sig][:5])
    whole = [(v, frames) for v, frames in pptr
             if not through_signal(frames) or interrupted(frames)[-1:] in (["runtime.main"], ["main.work"])]
    pp.stop(), f.stop()

    # Go's profile cannot sample its own SIGPROF handler (the handler's CPU
    # falls to whatever the next signal interrupts); podprof's does. Like
    # with like: the shares of podprof's stacks outside the handler.
    gos, pps = flat_shares(gotr), flat_shares([(v, fr) for v, fr in pptr if not through_signal(fr)])
    top = sorted(gos, key=gos.get, reverse=True)[:6]
    for fn in top:
        print("  info: %-22s podprof %5.1f%%  Go %5.1f%%" % (fn, pps.get(fn, 0.0), gos[fn]))
        if gos[fn] >= 2.0:
            check(abs(pps.get(fn, 0.0) - gos[fn]) <= 5.0,
                  "%s: %.1f%% in podprof's profile, %.1f%% in Go's" % (fn, pps.get(fn, 0.0), gos[fn]))
    for fn in CRUNCH:
        a, b = cum_share(pptr, fn), cum_share(gotr, fn)
        print("  info: %-22s cum podprof %5.1f%%  Go %5.1f%%" % (fn, a, b))
        check(abs(a - b) <= 5.0, "%s cumulative: podprof %.1f%%, Go %.1f%%" % (fn, a, b))
    check(abs(cum_share(pptr, "main.crunchAlpha") - 70.0) <= 6.0, "crunchAlpha is not ~70%")

    for fn, leaf in CRUNCH.items():
        want = callers(gotr, fn)
        check(want <= {tuple(t) for t in WORK_TAILS}, "Go's own callers of %s: %s" % (fn, want))
        got = callers(whole, fn)
        check(got and got <= want, "callers of %s: podprof %s, Go %s" % (fn, got, want))
        # The frameless leaf's caller is found (no frame pointer to follow).
        check(any(frames[:2] == [leaf, fn] for _, frames in pptr), "no %s <- %s stack" % (leaf, fn))
    for _, frames in whole:
        if frames[0].startswith("main."):
            i = frames.index("main.work")
            check(frames[i:] in WORK_TAILS, "stack does not reach its goroutine's top: %s" % frames)
    # Inlined code: one location, two Lines (scramble, then its caller).
    scr = [frames for _, frames in pptr if frames[0] == "main.scramble (inline)"]
    check(scr, "no sample in the inlined main.scramble")
    for frames in scr:
        check(frames[1] in CRUNCH, "main.scramble inlined into %s" % frames[1])
    raw = pprof("-raw", os.path.join(lib.TMP, "go-pp.pb.gz"))
    check(re.search(r"^\s+\d+: 0x[0-9a-f]+ M=\d+ main\.scramble \S*/gohot/main\.go:\d+ s=0\n"
                    r"\s+main\.crunch(Alpha|Beta) \S*/gohot/main\.go:\d+ s=0$",
                    raw, re.M), "no location with Lines main.scramble, main.crunch*:\n%s" % raw[-1500:])
    # Files and lines from .gopclntab (pcfile, pcln; a caller's at its call
    # site, an inlined function's at the PC): the same as Go's own profile.
    pplines, golines = (line_shares(os.path.join(lib.TMP, n)) for n in ("go-pp.pb.gz", "go-own.pb.gz"))
    for key in sorted(pplines, key=pplines.get, reverse=True)[:8]:
        print("  info: %-40s podprof %5.1f%%  Go %5.1f%%" % (" ".join(key), pplines[key], golines.get(key, 0.0)))
    for mine, theirs, who in ((pplines, golines, "Go's own profile"), (golines, pplines, "podprof's")):
        for key, share in mine.items():
            check(share < 3.0 or key in theirs, "%s %s (%.1f%%) is not in %s: %s" %
                  (key[0], key[1], share, who, sorted(theirs)))


@test
def stripped_go_binary_keeps_go_names():
    """strip removes .symtab; Go's names are in .gopclntab, which stays."""
    exe = GOHOT + "-stripped"
    syms = subprocess.run(["readelf", "-sW", exe], capture_output=True, text=True).stdout
    check("main.crunchAlpha" not in syms, "%s still has a symbol table" % exe)
    f = GoFixture(exe)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=2&hz=200"), "go-stripped.pb.gz")
    pp.stop(), f.stop()
    tr = traces(path)
    for fn in CRUNCH:
        check(any(fn in frames for _, frames in tr), "no %s in the stripped binary's profile" % fn)
    for _, frames in tr:
        for fr in frames:
            check("gohot-stripped+0x" not in fr, "unnamed Go frame %s in %s" % (fr, frames))
        if frames[0].startswith("main."):
            check(frames[frames.index("main.work"):] in WORK_TAILS,
                  "stack does not reach its goroutine's top: %s" % frames)


def libc_or(name):
    return lambda fr: fr == name or LIBC_RE.match(fr)


def shape(frames, want):
    """frames match want: each a name or a predicate, a trailing ... for any rest."""
    if want[-1] == "...":
        want = want[:-1]
        frames = frames[:len(want)]
    if len(frames) != len(want):
        return False
    return all((w(fr) if callable(w) else fr == w) for fr, w in zip(frames, want))


@test
@figures
def cgo_stacks_cross_between_go_and_c():
    """gocgo: a C leaf under a cgo call continues into the goroutine that
    made it; a libc system call made from C called by Go does too; Go code
    called back from a thread C created runs on to start_thread; Go's
    runtime threads under C's start_thread reach it."""
    f = GoFixture(GOCGO)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "seconds=4&hz=200"), "cgo.pb.gz")
    pp.stop(), f.stop()
    tr = traces(path)
    go_tail = ["runtime.asmcgocall", "runtime.cgocall"]
    spin = ["c_spin_inner", "c_spin"] + go_tail + ["main._Cfunc_c_spin", "main.cSpinLoop"]
    sysc = ["c_syscalls"] + go_tail + ["main._Cfunc_c_syscalls", "main.cSyscallLoop"]
    back = ["main.goBurn", "main.goCallback (inline)", lambda fr: fr.startswith("_cgoexp_"),
            "runtime.cgocallbackg1", "runtime.cgocallbackg", "runtime.cgocallback", "crosscall2",
            "goCallback", "c_thread", libc_or("start_thread"), libc_or("__clone3")]
    seen = {"spin": 0, "syscall": 0, "callback": 0, "mstart": 0}
    for value, frames in tr:
        if frames[0] == "c_spin_inner":
            check(shape(frames, spin), "C leaf under a cgo call: %s" % frames)
            seen["spin"] += value
        elif "c_syscalls" in frames:
            i = frames.index("c_syscalls")
            check(shape(frames[i:], sysc), "system call under a cgo call: %s" % frames)
            seen["syscall"] += value * (i > 0)
        elif frames[0] == "main.goBurn":
            # The C side of a callback is found through the goroutine's m
            # (g.m) and read once the thread runs on: where the goroutine
            # was descheduled or its callback ended meanwhile (g.m = nil,
            # or a C stack that moved on), the stack stops at the crossing
            # or a frame past it: short, never wrong. A few percent of
            # them (more under ASan, whose podprof is slower).
            short = any(shape(frames, back[:k]) for k in range(6, len(back)))
            check(shape(frames, back) or short, "Go called back from a C thread: %s" % frames)
            seen["callback"] += value
            if short:
                seen["callback_short"] = seen.get("callback_short", 0) + value
                seen["short_at_" + frames[-1]] = seen.get("short_at_" + frames[-1], 0) + 1
        elif "runtime.mstart" in frames:
            i = frames.index("runtime.mstart")
            check(shape(frames[i + 1:], [lambda fr: fr.startswith("gocgo+0x") or fr == "crosscall_amd64",
                                         "threadentry", libc_or("start_thread"), libc_or("__clone3")]),
                  "Go's thread under C's start_thread: %s" % frames)
            seen["mstart"] += value
    print("  info: ns of samples per kind of stack %s" % seen)
    for k in ("spin", "syscall", "callback"):
        check(seen[k] > 0, "no %s stack in %s" % (k, seen))
    check(seen.get("callback_short", 0) <= 0.2 * seen["callback"], "too many short callback stacks: %s" % seen)


# ---- Go's own allocation records ----------------------------------------------

HEAP_TYPES = ("alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes")


def raw_samples(path):
    """`go tool pprof -raw`: ([sample type], [(values, [location id])],
    {location id: [function, ...]} (inlined functions first))."""
    out = pprof("-raw", path)
    samples = out.split("Samples:\n", 1)[1].split("Locations\n", 1)[0]
    lines = samples.splitlines()
    types = lines[0].split()
    rows = []
    for line in lines[1:]:
        m = re.match(r"^\s*(-?\d+(?:\s+-?\d+)*):((?:\s+\d+)*)\s*$", line)
        if m:
            rows.append(([int(v) for v in m.group(1).split()], [int(i) for i in m.group(2).split()]))
    locs, last = {}, None
    for line in out.split("Locations\n", 1)[1].split("Mappings\n", 1)[0].splitlines():
        m = re.match(r"^\s*(\d+): 0x[0-9a-f]+(?: M=\d+)?(?: (\S+))?", line)
        if m:
            last = int(m.group(1))
            locs[last] = [m.group(2)] if m.group(2) else []
        elif last is not None and line.strip():
            locs[last].append(line.split()[0])
    return types, rows, locs


def by_function(path, index):
    """{function: cumulative value of the sample type index}: each sample
    counted once for every function on its stack (whether or not runtime
    frames were hidden at the leaf, as Go's own profile hides them)."""
    types, rows, locs = raw_samples(path)
    col = [i for i, t in enumerate(types) if t.split("/")[0] == index]
    check(col, "no sample type %s in %s: %s" % (index, path, types))
    out = {}
    for values, ids in rows:
        for fn in {fn for i in ids for fn in locs.get(i, [])}:
            out[fn] = out.get(fn, 0) + values[col[0]]
    return out


def fetch_both(pp, pid, go_port, name, tag="1.19"):
    """podprof's /debug/pprof/<name>?pid= and the Go program's own, taken at
    once (each GC publishes new records: every 200 ms in goalloc)."""
    bodies = {}

    def own():
        st, _, body = http(go_port, "/debug/pprof/" + name)
        bodies["go"] = body if st == 200 else None

    t = threading.Thread(target=own)
    t.start()
    bodies["pp"] = get_profile(pp, "pid=%d" % pid, name=name)
    t.join(60)
    check(bodies.get("go"), "Go's own %s profile failed" % name)
    return (save(bodies["pp"], "goalloc-%s-pp-%s.pb.gz" % (tag, name)),
            save(bodies["go"], "goalloc-%s-go-%s.pb.gz" % (tag, name)))


def goalloc_build(release, stripped):
    """goalloc built by Go `release` (bookworm's 1.19: make fixtures; 1.26,
    1.27: scripts/runtimes.sh's toolchains), stripped (-s -w) or not."""
    if release == "1.19" and not stripped:
        return GOALLOC
    out = os.path.join(lib.TMP, "goalloc-%s%s" % (release, "-stripped" if stripped else ""))
    if not os.path.exists(out):
        runtimes.go_build(release, os.path.join(lib.ROOT, "tests", "fixtures", "goalloc"), out,
                          flags=["-ldflags=-s -w"] if stripped else [])
    return out


def goalloc_profiles(release="1.19", stripped=False):
    """goalloc (built by Go `release`) started and warmed up; podprof's and
    Go's own heap and allocs (paths), each pair taken at once."""
    f = GoFixture(goalloc_build(release, stripped), ["0"])
    # Records reach MemProfile two GC cycles after their allocation: wait
    # until Go's own profile has churnGamma at 16 MiB (some 2 s).
    deadline = time.monotonic() + 20
    while True:
        st, _, body = http(f.port, "/debug/pprof/allocs")
        check(st == 200, "Go's own allocs profile: %d" % st)
        got = by_function(save(body, "goalloc-warmup.pb.gz"), "alloc_space").get("main.churnGamma", 0)
        if got >= 16 * 2**20:
            break
        check(time.monotonic() < deadline, "churnGamma at %d B after 20 s" % got)
        time.sleep(0.2)
    pp = Podprof("--pid", str(f.pid))
    tag = "%s%s" % (release, "-stripped" if stripped else "")
    heap = fetch_both(pp, f.pid, f.port, "heap", tag)
    allocs = fetch_both(pp, f.pid, f.port, "allocs", tag)
    pp.stop(), f.stop()
    for path in heap + allocs:
        types = [t.split("[")[0] for t in raw_samples(path)[0]]   # less a [dflt] mark
        check(tuple(types) == HEAP_TYPES, "%s: sample types %s" % (os.path.basename(path), types))
    return heap, allocs


def agree(checks, tol=0.15):
    """Each (index, (podprof's, Go's), functions): per function within tol."""
    for index, (ppath, gpath), fns in checks:
        mine, theirs = by_function(ppath, index), by_function(gpath, index)
        for fn in fns:
            a, b = mine.get(fn, 0), theirs.get(fn, 0)
            unit = 2.0**20 if index.endswith("space") else 1.0
            print("  info: %-13s %-16s podprof %9.2f  Go %9.2f%s" %
                  (index, fn, a / unit, b / unit, " MiB" if unit > 1 else ""))
            check(b > 0, "%s: no %s in Go's own profile" % (index, fn))
            check(abs(a - b) <= tol * b, "%s of %s: podprof %d, Go's own %d" % (index, fn, a, b))


@test
@figures
def go_heap_matches_gos_own_records():
    """goalloc (48 MiB kept by main.keepAlpha, 16 MiB by main.keepBeta, 8
    MiB by main.keepDelta, 8 MiB/s dropped by main.churnGamma) read by
    podprof from the runtime's memory-profile buckets and by the program's
    own net/http/pprof at the same moment: heap and allocs carry Go's four
    sample types, and per function the inuse_space (the keepers) and
    alloc_space (all four) agree within 15 %. Both read the same
    records, so they differ only by a GC publishing between the two reads
    (churnGamma's 1.6 MiB a cycle) and by the unsampling's rounding."""
    heap, allocs = goalloc_profiles()
    agree((("inuse_space", heap, ("main.keepAlpha", "main.keepBeta", "main.keepDelta")),
           ("alloc_space", allocs, ("main.keepAlpha", "main.keepBeta", "main.churnGamma",
                                    "main.keepDelta"))))
    # The fixture as designed (Go's sampling at 512 KiB leaves some 100
    # samples of keepAlpha's 48 MiB: about 10 % of noise).
    theirs = by_function(heap[1], "inuse_space")
    check(25 * 2**20 <= theirs["main.keepAlpha"] <= 75 * 2**20,
          "Go's own inuse_space of main.keepAlpha %.1f MiB, kept 48" % (theirs["main.keepAlpha"] / 2**20))
    check(theirs.get("main.churnGamma", 0) <= 4 * 2**20, "churnGamma keeps %d B" % theirs.get("main.churnGamma", 0))


@test
@figures
def go_heap_objects_match_gos_own_records():
    """As go_heap_matches_gos_own_records, for the object counts:
    inuse_objects and alloc_objects per function within 15 %. Go unsamples
    each bucket, one per stack and allocation size (runtime/pprof
    scaleHeapSample on each MemProfileRecord); unsampling the sum of a
    stack's buckets of several sizes gives fewer objects (keepAlpha's 4 to
    64 KiB: some 20 % fewer), while the bytes hardly change."""
    heap, allocs = goalloc_profiles()
    agree((("inuse_objects", heap, ("main.keepAlpha", "main.keepBeta")),
           ("alloc_objects", allocs, ("main.keepAlpha", "main.keepBeta", "main.churnGamma"))))


def main_stacks(path):
    """The distinct stacks (function names leaf first, a location's inlined
    functions before the one holding them) of samples through main.keep*
    or main.churn*."""
    _, rows, locs = raw_samples(path)
    out = set()
    for _, ids in rows:
        names = tuple(fn for i in ids for fn in locs.get(i, []))
        if any(fn.startswith(("main.keep", "main.churn")) for fn in names):
            out.add(names)
    return out


@test
def go_heap_stacks_match_gos_own_records():
    """goalloc's allocation stacks as podprof and Go's own net/http/pprof
    give them are the same: main.grabDelta inlined into main.keepDelta is
    one location of two lines (Go's record holds a PC for each: the
    inlined function's, then a mark in its caller, which Go's profile
    folds into that location), and no stack ends in runtime.goexit (Go
    leaves it out)."""
    heap, allocs = goalloc_profiles()
    for index, (ppath, gpath) in (("heap", heap), ("allocs", allocs)):
        mine, theirs = main_stacks(ppath), main_stacks(gpath)
        for st in sorted(theirs):
            print("  info: %s Go's own: %s" % (index, " <- ".join(st)))
        check(any(st[:2] == ("main.grabDelta", "main.keepDelta") for st in theirs),
              "Go's own %s has no main.grabDelta inlined in main.keepDelta: %s" % (index, theirs))
        check(mine == theirs, "%s stacks: podprof's not Go's: %s; Go's not podprof's: %s" %
              (index, sorted(mine - theirs), sorted(theirs - mine)))


def heap_of_release(release, stripped):
    """goalloc built by Go `release`: podprof's heap and allocs agree with
    the program's own per function (inuse_space of the keepers, alloc_space
    of all four, within 15 %) and have the same stacks."""
    heap, allocs = goalloc_profiles(release, stripped)
    agree((("inuse_space", heap, ("main.keepAlpha", "main.keepBeta", "main.keepDelta")),
           ("alloc_space", allocs, ("main.keepAlpha", "main.keepBeta", "main.churnGamma",
                                    "main.keepDelta"))))
    for index, (ppath, gpath) in (("heap", heap), ("allocs", allocs)):
        mine, theirs = main_stacks(ppath), main_stacks(gpath)
        check(mine == theirs, "go%s %s stacks: podprof's not Go's: %s; Go's not podprof's: %s" %
              (release, index, sorted(mine - theirs), sorted(theirs - mine)))
    raw = pprof("-raw", heap[0])
    assumed = "MemProfileRate cannot be read" in raw
    check(assumed == stripped, "go%s%s: the assumed-rate note %s" %
          (release, " stripped" if stripped else "", "present" if assumed else "missing"))


@test
def go_heap_of_go_1_26_matches_gos_own():
    """heap_of_release on Go 1.26 (the same bucket layout as 1.19)."""
    heap_of_release("1.26", False)


@test
def go_heap_of_go_1_27_matches_gos_own():
    """heap_of_release on Go 1.27, whose records keep counts only (the
    bytes are the counts times the bucket's object size)."""
    heap_of_release("1.27", False)


@test
def go_heap_of_stripped_go_1_26_and_1_27_matches_gos_own():
    """heap_of_release on Go 1.26 and 1.27 built -s -w: no symbol table, so
    runtime.mbuckets and runtime.mProfCycle are found from the code that
    reads them (named in .gopclntab), and the rate, which no code loads
    the same way, is Go's default, as the profile's comment says."""
    heap_of_release("1.26", True)
    heap_of_release("1.27", True)
