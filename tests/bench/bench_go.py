"""make bench's go section (issue 34): a Go program's goroutines read from
outside. The goroutines fixture (tests/fixtures/goroutines) with 10,000
goroutines parked in a channel receive and one hot goroutine labelled by
pprof.Do, built by Debian's Go 1.19 and, where scripts/runtimes.sh has
provisioned it, Go 1.26:

- a goroutine dump (goroutine?debug=2) by podprof and by the program's own
  net/http/pprof over the same goroutines: the answer's time (median and
  worst of the dumps) and its size;
- the hot goroutine's progress (its main.hotLoop rounds a second, the
  fixture's /rounds) in windows with one dump a second, each against the
  windows alone on either side of it (paired: a shared host drifts more
  between minutes than between neighbouring windows): the median of these
  ratios (1.000: unharmed) and their quartiles, and windows alone in the
  same turns measured alike (the machine's own noise, which a goal of 1 %
  has to clear);
- the share of the labelled goroutine's CPU samples that carry its labels
  (perf_event and ptrace backends; goal 100 %);
- where the goroutines wait (block?seconds=3 of a Go program: podprof
  looks at every goroutine every 10 ms or more): its looks, what one took
  and how often (podprof's log), podprof's CPU over the window, and the hot
  goroutine's progress in the window against its neighbours alone;
- short waits, sampled: a block and a mutex window at once over the
  fixture's -churn goroutines (main.contender waits 15 ms of every 20 for
  a mutex), beside the program's own block profile: main.contender's delay
  against Go's own in each window (median, range), the looks and those on
  the other window's read, and podprof's CPU over the window.

Called by bench.py (--only go)."""
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib  # noqa: E402
import runtimes  # noqa: E402  (Go 1.26's toolchain, from scripts/runtimes.sh)
from test_goroutines import labelled_traces  # noqa: E402

GOROUTINES = 10000
WINDOW_S = 3.0


def get(port, path, timeout=60):
    """(seconds taken, body) of GET path."""
    t0 = time.monotonic()
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        body = r.read()
    return time.monotonic() - t0, body


def fixture_exe(b, release):
    if release == "1.19":
        return os.path.join(b.build, "fixtures", "goroutines")
    out = os.path.join(b.tmp, "goroutines-%s" % release)
    if not os.path.exists(out):
        runtimes.go_build(release, os.path.join(b.root, "tests", "fixtures", "goroutines"), out)
    return out


