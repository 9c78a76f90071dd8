#!/bin/sh
# Installs the Debian packages listed in scripts/packages.txt that are missing.
# Needs root (or sudo). Safe to run again: installs nothing when all are there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
missing=""
# Each line: a package, and optionally a command that stands for it (node
# from another vendor's nodejs build must not be replaced by Debian's).
grep -v '^#' "$here/packages.txt" | grep -v '^$' > "${TMPDIR:-/tmp}/podprof-pkgs.$$"
while read -r p cmd; do
	[ -n "$cmd" ] && command -v "$cmd" >/dev/null 2>&1 && continue
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$status" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done < "${TMPDIR:-/tmp}/podprof-pkgs.$$"
rm -f "${TMPDIR:-/tmp}/podprof-pkgs.$$"
[ -z "$missing" ] && exit 0
echo "deps: installing:$missing" >&2
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "deps: run as root to install:$missing" >&2; exit 1; }
	SUDO=sudo
else
	SUDO=
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >&2
