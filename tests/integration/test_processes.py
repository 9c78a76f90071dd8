"""Every process of the pod (issue 25): a process and its descendants in
one profile (tree=1, --tree), each sample labelled with its pid and process,
the total the CPU the processes used."""
import os
import re
import select
import signal
import subprocess
import sys
import time

import lib  # noqa: E402
from lib import (BUILD, PROCS, Podprof, check, get_profile, http, pprof, save, test, figures, traces)


def in_group_window(pp, f, fetch, pids=()):
    """fetch() on a thread, with f.cpu_ns(), the wall clock and the CPU
    ticks of each of pids read as the group starts and as its last process
    is done (podprof's log lines)."""
    import threading
    got = []
    t = threading.Thread(target=lambda: got.append(fetch()))
    t.start()
    pp.wait_log(r"profile: started for \d+ processes", 10)
    r0 = (f.cpu_ns(), time.time_ns(), {p: lib.cpu_ticks(p) for p in pids})
    pp.wait_log(r"profile: all processes done", 30)
    r1 = (f.cpu_ns(), time.time_ns(), {p: lib.cpu_ticks(p) for p in pids})
    t.join(60)
    check(got, "the profile request failed")
    return got[0], r0, r1


def check_tree_total(path, r0, r1):
    """The profile's total against the tree's CPU between the two readings,
    within 5 % and the readings' slack: the tree's CPU in the time between
    each reading and the window's edge the profile states (the last process
    is done after its profile is built, tens to hundreds of ms after the
    window on a loaded machine)."""
    total = sum(v for v, _ in traces(path))
    used = r1[0] - r0[0]
    slack = lib.edge_slack(path, r0[1], r1[1], used)
    print("  info: profile total %.2f s, the tree's CPU %.2f s (%.3f), the readings' slack %.3f s" % (
        total / 1e9, used / 1e9, total / used, slack / 1e9))
    check(abs(total - used) <= 0.05 * used + slack, "the profile holds %.2f s, the tree used %.2f s (slack %.3f s)" % (
        total / 1e9, used / 1e9, slack / 1e9))
    return total, used

PREFORK = os.path.join(BUILD, "fixtures", "prefork")


class Prefork:
    """tests/fixtures/prefork.c: a master and `workers` forked workers
    burning CPU in worker_spin (recycled after `life_ms` when given)."""

    def __init__(self, workers=2, life_ms=0):
        r, w = os.pipe()
        argv = [PREFORK, "-w", str(workers), "-r", str(w)] + (["-l", str(life_ms)] if life_ms else [])
        self.proc = subprocess.Popen(argv, pass_fds=(w,), stdout=subprocess.PIPE, text=True)
        PROCS.append(self.proc)
        os.close(w)
        ready, _, _ = select.select([r], [], [], 10)
        line = os.read(r, 64).decode() if ready else ""
        os.close(r)
        check(line.startswith("ready"), "prefork did not start: %r" % line)
        self.pid = self.proc.pid

    def tree(self):
        """The master and its live children."""
        kids = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open("/proc/%s/stat" % d) as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == self.pid:
                            kids.append(int(d))
                except (OSError, IndexError, ValueError):
                    pass
        return [self.pid] + sorted(kids)

    def cpu_ns(self):
        """The tree's CPU so far: the master's own and its reaped
        children's (cutime, cstime), and each live worker's."""
        hz = os.sysconf("SC_CLK_TCK")
        total = 0
        for pid in self.tree():
            try:
                with open("/proc/%d/stat" % pid) as f:
                    st = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(st[11]) + int(st[12]) + (int(st[13]) + int(st[14]) if pid == self.pid else 0)
        return total * 1e9 / hz

    def stop(self):
        os.kill(self.pid, signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=20)
        return out


def tags_of(path, key, extra=()):
    """pprof -tags for one key: {value: share %} (extra: more options, as
    -tagfocus=pid=N)."""
    out = pprof("-tags", *extra, path)
    got, on = {}, False
    for line in out.splitlines():
        m = re.match(r"^\s*(\S+):\s+Total", line)
        if m:
            on = m.group(1) == key
            continue
        m = re.search(r"\(\s*([\d.]+)%\): (\S+)$", line)
        if on and m:
            got[m.group(2)] = float(m.group(1))
    return got


