#!/usr/bin/env python3
#
# What the activity log costs random writes on a real file.
#
# `qemu-img bench -w -s 4k` on one image on the machine's file system,
# opened with aio=native and cache.direct=on, in three ways:
#
#   raw       the image's data area through the raw driver
#   raw-dsync the same with every write durable (O_DSYNC): the cost of
#             one durable 4 KiB write per write, which is what an AL
#             transaction is; at queue depth 1 with a cold extent per
#             write, internal metadata can't beat raw plus raw-dsync
#   none      a standalone drbd primary with meta-disk=none over the same
#             data area: no metadata I/O at all
#   internal  a standalone drbd primary with the image's internal metadata
#             (activity log, bitmap, superblock)
#
# and two access patterns: sequential 4 KiB writes, and one 4 KiB write
# per 4 MiB extent (stride 4 MiB + 4 KiB) over a disk at least 32 times
# the activity log's reach, so that nearly every write needs an extent
# that is not hot.  A standalone primary marks every write out of sync,
# so an evicted extent's bitmap block has always changed: the worst case.
#
# The configurations run round-robin, each figure is the median of
# --repeat runs, and the ratios compare with drbd-none and with the floor
# (raw + raw-dsync: a write and a durable metadata write, one after the
# other) measured in the same run; a ratio is time(other) / time(internal),
# so above 1 is faster than the other.
# The `al` column is the number of activity-log transactions per 1000
# writes (counted from the drbd_al_transaction trace event).
#
# usage: drbd-al-bench.py BUILDDIR [--repeat N] [--dir DIR] [--quick]
#
# SPDX-License-Identifier: GPL-2.0-or-later

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument('build')
parser.add_argument('--repeat', type=int, default=5)
parser.add_argument('--dir', default=None,
                    help='where the (sparse) image goes; a real file '
                    'system, not tmpfs (default: beside this script)')
parser.add_argument('--al-extents', type=int, default=None,
                    help='al-extents of the image (default: the default)')
parser.add_argument('--quick', action='store_true',
                    help='fewer writes per run, for a smoke test')
args = parser.parse_args()

BUILD = os.path.abspath(args.build)
QEMU_IMG = os.path.join(BUILD, 'qemu-img')
EXTENT = 4 * 1024 * 1024
COUNT = 2000 if args.quick else 20000

# name, queue depth, step between writes
WORKLOADS = [
    ('seq-qd32', 32, 4096),
    ('extent-qd32', 32, EXTENT + 4096),
    ('extent-qd1', 1, EXTENT + 4096),
]


def al_extents(img):
    out = subprocess.run([QEMU_IMG, 'info', '-f', 'drbd', img],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r'al extents:\s*(\d+)', out)
    if not m:
        sys.exit('cannot read the activity log size from qemu-img info:\n' +
                 out)
    return int(m.group(1))


def image_opts(kind, img, data_size):
    file = (f'file.driver=file,file.filename={img},file.aio=native,'
            f'file.cache.direct=on')
    if kind in ('raw', 'raw-dsync'):
        return f'driver=raw,size={data_size},{file}'
    if kind == 'drbd-none':
        return (f'driver=drbd,role=primary,meta-disk=none,file.driver=raw,'
                f'file.size={data_size},' + file.replace('file.', 'file.file.'))
    return f'driver=drbd,role=primary,{file}'


def run(kind, img, data_size, depth, step, tracefile):
    argv = [QEMU_IMG, 'bench', '-w', '-c', str(COUNT), '-d', str(depth),
            '-s', '4k', '-S', str(step), '-n', '--image-opts']
    if kind == 'raw-dsync':
        argv += ['-t', 'directsync']
    if kind.startswith('drbd'):
        argv[1:1] = ['--trace', 'enable=drbd_al_transaction,'
                     f'file={tracefile}']
    argv.append(image_opts(kind, img, data_size))
    t0 = time.monotonic()
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    t = time.monotonic() - t0
    m = re.search(r'Run completed in ([0-9.]+) seconds', out.stdout)
    secs = float(m.group(1)) if m else t
    al = bm = 0
    if kind.startswith('drbd') and os.path.exists(tracefile):
        with open(tracefile, encoding='utf-8', errors='replace') as f:
            for line in f:
                if 'drbd_al_transaction' in line:
                    al += 1
        os.unlink(tracefile)
    return secs, al


def main():
    base = args.dir or os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory(dir=base, prefix='al-bench-') as d:
        img = os.path.join(d, 'disk.img')
        create = [QEMU_IMG, 'create', '-q', '-f', 'drbd']
        if args.al_extents:
            create += ['-o', f'al-extents={args.al_extents}']
        # sized after the AL's reach, once its size is known
        subprocess.run(create + [img, '1G'], check=True)
        nslots = al_extents(img)
        os.unlink(img)
        data_size = max(32 * nslots * EXTENT, COUNT * (EXTENT + 4096))
        data_size = (data_size + (1 << 30) - 1) & ~((1 << 30) - 1)
        subprocess.run(create + [img, str(data_size)], check=True)
        print(f'image {data_size >> 30} GiB (sparse), al-extents {nslots} '
              f'({nslots * 4} MiB), {COUNT} writes of 4 KiB per run, '
              f'median of {args.repeat}', flush=True)

        trace = os.path.join(d, 'trace.log')
        # Allocate the blocks the runs write, so no run pays for it
        for _, depth, step in WORKLOADS:
            run('raw', img, data_size, 32, step, trace)

        kinds = ['raw', 'raw-dsync', 'drbd-none', 'drbd-internal']
        res = {}
        for rep in range(args.repeat):
            for name, depth, step in WORKLOADS:
                for kind in kinds:
                    secs, al = run(kind, img, data_size, depth, step, trace)
                    res.setdefault((name, kind), []).append((secs, al))
            print(f'round {rep + 1}/{args.repeat} done', file=sys.stderr,
                  flush=True)

        hdr = ('workload', 'raw s', 'raw-dsync s', 'drbd-none s',
               'drbd-internal s', 'internal vs none',
               'internal vs floor', 'al/1000 writes')
        print('| ' + ' | '.join(hdr) + ' |')
        print('|' + '---|' * len(hdr))
        for name, depth, step in WORKLOADS:
            med = {k: statistics.median(s for s, _ in res[(name, k)])
                   for k in kinds}
            al = statistics.median(a for _, a in res[(name,
                                                      'drbd-internal')])
            internal = med['drbd-internal']
            # the floor: each write plus one durable metadata write
            floor = med['raw'] + med['raw-dsync']
            print(f'| {name} | {med["raw"]:.3f} | {med["raw-dsync"]:.3f} | '
                  f'{med["drbd-none"]:.3f} | {internal:.3f} | '
                  f'{med["drbd-none"] / internal:.2f} | '
                  f'{floor / internal:.2f} | {al * 1000 / COUNT:.1f} |')


main()
