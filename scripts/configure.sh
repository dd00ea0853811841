#!/bin/sh
# Configure QEMU with the drbd overlay: x86_64-softmmu and the tools.
# vhost-user (the vhost-user-blk-pci device and qemu-storage-daemon's
# vhost-user-blk export) is what libvirt's <disk type='vhostuser'> needs.
#
# --without-default-features turns off everything that is not asked for;
# the rest is what a VM host driven by libvirt needs, from what Debian's
# qemu-system-x86 enables (debian/rules, debian/control of the source):
#   kvm                      the accelerator (TCG stays the default when
#                            none is named; libvirt asks for -accel kvm)
#   linux-io-uring           aio=io_uring (libvirt's <driver io='io_uring'>)
#   vhost-kernel, vhost-net  -netdev tap,vhost=on (libvirt's default for
#                            virtio-net on a tap)
#   seccomp                  -sandbox, which libvirt passes
#                            (qemu.conf seccomp_sandbox)
#   slirp                    -netdev user (libvirt's <interface type='user'>)
#   pixman, vnc, png         <graphics type='vnc'>, and virDomainScreenshot
#                            (screendump format=png)
#   numa                     memory-backend host-nodes/policy (<numatune>)
#   tpm                      tpm-crb/tpm-tis with swtpm (<tpm>)
#   malloc-trim              give freed memory back to the host
# Left out: virtfs (and attr, cap-ng, which only it and the pr/bridge
# helpers use, none built here), spice, audio, GUI, USB redirection.
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
    --enable-kvm \
    --enable-linux-io-uring \
    --enable-vhost-kernel --enable-vhost-net \
    --enable-seccomp \
    --enable-slirp \
    --enable-pixman --enable-vnc --enable-png \
    --enable-numa \
    --enable-tpm \
    --enable-malloc-trim \
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
