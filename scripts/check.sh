#!/bin/sh
# Run the drbd unit tests, the drbd iotests and the installation test
# (scripts/check-install.sh) against a built tree and end
# with one line "N passed, N failed, N skipped" that counts test cases: each
# case of a unit test (a line of its TAP output) and each case of an iotest
# (a method of its TestCase classes, which drbd_iotests.main() records).
# Exit status is non-zero on any failure.
#
# An iotest that does not run (./check: "not run") counts its cases as
# skipped, never as passed; a case that did not end (a crash, a test killed
# after DRBD_IOTEST_TIMEOUT seconds) counts as failed, and so does an iotest
# that failed when none of its cases did (its output differs, it exited
# with an error).
#
# usage: check.sh BUILDDIR UNIT-TEST...
# DRBD_IOTESTS: the iotests to run, blank-separated (default: group drbd)
# DRBD_IOTEST_TIMEOUT: seconds one iotest may take (default: 900)
# DRBD_INSTALL_TEST=0: leave the installation test out
set -u

bld=$(cd "$1" && pwd)
shift
top=$(cd "$(dirname "$0")/.." && pwd)
log=$bld/drbd-check.log
: > "$log"
passed=0
failed=0
skipped=0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

add() {
    # add PASSED FAILED SKIPPED: to the totals
    passed=$((passed + $1))
    failed=$((failed + $2))
    skipped=$((skipped + $3))
}

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
up=0 uf=0 us=0
for t in "$@"; do
    tap=$tmp/unit.tap
    if timeout 300 "$bld/tests/unit/$t" --tap -k > "$tap" 2>>"$log"; then
        rc=0
    else
        rc=$?
    fi
    cat "$tap" >> "$log"
    # glib: "ok N path", "ok N path # SKIP why", "not ok N path", and
    # "not ok N path # TODO why" for a case marked incomplete
    grep -E '^(not )?ok ' "$tap" | sed "s|^|$t: |"
    p=$(grep '^ok ' "$tap" | grep -cv '# SKIP')
    s=$(grep -c '^ok .*# SKIP\|^not ok .*# TODO' "$tap")
    f=$(grep '^not ok ' "$tap" | grep -cv '# TODO')
    # Cases of the plan that never reported (a crash) failed
    plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$tap" | head -n 1)
    if [ -n "$plan" ] && [ "$((p + s + f))" -lt "$plan" ]; then
        echo "not ok $t: $((plan - p - s - f)) cases did not run" \
             "(exit status $rc)"
        f=$((plan - p - s))
    fi
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        echo "not ok $t: exited with status $rc"
        f=1
    fi
    up=$((up + p)) uf=$((uf + f)) us=$((us + s))
done
echo "unit tests: $up passed, $uf failed, $us skipped"
add "$up" "$uf" "$us"