@test
@figures
def tree_profile_of_a_prefork_server():
    """profile?tree=1 of a pre-fork server's master: one profile of the
    master and its two workers, every sample labelled with its pid and
    process (pprof -tags, -tagfocus), worker_spin on top, both workers in
    it in about equal shares, and the total the CPU the tree used over the
    window within 5 %."""
    f = Prefork(workers=2)
    pp = Podprof("--pid", str(f.pid))
    tree = f.tree()
    check(len(tree) == 3, "prefork's tree: %s" % tree)
    body, r0, r1 = in_group_window(pp, f, lambda: get_profile(pp, "seconds=3&tree=1"), tree[1:])
    path = save(body, "tree.pb.gz")
    pids = tags_of(path, "pid")
    names = tags_of(path, "process")
    # each worker's share as its own clock says (equal on a quiet machine;
    # on a loaded one the scheduler may give one more than the other)
    used = {w: r1[2][w] - r0[2][w] for w in tree[1:]}
    own = {w: 100.0 * used[w] / max(sum(used.values()), 1) for w in tree[1:]}
    print("  info: pid shares %s, their own clocks' %s, process %s" % (pids, own, names))
    for w in tree[1:]:
        check(str(w) in pids and abs(pids[str(w)] - own[w]) <= 10, "worker %d: shares %s, own %s" % (w, pids, own))
    check(set(names) == {"prefork"}, "process labels %s" % names)
    raw = pprof("-raw", path)
    check("3 processes" in raw, "no comment naming the processes:\n%s" % raw[:1500])
    top = pprof("-top", path)
    check(re.search(r"worker_spin\s*$", top, re.M), top)
    check_tree_total(path, r0, r1)
    # -tagfocus keeps one worker's samples
    one = pprof("-top", "-tagfocus=pid=%d" % tree[1], path)
    check("worker_spin" in one, one)
    pp.stop()
    f.stop()


@test
def max_processes_counts_the_root_and_leaves_the_rest_out_saying_so():
    """--max-processes 2 on a master with three workers: the profile holds
    the master and the first worker found (the root counts), its comment
    says how many were left out and by which limit, the log warns; the
    limit takes at most 256, and 257 is refused naming the range."""
    f = Prefork(workers=3)
    tree = f.tree()
    check(len(tree) == 4, "prefork's tree: %s" % tree)
    pp = Podprof("--pid", str(f.pid), "--max-processes", "2")
    path = save(get_profile(pp, "seconds=1&tree=1"), "capped.pb.gz")
    pids = set(int(p) for p in tags_of(path, "pid"))
    raw = pprof("-raw", path)
    print("  info: pids %s of the tree %s" % (sorted(pids), tree))
    check(len(pids - {f.pid}) == 1 and pids <= set(tree), "pids %s: the master and one worker of %s" % (pids, tree))
    check("podprof: 2 more processes left out: --max-processes 2 reached" in raw and "root" in raw,
          "no comment saying what was left out:\n%s" % raw[:2000])
    pp.wait_log(r"2 processes past --max-processes 2 are left out", 5)
    pp.stop()
    pp = Podprof("--pid", str(f.pid), "--max-processes", "256")
    body = get_profile(pp, "seconds=1&tree=1")
    check("left out" not in pprof("-raw", save(body, "uncapped.pb.gz")), "256 left some of 4 processes out")
    pp.stop()
    r = subprocess.run([lib.PODPROF, "--pid", str(f.pid), "--max-processes", "257", "--listen", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode != 0 and "max-processes" in r.stderr and "256" in r.stderr,
          "--max-processes 257: exit %d, %r" % (r.returncode, r.stderr[-500:]))
    f.stop()


@test
def tree_option_takes_the_master_of_several_matches():
    """--comm prefork matches the master and its workers: alone that is the
    clear refusal naming them; with --tree podprof takes the master (the one
    all others descend from), and a profile without tree= is its tree's."""
    f = Prefork(workers=2)
    r = subprocess.run([lib.PODPROF, "--comm", "prefork", "--listen", "127.0.0.1:0"], capture_output=True,
                       text=True, timeout=20)
    check(r.returncode != 0 and "3 processes match" in r.stderr and "--tree" in r.stderr,
          "without --tree: rc %d, %s" % (r.returncode, r.stderr[-800:]))
    pp = Podprof("--comm", "prefork", "--tree")
    path = save(get_profile(pp, "seconds=2"), "tree-opt.pb.gz")
    pids = tags_of(path, "pid")
    check(len([p for p in pids if int(p) in f.tree()[1:]]) == 2, "workers in the profile: %s of %s" %
          (pids, f.tree()))
    # tree=0 asks for the master alone: no labels, no worker
    path = save(get_profile(pp, "seconds=1&tree=0"), "tree-0.pb.gz")
    check(not tags_of(path, "pid"), "tree=0 carries pid labels")
    # an endpoint of one process answers for the master; asked for more, a 400
    st, _, body = http(pp.port, "/debug/pprof/cmdline")
    check(st == 200 and body.split(b"\0")[0].endswith(b"prefork"), "cmdline: %d %r" % (st, body[:80]))
    st, _, body = http(pp.port, "/debug/pprof/cmdline?tree=1")
    check(st == 400 and b"one process" in body, "cmdline?tree=1: %d %r" % (st, body[:200]))
    st, _, body = http(pp.port, "/debug/pprof/profile?seconds=1&tree=2")
    check(st == 400 and b"tree" in body, "tree=2: %d %r" % (st, body[:200]))
    pp.stop()
    f.stop()


@test
def thread_dump_of_a_tree():
    """goroutine?debug=0 and ?tree=1: one sample per thread of every
    process of the tree, labelled with its pid; the master in master_wait,
    the workers in worker_main."""
    f = Prefork(workers=2)
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "tree=1", name="goroutine"), "dump-tree.pb.gz")
    pids = tags_of(path, "pid")
    check(set(int(p) for p in pids) == set(f.tree()), "pids %s, tree %s" % (pids, f.tree()))
    tr = traces(path, "goroutine")
    check(any("master_wait" in fr for _, fr in tr), "no master_wait: %s" % tr[:5])
    check(sum(1 for _, fr in tr if "worker_main" in fr) >= 1, "no worker_main: %s" % tr[:5])
    # debug=2: each process's threads under its own line, the master first
    st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=2&tree=1")
    dump = body.decode()
    heads = re.findall(r"^process (\d+) \(prefork\):$", dump, re.M)
    check(st == 200 and [int(p) for p in heads] == sorted(f.tree()), "debug=2 headers %s, tree %s:\n%s" %
          (heads, f.tree(), dump[:1500]))
    check(re.search(r"^process %d \(prefork\):\n\ngoroutine %d \[.*\n(.*\n)*?master_wait\(" % (f.pid, f.pid),
                    dump, re.M), "the master's block lacks master_wait:\n%s" % dump[:1500])
    # debug=1: the workers' identical stacks stay apart, each with its labels
    st, _, body = http(pp.port, "/debug/pprof/goroutine?debug=1&tree=1")
    text = body.decode()
    labels = re.findall(r'^# labels: \{"pid":"(\d+)", "process":"prefork"\}$', text, re.M)
    check(st == 200 and sorted(int(p) for p in labels) == sorted(f.tree()), "debug=1 labels %s:\n%s" %
          (labels, text[:1500]))
    pp.stop()
    f.stop()