class Fixture:
    def __init__(self, exe, args):
        self.p = subprocess.Popen([exe] + args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        m = re.match(r"ready (\d+) (\d+)", self.p.stdout.readline())
        if not m:
            raise SystemExit("the goroutines fixture did not start")
        self.pid, self.port = int(m.group(1)), int(m.group(2))

    def rounds(self):
        return int(get(self.port, "/rounds")[1])

    def stop(self):
        self.p.kill()
        self.p.wait(10)


def window(f, dump_port, path):
    """The hot goroutine's rounds a second over WINDOW_S, with one dump a
    second from dump_port (None: alone); and each dump's time."""
    times = []
    r0, t0 = f.rounds(), time.monotonic()
    nxt = t0
    while time.monotonic() - t0 < WINDOW_S:
        if dump_port and time.monotonic() >= nxt:
            dt, _ = get(dump_port, path)
            times.append(dt)
            nxt += 1.0
        time.sleep(0.02)
    return (f.rounds() - r0) / (time.monotonic() - t0), times


def paired(f, kinds, reps, run):
    """The hot goroutine's progress in windows of each kind against the
    windows alone on either side of it: the sequence is alone, kinds[0],
    alone, kinds[1], ..., alone (reps times), and each window of a kind is
    measured against the mean of its two neighbours alone. Pairing
    neighbours cancels the machine's slow drifts (a shared host's), which
    medians of separate sets of windows do not. run(kind) is one window's
    rate; alone is window(f, None, None). Returns {kind: sorted ratios}."""
    seq = [("alone", window(f, None, None)[0])]
    for _ in range(reps):
        for k in kinds:
            seq.append((k, run(k)))
            seq.append(("alone", window(f, None, None)[0]))
    out = {k: [] for k in kinds}
    for i in range(1, len(seq) - 1, 2):
        out[seq[i][0]].append(seq[i][1] / ((seq[i - 1][1] + seq[i + 1][1]) / 2))
    return {k: sorted(v) for k, v in out.items()}


def spread(ratios):
    """A paired ratio's median and quartiles, as printed."""
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    return "%.4f (%.3f-%.3f)" % (statistics.median(ratios), q[0], q[2])


def dump_row(b, release):
    f = Fixture(fixture_exe(b, release), ["-recv", str(GOROUTINES), "-sleep", "0", "-lock", "0"])
    pp, port = b.start_podprof(f.pid)
    path = "/debug/pprof/goroutine?debug=2"
    # First answers (the tables read, the goroutine list found) apart.
    first, body = get(port, path)
    total = body.count(b"\ngoroutine ") + body.startswith(b"goroutine ")
    _, own_body = get(f.port, path)
    own_total = own_body.count(b"\ngoroutine ") + own_body.startswith(b"goroutine ")
    times = {"podprof": [], "own": []}

    def run(kind):
        rate, ts = window(f, {"podprof": port, "own": f.port}.get(kind), path)
        times.setdefault(kind, []).extend(ts)
        return rate
    # "alone again": a window alone in a kind's turn, the machine's own noise.
    ratios = paired(f, ("podprof", "alone again", "own"), max(b.reps, 3) * 2, run)
    b.stop_podprof(pp)
    f.stop()
    print("| %s | %d / %d | %.0f | %.1f / %.1f (%d) | %.1f / %.1f | %.0f / %.0f KiB | %s | %s | %s |" % (
        release, total, own_total, first * 1e3,
        1e3 * statistics.median(times["podprof"]), 1e3 * max(times["podprof"]), len(times["podprof"]),
        1e3 * statistics.median(times["own"]), 1e3 * max(times["own"]),
        len(body) / 1024, len(own_body) / 1024,
        spread(ratios["podprof"]), spread(ratios["own"]), spread(ratios["alone again"])))


def cpu_ms(pid):
    """A process's CPU (user + system) in ms."""
    with open("/proc/%d/stat" % pid) as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")


def waits_row(b, release):
    f = Fixture(fixture_exe(b, release), ["-recv", str(GOROUTINES), "-sleep", "0", "-lock", "0"])
    looks = []
    cpu = []

    def run(kind):
        pp, port = b.start_podprof(f.pid)
        result = {}

        def fetch():
            result["body"] = get(port, "/debug/pprof/block?seconds=%d" % WINDOW_S, timeout=WINDOW_S + 60)[1]
        t = threading.Thread(target=fetch)
        c0, r0, t0 = cpu_ms(pp.pid), f.rounds(), time.monotonic()
        t.start()
        t.join()
        rate = (f.rounds() - r0) / (time.monotonic() - t0)
        cpu.append(cpu_ms(pp.pid) - c0)
        log = b.stop_podprof(pp)
        m = re.search(r"block: pid=\d+ \S+: (\d+) looks at the goroutines \(\d+ on another session's read\), "
                      r"the last ([\d.]+) ms, every (\d+) ms; (\d+) parked", log)
        if m:
            looks.append(tuple(float(x) for x in m.groups()))
        return rate
    ratios = paired(f, ("block",), max(b.reps, 3), run)
    f.stop()
    if not looks:
        print("| %s | (no look logged) | | | | |" % release)
        return
    print("| %s | %d | %.0f | %.2f | %.0f | %.0f | %s |" % (
        release, statistics.median(x[3] for x in looks), statistics.median(x[0] for x in looks),
        statistics.median(x[1] for x in looks), statistics.median(x[2] for x in looks),
        statistics.median(cpu), spread(ratios["block"])))


def churn_row(b, release):
    """main.contender's delay in podprof's block profile against the
    program's own, over windows of a block and a mutex window at once."""
    from test_gowaits import LOCK, delay   # (go tool pprof's reading of the delay)
    f = Fixture(fixture_exe(b, release), ["-churn", "-blockrate", "-hot=false"])
    ratios, cpu, looks, shared = [], [], [], []
    for i in range(max(b.reps, 3) * 2):
        pp, port = b.start_podprof(f.pid)
        got = {}

        def fetch(p, name, key):
            got[key] = get(p, "/debug/pprof/%s?seconds=%d" % (name, WINDOW_S), timeout=WINDOW_S + 60)[1]
        ts = [threading.Thread(target=fetch, args=a) for a in
              ((port, "block", "block"), (port, "mutex", "mutex"), (f.port, "block", "own"))]
        c0 = cpu_ms(pp.pid)
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        cpu.append(cpu_ms(pp.pid) - c0)
        log = b.stop_podprof(pp)
        paths = {}
        for k in ("block", "own"):
            paths[k] = os.path.join(b.tmp, "churn-%s-%s-%d.pb.gz" % (release, k, i))
            with open(paths[k], "wb") as fh:
                fh.write(got[k])
        theirs = delay(paths["own"], "main.contender")
        ratios.append(delay(paths["block"], "main.contender", LOCK) / theirs
                      if theirs else float("nan"))
        for m in re.finditer(r"(?:block|mutex): pid=%d \S+: (\d+) looks at the goroutines \((\d+) on another" %
                             f.pid, log):
            looks.append(int(m.group(1)))
            shared.append(int(m.group(2)))
    f.stop()
    print("| %s | %d | %.2f (%.2f-%.2f) | %.0f | %.0f | %.0f |" % (
        release, len(ratios), statistics.median(ratios), min(ratios), max(ratios),
        statistics.median(looks) if looks else 0, sum(shared) / max(1, len(ratios)),
        statistics.median(cpu)))


def labels_row(b, release, backend):
    f = Fixture(fixture_exe(b, release), ["-recv", "5", "-sleep", "5", "-lock", "2"])
    pp, port = b.start_podprof(f.pid, "--backend", backend)
    out = os.path.join(b.tmp, "labels-%s-%s.pb.gz" % (release, backend))
    _, body = get(port, "/debug/pprof/profile?seconds=3&hz=200")
    with open(out, "wb") as fh:
        fh.write(body)
    b.stop_podprof(pp)
    f.stop()
    hot = [(lab, v) for lab, v, fr in labelled_traces(out) if "main.hotLoop" in fr]
    total = sum(v for _, v in hot)
    carried = sum(v for lab, v in hot if lab.get("worker") == "hot" and lab.get("tier") == "gold")
    print("| %s | %s | %.2f s | %.1f %% |" % (release, backend, total / 1e9,
                                              100.0 * carried / total if total else float("nan")))


def releases(b):
    out = ["1.19"]
    try:
        runtimes.goroot("1.26")
        out.append("1.26")
    except Exception as e:   # not provisioned: said, not hidden
        print("(Go 1.26 not provisioned: %s; scripts/runtimes.sh go 1.26)\n" % e)
    return out


def run(b):
    lib.TMP = b.tmp   # go tool pprof's scratch (labelled_traces)
    rel = releases(b)
    print("## Go: a goroutine dump of %d parked goroutines and one hot one\n" % GOROUTINES)
    print("One dump a second in %.0f s windows, each between two windows alone (%d of each kind); "
          "progress: the hot goroutine's rounds a second in the window against the mean of its two "
          "neighbours alone, median (quartiles) of these pairs; \"alone again\", windows alone in "
          "the same turns, gives the machine's own noise.\n" % (WINDOW_S, max(b.reps, 3) * 2))
    print("| Go | goroutines podprof / own | first answer ms | podprof ms median / worst (dumps) | "
          "own ms median / worst | size podprof / own | progress under podprof | under own | "
          "alone again (noise) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rel:
        dump_row(b, r)
    print("\n## Go: pprof labels on the labelled goroutine's CPU samples (3 s at 200 Hz)\n")
    print("| Go | backend | main.hotLoop CPU | carrying its labels |")
    print("|---|---|---|---|")
    for r in rel:
        for backend in ("perf_event", "ptrace"):
            labels_row(b, r, backend)
    print("\n## Go: where the goroutines wait, a %.0f s block window over %d parked goroutines\n" %
          (WINDOW_S, GOROUTINES))
    print("| Go | goroutines parked | looks | a look, ms | every, ms | podprof CPU in the window, ms | "
          "progress in the window (against its neighbours alone), median (quartiles) |")
    print("|---|---|---|---|---|---|---|")
    for r in rel:
        waits_row(b, r)
    print("\n## Go: short waits, sampled: main.contender (a mutex held 15 ms of every 20), a %.0f s block "
          "and mutex window at once beside the program's own block profile\n" % WINDOW_S)
    print("| Go | windows | main.contender's delay / Go's own, median (range) | looks a window (each) | "
          "of them on the other window's read (both) | podprof CPU in the window, ms |")
    print("|---|---|---|---|---|---|")
    for r in rel:
        churn_row(b, r)
    print()
