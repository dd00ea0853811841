#!/usr/bin/env python3
#
# A guest writing faster than the link to its peer: on-congestion.
#
# A drbd primary (protocol A, images on tmpfs) exports its node over NBD;
# `qemu-img bench -w -s 1M -d 8` writes --size bytes into it (the guest).
# Its peer, a drbd secondary in a second qemu-storage-daemon, is reached
# through a TCP proxy of this script on 127.0.0.1 that passes --rate
# bytes per second towards the peer.  In one run, in turn:
#
#   local        the peer not running: the primary writes locally only
#   block        connected, on-congestion=block: the guest waits for the
#                slow link once the socket buffers are full
#   pull-ahead   connected, on-congestion=pull-ahead with
#                congestion-fill=--fill: the primary goes ahead of the
#                peer, and resyncs it once the burst is over
#   extents      as pull-ahead, with congestion-extents=--extents instead
#                of congestion-fill: ahead once writes in flight to the
#                peer hold that many activity-log extents (4 MiB each)
#
# For each: the guest's MiB/s, and for the connected ones the seconds from
# the burst's end until the peer is up to date (oos 0), and whether the
# replicas then compare equal (qemu-img compare).  The table gives the
# guest's rate against `local`'s, median of --repeat runs.
#
# usage: drbd-congestion-bench.py BUILDDIR [--repeat N] [--size BYTES]
#                                 [--rate BYTES] [--fill BYTES]
#                                 [--extents N]
#
# SPDX-License-Identifier: GPL-2.0-or-later

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MiB = 1024 * 1024

parser = argparse.ArgumentParser()
parser.add_argument('build')
parser.add_argument('--repeat', type=int, default=3)
parser.add_argument('--size', type=int, default=256 * MiB)
parser.add_argument('--rate', type=int, default=20 * MiB,
                    help='bytes per second the link passes (default 20 MiB)')
parser.add_argument('--fill', type=int, default=256 * 1024,
                    help='congestion-fill of pull-ahead (default 256 KiB)')
parser.add_argument('--extents', type=int, default=2,
                    help='congestion-extents of extents (default 2)')
args = parser.parse_args()

BUILD = os.path.abspath(args.build)
sys.path.insert(0, os.path.join(BUILD, '..', 'qemu-src', 'python'))
from qemu.qmp.legacy import QEMUMonitorProtocol  # noqa: E402

QSD = os.path.join(BUILD, 'storage-daemon', 'qemu-storage-daemon')
QEMU_IMG = os.path.join(BUILD, 'qemu-img')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class SlowLink:
    """A TCP proxy to @target that passes @rate bytes/s towards it"""

    def __init__(self, target: int, rate: int) -> None:
        self.target = target
        self.rate = rate
        self.free_at = 0.0
        self.lock = threading.Lock()
        self.socks = []
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(('127.0.0.1', 0))
        self.port = self.listener.getsockname()[1]
        self.listener.listen(8)
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        while True:
            try:
                down, _ = self.listener.accept()
                up = socket.create_connection(('127.0.0.1', self.target))
            except OSError:
                return
            self.socks += [down, up]
            for src, dst, slow in ((down, up, True), (up, down, False)):
                threading.Thread(target=self.pump, args=(src, dst, slow),
                                 daemon=True).start()

    def pump(self, src, dst, slow) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if slow:
                    with self.lock:
                        now = time.monotonic()
                        self.free_at = max(self.free_at, now) + \
                            len(data) / self.rate
                        until = self.free_at
                    time.sleep(max(0.0, until - now))
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.listener.close()
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass


