#!/bin/sh
# make torture: the unit tests with each allocation failing in turn, then the
# HTTP scenarios (tests/torture/http.py) against a podprof of the torture
# flavour. Usage: tests/torture/run.sh BUILD_DIR [UNIT_MAX [HTTP_MAX]]: at
# most that many runs per unit test and per HTTP scenario (300 each: every
# allocation of most; a seeded sample past it, said in the output). Prints
# PASS/FAIL lines and a last line "N passed, N failed".
set -u
cd "$(dirname "$0")/../.."
build=${1:-build/torture}
max=${2:-300}
http_max=${3:-$max}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
out=$(mktemp)
{
	"$build/unit-tests" --torture="$max" | grep -v '^[0-9]* passed'
	python3 tests/torture/http.py "$build" --max "$http_max" | grep -v '^[0-9]* passed'
} | tee "$out"
p=$(grep -c '^PASS ' "$out"); f=$(grep -c '^FAIL ' "$out")
rm -f "$out"
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
