#!/bin/sh
# The main job: open a drbd node over a local image with the built tools and
# show that data written through it lands in the image.
#
# usage: demo.sh BUILDDIR
set -eu

bld=$(cd "$1" && pwd)
img=$bld/demo/disk.img
ref=$bld/demo/ref.img
mkdir -p "$bld/demo"
rm -f "$img" "$ref"

run() {
    echo "\$ $*" | sed "s|$bld/||g"
    "$@"
}

qemu_img=$bld/qemu-img
qemu_io=$bld/qemu-io
drbd="driver=drbd,file.driver=file,file.filename=$img"

run "$qemu_img" create -q -f raw "$img" 64M
run "$qemu_img" create -q -f raw "$ref" 64M

echo "== write 1 MiB of 0xa5 at 8 MiB through the drbd node"
run "$qemu_io" --image-opts -c 'write -P 0xa5 8M 1M' -c flush "$drbd"
run "$qemu_io" -f raw -c 'write -P 0xa5 8M 1M' "$ref" >/dev/null

echo "== read the local image directly: the data is there"
run "$qemu_io" -f raw -c 'read -P 0xa5 8M 1M' "$img"

echo "== the drbd node and a plain copy of the same writes are identical"
run "$qemu_img" compare --image-opts "$drbd" \
    "driver=raw,file.driver=file,file.filename=$ref"

echo "== qemu-img info through the node"
run "$qemu_img" info --image-opts "$drbd"
