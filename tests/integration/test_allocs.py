"""Allocation stacks (issue 21): the allocation agent (libpodprof-alloc.so)
in a fixture that keeps known amounts from known functions, read by
podprof and judged by go tool pprof; the agent leaves its host as it was."""
import os
import re
import select
import signal
import subprocess
import sys

from lib import (BUILD, PROCS, Podprof, check, get_profile, http, pprof, save, test)
from test_views import NamedInBackground, total

AGENT = os.path.join(BUILD, "libpodprof-alloc.so")
ALLOCS = os.path.join(BUILD, "fixtures", "allocs")
AGENTCHECK = os.path.join(BUILD, "fixtures", "agentcheck")
BUSY = os.path.join(BUILD, "fixtures", "busy")
FORKWALK = os.path.join(BUILD, "fixtures", "forkwalk")
UNWINDCHECK = os.path.join(BUILD, "fixtures", "unwindcheck")
# The agent's way on a glibc older than 2.35 (dl_iterate_phdr for each frame),
# taken on this machine's glibc too (agent/findobj.h).
NO_DLFO = {"PODPROF_ALLOC_NO_DL_FIND_OBJECT": "1"}


class Allocs:
    """The allocs fixture under the agent; ready when it prints 'ready'."""

    def __init__(self, *args, rate=None, agent=True, extra_env=None):
        env = dict(os.environ, **(extra_env or {}))
        if agent:
            env["LD_PRELOAD"] = AGENT
        if rate is not None:
            env["PODPROF_ALLOC_RATE"] = str(rate)
        # Unbuffered: select() must see every line not yet read.
        self.proc = subprocess.Popen([ALLOCS] + list(args), stdout=subprocess.PIPE, env=env, bufsize=0)
        PROCS.append(self.proc)
        self.pid = self.proc.pid
        self.child = None
        line = self.line()
        if line.startswith("child "):
            self.child = int(line.split()[1])
            line = self.line()
        check(line == "ready", "allocs fixture: %r" % line)

    def line(self, timeout=20):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        check(r, "the allocs fixture said nothing for %d s" % timeout)
        return self.proc.stdout.readline().decode().strip()

    def truth(self):
        """Bytes allocated by each function so far (keep_beta's live ones too)."""
        os.kill(self.pid, signal.SIGUSR1)
        w = self.line().split()
        return dict(zip(w[0::2], (int(x) for x in w[1::2])))

    def stop(self):
        self.proc.terminate()
        check(self.proc.wait(10) == 0, "allocs fixture exit %s" % self.proc.returncode)


def per_function(path, index, unit="B"):
    """{function: flat value} from go tool pprof -top, in bytes (unit "B")
    or, for a count sample type (unit ""), as counted."""
    out = pprof("-top", "-nodecount=100", "-sample_index=" + index, *(["-unit=" + unit] if unit else []), path)
    res = {}
    u = re.escape(unit)
    for line in out.splitlines():
        m = re.match(r"\s*(-?\d+)%s\s+[\d.]+%%\s+[\d.]+%%\s+-?\d+%s\s+[\d.]+%%\s+(\S+)" % (u, u), line)
        if m:
            res[m.group(2)] = int(m.group(1))
    return res


def near(got, want, tol):
    return want and abs(got - want) <= tol * want


