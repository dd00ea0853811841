#!/bin/sh
# Run QEMU's own generic iotests on a standalone drbd node (./check -drbd:
# images from "qemu-img create -f drbd", opened with -f drbd, no peer,
# primary by auto-promote for a writer) and end with one line
# "N passed, N failed, N skipped".  Exit status is non-zero on any failure.
#
# usage: check-qemu.sh BUILDDIR [TEST...]
#
# The default list is every test of QEMU 10.0 that runs for -drbd and
# passes.  The ones left out, and why, are in docs/system/drbd.rst
# ("QEMU's own tests").
set -u

tests="001 002 003 005 008 009 010 011 012 021 032 033 052 120 140 143 145 157
    174 184 192 197 208 215 226 227 236 238 240 277 300 307
    export-incoming-iothread inactive-node-nbd regression-vhdx-log"

bld=$(cd "$1" && pwd)
shift
[ $# -gt 0 ] && tests=$*
log=$bld/drbd-check-qemu.log
: > "$log"

cd "$bld/tests/qemu-iotests" || exit 1
scratch=${TEST_DIR:-$PWD/scratch}
tap=$(mktemp)
trap 'rm -f "$tap"' EXIT

# A hung test must fail the run, not stall it: bound the whole suite
# shellcheck disable=SC2086
if timeout 1800 python3 ./check -tap -drbd $tests > "$tap" 2>>"$log"; then
    rc=0
else
    rc=$?
fi
cat "$tap" >> "$log"

skipped=$(grep -c '^ok .* # SKIP$' "$tap")
passed=$(($(grep -c '^ok ' "$tap") - skipped))
failed=$(grep -c '^not ok ' "$tap")
grep -E '^(not )?ok ' "$tap" | while read -r line; do
    case $line in
    *'# SKIP')
        t=${line#ok drbd }
        t=${t% # SKIP}
        why=$(cat "$scratch/drbd-file-$t/$t.notrun" 2>/dev/null)
        echo "$line: ${why:-see $log}"
        ;;
    *) echo "$line" ;;
    esac
done
if [ "$rc" != 0 ] && [ "$failed" = 0 ]; then
    echo "not ok check-qemu: check exited with status $rc"
    failed=$((failed + 1))
fi
if [ "$failed" != 0 ]; then
    echo "details in $log"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$passed" != 0 ]
