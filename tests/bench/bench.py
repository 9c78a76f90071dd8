#!/usr/bin/env python3
"""podprof benchmark: runs the busy fixture alone and under podprof, side by
side and interleaved (these machines are noisy), and prints one table of
medians over the repetitions.

    python3 tests/bench/bench.py [build/release] [--reps N] [--seconds S]

Per configuration: pause per thread-sample (median and p99 over the run, as
podprof logs them), unwind time per stack and per frame, hot_a share error
against the fixture's own TSC ground truth, and the target's slowdown
(iterations/s under podprof vs alone in the same repetition).
"""
import argparse
import os
import re
import select
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import lib as run_it  # noqa: E402  (the integration suite's go tool pprof helpers)

ap = argparse.ArgumentParser()
ap.add_argument("build", nargs="?", default="build/release")
ap.add_argument("--reps", type=int, default=3)
ap.add_argument("--seconds", type=int, default=5)
args = ap.parse_args()
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, args.build)
BUSY = os.path.join(BUILD, "fixtures", "busy")
PODPROF = os.path.join(BUILD, "podprof")
TMP = tempfile.mkdtemp(prefix="podprof-bench-")

CONFIGS = [  # (label, threads, sleepers, hz)
    ("1 busy, 100 Hz", 1, 0, 100),
    ("1 busy, 1000 Hz", 1, 0, 1000),
    ("2 busy + 8 idle, 100 Hz", 2, 8, 100),
    ("8 busy, 100 Hz", 8, 0, 100),
]


def start_busy(threads, sleepers):
    r, w = os.pipe()
    p = subprocess.Popen([BUSY, "-t", str(threads), "-s", str(sleepers), "-r", str(w)],
                         pass_fds=(w,), stdout=subprocess.PIPE, text=True)
    os.close(w)
    select.select([r], [], [], 10)
    os.read(r, 64)
    os.close(r)
    return p


def stop_busy(p, t0):
    p.terminate()
    out, _ = p.communicate(timeout=20)
    m = re.search(r"truth_a=([\d.]+) truth_b=[\d.]+ iters=(\d+)", out)
    return float(m.group(1)), int(m.group(2))


def proc_cpu_s(pid):
    """utime + stime of a process, in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        s = f.read()
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_alone(threads, sleepers, seconds):
    p = start_busy(threads, sleepers)
    # The fixture counts iterations from its start; time the same window.
    import time
    t0 = time.monotonic()
    time.sleep(seconds)
    truth, iters = stop_busy(p, t0)
    return iters / (time.monotonic() - t0)


def run_profiled(threads, sleepers, hz, seconds):
    import time
    p = start_busy(threads, sleepers)
    t0 = time.monotonic()
    pp = subprocess.Popen([PODPROF, "--pid", str(p.pid), "--listen", "127.0.0.1:0"],
                          stderr=subprocess.PIPE, text=True)

    port = None
    while port is None:   # other start-up lines may come first
        line = pp.stderr.readline()
        if not line:
            raise SystemExit("podprof exited before it served")
        m = re.search(r"\(port (\d+)\)", line)
        port = m and int(m.group(1))
    out = os.path.join(TMP, "p.pb.gz")
    cpu0 = proc_cpu_s(pp.pid)
    subprocess.run(["curl", "-sf", "-o", out,
                    "http://127.0.0.1:%d/debug/pprof/profile?seconds=%d&hz=%d" % (port, seconds, hz)],
                   check=True)
    own_cpu = proc_cpu_s(pp.pid) - cpu0
    truth, iters = stop_busy(p, t0)
    ips = iters / (time.monotonic() - t0)
    pp.terminate()
    log = pp.stderr.read()
    pp.wait()
    m = re.search(r"thread_samples=(\d+).*pause_us p50=([\d.]+) p99=([\d.]+) unwind_us p50=([\d.]+) p99=([\d.]+)", log)
    samples, p50, p99, u50, u99 = int(m.group(1)), *map(float, m.group(2, 3, 4, 5))
    run_it.TMP = TMP
    a = b = 0.0
    frames = []
    for v, fr in run_it.traces(out):
        frames.append(len(fr))
        if fr[0] == "hot_a":
            a += v
        elif fr[0] == "hot_b":
            b += v
    share = 100 * a / (a + b) if a + b else float("nan")
    return dict(ips=ips, samples=samples, p50=p50, p99=p99, u50=u50, u99=u99,
                own_cpu_pct=100 * own_cpu / seconds, own_us_per_sample=1e6 * own_cpu / max(samples, 1),
                expected=threads * hz * seconds,
                frames=statistics.mean(frames) if frames else 0, err=share - truth, share=share, truth=truth)


def main():
    rows = []
    for label, t, s, hz in CONFIGS:
        reps = []
        for _ in range(args.reps):
            alone = run_alone(t, s, args.seconds)
            prof = run_profiled(t, s, hz, args.seconds)
            prof["slowdown"] = 100 * (1 - prof["ips"] / alone)
            reps.append(prof)
        med = lambda k: statistics.median(r[k] for r in reps)
        rows.append((label, med("samples"), med("expected"), med("p50"), med("p99"), med("u50"), med("u99"),
                     med("frames"), med("u50") / med("frames") if med("frames") else 0,
                     med("share"), med("truth"), max(abs(r["err"]) for r in reps), med("slowdown"),
                     min(r["slowdown"] for r in reps), max(r["slowdown"] for r in reps),
                     med("own_cpu_pct"), med("own_us_per_sample")))
    print("podprof bench: %d reps x %d s per configuration; medians over reps (slowdown: min..max)" % (args.reps, args.seconds))
    print("| target | thread-samples | busy x Hz x s | pause us p50 | pause us p99 | unwind us/stack p50 | p99 | frames/stack | unwind us/frame | hot_a % | truth % | max share err (pp) | target slowdown % | podprof CPU % of a core | podprof CPU us/sample |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %s | %d | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f (%.1f..%.1f) | %.2f | %.1f |" % r)


main()
