#!/usr/bin/env python3
#
# What a drbd node costs in memory over a large image.
#
# A qemu-storage-daemon opens one node over a sparse image of --size
# bytes (default 1 TiB), in turn:
#
#   raw       the raw driver over a raw image: the baseline
#   drbd      a drbd node with internal metadata, one peer (it listens on
#             127.0.0.1 for a peer that never comes)
#   drbd-3    the same with two peers (max-peers=2)
#   drbd-dirty  one peer, over an image whose bitmap has a bit set in
#             every 4 KiB of it (one 4 KiB write per 128 MiB, made while
#             the peer was away): the worst case, all of the bitmap
#             resident
#
# and reads /proc/PID/status once the node is open and idle: VmRSS (the
# steady figure) and VmHWM (the peak, the open included).  Each figure is
# the median of --repeat runs; the table gives each kind's figures minus
# raw's, measured in the same run, in MiB.  The bitmap is 32 MiB per TiB
# and peer slot (one bit per 4 KiB); only the parts of it with bits set
# (or set since the open) are resident.
#
# usage: drbd-mem-bench.py BUILDDIR [--repeat N] [--size BYTES] [--dir DIR]
#
# SPDX-License-Identifier: GPL-2.0-or-later

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument('build')
parser.add_argument('--repeat', type=int, default=3)
parser.add_argument('--size', type=int, default=1 << 40)
parser.add_argument('--dir', default=None,
                    help='where the sparse images go (default: a temporary '
                    'directory under /var/tmp)')
args = parser.parse_args()

BUILD = os.path.abspath(args.build)
QEMU_IMG = os.path.join(BUILD, 'qemu-img')
QEMU_IO = os.path.join(BUILD, 'qemu-io')
QSD = os.path.join(BUILD, 'storage-daemon', 'qemu-storage-daemon')
MiB = 1024 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def status(pid: int) -> dict:
    out = {}
    with open(f'/proc/{pid}/status', encoding='ascii') as f:
        for line in f:
            key, _, value = line.partition(':')
            if key in ('VmRSS', 'VmHWM'):
                out[key] = int(value.split()[0]) * 1024
    return out


def qmp(sock_path: str, cmd: str) -> dict:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    f = s.makefile('rw')
    f.readline()
    for c in ({'execute': 'qmp_capabilities'}, {'execute': cmd}):
        f.write(json.dumps(c) + '\n')
        f.flush()
        while True:
            msg = json.loads(f.readline())
            if 'return' in msg or 'error' in msg:
                break
    s.close()
    return msg


def measure(kind: str, img: str, tmp: str) -> dict:
    sock = os.path.join(tmp, 'qmp.sock')
    if os.path.exists(sock):
        os.unlink(sock)
    if kind == 'raw':
        node = f'driver=raw,node-name=n,file.driver=file,file.filename={img}'
    else:
        port = free_port()
        node = (f'driver=drbd,node-name=n,file.driver=file,'
                f'file.filename={img},role=secondary,node-id=0')
        if kind in ('drbd', 'drbd-dirty'):
            node += (f',peer-node-id=1,listen.type=inet,'
                     f'listen.host=127.0.0.1,listen.port={port}')
        else:
            node += (f',peers.0.node-id=1,peers.0.listen.type=inet,'
                     f'peers.0.listen.host=127.0.0.1,'
                     f'peers.0.listen.port={port},peers.1.node-id=2,'
                     f'peers.1.listen.type=inet,peers.1.listen.host='
                     f'127.0.0.1,peers.1.listen.port={free_port()}')
    proc = subprocess.Popen([QSD, '--blockdev', node, '--chardev',
                             f'socket,id=m,path={sock},server=on,wait=off',
                             '--monitor', 'chardev=m'],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not os.path.exists(sock):
            if proc.poll() is not None or time.monotonic() > deadline:
                sys.exit(f'{kind}: the daemon did not come up: '
                         f'{proc.stderr.read().decode()}')
            time.sleep(0.05)
        res = qmp(sock, 'query-named-block-nodes')
        assert 'return' in res, res
        time.sleep(2)   # idle: what it keeps
        return status(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)


def dirty(img: str) -> None:
    """A drbd image whose bitmap has a bit in each of its 4 KiB blocks"""
    subprocess.run([QEMU_IMG, 'create', '-q', '-f', 'drbd', img,
                    str(args.size)], check=True)
    step = 4096 * 8 * 4096      # the data one 4 KiB bitmap block covers
    script = ''.join(f'write {off} 4k\n'
                     for off in range(0, args.size, step))
    node = {'driver': 'drbd', 'role': 'primary', 'node-id': 0,
            'peer-node-id': 1,
            'listen': {'type': 'inet', 'host': '127.0.0.1',
                       'port': str(free_port())},
            'file': {'driver': 'file', 'filename': img}}
    subprocess.run([QEMU_IO, 'json:' + json.dumps(node)], input=script,
                   text=True, stdout=subprocess.DEVNULL, check=True)


def main() -> None:
    tmp = tempfile.mkdtemp(dir=args.dir or '/var/tmp',
                           prefix='drbd-mem-bench.')
    imgs = {'raw': os.path.join(tmp, 'raw.img'),
            'drbd': os.path.join(tmp, 'drbd.img'),
            'drbd-3': os.path.join(tmp, 'drbd3.img'),
            'drbd-dirty': os.path.join(tmp, 'drbd-dirty.img')}
    try:
        subprocess.run([QEMU_IMG, 'create', '-q', '-f', 'raw', imgs['raw'],
                        str(args.size)], check=True)
        subprocess.run([QEMU_IMG, 'create', '-q', '-f', 'drbd', imgs['drbd'],
                        str(args.size)], check=True)
        subprocess.run([QEMU_IMG, 'create', '-q', '-f', 'drbd', '-o',
                        'max-peers=2', imgs['drbd-3'], str(args.size)],
                       check=True)
        dirty(imgs['drbd-dirty'])
        runs = {k: [] for k in imgs}
        for _ in range(args.repeat):
            for kind, img in imgs.items():
                runs[kind].append(measure(kind, img, tmp))
        med = {k: {f: statistics.median(r[f] for r in v)
                   for f in ('VmRSS', 'VmHWM')} for k, v in runs.items()}
        print(f'drbd node memory over a {args.size / (1 << 40):g} TiB image '
              f'(median of {args.repeat}; minus raw, MiB)')
        print(f'{"kind":10} {"steady (RSS)":>14} {"peak (HWM)":>12}')
        for kind in ('drbd', 'drbd-3', 'drbd-dirty'):
            print(f'{kind:10} '
                  f'{(med[kind]["VmRSS"] - med["raw"]["VmRSS"]) / MiB:14.1f} '
                  f'{(med[kind]["VmHWM"] - med["raw"]["VmHWM"]) / MiB:12.1f}')
        print(f'(raw itself: RSS {med["raw"]["VmRSS"] / MiB:.1f} MiB, '
              f'HWM {med["raw"]["VmHWM"] / MiB:.1f} MiB)')
    finally:
        for img in imgs.values():
            if os.path.exists(img):
                os.unlink(img)
        for f in os.listdir(tmp):
            os.unlink(os.path.join(tmp, f))
        os.rmdir(tmp)


main()