@test
def tree_members_that_exit_end_cleanly():
    """Workers recycled after 1 s, a 3 s profile of the tree: the workers
    there at the start exit during it; the profile is whole (200, their
    samples in worker_spin up to their end) and its comment names each
    that exited."""
    f = Prefork(workers=2, life_ms=1000)
    pp = Podprof("--pid", str(f.pid))
    first = f.tree()[1:]
    path = save(get_profile(pp, "seconds=3&tree=1"), "tree-exit.pb.gz")
    raw = pprof("-raw", path)
    for w in first:
        check("pid %d (prefork) exited during the window" % w in raw, "no exit of %d in the comments:\n%s" %
              (w, raw[:2000]))
    pids = tags_of(path, "pid")
    check(all(str(w) in pids for w in first), "the first workers' samples: %s of %s" % (pids, first))
    check(re.search(r"worker_spin\s*$", pprof("-top", path), re.M), "no worker_spin")
    pp.stop()
    f.stop()


@test
@figures
def pid_all_profiles_every_process_of_the_pod():
    """In a pod-like PID namespace (pause as PID 1, two busy processes and
    podprof): profile?pid=all is one profile of the two busy processes,
    labelled with their pids as the pod sees them, neither pause nor
    podprof in it; goroutine?pid=all the same for the thread dump; an
    endpoint of one process refuses pid=all."""
    from test_cli import PodNamespace
    from lib import Fixture, Skip
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot create PID namespaces here: %s" % probe.stderr.decode().strip())
    ns = PodNamespace()
    f1 = Fixture(threads=1, wrap=ns.enter)
    f2 = Fixture(threads=2, wrap=ns.enter)
    pp = Podprof("--pid", str(f1.pid), prefix=ns.enter([]))
    path = save(get_profile(pp, "seconds=2&pid=all"), "all.pb.gz")
    pids = tags_of(path, "pid")
    names = tags_of(path, "process")
    print("  info: pid shares %s" % pids)
    check(set(int(p) for p in pids) == {f1.pid, f2.pid}, "pids %s, the pod's busy processes %d and %d" %
          (pids, f1.pid, f2.pid))
    check(set(names) == {"busy"}, "processes %s" % names)
    check(re.search(r"hot_a\s*$", pprof("-top", path), re.M), "no hot_a")
    path = save(get_profile(pp, "pid=all", name="goroutine"), "all-dump.pb.gz")
    check(set(int(p) for p in tags_of(path, "pid")) == {f1.pid, f2.pid}, "dump pids %s" % tags_of(path, "pid"))
    st, _, body = http(pp.port, "/debug/pprof/")
    check(st == 200 and b"href='profile?pid=all'" in body and b"href='goroutine?debug=1&pid=all'" in body,
          "the index has no pid=all links: %d" % st)
    st, _, body = http(pp.port, "/debug/pprof/cmdline?pid=all")
    check(st == 400 and b"one process" in body, "cmdline?pid=all: %d %r" % (st, body[:200]))
    pp.stop()
    f1.stop(), f2.stop()


