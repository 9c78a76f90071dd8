#!/bin/sh
# Makes the base image localhost/debian:bookworm-slim from Debian's packages
# (no registry is reachable here): debootstrap --variant=minbase, trimmed the
# way the official slim image is (no docs, man pages or locales; apt keeps no
# downloaded .debs), then imported into podman. Does nothing when the image is
# already there: podman's store is the cache between runs.
# Usage: base-image.sh [IMAGE]   (CONTAINERS_CONF as for the e2e test)
set -eu
image=${1:-localhost/debian:bookworm-slim}
if podman image exists "$image"; then
	echo "base-image: $image is there (cached)"
	exit 0
fi
mirror=${DEBIAN_MIRROR:-}
if [ -z "$mirror" ] && [ -r /etc/apt/sources.list.d/debian.sources ]; then
	mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\{0,1\}$/\1/p' /etc/apt/sources.list.d/debian.sources | head -n 1)
fi
mirror=${mirror:-http://deb.debian.org/debian}
root=$(mktemp -d "${TMPDIR:-/tmp}/podprof-rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "base-image: debootstrap bookworm from $mirror (about a minute or two)"
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 ||
	{ tail -n 20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# As the official slim image: dpkg skips docs, man pages and locales in later
# installs, and apt deletes the packages it downloaded.
mkdir -p "$root/etc/dpkg/dpkg.cfg.d" "$root/etc/apt/apt.conf.d"
cat > "$root/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
CFG
cat > "$root/etc/apt/apt.conf.d/slim-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
Acquire::Languages "none";
CFG
find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
rm -rf "$root/usr/share/man/"* "$root/usr/share/info/"* "$root/usr/share/locale/"* \
	"$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"* "$root/var/log/"*.log
tar --numeric-owner --xattrs -C "$root" -c . | podman import -q --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'CMD ["bash"]' - "$image" > /dev/null
echo "base-image: imported $image ($(podman image inspect --format '{{.Size}}' "$image") bytes)"
