"""make bench's flame graph section (issue 23): the page format=flamegraph
serves, for 20 000, 100 000 and 200 000 random distinct stacks
(bench-flamegen: 8-30 frames each over 5000 names, shared prefixes, values
1-10; a node under 0.001 % of the total is left out, so 100 000 is about
the heaviest page and 200 000 light stacks mostly pruned): its weight, the time
to write it, and in headless Chromium the time from load to drawn (the
page's own performance.now() when its script finished) and the whole
run (start, load, draw, DOM dump) with a click zoom. Medians over the
repetitions. Called by bench.py (--only flame)."""
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time

SIZES = (20000, 100000, 200000)


def chromium(exe, tmp, url):
    prof = tempfile.mkdtemp(prefix="chromium-", dir=tmp)
    t0 = time.monotonic()
    r = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--user-data-dir=" + prof, "--window-size=1400,900", "--virtual-time-budget=30000",
                        "--dump-dom", url], capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - t0
    shutil.rmtree(prof, ignore_errors=True)
    m = re.search(r'data-ms="(\d+)"', r.stdout)
    if not m or 'data-ready="1"' not in r.stdout:
        raise SystemExit("flame: the page did not finish in chromium: %s" % r.stderr[-500:])
    return int(m.group(1)), wall, len(re.findall(r'<div class="f', r.stdout))


def run(b):
    """b: build, tmp, reps."""
    exe = shutil.which("chromium")
    if not exe:
        print("### Flame graph page: skipped (chromium not installed)\n")
        return
    rows = []
    for n in SIZES:
        path = os.path.join(b.tmp, "flame-%d.html" % n)
        reps = []
        for _ in range(b.reps):
            out = subprocess.run([os.path.join(b.build, "bench-flamegen"), str(n), path], capture_output=True,
                                 text=True, check=True).stdout
            m = re.search(r"bytes (\d+) encode_ms ([\d.]+)", out)
            drawn, wall, boxes = chromium(exe, b.tmp, "file://" + path)
            zdrawn, zwall, _ = chromium(exe, b.tmp, "file://" + path + "#click=module::function_7")
            reps.append({"mb": int(m.group(1)) / 1e6, "encode_ms": float(m.group(2)), "drawn_ms": drawn,
                         "wall_s": wall, "boxes": boxes, "zoom_wall_s": zwall})
        rows.append((n, {k: statistics.median(r[k] for r in reps) for k in reps[0]}))
    print("### Flame graph page (format=flamegraph): random distinct stacks, headless Chromium, %d reps; "
          "medians\n" % b.reps)
    print("| stacks | page MB | podprof writes it, ms | load to drawn, ms | frames drawn | "
          "chromium run, s | with a click zoom, s |")
    print("|---|---|---|---|---|---|---|")
    for n, r in rows:
        print("| %d | %.1f | %.0f | %.0f | %d | %.2f | %.2f |" % (n, r["mb"], r["encode_ms"], r["drawn_ms"],
                                                                  r["boxes"], r["wall_s"], r["zoom_wall_s"]))
    print()
