#!/usr/bin/env python3
"""The tests that compare shares, rates or times, again and again with every
core taken by competing busy processes (issue 38: a suite that holds quiet
and under load; issue 22: stacks right every time, not most of the time).

    python3 tests/stress/figures.py [--runs N] [--hogs K] BUILD [test ...]

Starts K busy processes (default: one per core) that spin for the whole
run, then runs each test marked @figures in the integration suite (or the
ones named) N times, each in its own run.py; and N times again with
PODPROF_BACKEND=ptrace (as the suite's it-ptrace pass: "stress-ptrace/")
each test whose runs sampled with perf_event without naming a backend
(run.py's PODPROF_IT_SAMPLED_LIST) or did not pass. Prints one PASS/FAIL line per
test (FAIL if any run failed, with that run's message), then per test the
spread of every figure its runs printed ("info:" lines with the numbers
taken out: the same line of every run side by side, its worst and best
values), and a tally. Exit status 1 if any run failed. make stress runs
each test ten times; scripts/check.sh runs it once (its short form).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "..", "integration", "run.py")
NUM = re.compile(r"[-+]?\d+(?:\.\d+)?")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("build")
ap.add_argument("--runs", type=int, default=10, help="runs of each test (10)")
ap.add_argument("--hogs", type=int, default=os.cpu_count() or 1,
                help="busy processes beside the tests (one per core)")
ap.add_argument("--no-ptrace", action="store_true", help="skip the PODPROF_BACKEND=ptrace runs")
ap.add_argument("tests", nargs="*", help="tests to run (default: every one marked @figures)")
args = ap.parse_args()
if not args.tests:
    sys.path.insert(0, os.path.join(HERE, "..", "integration"))
    sys.argv = [sys.argv[0], args.build]   # run.py reads the build from its argv
    import run  # noqa: E402,F401  (imports every test module: they mark their tests)
    import lib  # noqa: E402
    args.tests = list(lib.FIGURES)
if args.runs < 1 or args.runs > 1000 or args.hogs < 0 or args.hogs > 256:
    sys.exit("figures.py: --runs 1..1000, --hogs 0..256")


def hog():
    return subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)


def one(name, backend, sampled_list):
    """(status, message, [info lines]) of one run of one test; without a
    backend, run.py adds its name to sampled_list if it passed and sampled
    with perf_event."""
    t0 = time.monotonic()
    env = dict(os.environ)
    env.pop("PODPROF_IT_FIGURES_LEFT_TO_STRESS", None)
    if backend:
        env["PODPROF_BACKEND"] = backend
    else:
        env["PODPROF_IT_SAMPLED_LIST"] = sampled_list
    r = subprocess.run([sys.executable, RUN, args.build, name], capture_output=True, text=True, timeout=600,
                       env=env)
    out = r.stdout.splitlines()
    status = next((ln.split()[0] for ln in out if ln.split()[:1] in (["PASS"], ["FAIL"], ["SKIP"])
                   and ln.split()[1:2] and ln.split()[1].split("/", 1)[1:] == [name]), "FAIL")
    msg = "\n".join(ln for ln in out if ln.startswith(("FAIL", "SKIP", "  ")) and "info:" not in ln)
    if status in ("PASS", "SKIP") and r.returncode != 0:
        status = "FAIL"   # its cleanup failed (FAIL it/NAME/cleanup), or the runner itself
    if status == "FAIL" and not msg:
        msg = (r.stdout + r.stderr)[-2000:]
    infos = [ln.split("info:", 1)[1].strip() for ln in out if "info:" in ln]
    return status, msg, infos, time.monotonic() - t0


def spread(runs):
    """Each info line's shape (numbers as #), with every run's numbers."""
    shapes = {}
    for i, infos in enumerate(runs):
        seen = {}
        for ln in infos:
            key = NUM.sub("#", ln)
            k = seen.get(key, 0)
            seen[key] = k + 1
            shapes.setdefault((key, k), []).append((i, [float(x) for x in NUM.findall(ln)]))
    return shapes


def main():
    hogs = [hog() for _ in range(args.hogs)]
    passed = failed = skipped = 0
    fd, sampled_list = tempfile.mkstemp(prefix="podprof-stress-sampled-")
    os.close(fd)
    todo = [(t, b, tag) for t in args.tests
            for b, tag in ((None, "stress"), ("ptrace", "stress-ptrace"))[:1 if args.no_ptrace else 2]]
    again = 0
    try:
        print("stress: %d runs of %d tests (again under ptrace those that sampled with perf_event), "
              "%d busy processes on %d cores" % (args.runs, len(args.tests), args.hogs, os.cpu_count() or 1),
              flush=True)
        for name, backend, tag in todo:
            if backend:
                with open(sampled_list) as fh:
                    if name not in fh.read().split():
                        continue
                again += 1
            runs, bad, skip, secs = [], [], None, []
            for i in range(args.runs):
                status, msg, infos, dt = one(name, backend, sampled_list)
                secs.append(dt)
                if not backend and status != "PASS":
                    # run again under ptrace, as run.py's second pass runs a
                    # test that did not pass (listed here, not by run.py: a
                    # runner that died writes nothing)
                    with open(sampled_list, "a") as fh:
                        fh.write(name + "\n")
                if status == "SKIP":
                    skip = msg
                    break
                runs.append(infos)
                if status != "PASS":
                    bad.append((i + 1, msg))
            if skip is not None:
                # the reason of run.py's SKIP line; any other line under it
                lines = skip.strip().split("\n")
                why = next((ln.split(": ", 1)[-1] for ln in lines if ln.startswith("SKIP ")), lines[0])
                rest = "".join("\n  | " + ln for ln in lines if not ln.startswith("SKIP "))
                print("SKIP %s/%s: %s%s" % (tag, name, why, rest), flush=True)
                skipped += 1
                continue
            if bad:
                detail = "\n".join("  | " + l for l in bad[0][1].rstrip("\n").split("\n"))
                print("FAIL %s/%s: %d of %d runs failed; the first (run %d):\n%s" % (
                    tag, name, len(bad), len(runs), bad[0][0], detail), flush=True)
                failed += 1
            else:
                print("PASS %s/%s: %d of %d runs (%.0f-%.0f s each)" % (
                    tag, name, len(runs), len(runs), min(secs), max(secs)), flush=True)
                passed += 1
            for (shape, _), vals in sorted(spread(runs).items()):
                cols = list(zip(*[v for _, v in vals if len(v) == len(vals[0][1])]))
                rng = ", ".join("%g..%g" % (min(c), max(c)) if min(c) != max(c) else "%g" % c[0] for c in cols)
                print("  %s  [%d runs: %s]" % (shape, len(vals), rng), flush=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        os.unlink(sampled_list)
    print("stress: %d of %d tests run again under ptrace" % (again, len(args.tests)))
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
