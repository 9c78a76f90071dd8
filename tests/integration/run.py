#!/usr/bin/env python3
"""Black-box tests of the built podprof against fixture targets, judged by
the real client (go tool pprof from Debian's golang-go).

    python3 tests/integration/run.py build/release [test-name ...]

Prints PASS/FAIL/SKIP <name> per test and a tally. Every process a test
starts is killed when it ends.
"""
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) > 1:
    os.environ["PODPROF_BUILD"] = sys.argv[1]
import lib  # noqa: E402
import test_cli, test_http, test_cpu, test_safety, test_goroutine, test_loop, test_views, test_trace, test_ops, test_go, test_goroutines, test_gowaits, test_python, test_gunicorn, test_allocs, test_accounting, test_processes, test_formats, test_backends, test_jvm  # noqa: E402,F401,E501  (they register tests)
from lib import PROCS, TESTS, Skip  # noqa: E402


def main():
    lib.TMP = tempfile.mkdtemp(prefix="podprof-it-")
    wanted = sys.argv[2:]
    passed = failed = skipped = 0
    for t in TESTS:
        if wanted and t.__name__ not in wanted:
            continue
        # A second pass under another default backend (tests/run.sh:
        # PODPROF_BACKEND=ptrace) is named for it.
        name = ("it-%s/" % os.environ["PODPROF_BACKEND"] if os.environ.get("PODPROF_BACKEND") else "it/") + t.__name__
        t0 = time.monotonic()
        try:
            t()
            print("PASS %s (%.1fs)" % (name, time.monotonic() - t0), flush=True)
            passed += 1
        except Skip as e:
            print("SKIP %s: %s" % (name, e), flush=True)
            skipped += 1
        except Exception as e:
            print("FAIL %s: %s" % (name, e), flush=True)
            if not isinstance(e, AssertionError):
                traceback.print_exc()
            failed += 1
        finally:
            for p in PROCS:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            PROCS.clear()
    shutil.rmtree(lib.TMP, ignore_errors=True)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
