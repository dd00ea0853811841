#!/bin/sh
# Install what building and testing qemu-drbd needs, by Debian package name.
#
# Debian 12 (bookworm) is the base.  QEMU 10.0 and meson >= 1.5 come from
# Debian 13 (trixie): its entries are added with a pin of 1, so that nothing
# installed is ever upgraded from it; we only ask it for sources and for the
# architecture-independent meson .deb, by explicit release.
set -eu

packages="build-essential ccache dpkg-dev patch python3 python3-venv
    ninja-build flex bison pkg-config
    libglib2.0-dev libaio-dev libgnutls28-dev nettle-dev libpixman-1-dev
    libfdt-dev liburing-dev zlib1g-dev gnutls-bin
    libseccomp-dev libslirp-dev libpng-dev libnuma-dev
    seabios ipxe-qemu qemu-system-data
    libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients prometheus
    resource-agents libxml2-utils shellcheck fio
    linux-image-amd64 busybox-static
    corosync pacemaker pacemaker-cli-utils crmsh"

sources=/etc/apt/sources.list.d/qemu-drbd-trixie.sources

# Nothing to do (and no network touched) when everything is in place.
missing=
for p in $packages; do
    dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed ||
        missing="$missing $p"
done
if [ -e "$sources" ] && [ -z "$missing" ]; then
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    echo "deps.sh: missing packages; run as root (apt-get install)" >&2
    exit 1
fi

if [ ! -e "$sources" ]; then
    cat > "$sources" <<'SRC'
# Added by qemu-drbd scripts/deps.sh: QEMU 10.0 sources and meson come
# from trixie; the pin in preferences.d keeps the rest of the system on bookworm.
Types: deb deb-src
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    cat > /etc/apt/preferences.d/qemu-drbd-trixie <<'PIN'
Package: *
Pin: release n=trixie
Pin-Priority: 1
PIN
fi

export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# shellcheck disable=SC2086
apt-get install -y -qq --no-install-recommends $packages >/dev/null
case " $missing " in
*" corosync "*|*" pacemaker "*)
    # make check-ha runs its own corosync and Pacemaker inside namespaces
    # (tests/ha): the machine-wide services that the packages enable are
    # stopped, where we installed them
    if command -v systemctl >/dev/null 2>&1; then
        systemctl disable --now pacemaker corosync >/dev/null 2>&1 || true
    fi
    ;;
esac
case " $missing " in
*" prometheus "*)
    # Only its promtool is wanted (iotest drbd-adm): the server that the
    # package enables is stopped, where we installed it
    if command -v systemctl >/dev/null 2>&1; then
        systemctl disable --now prometheus >/dev/null 2>&1 || true
    fi
    ;;
esac
