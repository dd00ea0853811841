#!/bin/sh
# Build the previous releases named in tests/upgrade/previous-release:
# for each line NAME COMMIT, that commit's qemu-storage-daemon and
# qemu-img, from that commit's own files (git archive), hook patch,
# overlay and configure script, over a fresh extraction of the cached
# Debian QEMU source.  The drbd-upgrade iotest runs them beside this
# tree's binaries.
#
# SPDX-License-Identifier: GPL-2.0-or-later
#
# usage: build-previous.sh TOPDIR [NAME...]
#
# Into TOPDIR/build/qemu-NAME/:
#   top/         the commit's files (git archive; overlay.sh links to them)
#   qemu-src/    QEMU's source with the commit's hook patch and overlay
#   qemu-build/  the build; qemu-build/qemu-img, .../qemu-storage-daemon
#   stamp        the commit id, written once the build is complete:
#                nothing is rebuilt while it names the commit of the file
#
# The source and build directories sit at the same relative places as
# build/qemu-src and build/qemu-build, so that with CCACHE_BASEDIR at the
# top (as the Makefile sets it) QEMU's own files hit the cache entries of
# the current build.  Needs the commits in the repository: a shallow
# clone must be deepened first (git fetch --unshallow).
set -eu

top=$(cd "$1" && pwd)
shift
list=$top/tests/upgrade/previous-release
b=$top/build
mesondir=$b/meson

export CCACHE_DIR="${CCACHE_DIR:-/var/cache/qemu-drbd/ccache}"
export CCACHE_BASEDIR="$top"
export CCACHE_NOHASHDIR=1
pydir=$mesondir/usr/lib/python3/dist-packages
export PYTHONPATH="$pydir${PYTHONPATH:+:$PYTHONPATH}"
# A previous release is built plain, whatever this build is
unset DRBD_SANITIZE

build_one() {
    name=$1 rev=$2
    dir=$b/qemu-$name
    if [ "$(cat "$dir/stamp" 2>/dev/null)" = "$rev" ] &&
       [ -x "$dir/qemu-build/qemu-img" ] &&
       [ -x "$dir/qemu-build/storage-daemon/qemu-storage-daemon" ]; then
        echo "build-previous.sh: $name ($rev) is built"
        return 0
    fi
    if ! git -C "$top" cat-file -e "$rev^{commit}" 2>/dev/null; then
        echo "build-previous.sh: commit $rev ($name) is not in $top's" \
             "history (a shallow clone? git fetch --unshallow)" >&2
        exit 1
    fi
    start=$(date +%s)
    rm -rf "$dir"
    mkdir -p "$dir/top"
    git -C "$top" archive --format=tar "$rev" | tar -x -C "$dir/top"
    # Fetching QEMU's source is this tree's business (the archive and
    # its cache), applying the release's patch and overlay the release's
    sh "$top/scripts/get-qemu.sh" "$dir/qemu-src" "$mesondir"
    (cd "$dir/qemu-src" && patch -p1 -s < "$dir/top/scripts/qemu-hooks.patch")
    sh "$dir/top/scripts/overlay.sh" "$dir/top" "$dir/qemu-src"
    sh "$dir/top/scripts/configure.sh" "$dir/qemu-src" "$dir/qemu-build"
    ninja -C "$dir/qemu-build" storage-daemon/qemu-storage-daemon qemu-img
    echo "$rev" > "$dir/stamp"
    echo "build-previous.sh: built $name ($rev) in $(($(date +%s) - start)) s"
}

found=
while read -r name rev <&3; do
    case $name in ''|'#'*) continue ;; esac
    if [ $# -gt 0 ]; then
        case " $* " in *" $name "*) ;; *) continue ;; esac
    fi
    found=1
    build_one "$name" "$rev"
done 3< "$list"
if [ -z "$found" ]; then
    echo "build-previous.sh: no release ${*:+named $* }in $list" >&2
    exit 1
fi
