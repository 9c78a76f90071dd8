#!/bin/sh
# Provisions the language runtimes the tests need beyond bookworm's, from
# Debian unstable (sid) on the mirror apt is configured with, into a cache
# that outlives clones (PODPROF_RUNTIMES, default /var/cache/podprof/runtimes):
#   go-1.26/ go-1.27/  golang-1.2X-go and -src unpacked with dpkg -x (Go's
#                      toolchain is static); GOROOT is usr/lib/go-1.2X inside
#   sid/               a debootstrap chroot of sid: python3.13-3.15 with their
#                      libpython-dev headers, OpenJDK 21 and 25 (jdk-headless:
#                      javac, jcmd); /proc is mounted in it (java needs it)
# A piece that is there and works is left alone. sid moves on: when a wanted
# package is gone, this fails naming it and what sid has instead.
#
# Usage (root): runtimes.sh              all of them; prints what is there
#               runtimes.sh go 1.26      that toolchain; prints its GOROOT
#               runtimes.sh goenv 1.26   the environment to run its go build with
#               runtimes.sh path NAME    go-1.26, sid...; prints its directory
#               runtimes.sh umount       unmounts the chroot's /proc (before rm -rf)
set -eu
cache=${PODPROF_RUNTIMES:-/var/cache/podprof/runtimes}
GO_RELEASES="1.26 1.27"
SID_PACKAGES="python3.13 python3.14 python3.15 libpython3.13-dev libpython3.14-dev libpython3.15-dev
openjdk-21-jdk-headless openjdk-25-jdk-headless"

say() { echo "runtimes: $*" >&2; }
die() { say "$*"; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, chroot, mount)"
mkdir -p "$cache"
exec 9> "$cache/.lock"
flock 9        # one provisioning at a time

# The mirror and keyring of apt's configuration, as tests/e2e/base-image.sh.
mirror=${DEBIAN_MIRROR:-}
src=/etc/apt/sources.list.d/debian.sources
if [ -z "$mirror" ] && [ -r "$src" ]; then
	mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\{0,1\}$/\1/p' "$src" | head -n 1)