echo "== iotests"
cd "$bld/tests/qemu-iotests" || exit 1
# The tests and their reference output are in the source tree
src=$(dirname "$(readlink -f check)")
tests=${DRBD_IOTESTS:-}
if [ -z "$tests" ]; then
    # What ./check -g drbd runs: the named tests of group drbd
    tests=$(grep -l '^# group: .*\bdrbd\b' "$src"/tests/* 2>/dev/null |
            while read -r f; do
                [ -e "$f.out" ] && basename "$f"
            done)
fi

# drbd-upgrade runs the previous releases (tests/upgrade/previous-release)
# beside this build: build them first (once per release, with ccache),
# and make the test fail rather than skip without them
upgrade=
for t in $tests; do
    [ "$t" = drbd-upgrade ] && upgrade=1
done
if [ -n "$upgrade" ]; then
    echo "== previous releases"
    t0=$(date +%s)
    if sh "$top/scripts/build-previous.sh" "$top" >> "$log" 2>&1; then
        echo "previous releases: built in $(($(date +%s) - t0)) s"
    else
        echo "not ok build-previous: scripts/build-previous.sh failed" \
             "(see $log); drbd-upgrade fails without its builds"
        add 0 1 0
    fi
    export DRBD_UPGRADE_REQUIRED=1
fi
limit=${DRBD_IOTEST_TIMEOUT:-900}
ip=0 if_=0 is=0
for t in $tests; do
    tap=$tmp/$t.tap
    cases=$tmp/$t.cases
    : > "$cases"
    # A hung test must fail the run, not stall it: timeout signals the
    # whole process group (./check, the test, its daemons and VMs)
    if DRBD_IOTEST_CASES=$cases timeout -k 30 "$limit" \
            python3 ./check -tap -raw -file "$t" > "$tap" 2>>"$log"; then
        rc=0
    else
        rc=$?
    fi
    cat "$tap" "$cases" >> "$log"
    grep -E '^(not )?ok ' "$cases"
    # ./check's verdict on the whole test
    if grep -q "^ok raw $t # SKIP" "$tap"; then
        verdict=skip
    elif grep -q "^ok raw $t\$" "$tap" && [ "$rc" = 0 ]; then
        verdict=pass
    else
        verdict=fail
    fi
    p=$(grep '^ok ' "$cases" | grep -cv '# SKIP')
    s=$(grep -c '^ok .*# SKIP' "$cases")
    f=$(grep -c '^not ok ' "$cases")
    if [ "$(grep -c '^# plan ' "$cases")" = 0 ]; then
        # Not a drbd_iotests.main() test: its cases are those of its
        # reference output, and the "[case not run]" notes of ./check
        n=$(sed -n 's/^Ran \([0-9][0-9]*\) tests\{0,1\}$/\1/p' \
            "$src/tests/$t.out" |
            head -n 1)
        s=$(grep -c '^# *\[case not run\]' "$tap")
        case $verdict in
        pass) p=$(( ${n:-1} - s )) ;;
        skip) p=0 s=${n:-1} ;;
        fail) p=0 f=1 ;;
        esac
    else
        # Planned cases that did not end: the test crashed or hung
        for c in $(sed -n 's/^# plan [^ ]* //p' "$cases"); do
            if ! grep -q "^\(not \)\{0,1\}ok $t $c\( \|\$\)" "$cases"; then
                echo "not ok $t $c: did not end"
                f=$((f + 1))
            fi
        done
        if [ "$verdict" = skip ]; then
            # Not run: nothing it did counts as passed
            s=$((s + p))
            p=0
        fi
    fi
    bad=${TEST_DIR:-$PWD/scratch}/raw-file-$t/$t.out.bad
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        why="killed after $limit s"
    elif [ -e "$bad" ]; then
        why="it failed (exit status, or output other than $t.out): $bad"
        diff -u "$src/tests/$t.out" "$bad" >> "$log"
    else
        why="./check exited with status $rc"
    fi
    if [ "$verdict" = fail ] && [ "$f" = 0 ]; then
        echo "not ok $t: $why"
        f=1
    elif [ "$verdict" = fail ]; then
        echo "# $t: $why"
    fi
    echo "$t: $p passed, $f failed, $s skipped"
    ip=$((ip + p)) if_=$((if_ + f)) is=$((is + s))
done
echo "iotests: $ip passed, $if_ failed, $is skipped"
add "$ip" "$if_" "$is"

# What `make install` installs, run once: files, the unit, KVM, firmware
# and keymaps, a replicated pair of the installed programs
# (scripts/check-install.sh).  DRBD_INSTALL_TEST=0 leaves it out.
echo "== install"
if [ "${DRBD_INSTALL_TEST:-1}" = 0 ]; then
    echo "install: left out (DRBD_INSTALL_TEST=0)"
else
    out=$tmp/install.out
    timeout -k 30 600 sh "$top/scripts/check-install.sh" "$top" \
        "$tmp/install" > "$out" 2>&1
    rc=$?
    cat "$out" "$tmp/install/install.log" >> "$log" 2>/dev/null
    grep -E '^(not )?ok ' "$out"
    p=$(grep '^ok ' "$out" | grep -cv '# SKIP')
    s=$(grep -c '^ok .*# SKIP' "$out")
    f=$(grep -c '^not ok ' "$out")
    if [ "$rc" != 0 ] && [ "$f" = 0 ]; then
        echo "not ok install: exited with status $rc"
        f=1
    fi
    echo "install: $p passed, $f failed, $s skipped"
    add "$p" "$f" "$s"
fi

# A real cluster manager fails the resource over: corosync + Pacemaker on
# namespaced hosts, our OCF agent, kill -9 and cut links
# (tests/ha/test-drbd-failover.py).  Root only (namespaces, mounts);
# DRBD_CLUSTER_TEST=0 leaves it out, DRBD_CLUSTER_ARGS passes options.
echo "== cluster"
if [ "${DRBD_CLUSTER_TEST:-1}" = 0 ]; then
    echo "cluster: left out (DRBD_CLUSTER_TEST=0)"
elif [ "$(id -u)" != 0 ]; then
    echo "ok cluster # SKIP needs root (network, mount and PID namespaces)"
    add 0 0 1
else
    out=$tmp/cluster.out
    # shellcheck disable=SC2086
    if timeout -k 30 2400 python3 "$top/tests/ha/test-drbd-failover.py" \
            "$bld" ${DRBD_CLUSTER_ARGS:-} > "$out" 2>&1; then
        rc=0
    else
        rc=$?
    fi
    cat "$out" >> "$log"
    grep -E '^(drbd [0-9]+ hosts:|\[.*(FAILED|Error|promoted after))' "$out"
    line=$(tail -n 1 "$out")
    cp=$(echo "$line" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\1/p')
    cf=$(echo "$line" | sed -n 's/^\([0-9][0-9]*\) passed, \([0-9][0-9]*\) failed$/\2/p')
    if [ -z "$cp" ]; then
        echo "not ok cluster: the test ended without its count (status $rc)"
        cp=0 cf=1
    elif [ "$rc" != 0 ] && [ "$cf" = 0 ]; then
        echo "not ok cluster: exited with status $rc"
        cf=1
    fi
    echo "cluster: $cp passed, $cf failed, 0 skipped"
    add "$cp" "$cf" 0
fi

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

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ] && [ "$passed" != 0 ]
