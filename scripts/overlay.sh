#!/bin/sh
# Lay our files over QEMU's source tree, as symbolic links so that an edit
# here is what the next ninja run compiles.  Idempotent; cheap enough to
# run on every make.
#
# usage: overlay.sh TOPDIR SRCDIR
set -eu

top=$(cd "$1" && pwd)
src=$2

link() {
    # link TARGET-IN-TOP LINK-IN-SRC
    if [ ! -e "$top/$1" ]; then
        echo "overlay.sh: $top/$1 is missing" >&2
        exit 1
    fi
    if [ "$(readlink "$src/$2" 2>/dev/null)" != "$top/$1" ]; then
        mkdir -p "$(dirname "$src/$2")"
        ln -sfn "$top/$1" "$src/$2"
    fi
}

link meson.build qemu-drbd/meson.build
link block/drbd block/drbd
link qapi/drbd.json qapi/drbd.json
link docs/system/drbd.rst docs/system/drbd.rst
link tests/fuzz tests/fuzz
# The library the drbd iotests import (not a test: it has no .out)
link tests/qemu-iotests/tests/drbd_iotests.py \
     tests/qemu-iotests/tests/drbd_iotests.py
for f in "$top"/docs/interop/drbd*.rst "$top"/docs/system/drbd-*.rst "$top"/tests/unit/test-drbd-*.c \
         "$top"/tests/qemu-iotests/tests/drbd-*; do
    [ -e "$f" ] || continue
    rel=${f#"$top"/}
    link "$rel" "$rel"
done

# Links to files since deleted here go too (a test removed or renamed)
find "$src/tests" "$src/docs" -type l 2>/dev/null | while read -r l; do
    case $(readlink "$l") in
    "$top"/*) [ -e "$l" ] || rm -f "$l" ;;
    esac
done

# The MAINTAINERS stanza, appended once so that get_maintainer.pl knows it.
if ! grep -q '^F: block/drbd/' "$src/MAINTAINERS"; then
    { echo; cat "$top/MAINTAINERS"; } >> "$src/MAINTAINERS"
fi
