#!/bin/sh
# Judges the SKIP lines of a test run against tests/expected-skips.txt
# (scripts/check.sh). Reads the run's output on stdin; for each line
# "SKIP NAME: REASON" (NAME as check.sh prints it: release/unit/...,
# asan/it/..., release/it-ptrace/..., stress/..., stress-ptrace/...,
# torture/..., e2e/...) prints
#   expected skip NAME: REASON [listed: WHY]   when a pattern of the list matches NAME
#   FAIL unexpected-skip/NAME: REASON          otherwise
# then "N expected, N unexpected" (the last line). Exits 1 when a skip was
# not expected. Also says (info) which entries of the list matched nothing.
#   tests/skips.sh [LIST] < run.log
set -u -f
list=${1:-$(dirname "$0")/expected-skips.txt}
if [ ! -r "$list" ]; then
	echo "FAIL unexpected-skip/list: $list unreadable"
	echo "0 expected, 1 unexpected"
	exit 1
fi
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.out"' EXIT
# Entries: PATTERN REASON..., comments (#) and blank lines aside.
entries() { grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$list"; }
grep '^SKIP ' | while IFS= read -r line; do
	rest=${line#SKIP }
	name=${rest%%: *}
	reason=
	[ "$name" != "$rest" ] && reason=${rest#*: }
	found=
	while read -r pat why; do
		[ -n "$pat" ] || continue
		# The pattern is a glob:
		# shellcheck disable=SC2254
		case $name in
		$pat)
			found=1
			echo "expected skip $name: ${reason:-(no reason given)} [listed: $why]"
			echo "$pat" >&3
			break
			;;
		esac
	done <<EOF
$(entries)
EOF
	[ -n "$found" ] ||
		echo "FAIL unexpected-skip/$name: ${reason:-(no reason given)} (not in tests/expected-skips.txt: counted as failed)"
done 3> "$tmp" | tee "$tmp.out"
entries | while read -r pat why; do
	grep -qxF -- "$pat" "$tmp" || echo "info: expected skip $pat did not occur in this run"
done
e=$(grep -c '^expected skip ' "$tmp.out"); u=$(grep -c '^FAIL unexpected-skip/' "$tmp.out")
rm -f "$tmp.out"
echo "$e expected, $u unexpected"
[ "$u" -eq 0 ]