@test
def heap_names_who_allocated_with_the_agent():
    # Rate 32 KiB: about 3000 samples of keep_alpha's 96 MiB and 900 of
    # keep_beta's 28 MiB, so each estimate's spread (one sample's weight in
    # Poisson sampling of bytes: 1/sqrt(samples), 1.8 and 3.4 %) is a
    # quarter of its bound or less. At 64 KiB keep_beta's was 4.8 %, a
    # third of its 15 %: a CI run's ASan reading came to +15.4 %. The
    # default rate's accuracy is make bench's.
    f = Allocs("-t", "2", rate=32768)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "", name="heap"), "heap-agent.pb.gz")
    t = f.truth()
    top = pprof("-top", path)
    check("Type: inuse_space" in top, top[:400])
    check("allocation stacks from podprof's allocation agent" in top, top[:600])
    raw = pprof("-raw", path)
    for st in ("alloc_objects/count", "alloc_space/bytes", "inuse_objects/count",
               "inuse_space/bytes"):
        check(st in raw, "sample type %s missing" % st)
    check("PeriodType: space bytes" in raw and "Period: 32768" in raw, raw[:300])
    # Go's label: the blocks' size (keep_beta's are under 2 KiB, keep_alpha's 4-64 KiB).
    small = pprof("-top", "-tagfocus=bytes=:2kb", "-sample_index=inuse_space", path)
    check("keep_beta" in small and "keep_alpha" not in small, small[:800])
    inuse = per_function(path, "inuse_space")
    print("  info: inuse keep_alpha %.1f MiB (truth %.1f), keep_beta %.1f MiB (truth %.1f)" % (
        inuse.get("keep_alpha", 0) / 2**20, t["alpha"] / 2**20, inuse.get("keep_beta", 0) / 2**20,
        t["beta_live"] / 2**20))
    check(near(inuse.get("keep_alpha", 0), t["alpha"], 0.10), "keep_alpha inuse %s, truth %d" % (
        inuse.get("keep_alpha"), t["alpha"]))
    check(near(inuse.get("keep_beta", 0), t["beta_live"], 0.15), "keep_beta inuse %s, truth %d" % (
        inuse.get("keep_beta"), t["beta_live"]))
    check(inuse.get("churn_gamma", 0) < 2**20, "churn_gamma holds %s B in use" % inuse.get("churn_gamma"))
    # The stack runs on to the thread's start: keep_alpha <- worker <- start_thread.
    traces = pprof("-traces", "-sample_index=inuse_space", path)
    check(re.search(r"keep_alpha\n\s+worker\n\s+start_thread", traces), traces[:800])

    # allocs: the same records, alloc_space by default; -sample_index works.
    before = f.truth()
    apath = save(get_profile(pp, "", name="allocs"), "allocs-agent.pb.gz")
    after = f.truth()
    check("Type: alloc_space" in pprof("-top", apath), "allocs' default type")
    alloc = per_function(apath, "alloc_space")
    g = alloc.get("churn_gamma", 0)
    print("  info: alloc_space churn_gamma %.2f GiB, truth %.2f-%.2f GiB" % (
        g / 2**30, before["gamma"] / 2**30, after["gamma"] / 2**30))
    check(0.9 * before["gamma"] <= g <= 1.1 * after["gamma"], "churn_gamma alloc_space %d, truth %d..%d"
          % (g, before["gamma"], after["gamma"]))
    objs = pprof("-top", "-sample_index=alloc_objects", apath)
    check("Type: alloc_objects" in objs and "churn_gamma" in objs, objs[:500])

    # debug=1: Go's heap text, which go tool pprof reads (and symbolizes
    # through podprof's /symbol).
    st, h, text = http(pp.port, "/debug/pprof/heap?debug=1")
    first = text.decode().splitlines()[0]
    # The estimates, as Go writes a profile of rate 1 (pprof reads them unscaled).
    check(st == 200 and re.match(r"heap profile: \d+: \d+ \[\d+: \d+\] @ heap/2$", first), first)
    check("keep_alpha" in text.decode(), "debug=1 names no keep_alpha")
    url = "http://127.0.0.1:%d/debug/pprof/heap?debug=1" % pp.port
    legacy = pprof("-top", "-sample_index=inuse_space", url)
    check("keep_alpha" in legacy, legacy[:600])
    f.stop()


@test
def heap_delta_with_the_agent_is_the_window():
    f = Allocs(rate=65536)
    pp = Podprof("--pid", str(f.pid))
    t0 = f.truth()
    bg = NamedInBackground(pp, "allocs", "seconds=2", "allocs-delta")
    body = bg.result()
    t1 = f.truth()
    path = save(body, "allocs-delta.pb.gz")
    alloc = per_function(path, "alloc_space")
    window = t1["gamma"] - t0["gamma"]
    g = alloc.get("churn_gamma", 0)
    print("  info: delta churn_gamma %.2f GiB over the window, truth at most %.2f GiB" % (
        g / 2**30, window / 2**30))
    check(0.5 * window <= g <= 1.1 * window, "churn_gamma delta %d, fixture %d" % (g, window))
    check(abs(alloc.get("keep_alpha", 0)) < 2**20, "keep_alpha allocated nothing in the window: %s"
          % alloc.get("keep_alpha"))
    f.stop()


@test
def heap_mapping_view_and_without_agent():
    f = Allocs(rate=65536)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "view=mappings", name="heap"), "heap-view.pb.gz")
    raw = pprof("-raw", path)
    check("pss/bytes" in raw and "thread stacks" in raw, raw[:300])
    st, h, body = http(pp.port, "/debug/pprof/heap?view=bogus")
    check(st == 400 and b"view" in body, "%d %r" % (st, body))
    f.stop()
    g = Allocs(agent=False)
    pp2 = Podprof("--pid", str(g.pid))
    top = pprof("-top", save(get_profile(pp2, "", name="heap"), "heap-none.pb.gz"))
    check("no allocation stacks" in top and "LD_PRELOAD" in top and "pss" not in top.split("Type")[0],
          top[:800])
    g.stop()