class Daemon:
    def __init__(self, workdir: str, name: str, argv) -> None:
        sock = os.path.join(workdir, name + '-qmp.sock')
        self.qmp = QEMUMonitorProtocol(sock, server=True)
        self.proc = subprocess.Popen(
            [QSD, '--chardev', f'socket,id=qmp,path={sock}',
             '--monitor', 'chardev=qmp'] + argv,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.qmp.accept(30)

    def drbd(self) -> dict:
        return self.qmp.cmd('query-drbd')[0]

    def stop(self) -> None:
        try:
            self.qmp.cmd('quit')
            self.proc.wait(30)
        except Exception:  # pylint: disable=broad-except
            self.proc.kill()
            self.proc.wait()
        try:
            self.qmp.close()
        except EOFError:
            pass


def wait(cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f'{what} after {timeout:.0f} s')
        time.sleep(0.05)


def measure(kind: str, workdir: str) -> dict:
    imgs = [os.path.join(workdir, f'{n}.img') for n in 'ab']
    for img in imgs:
        subprocess.run([QEMU_IMG, 'create', '-q', '-f', 'drbd', img,
                        str(args.size)], check=True)
    port = free_port()
    link = SlowLink(port, args.rate)
    opts = 'protocol=a'
    if kind == 'pull-ahead':
        opts += f',on-congestion=pull-ahead,congestion-fill={args.fill}'
    elif kind == 'extents':
        opts += (f',on-congestion=pull-ahead,'
                 f'congestion-extents={args.extents}')
    nbd = os.path.join(workdir, 'a.sock')
    daemons = []
    try:
        if kind != 'local':
            daemons.append(Daemon(workdir, 'b', [
                '--blockdev', f'driver=file,node-name=bf,filename={imgs[1]}',
                '--blockdev', f'driver=drbd,node-name=b,file=bf,node-id=1,'
                f'role=secondary,{opts},listen.type=inet,'
                f'listen.host=127.0.0.1,listen.port={port}']))
        a = Daemon(workdir, 'a', [
            '--blockdev', f'driver=file,node-name=af,filename={imgs[0]}',
            '--blockdev', f'driver=drbd,node-name=a,file=af,node-id=0,'
            f'role=primary,{opts},peer.type=inet,peer.host=127.0.0.1,'
            f'peer.port={link.port}',
            '--nbd-server', f'addr.type=unix,addr.path={nbd}',
            '--export', 'type=nbd,id=e,node-name=a,writable=on'])
        daemons.append(a)
        if kind != 'local':
            wait(lambda: a.drbd()['connection'] == 'connected', 30,
                 'not connected')
        states = set()
        out = subprocess.run(
            [QEMU_IMG, 'bench', '-w', '-s', '1M', '-d', '8', '-c',
             str(args.size // MiB), '--pattern', '0x5a', '-f', 'raw',
             f'nbd+unix:///a?socket={nbd}'],
            check=True, capture_output=True, text=True).stdout
        secs = float(re.search(r'completed in ([0-9.]+) seconds',
                               out).group(1))
        res = {'rate': args.size / MiB / secs}
        if kind != 'local':
            t0 = time.monotonic()

            def synced():
                info = a.drbd()
                states.add(info['connection'])
                return info['connection'] == 'connected' and \
                    info['counters']['oos'] == 0 and \
                    info['peer-disk'] == 'up-to-date'
            wait(synced, 60 + args.size / args.rate * 2, 'not in sync')
            res['catch_up'] = time.monotonic() - t0
            for d in daemons:
                d.stop()
            daemons = []
            cmp = subprocess.run([QEMU_IMG, 'compare', '-q', '-f', 'drbd',
                                  '-F', 'drbd', imgs[0], imgs[1]])
            res['equal'] = cmp.returncode == 0
        return res
    finally:
        for d in daemons:
            d.stop()
        link.close()
        for img in imgs:
            os.unlink(img)


def main() -> None:
    kinds = ('local', 'block', 'pull-ahead', 'extents')
    runs = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix='drbd-congestion-bench-',
                                     dir='/dev/shm') as workdir:
        for rep in range(args.repeat):
            for kind in kinds:
                r = measure(kind, workdir)
                runs[kind].append(r)
                print(f'run {rep + 1}: {kind:10} {r["rate"]:8.1f} MiB/s' +
                      (f'  caught up in {r["catch_up"]:.1f} s, replicas '
                       f'{"equal" if r["equal"] else "DIFFER"}'
                       if 'catch_up' in r else ''),
                      file=sys.stderr, flush=True)
    med = {k: statistics.median(r['rate'] for r in v)
           for k, v in runs.items()}
    print(f'slow link: {args.rate / MiB:g} MiB/s to the peer, protocol A, '
          f'{args.size // MiB} MiB written (1M QD8), median of '
          f'{args.repeat} runs')
    print('| configuration | guest MiB/s | vs local | peer up to date after '
          '(s) | replicas equal |')
    print('| --- | --- | --- | --- | --- |')
    for kind in kinds:
        catch = [r['catch_up'] for r in runs[kind] if 'catch_up' in r]
        equal = [r['equal'] for r in runs[kind] if 'equal' in r]
        print(f'| {kind} | {med[kind]:.1f} | {med[kind] / med["local"]:.2f} '
              f'| {statistics.median(catch):.1f} | '
              f'{sum(equal)}/{len(equal)} |' if catch else
              f'| {kind} | {med[kind]:.1f} | 1.00 | | |')


if __name__ == '__main__':
    main()