@test
@figures
def recycled_workers_are_followed_from_their_first_instruction():
    """A pre-fork server recycling its workers every 0.5 s, a 3 s profile of
    its tree: the workers forked during the window join it (their pids in
    the labels beside the first ones', worker_spin in their stacks), and the
    profile holds the CPU the whole tree used, the workers that ended
    included (the master's cutime), within 5 %."""
    f = Prefork(workers=2, life_ms=500)
    pp = Podprof("--pid", str(f.pid))
    first = set(f.tree()[1:])
    body, r0, r1 = in_group_window(pp, f, lambda: get_profile(pp, "seconds=3&tree=1"))
    path = save(body, "recycled.pb.gz")
    shares = {int(p): v for p, v in tags_of(path, "pid").items()}
    pids = set(shares)
    later = pids - first - {f.pid}
    st, _, m = http(pp.port, "/metrics")
    followed = re.search(rb"^podprof_processes_followed_total (\d+)", m, re.M)
    print("  info: %d processes in the profile, %d forked during it; followed %s" % (
        len(pids), len(later), followed and followed.group(1).decode()))
    check(len(later) >= 6, "only %d workers forked in the window are in the profile: %s (first %s)" %
          (len(later), sorted(pids), sorted(first)))
    check(followed and int(followed.group(1)) >= len(later), "podprof_processes_followed_total: %r" % followed)
    # the later worker with the most samples (the last forked may have had
    # only its first milliseconds in the window)
    one = pprof("-top", "-tagfocus=pid=%d" % max(later, key=lambda p: shares[p]), path)
    check("worker_spin" in one, "a later worker's samples lack worker_spin:\n%s" % one)
    check_tree_total(path, r0, r1)
    pp.stop()
    out = f.stop()
    check("forked=" in out, "prefork's end: %r" % out)


@test
def a_script_and_the_program_it_starts():
    """--tree on a shell entrypoint that starts the real program as a child
    (sleeps, then runs busy): a profile begun before the start follows the
    fork and the exec into busy, whose hot_a and hot_b are in it under
    process busy; the shell is there under its own name."""
    script = "sleep 0.5; exec_me() { %s -t 1 -s 0; }; exec_me; :" % lib.BUSY
    sh = subprocess.Popen(["sh", "-c", script])
    PROCS.append(sh)
    try:
        pp = Podprof("--pid", str(sh.pid), "--tree")
        path = save(get_profile(pp, "seconds=2"), "script.pb.gz")
        names = tags_of(path, "process")
        print("  info: processes %s" % names)
        check("busy" in names, "busy is not in the profile: %s" % names)
        top = pprof("-top", "-tagfocus=process=busy", path)
        check(re.search(r"hot_a\s*$", top, re.M), "no hot_a under busy:\n%s" % top)
        pp.stop()
    finally:
        for p in subprocess.run(["pgrep", "-P", str(sh.pid)], capture_output=True, text=True).stdout.split():
            os.kill(int(p), signal.SIGKILL)
        sh.kill()
        sh.wait()