@test
def agent_leaves_the_app_as_it_was():
    """The same lines and exit code alone and under the agent (at the
    default rate and sampling every allocation): the malloc family's
    contracts, threads, fork, dlopen, signals."""
    runs = {}
    for name, env in (("alone", {}), ("agent", {"LD_PRELOAD": AGENT}),
                      ("every", {"LD_PRELOAD": AGENT, "PODPROF_ALLOC_RATE": "1"})):
        r = subprocess.run([AGENTCHECK, "-n", "20000"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, **env))
        runs[name] = (r.returncode, r.stdout)
        check(r.returncode == 7 and "FAIL" not in r.stdout, "%s: exit %d\n%s%s" % (
            name, r.returncode, r.stdout, r.stderr))
    check(runs["alone"] == runs["agent"] == runs["every"], "outputs differ: %r" % runs)
    # A program without podprof: its output is unchanged (busy prints nothing).
    r = subprocess.run(["/bin/echo", "hello"], capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD=AGENT))
    check(r.returncode == 0 and r.stdout == "hello\n" and not r.stderr, repr(r))


# The oldest glibc the agent loads on (RHEL/CentOS 7): ld.so refuses to start
# a program whose preloaded library needs a symbol version its glibc lacks.
AGENT_GLIBC = (2, 17)


@test
def agent_needs_glibc_2_17_at_most():
    """The agent needs libc.so.6 only, and no symbol version newer than
    GLIBC_2.17 (readelf -V: the versions ld.so checks before the program
    starts). On a glibc with _dl_find_object (2.35) it still binds it."""
    ver = subprocess.run(["readelf", "-VW", AGENT], capture_output=True, text=True).stdout
    needs = ver.split(".gnu.version_r", 1)[-1] if ".gnu.version_r" in ver else ""
    files = set(re.findall(r"File: (\S+)", needs))
    names = re.findall(r"Name: (\S+)", needs)
    print("  info: version needs %s: %s" % (", ".join(sorted(files)), " ".join(names)))
    check(files == {"libc.so.6"}, "version needs from %r" % files)
    newer = [n for n in names if not re.fullmatch(r"GLIBC_[\d.]+", n)
             or tuple(int(x) for x in n[6:].split(".")) > AGENT_GLIBC]
    check(names and not newer, "versions newer than GLIBC_%d.%d: %r" % (AGENT_GLIBC + (newer,)))
    dyn = subprocess.run(["readelf", "-dW", AGENT], capture_output=True, text=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^]]+)\]", dyn)
    check(needed == ["libc.so.6"], "NEEDED %r" % needed)
    # This machine's glibc: the unwinder's lookup is its own _dl_find_object.
    libc = os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    if tuple(int(x) for x in libc.split(".")[:2]) >= (2, 35):
        r = subprocess.run(["/bin/true"], capture_output=True, text=True,
                           env=dict(os.environ, LD_PRELOAD=AGENT, LD_DEBUG="bindings"))
        check(re.search(r"binding file \S*libpodprof-alloc\.so .* symbol `_dl_find_object' "
                        r"\[GLIBC_2\.35\]", r.stderr),
              "glibc %s: the agent did not bind _dl_find_object" % libc)


