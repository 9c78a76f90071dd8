#!/usr/bin/env python3
"""Cold symbol-table reads of two builds, alternating (the order of a run
biases its first podprof, see docs/BENCHMARKS.md):

    python3 tests/bench/symtab_ab.py NEW_BUILD OLD_BUILD [RUNS]

Each run starts podprof on one busy fixture, takes a 1 s CPU profile and
reads the log's "symtabs=N in T ms"; prints the median and every value."""
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import urllib.request


def one(podprof, pid):
    p = subprocess.Popen([podprof, "--pid", str(pid), "--listen", "127.0.0.1:0"],
                         stderr=subprocess.PIPE, text=True)
    port = None
    for line in p.stderr:
        m = re.search(r"\(port (\d+)\)", line)
        if m:
            port = int(m.group(1))
            break
    urllib.request.urlopen("http://127.0.0.1:%d/debug/pprof/profile?seconds=1" % port).read()
    p.send_signal(signal.SIGTERM)
    out = p.stderr.read()
    p.wait()
    return float(re.search(r"symtabs=\d+ in ([\d.]+) ms", out).group(1))


def main():
    new, old = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    r, w = os.pipe()
    busy = subprocess.Popen([os.path.join(new, "fixtures", "busy"), "-t", "1", "-s", "0", "-r", str(w)],
                            pass_fds=(w,), stdout=subprocess.DEVNULL)
    os.close(w)
    select.select([r], [], [], 10)
    os.read(r, 64)
    res = {new: [], old: []}
    for i in range(runs):
        for b in ((new, old) if i % 2 == 0 else (old, new)):
            res[b].append(one(os.path.join(b, "podprof"), busy.pid))
    busy.kill()
    for b, v in res.items():
        print("%s: median %.2f ms %s" % (b, statistics.median(v), sorted(v)))


if __name__ == "__main__":
    main()