@test
@figures
def nginx_master_and_workers_in_one_profile():
    """Debian's nginx, a master and two workers serving a gzip'd file under
    wrk: a tree profile through the master (--comm nginx --tree) holds both
    workers' CPU, labelled by pid, deflate among their stacks (zlib, each
    request compressed); reloaded mid-profile (SIGHUP: the master forks two
    new workers, the old ones finish and exit), the new workers are in it
    too, from their first instruction."""
    import shutil
    import socket
    import tempfile
    import time
    sys.path.insert(0, os.path.join(lib.ROOT, "tests", "bench"))
    from bench_allocs import NGINX_CONF, children   # make bench's nginx, with 2 workers
    if not shutil.which("nginx") or not shutil.which("wrk"):
        raise lib.Skip("nginx or wrk not installed (scripts/deps.sh)")
    d = tempfile.mkdtemp(prefix="nginx-", dir=lib.TMP)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    os.makedirs(os.path.join(d, "html"))
    os.makedirs(os.path.join(d, "tmp"))
    with open(os.path.join(d, "nginx.conf"), "w") as fh:
        fh.write(NGINX_CONF % dict(dir=d, port=port, workers=2))
    with open(os.path.join(d, "html", "gz.txt"), "w") as fh:
        fh.write(" ".join("podprof profiles nginx %d" % i for i in range(2000)))
    cmd = ["nginx", "-p", d, "-c", os.path.join(d, "nginx.conf"), "-e", os.path.join(d, "error.log")]
    if os.geteuid() == 0:   # nginx as nobody: its own files
        os.chmod(lib.TMP, 0o755)
        for root, _, files in os.walk(d):
            shutil.chown(root, "nobody", "nogroup")
            for fn in files:
                shutil.chown(os.path.join(root, fn), "nobody", "nogroup")
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"] + cmd
    ng = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    PROCS.append(ng)
    try:
        deadline = time.monotonic() + 10
        while len(children(ng.pid)) < 2 or subprocess.run(
                ["curl", "-sf", "-o", os.devnull, "http://127.0.0.1:%d/gz.txt" % port]).returncode:
            check(time.monotonic() < deadline and ng.poll() is None, "nginx did not start")
            time.sleep(0.05)
        first = set(children(ng.pid))
        wrk = subprocess.Popen(["wrk", "-t", "1", "-c", "8", "-d", "5s", "-H", "Accept-Encoding: gzip",
                                "http://127.0.0.1:%d/gz.txt" % port], stdout=subprocess.DEVNULL)
        PROCS.append(wrk)
        pp = Podprof("--comm", "nginx", "--tree")
        result = []
        import threading
        t = threading.Thread(target=lambda: result.append(get_profile(pp, "seconds=3")))
        t.start()
        pp.wait_log(r"profile: started for 3 processes", 10)
        time.sleep(1)
        os.kill(ng.pid, signal.SIGHUP)   # reload: new workers, the old ones leave
        t.join(60)
        wrk.wait(20)
        check(result, "the profile failed")
        path = save(result[0], "nginx.pb.gz")
        pids = {int(p): v for p, v in tags_of(path, "pid").items()}
        later = set(pids) - first - {ng.pid}
        print("  info: nginx master %d, first workers %s, in the profile %s" % (ng.pid, sorted(first), pids))
        # a worker may serve few requests before the reload (under load,
        # one took none in 1 s): one of them at least, and all followed
        check(first & set(pids), "none of the first workers is in the profile: %s" % pids)
        m = re.search(r"podprof: (\d+) processes", pprof("-raw", path))
        check(m and int(m.group(1)) >= 5, "the profile's processes (master, 2 workers, 2 after the reload): %s" %
              (m and m.group(0)))
        check(len(later) >= 1, "no worker forked by the reload in the profile: %s (first %s)" % (pids, first))
        check(set(tags_of(path, "process")) <= {"nginx"}, "processes %s" % tags_of(path, "process"))
        top = pprof("-top", "-nodecount=200", path)
        check(re.search(r"deflate|compress", top), "no zlib in the workers' stacks:\n%s" % top[:3000])
        pp.stop()
    finally:
        ng.terminate()
        ng.wait(20)