@test
def agent_the_old_glibc_way():
    """The agent as on a glibc before 2.35, which has no _dl_find_object:
    each frame's object found with dl_iterate_phdr (forced here). The app
    runs as alone; a fork while other threads unwind leaves the child no
    loader lock held (fork does not reset it: forkwalk's children would
    hang on it); heap names who allocated."""
    r = subprocess.run(["/bin/true"], capture_output=True, text=True,
                       env=dict(os.environ, LD_PRELOAD=AGENT, LD_DEBUG="bindings", **NO_DLFO))
    check(r.returncode == 0 and "`_dl_find_object'" not in r.stderr and "`dl_iterate_phdr'" in r.stderr,
          "the agent bound _dl_find_object with %s=1, or no dl_iterate_phdr" % list(NO_DLFO)[0])
    runs = set()
    for env in ({}, dict(LD_PRELOAD=AGENT, **NO_DLFO),
                dict(LD_PRELOAD=AGENT, PODPROF_ALLOC_RATE="1", **NO_DLFO)):
        r = subprocess.run([AGENTCHECK, "-n", "20000"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, **env))
        check(r.returncode == 7 and "FAIL" not in r.stdout, "%r: exit %d\n%s%s" % (
            env, r.returncode, r.stdout, r.stderr))
        runs.add(r.stdout)
    check(len(runs) == 1, "outputs differ: %r" % runs)
    r = subprocess.run([FORKWALK, "200"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, LD_PRELOAD=AGENT, PODPROF_ALLOC_RATE="1", **NO_DLFO))
    print("  info: forkwalk: " + r.stdout.strip())
    check(r.returncode == 0 and "200 exited, 0 hung" in r.stdout, "forkwalk exit %d: %s%s" % (
        r.returncode, r.stdout, r.stderr))
    f = Allocs("-t", "2", rate=65536, extra_env=NO_DLFO)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "", name="heap"), "heap-no-dlfo.pb.gz")
    t = f.truth()
    inuse = per_function(path, "inuse_space")
    check(near(inuse.get("keep_alpha", 0), t["alpha"], 0.10), "keep_alpha inuse %s, truth %d" % (
        inuse.get("keep_alpha"), t["alpha"]))
    traces = pprof("-traces", "-sample_index=inuse_space", path)
    check(re.search(r"keep_alpha\n\s+worker\n\s+start_thread", traces), traces[:800])
    f.stop()


@test
def fork_child_keeps_its_own_records():
    f = Allocs("-f", rate=65536)
    check(f.child, "no fork child")
    pp = Podprof("--pid", str(f.pid))
    child = save(get_profile(pp, "pid=%d" % f.child, name="heap"), "heap-child.pb.gz")
    top = pprof("-top", child)
    check("fork child" in top, top[:800])
    inuse = per_function(child, "inuse_space")
    check(near(inuse.get("child_delta", 0), 8 << 20, 0.25), "child_delta %s" % inuse.get("child_delta"))
    parent = per_function(save(get_profile(pp, "", name="heap"), "heap-parent.pb.gz"), "inuse_space")
    check("child_delta" not in parent and "keep_alpha" in parent, "parent: %r" % parent)
    f.stop()


@test
def agent_record_area_full_is_said():
    """Past its fixed area (16384 distinct stacks) the agent stops recording
    new stacks, the app runs on, and the profile says how much was lost."""
    f = Allocs("-d", "15", "-a", "1", "-b", "1", rate=1)
    pp = Podprof("--pid", str(f.pid))
    raw = pprof("-raw", save(get_profile(pp, "", name="heap"), "heap-full.pb.gz"))
    m = re.search(r"record area is full: (\d+) samples not recorded", raw)
    check(m and int(m.group(1)) > 0, raw[:800])
    check("every allocation recorded" in raw, raw[:500])
    n = len(re.findall(r"^\s+\d+\s+\d+\s+\d+\s+\d+: ", raw, re.M))
    check(16000 <= n <= 16384 + 64, "%d stacks in the profile" % n)
    check(f.truth()["alpha"] > 0, "the fixture stopped answering")
    f.stop()


@test
def agent_records_every_allocation_at_rate_one():
    """PODPROF_ALLOC_RATE=1: every allocation, a thread's first too, is
    recorded with its own size: keep_alpha's bytes in use are the fixture's
    to the byte."""
    # One worker: no other thread contends for the agent's lock (a sample
    # that cannot have it soon is dropped, and said so: checked below).
    f = Allocs("-t", "1", "-a", "2", "-b", "1", rate=1)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "", name="heap"), "heap-rate1.pb.gz")
    t = f.truth()
    top = pprof("-top", path)
    check("not recorded" not in top, top[:800])
    inuse = per_function(path, "inuse_space")
    check(inuse.get("keep_alpha") == t["alpha"], "keep_alpha %s B in use, the fixture keeps %d" % (
        inuse.get("keep_alpha"), t["alpha"]))
    check(inuse.get("keep_beta") == t["beta_live"], "keep_beta %s B in use, the fixture keeps %d" % (
        inuse.get("keep_beta"), t["beta_live"]))
    f.stop()


