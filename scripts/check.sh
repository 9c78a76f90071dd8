#!/bin/sh
# The whole test suite: installs what is missing, then builds and runs every
# test twice, plain and under ASan+UBSan, the structure's rules, the tests
# that judge figures once more under load (a short make stress), a short
# torture (allocations failing), the fuzz smoke, the pod end-to-end test,
# and last the check that build/podprof is still the release build.
#
# A skipped test fails the run unless tests/expected-skips.txt lists it with
# its reason (tests/skips.sh): the expected ones are named, each other skip
# is a "FAIL unexpected-skip/..." line and counted among the failed.
# Each stage's time goes to stderr ("stage release: 612 s"), then the total.
# The last line is "N passed, N failed, N skipped": N skipped counts the
# expected skips; the unexpected ones are in N failed.
set -u
cd "$(dirname "$0")/.." || exit 1
all=$(mktemp)        # every PASS/FAIL/SKIP line of every stage
times=$(mktemp)
trap 'rm -f "$all" "$times"' EXIT
t0=$(date +%s) stage_t0=$(date +%s)
# stage NAME: the time since the previous stage ended, on stderr.
stage() {
	now=$(date +%s)
	echo "stage $1: $((now - stage_t0)) s" | tee -a "$times" >&2
	stage_t0=$now
}
# record: a stage's output, kept for the tally.
record() { tee -a "$all"; }

scripts/deps.sh || exit 1
# The tests' one npm module, at the version the committed lockfile pins.
if [ ! -d tests/integration/node_modules/pprof-format ]; then
	(cd tests/integration && npm ci --no-audit --no-fund --loglevel=error) >&2 || exit 1
fi
stage deps

# The release stage leaves the integration tests marked @figures to the
# stress stage below, which runs them beside busy processes with the default
# backend and again under ptrace where that sampled with perf_event (as the
# release stage's second pass would): each test runs once under each
# backend of each flavour. The ASan stage runs them all, quiet.
for flavour in release asan; do
	if make -j"$(nproc)" FLAVOUR=$flavour all fixtures build/$flavour/unit-tests >&2; then
		left=; [ "$flavour" = release ] && left=1
		PODPROF_IT_FIGURES_LEFT_TO_STRESS=$left tests/run.sh "$flavour" | record
	else
		echo "FAIL build/$flavour" | record
	fi
	stage "$flavour"
done
# make stress, short: every test that compares shares, rates or times
# (marked @figures) once, with both cores taken by busy processes, and once
# more under ptrace those that sampled with perf_event (make stress runs
# each ten times and prints each figure's spread).
python3 tests/stress/figures.py build/release --runs "${STRESS_RUNS_SHORT:-1}" | record |
	grep --line-buffered -E '^(FAIL|SKIP|[0-9]+ passed|  \| )'
stage stress
# make torture, short: every unit test with each allocation failing in turn
# (at most 100 runs a test: every allocation of a test that makes 100 or
# fewer, else the first 50 and 50 drawn), and the HTTP scenarios with at most
# 30 of each request's allocations failing (make torture runs 300 of each).
# 100 for the unit tests: at 300 the stage took 22 minutes, one traced-child
# test alone 63 s; at 100 the unit part takes 5 minutes (18 tests sampled).
if make -j"$(nproc)" FLAVOUR=torture all fixtures build/torture/unit-tests >&2; then
	tests/torture/run.sh build/torture "${TORTURE_UNIT_MAX:-100}" "${TORTURE_HTTP_MAX:-30}" | record | grep --line-buffered -E '^(FAIL|SKIP|[0-9]+ passed|  \| )'
else
	echo "FAIL build/torture" | record
fi
stage torture
# A short fuzz smoke: every committed seed replayed, then FUZZ_SECONDS of
# fuzzing per harness under ASan+UBSan (make fuzz runs longer).
out=$(mktemp)
make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-10}" 2>&1 | grep --line-buffered -E '^(PASS|FAIL) ' | tee "$out" | record
if ! grep -q '^PASS fuzz/' "$out"; then
	echo "FAIL fuzz/build" | record
fi
rm -f "$out"
stage fuzz
# The pod end-to-end test (make e2e: podman, the image, the chart; a few
# minutes, longer on a machine that has no base image yet).
out=$(mktemp)
tests/e2e/run.sh 2>&1 | sed -u -E "s#^(PASS|FAIL|SKIP) #\1 e2e/#" | tee "$out" | grep --line-buffered -E '^(PASS|FAIL|SKIP) |passed'
grep -E '^(PASS|FAIL|SKIP) ' "$out" >> "$all"
if ! grep -qE '^[0-9]+ passed' "$out"; then
	echo "FAIL e2e/run (no tally)" | record
fi
rm -f "$out"
stage e2e
# Last: build/podprof is the release build, whatever the stages built.
tests/release-copy.sh | grep -v '^[0-9]* passed' | record
stage release-copy

# The skips, judged against tests/expected-skips.txt.
skips=$(tests/skips.sh < "$all")
printf '%s\n' "$skips" | grep -v '^[0-9]* expected'
unexpected=$(printf '%s\n' "$skips" | grep -c '^FAIL unexpected-skip/')
expected=$(printf '%s\n' "$skips" | grep -c '^expected skip ')
total=$(($(date +%s) - t0))
{
	echo "stage times:"
	sed 's/^stage /  /' "$times"
	echo "  total: $total s ($((total / 60)) min; CI allows 90)"
	[ "$total" -le 3600 ] || echo "check: over an hour: CI's limit is 90 minutes, keep well inside it"
} >&2
p=$(grep -c '^PASS ' "$all"); f=$(grep -c '^FAIL ' "$all")
echo "skips: $expected expected (tests/expected-skips.txt), $unexpected unexpected (counted as failed)"
echo "$p passed, $((f + unexpected)) failed, $expected skipped"
[ "$f" -eq 0 ] && [ "$unexpected" -eq 0 ]