@test
def trace_of_a_tree_keeps_each_process_apart():
    """trace?tree=1 of a pre-fork server: go tool trace opens it and its
    goroutine analysis lists each worker's thread under its own process;
    the JSON form puts each thread's events under its process's pid, with
    a process_name for each, and the processes' RSS summed under pid 0."""
    import json
    from test_trace import Viewer, get_trace
    f = Prefork(workers=2)
    pp = Podprof("--pid", str(f.pid))
    tree = f.tree()
    path = get_trace(pp, "seconds=1&tree=1", "tree-trace")
    page = Viewer(path).get("/goroutines")
    for pid in tree:
        check("thread prefork of prefork (pid %d)" % pid in page,
              "goroutines page lacks process %d:\n%s" % (pid, page[:1500]))
    st, h, body = http(pp.port, "/debug/pprof/trace?seconds=1&tree=1&format=json", timeout=60)
    check(st == 200, "json trace %d %r" % (st, body[:200]))
    ev = json.loads(body)["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e.get("name") == "process_name"}
    check(names.get(0) == "3 processes", "process names %s" % names)
    for pid in tree:
        check(names.get(pid) == "prefork (pid %d)" % pid, "process names %s" % names)
    for w in tree[1:]:
        # A worker's one thread is its own tid: its slices and samples are under its pid.
        mine = [e for e in ev if e.get("ph") in ("X", "P") and e.get("tid") == w]
        check(mine and all(e["pid"] == w for e in mine), "worker %d's events: %s" % (w, mine[:3]))
    rss = [e["args"]["bytes"] for e in ev if e.get("name") == "RSS"]
    own = []
    for pid in tree:
        with open("/proc/%d/status" % pid) as fh:
            own.append(int(re.search(r"VmRSS:\s+(\d+)", fh.read()).group(1)) * 1024)
    print("  info: RSS counter last %d, the processes' own %s" % (rss[-1] if rss else -1, own))
    check(rss and all(e["pid"] == 0 for e in ev if e.get("name") == "RSS"), "RSS counter")
    check(abs(rss[-1] - sum(own)) <= 0.2 * sum(own), "RSS %d, the processes' sum %d" % (rss[-1], sum(own)))
    pp.stop()
    f.stop()


@test
def heap_of_a_tree_keeps_each_process_apart():
    """heap?tree=1 of a process and its fork child, each with the agent's
    records: one profile, each sample labelled with its pid, the child's
    own allocation (child_delta) under its pid alone; a tree where only
    the master has records names the workers left out and why; the
    mapping view (view=mappings, debug=1) has every process's rows."""
    import test_allocs
    f = test_allocs.Allocs("-f", rate=65536)
    check(f.child, "no fork child")
    pp = Podprof("--pid", str(f.pid))
    path = save(get_profile(pp, "tree=1", name="heap"), "heap-tree.pb.gz")
    pids = tags_of(path, "pid")
    check(set(pids) == {str(f.pid), str(f.child)}, "pids %s, want %d and %d" % (pids, f.pid, f.child))
    def focus(pid):
        out = os.path.join(lib.TMP, "heap-tree-%d.pb.gz" % pid)
        pprof("-proto", "-tagfocus=pid=%d" % pid, "-output=" + out, path)
        return test_allocs.per_function(out, "inuse_space")
    child, parent = focus(f.child), focus(f.pid)
    check(test_allocs.near(child.get("child_delta", 0), 8 << 20, 0.25), "child's child_delta %s" % child)
    check("child_delta" not in parent and "keep_alpha" in parent, "parent's: %r" % parent)
    raw = pprof("-raw", path)
    check("fork children among these processes" in raw, raw[:1500])
    st, _, body = http(pp.port, "/debug/pprof/allocs?tree=1&view=mappings&debug=1")
    check(st == 200, "allocs mapping table %d" % st)
    rows = body.decode().splitlines()
    check(rows[0].split()[0] == "pid" and {r.split()[0] for r in rows[1:-1]} == {str(f.pid), str(f.child)},
          "mapping table's pids:\n%s" % "\n".join(rows[:5]))
    pp.stop()
    f.stop()
    # A pre-fork server whose workers have the agent but nothing sampled yet.
    import test_allocs as ta
    env = dict(os.environ, LD_PRELOAD=ta.AGENT)
    r, w = os.pipe()
    pf = subprocess.Popen([PREFORK, "-w", "2", "-r", str(w)], pass_fds=(w,), stdout=subprocess.DEVNULL, env=env)
    PROCS.append(pf)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 10)
    check(ready and os.read(r, 64).startswith(b"ready"), "prefork under the agent did not start")
    os.close(r)
    pp = Podprof("--pid", str(pf.pid))
    raw = pprof("-raw", save(get_profile(pp, "tree=1", name="heap"), "heap-prefork.pb.gz"))
    left = re.findall(r"pid (\d+) \(prefork\): not in this profile: (.*)", raw)
    check(len(left) == 2 and all("view=mappings" in why for _, why in left), raw[:2000])
    pp.stop()
    pf.terminate()
    pf.wait(20)
