#!/bin/sh
# Regenerates ptrace/runtimes/go/goruntime_tables.inc, the Go runtime's
# layout per release for the goroutine reader: builds scripts/gooffsets (with
# bookworm's Go), builds scripts/gooffsets/probe with DWARF by each toolchain
# (Debian's golang-go 1.19; 1.26 and 1.27 from scripts/runtimes.sh, which
# needs root), runs the generator on the probes with their GOROOTs, and
# compiles the C file with the project's warnings. Scratch in build/gooffsets.
# Usage: scripts/gooffsets.sh [RELEASE...]   (default: 1.26 1.27, beside 1.19)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/gooffsets
inc=$root/ptrace/runtimes/go/goruntime_tables.inc
releases=${*:-1.26 1.27}
mkdir -p "$out" "$(dirname "$inc")"
say() { echo "gooffsets: $*" >&2; }

# bookworm's Go, as the Makefile builds the Go fixtures (GOPATH mode, no network).
sys_env="GOROOT=$(go env GOROOT) GO111MODULE=off GOFLAGS= GOPROXY=off GOPATH=$out/gopath GOCACHE=$out/gocache"
say "build the generator and the probe with $(go env GOVERSION)"
# shellcheck disable=SC2086
(cd "$root/scripts/gooffsets" && env $sys_env go build -trimpath -buildvcs=false -o "$out/gooffsets" .)
build_probe() {   # build_probe NAME GO ENV...: the probe, with DWARF, no cgo
	name=$1 go=$2; shift 2
	(cd "$root/scripts/gooffsets/probe" && env "$@" CGO_ENABLED=0 "$go" build -trimpath -buildvcs=false -o "$out/probe-$name" .)
}
# shellcheck disable=SC2086
build_probe sys go $sys_env
args="$out/probe-sys=$(go env GOROOT)"
for rel in $releases; do
	goenv=$("$root/scripts/runtimes.sh" goenv "$rel")
	goroot=$(echo "$goenv" | sed -n 's/^GOROOT=//p')
	say "build the probe with go $rel ($goroot)"
	# shellcheck disable=SC2086
	build_probe "$rel" "$goroot/bin/go" $goenv
	args="$args $out/probe-$rel=$goroot"
done
# shellcheck disable=SC2086
"$out/gooffsets" -o "$inc.tmp" $args
printf '#include "%s"\nconst void *go_rt_check(void);\nconst void *go_rt_check(void) { return go_rt_layouts; }\n' "$inc.tmp" > "$out/check.c"
${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
	-Wundef -Wpointer-arith -c -o "$out/check.o" "$out/check.c"
mv "$inc.tmp" "$inc"
say "wrote ${inc#"$root"/}"
