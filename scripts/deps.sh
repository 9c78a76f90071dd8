#!/bin/sh
# Installs the Debian packages listed in scripts/packages.txt that are missing.
# Needs root (or sudo). Safe to run again: installs nothing when all are there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
missing=""
for p in $(grep -v '^#' "$here/packages.txt" | grep -v '^$'); do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	case "$status" in
	*"install ok installed"*) ;;
	*) missing="$missing $p" ;;
	esac
done
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
