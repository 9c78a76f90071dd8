#!/bin/sh
# Runs every libFuzzer harness in BUILD for SECONDS each, starting from the
# committed seeds (copied: new inputs stay in build/), and prints one line per
# harness with its executions. Fails if any harness finds a crash.
#   tests/fuzz/run.sh build/fuzz 60
set -u
build=$1 seconds=$2
here=$(cd "$(dirname "$0")" && pwd)
status=0
for h in "$build"/fuzz-*; do
	[ -x "$h" ] || continue
	name=${h##*/fuzz-}
	work="$build/corpus-$name"
	mkdir -p "$work" "$build/crashes-$name"
	cp -n "$here/corpus/$name"/* "$work/" 2>/dev/null
	log="$build/fuzz-$name.log"
	"$h" -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/crashes-$name/" \
		"$work" > "$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	if [ $rc -eq 0 ]; then
		echo "PASS fuzz/$name: ${execs:-?} executions in ${seconds}s, corpus $(ls "$work" | wc -l) inputs"
	else
		echo "FAIL fuzz/$name: exit $rc after ${execs:-?} executions; see $log and $build/crashes-$name/"
		status=1
	fi
done
exit $status
