#!/bin/sh
# build/podprof and build/libpodprof-alloc.so, what the README, scripts/demo.sh
# and every user run, are the release build: byte for byte build/release's,
# and no sanitizer runtime in them (the asan and torture flavours once copied
# their builds over them). scripts/check.sh runs this after every other
# stage. Prints PASS/FAIL lines and "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
p=0 f=0
pass() { p=$((p + 1)); echo "PASS release-copy/$1"; }
fail() { f=$((f + 1)); echo "FAIL release-copy/$1${2:+: $2}"; }
for file in podprof libpodprof-alloc.so; do
	if [ ! -e "build/$file" ]; then
		fail "build/$file is build/release/$file" "build/$file missing (make)"
	elif cmp -s "build/release/$file" "build/$file"; then
		pass "build/$file is build/release/$file"
	else
		fail "build/$file is build/release/$file" "they differ ($(wc -c < "build/$file") and $(wc -c < "build/release/$file" 2>/dev/null || echo no) bytes)"
	fi
	# ASan and UBSan: their runtimes linked (ldd) or their hooks compiled in (nm).
	libs=$(ldd "build/$file" 2>/dev/null | grep -oE 'lib(a|ub|t|l)san[^ ]*' | sort -u | paste -sd ' ')
	hooks=$( { nm "build/$file"; nm -D "build/$file"; } 2>/dev/null | grep -cE ' (__asan_|__ubsan_|__tsan_|__lsan_)')
	if [ -e "build/$file" ] && [ -z "$libs" ] && [ "$hooks" -eq 0 ]; then
		pass "build/$file has no sanitizer runtime"
	else
		fail "build/$file has no sanitizer runtime" "linked: ${libs:-none}; ${hooks} sanitizer symbols"
	fi
done
echo "$p passed, $f failed"
[ "$f" -eq 0 ]
