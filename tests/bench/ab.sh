#!/bin/sh
# A/B of two podprof builds on the same fixture, alternating, one line per
# run with the pause and unwind medians podprof logs:
#   tests/bench/ab.sh OLD/podprof NEW/podprof [REPS] [HZ]
# e.g. build the old commit in a git worktree and compare it with build/podprof.
set -u
old=$1 new=$2 reps=${3:-3} hz=${4:-1000}
busy=$(dirname "$0")/../../build/release/fixtures/busy
log=${TMPDIR:-/tmp}/podprof-ab.$$
i=0
while [ $i -lt "$reps" ]; do
	for bin in "$old" "$new"; do
		"$busy" -t 1 -s 2 > /dev/null & b=$!
		"$bin" --pid=$b --listen=127.0.0.1:18100 2> "$log" & p=$!
		until grep -q "(port 18100)" "$log" 2>/dev/null; do sleep 0.05; done
		curl -s -o /dev/null "http://127.0.0.1:18100/debug/pprof/profile?seconds=3&hz=$hz"
		kill $p $b; wait $p $b 2>/dev/null
		echo "$bin: $(grep -o 'pause_us p50=[0-9.]* p99=[0-9.]* unwind_us p50=[0-9.]*' "$log")"
	done
	i=$((i + 1))
done
rm -f "$log"