fi
mirror=${mirror:-http://deb.debian.org/debian}
keyring=$( [ -r "$src" ] && sed -n 's/^Signed-By: *\(\/.*\)$/\1/p' "$src" | head -n 1 || true)
keyring=${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}

# apt-get/apt-cache on a private state that knows sid only.
apt_sid() {
	tool=$1; shift
	"$tool" -q -o Dir::Etc::SourceList="$cache/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::Etc::Preferences=/dev/null -o Dir::Etc::PreferencesParts=/dev/null \
		-o Dir::State::Lists="$cache/apt/lists" -o Dir::State::status="$cache/apt/status" \
		-o Dir::Cache="$cache/apt/cache" -o APT::Sandbox::User=root -o Acquire::Languages=none "$@"
}
indexed=
sid_index() {
	[ -n "$indexed" ] && return 0
	mkdir -p "$cache/apt/lists/partial" "$cache/apt/cache/archives/partial"
	echo "deb [signed-by=$keyring] $mirror sid main" > "$cache/apt/sources.list"
	touch "$cache/apt/status"
	say "apt-get update: sid at $mirror"
	apt_sid apt-get -qq update >&2 || die "apt-get update of sid at $mirror failed"
	indexed=1
}
# The version sid has of a package, or a failure naming what it has instead.
sid_version() {
	sid_index
	v=$(apt_sid apt-cache show --no-all-versions "$1" 2>/dev/null | sed -n 's/^Version: //p' | head -n 1)
	if [ -z "$v" ]; then
		like=$(echo "$1" | sed 's/[0-9][0-9.]*/[0-9.]*/')
		others=$(apt_sid apt-cache pkgnames 2>/dev/null | grep -x "$like" | sort -V | tr '\n' ' ' | sed 's/ $//')
		die "sid at $mirror has no package $1 (looked for it on $(date -u +%F)); it has: ${others:-none like it}"
	fi
	echo "$v"
}
since() { echo "$(( $(date +%s) - $1 )) s, $(du -shx "$2" | cut -f1)"; }
# Unmounts whatever is mounted under a directory, deepest first.
unmount_under() {
	awk -v d="$1/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do umount "$m"; done
}

# ---- Go toolchains ------------------------------------------------------------
go_ok() {   # the unpacked toolchain runs and is the release it was made from
	[ -r "$1/.release" ] && [ "$("$1/usr/lib/go-$2/bin/go" version 2>/dev/null | cut -d' ' -f3)" = "$(cat "$1/.release")" ]
}
provision_go() {
	rel=$1 dir=$cache/go-$1
	go_ok "$dir" "$rel" && return 0
	t0=$(date +%s)
	sid_index
	v=$(sid_version "golang-$rel-go")
	sid_version "golang-$rel-src" > /dev/null
	want=go$(echo "$v" | sed 's/^[0-9]*://; s/-[^-]*$//; s/~//')
	say "go $rel: apt-get download golang-$rel-go golang-$rel-src ($v), dpkg -x"
	tmp=$cache/.go-$rel.tmp
	rm -rf "$tmp" && mkdir -p "$tmp/root"
	(cd "$tmp" && apt_sid apt-get -qq download "golang-$rel-go" "golang-$rel-src") >&2
	for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$tmp/root"; done
	echo "$want" > "$tmp/root/.release"
	go_ok "$tmp/root" "$rel" || die "go $rel: $tmp/root/usr/lib/go-$rel/bin/go version does not say $want: $("$tmp/root/usr/lib/go-$rel/bin/go" version 2>&1)"
	rm -rf "$dir" && mv "$tmp/root" "$dir" && rm -rf "$tmp"
	say "go $rel: $want in $dir ($(since "$t0" "$dir"))"
}
goroot() { echo "$cache/go-$1/usr/lib/go-$1"; }
# How go build runs with it: this toolchain only (no download of another),
# no network, GOPATH mode as the Makefile's fixtures, a build cache that stays.
goenv() {
	echo "GOROOT=$(goroot "$1")"
	echo "GOTOOLCHAIN=local"
	echo "GOPROXY=off"
	echo "GOENV=off"
	echo "GOFLAGS="
	echo "GO111MODULE=off"
	echo "GOPATH=$cache/gopath"
	echo "GOCACHE=$cache/gocache"
}

# ---- the sid chroot --------------------------------------------------------------
sid_ok() {   # made with this list of packages, and they are all installed
	[ -r "$1/.packages" ] && [ "$(cat "$1/.packages")" = "$(echo $SID_PACKAGES)" ] || return 1
	n=$(chroot "$1" dpkg-query -W -f '${db:Status-Status}\n' $SID_PACKAGES 2>/dev/null | grep -cx installed || true)
	[ "$n" -eq "$(echo $SID_PACKAGES | wc -w)" ]
}
mount_proc() {
	mountpoint -q "$cache/sid/proc" || mount -t proc proc "$cache/sid/proc"
	[ -r "$cache/sid/proc/self/exe" ] || die "no /proc in $cache/sid"
}
provision_sid() {
	dir=$cache/sid
	if sid_ok "$dir"; then mount_proc; return 0; fi
	t0=$(date +%s)
	sid_index
	for p in $SID_PACKAGES; do sid_version "$p" > /dev/null; done
	tmp=$cache/.sid.tmp
	unmount_under "$tmp" && rm -rf --one-file-system "$tmp"
	say "debootstrap sid from $mirror (about two minutes; log $cache/debootstrap.log)"
	debootstrap --variant=minbase --keyring="$keyring" --include="$(echo $SID_PACKAGES | tr ' ' ,)" \
		sid "$tmp" "$mirror" > "$cache/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$cache/debootstrap.log" >&2; unmount_under "$tmp"; die "debootstrap sid failed"; }
	unmount_under "$tmp"
	rm -f "$tmp/var/cache/apt/archives/"*.deb
	echo $SID_PACKAGES > "$tmp/.packages"
	sid_ok "$tmp" || die "$tmp lacks some of $SID_PACKAGES"
	unmount_under "$dir" && rm -rf --one-file-system "$dir" && mv "$tmp" "$dir"
	mount_proc
	say "sid: $dir ($(since "$t0" "$dir"))"
}

case "${1:-all}" in
all)
	for rel in $GO_RELEASES; do provision_go "$rel"; done
	provision_sid
	for rel in $GO_RELEASES; do
		echo "go-$rel: $("$(goroot "$rel")/bin/go" version | cut -d' ' -f3) GOROOT=$(goroot "$rel")"
	done
	echo "sid: $cache/sid"
	for p in $SID_PACKAGES; do
		case $p in python3.*)
			echo "  /usr/bin/$p: $(chroot "$cache/sid" "$p" -c 'import sys; print(sys.version.split()[0])')" ;;
		openjdk-*)
			j=/usr/lib/jvm/java-$(echo "$p" | cut -d- -f2)-openjdk-amd64/bin/java
			echo "  $j: $(chroot "$cache/sid" "$j" -version 2>&1 | head -n 1)" ;;
		esac
	done ;;
go) provision_go "${2:?go RELEASE}"; goroot "$2" ;;
goenv) provision_go "${2:?goenv RELEASE}"; goenv "$2" ;;
path)
	case "${2:?path NAME}" in
	go-*) provision_go "${2#go-}" ;;
	sid) provision_sid ;;
	*) die "no runtime $2 (go-1.26, go-1.27, sid)" ;;
	esac
	echo "$cache/$2" ;;
umount) unmount_under "$cache/sid" ;;
*) die "usage: $0 [all | go RELEASE | goenv RELEASE | path NAME | umount]" ;;
esac
