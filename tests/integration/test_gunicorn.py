"""A pre-fork Python server as users run it (issue 35): Debian's gunicorn
serving tests/fixtures/pyapp.py, in a pod-like PID namespace with podprof
(pause as PID 1), under load from the test's own clients. profile?pid=all
is one profile of the master and its workers: every worker in it, each with
its Python frames named (burn_request, crunch_alpha with their file and
line), the app's function most of the workers' CPU; with threaded
workers, each worker's threads; with --max-requests, the workers forked
during the window followed with their Python frames from their first
samples."""
import http.client
import os
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time

import lib
from lib import PROCS, Podprof, Skip, check, find_descendant, get_profile, nspid, pprof, save, test, figures
from test_python import marked_lines, py_traces
from test_processes import tags_of

GUNICORN = "/usr/bin/gunicorn"
APP = os.path.join(lib.ROOT, "tests", "fixtures", "pyapp.py")
LINES = marked_lines(APP)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Gunicorn:
    """gunicorn inside the namespace ns: `workers` workers of worker_class,
    `threads` threads each; ready once its master has written its pid file
    and every worker answers. Truths are the workers' files (pyapp.py)."""

    def __init__(self, ns, workers, worker_class="sync", threads=1, max_requests=0):
        if not os.path.exists(GUNICORN):
            raise Skip("%s not installed (Debian's gunicorn: scripts/packages.txt)" % GUNICORN)
        self.dir = tempfile.mkdtemp(dir=lib.TMP)
        self.port = free_port()
        pidfile = os.path.join(self.dir, "master.pid")
        argv = [GUNICORN, "--bind", "127.0.0.1:%d" % self.port, "--workers", str(workers),
                "--worker-class", worker_class, "--threads", str(threads), "--pid", pidfile,
                "--chdir", os.path.dirname(APP), "--log-level", "warning", "--graceful-timeout", "10", "--preload"]
        if max_requests:
            argv += ["--max-requests", str(max_requests)]
        env = dict(os.environ, PYAPP_TRUTH=self.dir)
        self.log = open(os.path.join(self.dir, "gunicorn.log"), "w+")
        self.proc = subprocess.Popen(ns.enter(argv + ["pyapp:application"]), env=env,
                                     stdout=subprocess.DEVNULL, stderr=self.log, text=True)
        PROCS.append(self.proc)
        deadline = time.monotonic() + 30
        while not os.path.exists(pidfile) or not open(pidfile).read().strip():
            if self.proc.poll() is not None:
                raise AssertionError("gunicorn exited: %s" % self.errors())
            check(time.monotonic() < deadline, "gunicorn wrote no pid file")
            time.sleep(0.05)
        self.pid = int(open(pidfile).read())            # as the pod sees it
        self.host_pid = find_descendant(self.proc.pid, lambda p: nspid(p) == self.pid)
        while len(self.workers()) < workers:
            check(time.monotonic() < deadline, "gunicorn started %d of %d workers" % (len(self.workers()), workers))
            time.sleep(0.05)
        self.get()

    def errors(self):
        """The end of gunicorn's log."""
        self.log.seek(0)
        return self.log.read()[-2000:]

    def workers(self):
        """The live workers' pids, as the pod sees them."""
        try:
            with open("/proc/%d/task/%d/children" % (self.host_pid, self.host_pid)) as f:
                kids = [int(c) for c in f.read().split()]
        except OSError:
            return []
        out = []
        for k in kids:
            try:
                out.append(nspid(k))
            except OSError:
                pass
        return sorted(out)

    def get(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            c.request("GET", "/")
            r = c.getresponse()
            body = r.read()
            check(r.status == 200 and body.startswith(b"ok "), "the app answered %d %r" % (r.status, body))
        finally:
            c.close()

    def stop(self):
        """SIGTERM to the master (its workers end, writing their truths);
        the workers' truths {pid: {burn, alpha, beta, cpu, requests}}."""
        os.kill(self.host_pid, signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.log.close()
        out = {}
        for name in os.listdir(self.dir):
            if name.isdigit():
                with open(os.path.join(self.dir, name)) as f:
                    out[int(name)] = {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", f.read())}
        return out


class Load:
    """`clients` threads of the test each sending requests one after
    another, a connection each (sync workers close it), until stop()."""

    def __init__(self, g, clients):
        self.done = threading.Event()
        self.count = 0
        self.errors = []
        self.threads = [threading.Thread(target=self._run, args=(g,), daemon=True) for _ in range(clients)]
        for t in self.threads:
            t.start()

    def _run(self, g):
        while not self.done.is_set():
            try:
                g.get()
                self.count += 1
            except Exception as e:   # noqa: BLE001  (kept and reported by stop)
                self.errors.append(repr(e))
                return

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(60)
        check(not self.errors, "requests failed: %s" % self.errors[:3])
        return self.count


def pod_profile(ns, g, query, name):
    """podprof in the pod's namespace on the master; a pid=all profile."""
    pp = Podprof("--pid", str(g.pid), prefix=ns.enter([]))
    path = save(get_profile(pp, query + "&pid=all"), name)
    pp.stop()
    return path


def pod():
    from test_cli import PodNamespace
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        raise Skip("cannot create PID namespaces here: %s" % probe.stderr.decode().strip())
    return PodNamespace()


def names_with_lines(path):
    """burn_request and crunch_alpha with the app's file and line, as
    go tool pprof -top -lines shows them."""
    top = pprof("-top", "-lines", "-nodecount=300", path)
    for name, mark in (("burn_request", "burn"), ("crunch_alpha", "alpha"), ("application", "app")):
        want = "%s %s:%d" % (name, APP, LINES[mark])
        check(want in top, "no %r in pprof -top -lines:\n%s" % (want, top[-3000:]))


def check_shares(path, truths, master):
    """burn_request's share of the workers' CPU (every sample but the
    master's): most of it (each request is ~4 ms of burn_request and a
    fraction of that in gunicorn's own code: 82-85 % by the workers' thread
    clocks). The alpha/beta split is printed beside the workers' own wall
    time, not held: four workers sharing two cores with the test's clients
    make wall time no measure of CPU (with --preload, every worker sized
    alike, the profile read 2.7-3.3 points below it on a quiet machine;
    each worker sized apart, -6.4 to +3.6), and a thread clock read at each
    call skews the profile itself (pyhot.py). The split is held per
    interpreter by test_python.py, where one process owns its core."""
    tr = py_traces(path, extra=("-tagignore=pid=%d" % master,))
    total = sum(v for v, _ in tr)
    check(total > 0, "no samples but the master's")
    burn = 100.0 * sum(v for v, fr in tr if "burn_request" in fr) / total
    a = sum(v for v, fr in tr if "crunch_alpha" in fr)
    b = sum(v for v, fr in tr if "crunch_beta" in fr)
    t = {k: sum(x.get(k, 0.0) for x in truths.values()) for k in ("alpha", "beta", "requests")}
    check(a > 0 and b > 0 and t["alpha"] + t["beta"] > 0, "crunch_alpha %s, crunch_beta %s, the workers' own %s" %
          (a, b, truths))
    print("  info: burn_request %.1f%% of the workers' CPU; crunch_alpha %.1f%% of alpha+beta (the workers' wall "
          "time: %.1f%%); %d requests, %.2f s of samples" % (burn, 100.0 * a / (a + b),
                                                             100.0 * t["alpha"] / (t["alpha"] + t["beta"]),
                                                             t["requests"], total / 1e9))
    check(burn >= 70.0, "burn_request only %.1f%% of the workers' CPU" % burn)


@test
@figures
def gunicorn_sync_workers_in_one_profile():
    """gunicorn with four sync workers in a pod-like PID namespace:
    profile?pid=all holds the master's pid and its four workers', each
    worker's samples with burn_request under application, its Python
    frames named with the app's file and lines, burn_request's share of
    the workers' CPU most of it."""
    ns = pod()
    g = Gunicorn(ns, workers=4)
    load = Load(g, clients=4)
    workers = g.workers()
    path = pod_profile(ns, g, "seconds=4&hz=250", "gunicorn-sync.pb.gz")
    n = load.stop()
    truths = g.stop()
    pids = {int(p): s for p, s in tags_of(path, "pid").items()}
    print("  info: pid shares %s (master %d, workers %s), %d requests in all" % (pids, g.pid, workers, n))
    check(set(workers) <= set(pids), "workers %s, the profile's pids %s" % (workers, sorted(pids)))
    check(set(pids) <= set(workers) | {g.pid}, "pids beyond gunicorn's: %s" % sorted(pids))
    for w in workers:
        one = pprof("-top", "-tagfocus=pid=%d" % w, path)
        check("burn_request" in one and "application" in one, "worker %d without the app's frames:\n%s" % (w, one))
    names_with_lines(path)
    check(set(truths) >= set(workers), "truths of %s, workers %s" % (sorted(truths), workers))
    check_shares(path, truths, g.pid)


@test
@figures
def gunicorn_threaded_workers_in_one_profile():
    """gunicorn's gthread workers (2 workers, 4 threads each): every worker
    in profile?pid=all, the app's frames named in several threads of each,
    burn_request most of the workers' CPU."""
    ns = pod()
    g = Gunicorn(ns, workers=2, worker_class="gthread", threads=4)
    load = Load(g, clients=6)
    workers = g.workers()
    path = pod_profile(ns, g, "seconds=4&hz=250", "gunicorn-gthread.pb.gz")
    load.stop()
    truths = g.stop()
    pids = {int(p): s for p, s in tags_of(path, "pid").items()}
    check(set(workers) <= set(pids), "workers %s, the profile's pids %s" % (workers, sorted(pids)))
    for w in workers:
        tids = tags_of(path, "tid", extra=("-tagfocus=pid=%d" % w, "-focus=burn_request"))
        print("  info: worker %d: burn_request in threads %s" % (w, tids))
        check(len(tids) >= 2, "worker %d: burn_request in %d thread(s): %s" % (w, len(tids), tids))
    names_with_lines(path)
    check_shares(path, truths, g.pid)


@test
@figures
def gunicorn_recycled_workers_are_followed():
    """gunicorn with --max-requests 30 (a worker ends after 30 requests and
    the master forks another): the workers forked during a 4 s profile are
    in it, three or more, and three or more of them with their Python
    frames named."""
    ns = pod()
    g = Gunicorn(ns, workers=2, max_requests=30)
    load = Load(g, clients=3)
    first = set(g.workers())
    # The workers the master forked meanwhile, as /proc shows them (how many
    # depends on how fast the requests go: fewer on a loaded machine).
    seen, done = {}, threading.Event()

    def watch():
        while not done.wait(0.02):
            for p in g.workers():
                seen.setdefault(p, time.time_ns())
    w = threading.Thread(target=watch)
    w.start()
    path = pod_profile(ns, g, "seconds=4&hz=250", "gunicorn-recycled.pb.gz")
    done.set()
    w.join()
    load.stop()
    truths = g.stop()
    shares = {int(p): s for p, s in tags_of(path, "pid").items()}
    later = set(shares) - first - {g.pid}
    start, length = lib.profile_window(path)
    forked = {p for p, at in seen.items() if p not in first and start <= at <= start + length}
    print("  info: %d pids in the profile, %d forked after it began (%d seen forked meanwhile); "
          "%d workers ended in all" % (len(shares), len(later), len(forked), len(truths)))
    check(len(forked) >= 2, "the master forked only %d workers during the profile: %s" % (len(forked), sorted(forked)))
    # every one of them, but one forked in the window's last moments
    check(len(later) >= min(3, len(forked) - 1),
          "only %d workers forked during the window are in the profile: %s (first %s, forked %s)" %
          (len(later), sorted(shares), sorted(first), sorted(forked)))
    # A worker forked near the window's end may have had only its start
    # (the import) in it: three of them with the app's frames named.
    named = [p for p in later if "burn_request" in pprof("-top", "-tagfocus=pid=%d" % p, path)]
    print("  info: burn_request named in %d of them" % len(named))
    check(len(named) >= min(3, len(later) - 1),
          "of the workers forked during the window %s, only %s have burn_request" % (sorted(later), sorted(named)))
