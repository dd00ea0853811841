#!/bin/sh
# Build and run the libFuzzer targets of tests/fuzz (see tests/fuzz/README.rst).
#
# SPDX-License-Identifier: GPL-2.0-or-later
#
# usage: fuzz.sh deps
#        fuzz.sh build SRCDIR BUILDDIR OUTDIR
#        fuzz.sh run OUTDIR SECONDS [TARGET...]
#        fuzz.sh corpus OUTDIR
#
# deps    installs clang and libFuzzer's runtime (Debian packages) if missing
# build   compiles the targets with clang, -fsanitize=fuzzer,address,undefined,
#         against the headers of a configured QEMU tree (SRCDIR, BUILDDIR)
#         and its libqemuutil.a, into OUTDIR
# run     runs each target (default: all) for SECONDS over its seed corpus
#         (tests/fuzz/corpus/TARGET, read only) and what it finds
#         (OUTDIR/corpus/TARGET); fails if any target crashes
# corpus  writes the seed corpus again into tests/fuzz/corpus
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
targets="wire rle superblock al gate"
# The pure files of the driver that the targets exercise
pure="wire rle md-format gate order uuid"
# QEMU's utilities that touch the fuzzed bytes: built with the sanitizers,
# they take the place of libqemuutil.a's copies
util="hbitmap bufferiszero crc32c"
packages="clang libclang-rt-14-dev"

max_len() {
    case $1 in
    wire) echo 16384 ;;
    superblock) echo 4200 ;;
    al) echo 33000 ;;
    *) echo 8192 ;;
    esac
}

deps() {
    missing=
    for p in $packages; do
        dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null |
            grep -qx installed || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "fuzz.sh: missing packages:$missing; run as root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

build() {
    src=$(cd "$1" && pwd)
    bld=$(cd "$2" && pwd)
    out=$3
    mkdir -p "$out/obj"
    if [ ! -e "$bld/libqemuutil.a" ] || [ ! -e "$bld/qapi/qapi-types-drbd.h" ]
    then
        echo "fuzz.sh: $bld is not built (make build first)" >&2
        exit 1
    fi

    # What QEMU compiles its own files with, less what clang lacks
    cflags="-std=gnu11 -g -O1 -fno-omit-frame-pointer
        -fsanitize=address,undefined -fno-sanitize-recover=undefined
        -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -D_LARGEFILE_SOURCE
        -fno-strict-aliasing -fno-common -fwrapv -mcx16 -msse2
        -I$bld -I$bld/qapi -I$bld/trace -I$src
        -iquote $src/include -iquote $src/host/include/x86_64
        -iquote $src/host/include/generic -isystem $src/linux-headers
        $(pkg-config --cflags glib-2.0)
        -DDRBD_FUZZ_LIBFUZZER"
    libs="$bld/libqemuutil.a $(pkg-config --libs glib-2.0) -lm -lpthread"
    objs=
    for f in $pure; do
        objs="$objs $out/obj/$f.o"
        # shellcheck disable=SC2086
        clang $cflags -fsanitize=fuzzer-no-link -c "$top/block/drbd/$f.c" \
            -o "$out/obj/$f.o"
    done
    for f in $util; do
        objs="$objs $out/obj/util-$f.o"
        # shellcheck disable=SC2086
        clang $cflags -fsanitize=fuzzer-no-link -c "$src/util/$f.c" \
            -o "$out/obj/util-$f.o"
    done
    # shellcheck disable=SC2086
    clang $cflags -c "$top/tests/fuzz/stubs.c" -o "$out/obj/stubs.o"
    objs="$objs $out/obj/stubs.o"

    for t in $targets; do
        # shellcheck disable=SC2086
        clang $cflags -fsanitize=fuzzer "$top/tests/fuzz/fuzz-$t.c" $objs \
            $libs -o "$out/fuzz-$t"
    done
    # shellcheck disable=SC2086
    clang $cflags "$top/tests/fuzz/gen-corpus.c" $objs $libs \
        -o "$out/gen-corpus"
    echo "fuzz.sh: built$(for t in $targets; do printf ' fuzz-%s' "$t"; done)"
}

run() {
    out=$1
    secs=$2
    shift 2
    # shellcheck disable=SC2086
    [ $# -gt 0 ] || set -- $targets
    failed=
    for t in "$@"; do
        mkdir -p "$out/corpus/$t"
        log=$out/$t.log
        if "$out/fuzz-$t" -max_total_time="$secs" -timeout=20 \
            -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
            -print_final_stats=1 -artifact_prefix="$out/crash-$t-" \
            "$out/corpus/$t" "$top/tests/fuzz/corpus/$t" > "$log" 2>&1
        then
            result=ok
        else
            result="FAILED (see $log and $out/crash-$t-*)"
            failed="$failed $t"
        fi
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
        echo "fuzz-$t: ${execs:-?} executions in ${secs}s, $cov: $result"
    done
    if [ -n "$failed" ]; then
        echo "fuzz.sh: crashes in:$failed" >&2
        exit 1
    fi
}

corpus() {
    "$1/gen-corpus" "$top/tests/fuzz/corpus"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
deps) deps ;;
build) build "$@" ;;
run) run "$@" ;;
corpus) corpus "$@" ;;
*) sed -n '2,/^set/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
