#!/bin/sh
# Fetch QEMU 10.0 (Debian 13's "qemu" source package, with Debian's patches
# applied by dpkg-source) and meson >= 1.5 (Debian 13's "meson" .deb,
# unpacked, not installed), both by package name with apt.
#
# usage: get-qemu.sh SRCDIR MESONDIR
#
# Downloads are kept in $QEMU_DRBD_CACHE (default /var/cache/qemu-drbd) so
# that a fresh clone on a machine that fetched them before does not fetch
# them again; without that cache everything is fetched anew.
set -eu

src=$1
mesondir=$2
cache=${QEMU_DRBD_CACHE:-/var/cache/qemu-drbd}/apt
mkdir -p "$cache"

fetch() {
    # $1: apt-get verb and arguments; retried once after an update, for a
    # machine whose package lists predate the trixie entry
    (cd "$cache" && apt-get -qq "$@") ||
        { apt-get update -qq && (cd "$cache" && apt-get -qq "$@"); }
}

if ! ls "$cache"/qemu_*.dsc >/dev/null 2>&1; then
    fetch source --download-only qemu/trixie
fi
dsc=$(ls "$cache"/qemu_*.dsc | sort -V | tail -n 1)
rm -rf "$src" "$src.tmp"
dpkg-source --no-check -x "$dsc" "$src.tmp" >/dev/null
rm -f "$(dirname "$src")"/qemu_*.orig.tar.*
mv "$src.tmp" "$src"
echo "QEMU $(cat "$src/VERSION") from $(basename "$dsc")"

if [ ! -d "$mesondir/usr/lib/python3/dist-packages/mesonbuild" ]; then
    if ! ls "$cache"/meson_*_all.deb >/dev/null 2>&1; then
        fetch download meson/trixie
    fi
    deb=$(ls "$cache"/meson_*_all.deb | sort -V | tail -n 1)
    rm -rf "$mesondir"
    dpkg -x "$deb" "$mesondir"
    echo "meson from $(basename "$deb")"
fi
