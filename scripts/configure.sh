#!/bin/sh
# Configure QEMU with the drbd overlay: x86_64-softmmu and the tools.
# vhost-user (the vhost-user-blk-pci device and qemu-storage-daemon's
# vhost-user-blk export) is what libvirt's <disk type='vhostuser'> needs.
#
# usage: configure.sh SRCDIR BUILDDIR
set -eu

src=$(cd "$1" && pwd)
bld=$2

# ccache keeps the compiler's output outside the tree (CCACHE_DIR), so a
# fresh clone on a machine that built before rebuilds quickly.
cc=cc
command -v ccache >/dev/null && cc="ccache cc"

# make SANITIZE=1: AddressSanitizer and UBSan (scripts/check.sh collects
# their reports)
sanitize=
if [ "${DRBD_SANITIZE:-}" = 1 ]; then
    sanitize="--enable-asan --enable-ubsan"
fi

rm -rf "$bld"
mkdir -p "$bld"
cd "$bld"
# shellcheck disable=SC2086
"$src/configure" $sanitize \
    --cc="$cc" \
    --target-list=x86_64-softmmu \
    --without-default-features \
    --enable-tools \
    --enable-gnutls --enable-nettle \
    --enable-linux-aio \
    --enable-vhost-user --enable-vhost-user-blk-server \
    --disable-docs \
    --disable-install-blobs \
    --disable-werror \
    --firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu \
    >configure.log 2>&1 || { tail -n 40 configure.log >&2; exit 1; }

# Run from the build tree, QEMU looks for firmware under qemu-bundle/ plus
# the firmware path; the +ds source ships none, Debian's packages do.
for d in /usr/share/qemu /usr/share/seabios /usr/lib/ipxe/qemu; do
    mkdir -p "qemu-bundle$(dirname "$d")"
    ln -sfn "$d" "qemu-bundle$d"
done
