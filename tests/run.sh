#!/bin/sh
# Runs the unit and integration tests of one build flavour (release, asan).
# Prints PASS/FAIL/SKIP lines, prefixed with the flavour, then a tally.
set -u
cd "$(dirname "$0")/.."
flavour=${1:-release}
build=build/$flavour
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
{
	# The structure's rules (scripts/structure.py), read from this build's objects.
	if python3 scripts/structure.py "$build" > /tmp/podprof-structure-$$.txt; then
		echo "PASS structure/rules"
	else
		echo "FAIL structure/rules:"
		sed 's/^/  /' /tmp/podprof-structure-$$.txt
	fi
	rm -f /tmp/podprof-structure-$$.txt
	"$build/unit-tests"
	python3 tests/integration/run.py "$build"
	# auto samples with perf_event on these machines: the integration tests
	# again with ptrace as every podprof's default (PODPROF_BACKEND; a test
	# that names a backend keeps it), the plain build only: those the first
	# pass listed as sampled with perf_event or not passed (run.py).
	# With PODPROF_IT_FIGURES_LEFT_TO_STRESS set (scripts/check.sh's
	# release stage), neither pass runs the tests marked @figures: its
	# stress stage runs them, beside busy processes.
	if [ "$flavour" = release ]; then
		PODPROF_BACKEND=ptrace python3 tests/integration/run.py "$build"
	fi
} 2>&1 | sed -u -E "s#^(PASS|FAIL|SKIP) #\1 $flavour/#" | tee /tmp/podprof-tests-$$.log | grep --line-buffered -vE '^[0-9]+ passed'
p=$(grep -c '^PASS ' /tmp/podprof-tests-$$.log); f=$(grep -c '^FAIL ' /tmp/podprof-tests-$$.log)
s=$(grep -c '^SKIP ' /tmp/podprof-tests-$$.log)
rm -f /tmp/podprof-tests-$$.log
echo "$p passed, $f failed, $s skipped"
[ "$f" -eq 0 ]
