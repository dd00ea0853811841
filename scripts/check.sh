#!/bin/sh
# Run the drbd unit tests and the drbd iotests against a built tree and end
# with one line "N passed, N failed".  Exit status is non-zero on any failure.
#
# usage: check.sh BUILDDIR UNIT-TEST...
set -u

bld=$(cd "$1" && pwd)
shift
log=$bld/drbd-check.log
: > "$log"
passed=0
failed=0

count() {
    # count TAP-FILE: add its "ok" and "not ok" lines to the totals
    p=$(grep -c '^ok ' "$1")
    f=$(grep -c '^not ok ' "$1")
    passed=$((passed + p))
    failed=$((failed + f))
}

tap=$(mktemp)
trap 'rm -f "$tap"' EXIT

# A sanitizer build (make SANITIZE=1): every process writes its reports to
# a file of its own under $san, and any report fails the run, whether or
# not the test noticed (a daemon killed by the test, a report on exit).
# Leaks are not reported: QEMU's own tools leak at exit by design, and
# tests kill daemons with SIGKILL, which leaves nothing to check.
san=
if [ "${DRBD_SANITIZE:-}" = 1 ]; then
    san=$bld/sanitizer-reports
    rm -rf "$san"
    mkdir -p "$san"
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:log_path=$san/asan"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$san/ubsan"
fi

echo "== unit tests"
for t in "$@"; do
    exe=$bld/tests/unit/$t
    if timeout 300 "$exe" --tap -k > "$tap" 2>>"$log"; then
        rc=0
    else
        rc=$?
    fi
    grep -E '^(not )?ok ' "$tap" | sed "s|^|$t: |"
    count "$tap"
    # a crash before any TAP line still counts as a failure
    if [ "$rc" != 0 ] && ! grep -q '^not ok ' "$tap"; then
        echo "not ok $t: exited with status $rc"
        failed=$((failed + 1))
    fi
    cat "$tap" >> "$log"
done

echo "== iotests"
cd "$bld/tests/qemu-iotests" || exit 1
# A hung test must fail the run, not stall it: bound the whole suite
if timeout 1200 python3 ./check -tap -raw -file -g drbd > "$tap" 2>>"$log"
then
    rc=0
else
    rc=$?
fi
grep -E '^(not )?ok ' "$tap"
count "$tap"
if [ "$rc" != 0 ] && ! grep -q '^not ok ' "$tap"; then
    echo "not ok iotests: check exited with status $rc"
    failed=$((failed + 1))
fi
cat "$tap" >> "$log"
if [ -n "$san" ]; then
    echo "== sanitizer reports"
    # Only reports count: ASan also logs warnings there (it does not
    # fully support the coroutines' makecontext/swapcontext)
    for r in "$san"/*; do
        [ -e "$r" ] || continue
        grep -q 'ERROR: AddressSanitizer\|runtime error:' "$r" || continue
        echo "not ok sanitizer: $r"
        grep -A 30 'ERROR: AddressSanitizer\|runtime error:' "$r" | head -n 40
        failed=$((failed + 1))
    done
fi
if [ "$failed" != 0 ]; then
    echo "details in $log"
fi

echo "$passed passed, $failed failed"
[ "$failed" = 0 ] && [ "$passed" != 0 ]
