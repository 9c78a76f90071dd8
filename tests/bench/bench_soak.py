"""make bench's soak section (issue 38): podprof SIGKILLed at random
moments of a profile, each time with a SIGUSR1 sent to the target just
before, under each backend. The run is the integration test
sigkill_at_random_moments_never_harms_the_target (tests/integration/
test_safety.py) with PODPROF_KILLS kills: it fails at the first signal
lost, thread left traced or stopped, or target stalled, and on success
prints the kills, the signals sent and those the target's handler counted.
make soak runs it with 1000 kills a backend; the bench, --soak-kills (a
fifth of a second each on a quiet machine). Called by bench.py (--only soak)."""
import os
import re
import subprocess
import sys
import time

INFO = re.compile(r"info: (\d+) SIGKILLs survived, (\d+) SIGUSR1 sent, (\d+) delivered, in (\d+) s \(seed (\d+)\)")


def one(b, backend):
    """One run of the kills under backend (None: the default): a dict."""
    env = dict(os.environ, PODPROF_KILLS=str(b.kills), PODPROF_TEST_TIMEOUT=str(60 + 5 * b.kills))
    env.pop("PODPROF_BACKEND", None)
    if backend:
        env["PODPROF_BACKEND"] = backend
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, os.path.join(b.root, "tests", "integration", "run.py"), b.build,
                        "sigkill_at_random_moments_never_harms_the_target"], env=env, capture_output=True, text=True)
    out = r.stdout + r.stderr
    m = INFO.search(out)
    fail = re.search(r"^FAIL \S+: (.*)$", out, re.M)
    return {"backend": backend or "default (perf_event)", "kills": int(m.group(1)) if m else None,
            "sent": int(m.group(2)) if m else None, "delivered": int(m.group(3)) if m else None,
            "seed": m.group(5) if m else "", "secs": time.monotonic() - t0,
            "failed": fail.group(1) if fail else ("" if m else "no result line (exit %d)" % r.returncode)}


def run(b):
    """b: build, root, kills."""
    rows = [one(b, backend) for backend in (None, "ptrace")]
    print("### Signal-loss soak: podprof SIGKILLed at a random moment of a profile (0-0.4 s after it "
          "starts, at 100, 500 or 1000 Hz), a SIGUSR1 sent to the target just before each kill; "
          "%d kills a backend (make soak: 1000)\n" % b.kills)
    print("| backend | kills | SIGUSR1 sent | delivered | lost | threads left traced or stopped, stalls | "
          "seconds | seed |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["failed"]:
            print("| %s | failed: %s | | | | | %.0f | |" % (r["backend"], r["failed"], r["secs"]))
            continue
        print("| %s | %d | %d | %d | %d | 0 | %.0f | %s |" % (r["backend"], r["kills"], r["sent"], r["delivered"],
                                                            r["sent"] - r["delivered"], r["secs"], r["seed"]))
    print()
