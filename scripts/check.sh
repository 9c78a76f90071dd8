#!/bin/sh
# The whole test suite: installs what is missing, then builds and runs every
# test twice, plain and under ASan+UBSan, the structure's rules, a short
# torture (allocations failing), the fuzz smoke and the pod end-to-end
# test. The last line is "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
scripts/deps.sh || exit 1
# The tests' one npm module, at the version the committed lockfile pins.
if [ ! -d tests/integration/node_modules/pprof-format ]; then
	(cd tests/integration && npm ci --no-audit --no-fund --loglevel=error) >&2 || exit 1
fi
total_p=0; total_f=0; total_s=0
for flavour in release asan; do
	if ! make -j"$(nproc)" FLAVOUR=$flavour all fixtures build/$flavour/unit-tests >&2; then
		echo "FAIL build/$flavour"
		total_f=$((total_f + 1))
		continue
	fi
	out=$(mktemp)
	tests/run.sh "$flavour" | tee "$out"
	p=$(grep -c '^PASS ' "$out"); f=$(grep -c '^FAIL ' "$out"); s=$(grep -c '^SKIP ' "$out")
	total_p=$((total_p + p)); total_f=$((total_f + f)); total_s=$((total_s + s))
	rm -f "$out"
done
# make torture, short: every unit test with each allocation failing in turn
# (at most 300 runs a test), and the HTTP scenarios with at most 30 of each
# request's allocations failing (make torture runs 300).
if make -j"$(nproc)" FLAVOUR=torture all fixtures build/torture/unit-tests >&2; then
	out=$(mktemp)
	tests/torture/run.sh build/torture 300 "${TORTURE_HTTP_MAX:-30}" | tee "$out" | grep -E '^(FAIL|[0-9]+ passed)'
	total_p=$((total_p + $(grep -c '^PASS ' "$out"))); total_f=$((total_f + $(grep -c '^FAIL ' "$out")))
	rm -f "$out"
else
	echo "FAIL build/torture"
	total_f=$((total_f + 1))
fi
# A short fuzz smoke: every committed seed replayed, then FUZZ_SECONDS of
# fuzzing per harness under ASan+UBSan (make fuzz runs longer).
out=$(mktemp)
make fuzz FUZZ_SECONDS="${FUZZ_SECONDS:-10}" 2>&1 | grep -E '^(PASS|FAIL) ' | tee "$out"
total_p=$((total_p + $(grep -c '^PASS ' "$out"))); total_f=$((total_f + $(grep -c '^FAIL ' "$out")))
if ! grep -q '^PASS fuzz/' "$out"; then
	echo "FAIL fuzz/build"
	total_f=$((total_f + 1))
fi
rm -f "$out"
# The pod end-to-end test (make e2e: podman, the image, the chart; a few
# minutes, longer on a machine that has no base image yet).
out=$(mktemp)
tests/e2e/run.sh 2>&1 | sed -E "s#^(PASS|FAIL|SKIP) #\1 e2e/#" | tee "$out" | grep -E '^(PASS|FAIL|SKIP) |passed'
total_p=$((total_p + $(grep -c '^PASS ' "$out"))); total_f=$((total_f + $(grep -c '^FAIL ' "$out")))
total_s=$((total_s + $(grep -c '^SKIP ' "$out")))
if ! grep -qE '^[0-9]+ passed' "$out"; then
	echo "FAIL e2e/run (no tally)"
	total_f=$((total_f + 1))
fi
rm -f "$out"
echo "$total_p passed, $total_f failed, $total_s skipped"
[ "$total_f" -eq 0 ]