@test
def agent_fast_walk_agrees_with_gccs_unwinder():
    """The agent's cached CFA rules (agent/unwind.c) give the same return
    addresses as GCC's unwinder, frame for frame, on stacks of frameless
    code, alloca and large frames, libc's callbacks and threads, from
    .eh_frame and again from the cache; a signal frame makes the walk give
    up (GCC's unwinder then walks), never guess; after a dlclose, another
    build of the same function loaded at the same address (the code at its
    call the same, its frame larger) is walked by its own rule, not the
    one kept from the first. Run both ways of finding objects
    (_dl_find_object, and the older glibc's dl_iterate_phdr). Then the
    agent's own dlclose, which tells the walk of unloads, in a program it
    is preloaded into: the program's dlclose is the agent's, and the object
    is unloaded, as glibc's dlclose does."""
    for env in ({}, NO_DLFO):
        r = subprocess.run([UNWINDCHECK], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, **env))
        last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        print("  info: unwindcheck%s: %s" % (" (dl_iterate_phdr)" if env else "", last))
        check(r.returncode == 0 and last.startswith("ok:"), "unwindcheck exit %d:\n%s%s" % (
            r.returncode, r.stdout[-3000:], r.stderr[-1000:]))
    lib_so = os.path.join(BUILD, "fixtures", "unwindframe-256.so")
    prog = ("import ctypes, _ctypes\n"
            "def mapped(): return %r in open('/proc/self/maps').read()\n"
            "def owner(a):\n"
            "    for l in open('/proc/self/maps'):\n"
            "        lo, hi = (int(x, 16) for x in l.split()[0].split('-'))\n"
            "        if lo <= a < hi: return l.split()[-1].rsplit('/', 1)[-1]\n"
            "dlclose = ctypes.cast(ctypes.CDLL(None).dlclose, ctypes.c_void_p).value\n"
            "h = ctypes.CDLL(%r)._handle\n"
            "print(owner(dlclose), mapped(), _ctypes.dlclose(h), mapped())\n" % (lib_so, lib_so))
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, LD_PRELOAD=AGENT))
    print("  info: under the agent: dlclose's object, mapped, dlclose's answer, mapped: %s" % r.stdout.strip())
    check(r.returncode == 0 and r.stdout.split() == [os.path.basename(AGENT), "True", "None", "False"],
          "dlclose under the agent: exit %d, %r %r" % (r.returncode, r.stdout, r.stderr[-500:]))


@test
def agent_estimates_a_stack_of_mixed_sizes():
    """One call site allocating 200000 blocks of 64 B and 16 of 1 MiB: each
    sample weighs the allocations of its own size it stands for (a stack's
    average size would count some 240 objects)."""
    f = Allocs("-m", "-a", "1", "-b", "1", rate=65536)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "", name="heap"), "heap-mixed.pb.gz")
    objs = per_function(path, "inuse_objects", unit="").get("xmalloc", 0)
    space = per_function(path, "inuse_space").get("xmalloc", 0)
    print("  info: xmalloc %d objects (200016 kept), %.2f MB (29.58 kept)" % (objs, space / 1e6))
    check(near(objs, 200016, 0.20), "xmalloc holds %d objects, the fixture 200016" % objs)
    check(near(space, 16 * 2**20 + 200000 * 64, 0.15), "xmalloc holds %d B" % space)
    f.stop()


@test
def go_records_and_the_agent_in_a_cgo_program():
    """A Go program linked with libc, under the agent: Go's own records name
    its Go code, the agent's its C allocations, in one profile."""
    exe = os.path.join(BUILD, "fixtures", "goalloc-cgo")
    check(os.path.exists(exe), "%s not built (make fixtures; Go is a declared dependency)" % exe)
    env = dict(os.environ, LD_PRELOAD=AGENT, PODPROF_ALLOC_RATE="1")
    proc = subprocess.Popen([exe, "0"], stdout=subprocess.PIPE, env=env, bufsize=0)
    PROCS.append(proc)
    r, _, _ = select.select([proc.stdout], [], [], 20)
    check(r and proc.stdout.readline().startswith(b"listening"), "goalloc-cgo did not start")
    pp = Podprof("--pid", str(proc.pid))
    top = pprof("-top", save(get_profile(pp, "", name="heap"), "heap-cgo.pb.gz"))
    check("Go runtime's own records" in top and "podprof's allocation agent (C allocations" in top,
          top[:800])
    check("main.keepAlpha" in top, top[:1200])
    traces = pprof("-traces", "-sample_index=alloc_objects",
                   save(get_profile(pp, "", name="allocs"), "allocs-cgo.pb.gz"))
    check(re.search(r"\n\s+\d+\s+(x_cgo_thread_start|x_cgo_init|allocate_dtv)\n", traces),
          "no C allocation of the cgo runtime: %s" % traces[:1500])
    proc.kill()
