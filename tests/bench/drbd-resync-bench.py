#!/usr/bin/env python3
#
# Resync and online-verify throughput of drbd against the link, in one run.
#
# Everything runs on loopback (127.0.0.1), with the images in a temporary
# directory on tmpfs (/dev/shm), so that the engines are measured, not the
# disks.  Every drbd measure uses two qemu-storage-daemons, each a drbd
# node over a fresh image of `qemu-img create -f drbd` (internal
# metadata): node 0 primary and connecting, node 1 secondary and
# listening.  Before the daemons start, the data areas of both images are
# filled with the same non-zero bytes (qemu-img bench -w --pattern),
# behind drbd's back: the resync sends a chunk that reads as zeroes as
# RS_ZEROES, without its data, and tmpfs reads a hole from its zero page
# at 20+ GB/s, which no disk does; `resync-sparse` measures the images as
# created.  For each size, every run measures, in this order:
#
#   link          `qemu-img bench -w -s 1M -d 8 -t none` over NBD (TCP)
#                 into a qemu-storage-daemon that writes a raw file (filled
#                 beforehand, as the drbd images are): what one stream of
#                 1 MiB writes over loopback TCP achieves
#   resync        once connected, `drbd-invalidate` on the secondary makes
#                 a full resync, timed from the command until both nodes
#                 are `connected` with `oos` 0.  Also: the target's `nr`
#                 over the bytes that were out of sync (1.00 is no
#                 overhead), the connection losses during the resync, and
#                 the rate of the resync proper, from the moment the
#                 target is sync-target (the invalidate makes the nodes
#                 reconnect first)
#   resync-sparse the same over the images as created (holes)
#   link-sparse   as link, into a raw file as created (a hole): tmpfs
#                 allocates its pages as the writes come
#   resync-new    a new replica: a pair over images as created (holes),
#                 node b killed, the size's bytes written on a through an
#                 NBD export (qemu-img bench -w --pattern), b started
#                 again; timed from b's start until both are `connected`
#                 with `oos` 0, and compared with link-sparse
#   resync-ping   the same as resync with ping-timeout=--ping-timeout (and
#                 ping-interval=--ping-interval, if given) on both nodes.
#                 During a resync pings come every ping-timeout: a peer
#                 that answers late under the load is dropped
#   resync-csums  the same as resync with csums-alg=crc32c on both nodes:
#                 all data is equal, so only digests should cross the
#                 link; compared with `resync`
#   verify        both nodes with verify-alg=crc32c; `drbd-verify` on the
#                 primary, timed until DRBD_VERIFY_FINISHED
#   read-a/read-b `qemu-img bench -s 1M -d 8 -f raw` reading the data
#                 area (offset 0 of the image) of each node's image
#                 locally, the daemons stopped; verify is compared with
#                 the slower of the two.  The images are read once before
#                 the daemons start, so that the verify reads the same
#                 tmpfs pages as these reads do: the first read of a page
#                 after it was written moves it to tmpfs's active list,
#                 which takes a third of the read rate (9 against 13
#                 GB/s here) and which no disk has
#
# --only NAME,... runs just those measures (e.g. --only verify, under a
# profiler); the table's other rows are then n/a.
#
# With --pace, instead, the dynamic resync controller is measured against
# a resync without it, on --pace-size (2G): for each of the two, a pair
# whose primary exports its node over NBD (unix socket) for a guest; the
# guest's write latency at QD1 (4 KiB writes, one after the other without
# a gap, by a small NBD client of this script) with the pair in sync, then
# during a full resync (drbd-invalidate), counting the writes that ended
# while the resync ran; then the rate of a full resync of a new pair with
# the guest idle (the resync proper, as `resync` above).
#
# Ends of resyncs and verifies are taken from the timestamps of the
# DRBD_STATE_CHANGE and DRBD_VERIFY_FINISHED events, so the polling
# does not show in the figures; query-drbd confirms the end state.  A
# connection loss is a change of a node to wf-connection or standalone
# after the resync (or the verify) started, counted on the node that saw
# more of them (a break shows on both); the reconnect that drbd-invalidate
# itself causes is not counted.
#
# The machine this runs on is noisy: the measures of one run follow each
# other, runs repeat the whole sequence, and each figure is the median of
# --runs runs; the ratios are of medians of the same invocation.
#
# usage: drbd-resync-bench.py BUILDDIR [--sizes 512M,4G] [--runs N]
#                             [--ping-timeout MS] [--port N]
#                             [--ping-interval MS] [--connect-interval MS]
#                             [--pace [--pace-size 2G] [--pace-writes N]]
#
# SPDX-License-Identifier: GPL-2.0-or-later

import argparse
import contextlib
import json
import os
import re
import select
import shlex
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                '..', 'ha'))
from nbdwriter import Nbd  # noqa: E402

MiB = 1024 * 1024


def parse_size(text):
    m = re.fullmatch(r'(\d+)([KMGT]?)i?B?', text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f'bad size: {text!r}')
    shift = {'': 0, 'K': 10, 'M': 20, 'G': 30, 'T': 40}[m.group(2).upper()]
    size = int(m.group(1)) << shift
    if size <= 0 or size % MiB:
        raise argparse.ArgumentTypeError(
            f'{text!r}: a size must be a positive multiple of 1M')
    return size


def parse_sizes(text):
    return [(s.strip(), parse_size(s)) for s in text.split(',') if s.strip()]


def parse_opts(text):
    """key=value,... as a dict"""
    return dict(kv.split('=', 1) for kv in text.split(',') if kv)


parser = argparse.ArgumentParser()
parser.add_argument('build')
parser.add_argument('--sizes', type=parse_sizes, default='512M,4G',
                    help='comma-separated disk sizes (default: 512M,4G)')
parser.add_argument('--runs', type=int, default=3,
                    help='runs per size; figures are medians (default: 3)')
parser.add_argument('--ping-timeout', type=int, default=500,
                    help='ping-timeout (ms) of the resync-ping measure '
                    '(default: 500)')
parser.add_argument('--ping-interval', type=int, default=None,
                    help='ping-interval (ms) of the resync-ping measure '
                    '(default: the driver\'s, 10000)')
parser.add_argument('--connect-interval', type=int, default=None,
                    help='connect-interval (ms) of every drbd node '
                    '(default: the driver\'s, 1000)')
parser.add_argument('--pace', action='store_true',
                    help='instead of the measures above, the dynamic '
                    'resync controller\'s: the guest\'s QD1 write latency '
                    'during a resync with and without it, and the resync '
                    'rate once the guest is idle')
parser.add_argument('--pace-size', type=parse_size, default=2 * 1024 ** 3,
                    help='size of the --pace resyncs (default: 2G)')
parser.add_argument('--pace-ctl', type=parse_opts,
                    default='c-plan-ahead=200,c-fill-target=64M',
                    help='the controller\'s options in the --pace measures '
                    '(default: c-plan-ahead=200,c-fill-target=64M)')
parser.add_argument('--pace-writes', type=int, default=4000,
                    help='writes of the --pace latency measures '
                    '(default: 4000)')
parser.add_argument('--only', default=None,
                    help='comma-separated measures to run (e.g. '
                    'verify,resync-csums: for a profile; the table then '
                    'lacks the rest)')
parser.add_argument('--port', type=int, default=17960,
                    help='first TCP port to use (default: 17960)')
args = parser.parse_args()
if isinstance(args.sizes, str):
    args.sizes = parse_sizes(args.sizes)
if args.runs < 1:
    parser.error('--runs must be at least 1')

BUILD = os.path.abspath(args.build)
QSD = os.path.join(BUILD, 'storage-daemon', 'qemu-storage-daemon')
QEMU_IMG = os.path.join(BUILD, 'qemu-img')
HOST = '127.0.0.1'
SYNC_STATES = ('sync-source', 'sync-target')


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class QMPError(Exception):
    pass


class QMP:
    """A minimal QMP client over a unix socket that keeps the events"""

    def __init__(self, path, proc, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f'the daemon exited with {proc.returncode}'
                                   ' before its monitor answered')
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                sock.close()
                if time.monotonic() > deadline:
                    raise RuntimeError(f'no QMP monitor at {path}')
                time.sleep(0.02)
        self.sock = sock
        self.buf = b''
        self.msgs = []
        self.events = []
        greeting = self._next(timeout)
        if 'QMP' not in greeting:
            raise RuntimeError(f'not a QMP greeting: {greeting}')
        self.cmd('qmp_capabilities')

    def fileno(self):
        return self.sock.fileno()

    def pump(self, timeout=0.0):
        """Read what is there (waiting up to @timeout); keep the events"""
        r, _, _ = select.select([self.sock], [], [], timeout)
        if not r:
            return
        data = self.sock.recv(1 << 20)
        if not data:
            raise EOFError('the QMP monitor closed')
        self.buf += data
        while b'\n' in self.buf:
            line, self.buf = self.buf.split(b'\n', 1)
            if not line.strip():
                continue
            msg = json.loads(line)
            if 'event' in msg:
                self.events.append(msg)
            else:
                self.msgs.append(msg)

    def _next(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.msgs:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError('no answer from the QMP monitor')
            self.pump(left)
        return self.msgs.pop(0)

    def cmd(self, name, timeout=60, **kwargs):
        msg = {'execute': name}
        if kwargs:
            msg['arguments'] = {k.replace('_', '-'): v
                                for k, v in kwargs.items()}
        self.sock.sendall(json.dumps(msg).encode() + b'\n')
        ans = self._next(timeout)
        if 'error' in ans:
            raise QMPError(f'{name}: {ans["error"].get("desc", ans)}')
        return ans['return']

    def take_events(self):
        ev, self.events = self.events, []
        return ev

    def close(self):
        self.sock.close()


LIVE = []   # every daemon not yet stopped, killed in main()'s finally


class Daemon:
    def __init__(self, workdir, name, argv):
        self.name = name
        sock = os.path.join(workdir, name + '-qmp.sock')
        self.logfile = os.path.join(workdir, name + '.log')
        with open(self.logfile, 'wb') as out:
            self.proc = subprocess.Popen(
                [QSD, '--chardev',
                 f'socket,id=qmp,path={sock},server=on,wait=off',
                 '--monitor', 'chardev=qmp'] + argv,
                stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        LIVE.append(self)
        try:
            self.qmp = QMP(sock, self.proc)
        except BaseException:
            self.kill()
            log(f'{name}: ' + self.log_tail())
            raise

    def cmd(self, name, **kwargs):
        return self.qmp.cmd(name, **kwargs)

    def drbd(self):
        return self.cmd('query-drbd')[0]

    def log_tail(self, lines=20):
        try:
            with open(self.logfile, encoding='utf-8', errors='replace') as f:
                return ''.join(f.readlines()[-lines:])
        except OSError:
            return ''

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        if self in LIVE:
            LIVE.remove(self)

    def stop(self):
        if self not in LIVE:
            return
        try:
            self.qmp.sock.sendall(b'{"execute": "quit"}\n')
            self.proc.wait(30)
        except Exception:
            pass
        try:
            self.qmp.close()
        except Exception:
            pass
        self.kill()


class Ports:
    def __init__(self, first):
        self.next = first

    def take(self):
        self.next += 1
        return self.next - 1


def run_img(argv):
    res = subprocess.run([QEMU_IMG] + argv, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f'qemu-img {" ".join(argv)} failed: '
                           f'{res.stderr.strip() or res.stdout.strip()}')
    return res.stdout


def img_bench(argv):
    """Seconds of a qemu-img bench run, as it reports them"""
    out = run_img(['bench'] + argv)
    m = re.search(r'Run completed in ([0-9.]+) seconds', out)
    if not m:
        raise RuntimeError('unexpected qemu-img bench output: ' + out)
    return float(m.group(1))


def fill_images(imgs, size):
    """
    The same non-zero bytes in the data areas of @imgs, behind drbd's
    back (before the daemons start), both at once
    """
    procs = [subprocess.Popen([QEMU_IMG, 'bench', '-w', '--pattern', '0x5a',
                               '-s', '1M', '-d', '8', '-c', str(size // MiB),
                               '-f', 'raw', img],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
             for img in imgs]
    try:
        errs = [(p.communicate()[1], p.returncode) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for err, rc in errs:
        if rc != 0:
            raise RuntimeError(f'filling the images failed: {err.strip()}')


def ev_time(ev):
    ts = ev['timestamp']
    return ts['seconds'] + ts['microseconds'] / 1e6


def wait_timeout(size):
    """Give up on a resync or verify slower than 8 MiB/s"""
    return 60 + size / (8 * MiB)


# --- measures -------------------------------------------------------------

def measure_link(workdir, ports, size, fill=True):
    img = os.path.join(workdir, 'link.raw')
    run_img(['create', '-q', '-f', 'raw', img, str(size)])
    # Written over, as the resyncs write over their filled images: tmpfs
    # allocating its pages is not the link's cost (but is with fill=False,
    # the link for a new replica)
    if fill:
        fill_images([img], size)
    port = ports.take()
    d = None
    try:
        d = Daemon(workdir, 'link', [
            '--blockdev', f'driver=file,node-name=link,filename={img}',
            '--nbd-server', f'addr.type=inet,addr.host={HOST},'
            f'addr.port={port}',
            '--export', 'type=nbd,id=e0,node-name=link,writable=on'])
        secs = img_bench(['-w', '-s', '1M', '-d', '8', '-c',
                          str(size // MiB), '-t', 'none', '-f', 'raw',
                          f'nbd://{HOST}:{port}/link'])
    finally:
        if d:
            d.stop()
        os.unlink(img)
    return {'rate': size / MiB / secs}


class Pair:
    """Two drbd nodes, 'a' (node 0, primary) and 'b' (node 1, secondary)"""

    def __init__(self, workdir, ports, size, opts, fill=True, export=False,
                 warm=False):
        self.imgs = [os.path.join(workdir, n + '.img') for n in 'ab']
        sock = self.nbd_sock = os.path.join(workdir, 'a.sock')
        exp = ['--nbd-server', f'addr.type=unix,addr.path={sock}',
               '--export', 'type=nbd,id=e0,node-name=a,writable=on']
        self.daemons = []
        try:
            for img in self.imgs:
                run_img(['create', '-q', '-f', 'drbd', img, str(size)])
            if fill:
                fill_images(self.imgs, size)
            if warm:
                # tmpfs moves a page to its active list on its second
                # access (the first read after the fill): a cost that the
                # local reads, which come after, do not pay, nor a disk
                for img in self.imgs:
                    img_bench(['-c', str(size // MiB), '-s', '1M', '-d',
                               '8', '-f', 'raw', img])
            port = ports.take()
            common = 'driver=drbd,resource=bench' + ''.join(
                f',{k}={v}' for k, v in opts.items())
            if args.connect_interval is not None:
                common += f',connect-interval={args.connect_interval}'
            self.b_argv = [
                '--blockdev', f'driver=file,node-name=b-file,'
                f'filename={self.imgs[1]}',
                '--blockdev', common + ',node-name=b,file=b-file,node-id=1,'
                f'role=secondary,listen.type=inet,listen.host={HOST},'
                f'listen.port={port}']
            self.b = self.start(workdir, 'b', self.b_argv)
            self.a = self.start(workdir, 'a', [
                '--blockdev', f'driver=file,node-name=a-file,'
                f'filename={self.imgs[0]}',
                '--blockdev', common + ',node-name=a,file=a-file,node-id=0,'
                f'role=primary,peer.type=inet,peer.host={HOST},'
                f'peer.port={port}'] + (exp if export else []))
            self.wait_in_sync(60 + size / (8 * MiB))
        except BaseException:
            self.stop()
            raise

    def start(self, workdir, name, argv):
        d = Daemon(workdir, name, argv)
        self.daemons.append(d)
        return d

    def wait_in_sync(self, timeout):
        """Both connected, nothing out of sync (a first resync is over)"""
        deadline = time.monotonic() + timeout
        while True:
            infos = [d.drbd() for d in self.daemons]
            if all(i['connection'] == 'connected' and
                   i['counters']['oos'] == 0 for i in infos):
                return
            if time.monotonic() > deadline:
                raise RuntimeError('the nodes did not connect in sync: ' +
                                   '; '.join(f'{i["node-name"]}: '
                                             f'{i["connection"]} oos '
                                             f'{i["counters"]["oos"]} '
                                             f'{i.get("last-error", "")}'
                                             for i in infos))
            time.sleep(0.01)

    def stop(self):
        # The primary first, while its peer still acks its demotion
        for d in reversed(self.daemons):
            d.stop()
        self.daemons = []

    def remove_images(self):
        for img in self.imgs:
            if os.path.exists(img):
                os.unlink(img)


class Watch:
    """
    The state changes of both nodes from the start of a resync or verify
    on: when each reached a sync state, when it was connected (and not
    syncing) again, and the connection losses in between.
    """

    def __init__(self, pair, resync, fresh=()):
        self.pair = pair
        self.resync = resync
        self.state = {}
        for d in pair.daemons:
            # a daemon just started: everything it said is of this watch
            if d not in fresh:
                d.qmp.take_events()
            self.state[d.name] = {'synced': not resync, 'sync_at': None,
                                  'done_at': None, 'losses': 0}
        self.reasons = []
        self.verify_ev = None

    def feed(self):
        for d in self.pair.daemons:
            st = self.state[d.name]
            for ev in d.qmp.take_events():
                if ev['event'] == 'DRBD_VERIFY_FINISHED':
                    self.verify_ev = ev
                    continue
                if ev['event'] != 'DRBD_STATE_CHANGE':
                    continue
                conn = ev['data']['connection']
                if conn in SYNC_STATES:
                    if not st['synced']:
                        st['sync_at'] = ev_time(ev)
                    st['synced'] = True
                    st['done_at'] = None
                elif conn == 'connected':
                    if st['synced'] and st['done_at'] is None:
                        st['done_at'] = ev_time(ev)
                else:
                    st['done_at'] = None
                    # wf-report-params is the reconnect's handshake
                    if st['synced'] and conn in ('wf-connection',
                                                 'standalone'):
                        st['losses'] += 1
                        self.reasons.append(
                            f'{d.name}: {conn}: {ev["data"]["reason"]}')

    def pump(self, timeout):
        socks = [d.qmp for d in self.pair.daemons]
        r, _, _ = select.select(socks, [], [], timeout)
        for q in r:
            q.pump()
        self.feed()

    def losses(self):
        return max(st['losses'] for st in self.state.values())


def wait_resynced(pair, w, t0, size):
    """
    Wait for the end of the resync that @w watches (from @t0): both nodes
    connected with nothing out of sync and b up to date; the figures
    """
    a, b = pair.a, pair.b
    deadline = time.monotonic() + wait_timeout(size)
    next_poll = time.monotonic() + 0.5
    end = None
    while end is None:
        if time.monotonic() > deadline:
            raise RuntimeError(
                f'resync not finished after {wait_timeout(size):.0f} s: '
                f'a {a.drbd()["connection"]}, b {b.drbd()["connection"]}'
                f' oos {b.drbd()["counters"]["oos"]}; losses: '
                + '; '.join(w.reasons))
        w.pump(0.5)
        events_done = all(st['done_at'] is not None
                          for st in w.state.values())
        if not events_done and time.monotonic() < next_poll:
            continue
        next_poll = time.monotonic() + 0.5
        infos = [a.drbd(), b.drbd()]
        if not all(i['connection'] == 'connected' and
                   i['counters']['oos'] == 0 for i in infos):
            continue
        if infos[1]['disk'] != 'up-to-date':
            continue
        w.feed()
        if all(st['done_at'] is not None for st in w.state.values()):
            end = max(st['done_at'] for st in w.state.values())
        else:
            # the events missed (should not happen): the poll's time
            end = time.time()
    sync_at = w.state['b']['sync_at'] or t0
    return {
        'rate': size / MiB / (end - t0),
        'sync_rate': size / MiB / max(end - sync_at, 1e-6),
        'reconnect': sync_at - t0,
        'losses': w.losses(),
        'reasons': w.reasons,
    }


def measure_resync(workdir, ports, size, opts, fill=True):
    pair = Pair(workdir, ports, size, opts, fill)
    try:
        b = pair.b
        before = b.drbd()['counters']
        w = Watch(pair, resync=True)
        t0 = time.time()
        b.cmd('drbd-invalidate', node_name='b')
        res = wait_resynced(pair, w, t0, size)
        after = b.drbd()['counters']
        res['nr'] = (after['nr'] - before['nr']) / size
        res['same'] = (after['same-csum'] - before['same-csum']) / size
        return res
    finally:
        pair.stop()
        pair.remove_images()


def measure_new_replica(workdir, ports, size):
    """
    A replica that missed all of the disk's data while its data area is
    still a hole, as a new one is: a pair of images as created, b killed,
    @size bytes written on a (through its NBD export), b started again;
    from b's start until both are connected with nothing out of sync
    """
    pair = Pair(workdir, ports, size, {}, fill=False, export=True)
    try:
        a, b = pair.a, pair.b
        argv = pair.b_argv
        b.kill()
        pair.daemons.remove(b)
        deadline = time.monotonic() + 30
        while a.drbd()['connection'] == 'connected':
            if time.monotonic() > deadline:
                raise RuntimeError('a still connected 30 s after b\'s kill')
            time.sleep(0.01)
        img_bench(['-w', '--pattern', '0x5a', '-s', '1M', '-d', '8', '-c',
                   str(size // MiB), '-t', 'none', '-f', 'raw',
                   f'nbd+unix:///a?socket={pair.nbd_sock}'])
        oos = a.drbd()['counters']['oos']
        if oos != size:
            raise RuntimeError(f'{oos} bytes out of sync, not {size}')
        t0 = time.time()
        pair.b = b = pair.start(workdir, 'b', argv)
        w = Watch(pair, resync=True, fresh=(b,))
        res = wait_resynced(pair, w, t0, size)
        res['nr'] = b.drbd()['counters']['nr'] / size
        res['same'] = 0.0
        return res
    finally:
        pair.stop()
        pair.remove_images()


class NbdGuest(Nbd):
    """
    A guest that writes 4 KiB at a time at queue depth 1 into an NBD
    export (tests/ha/nbdwriter.py's client) and records when each write
    ended and how long it took: a writer that goes on without a gap for
    as long as it is asked to
    """

    def __init__(self, path, name):
        super().__init__(path, name)
        self.buf = bytes([0xa5]) * 4096
        self.stop = threading.Event()
        self.log = []

    def run(self, count):
        """Up to @count writes, 8 KiB apart, until told to stop"""
        offset = 0
        for _ in range(count):
            if self.stop.is_set():
                break
            t = time.monotonic()
            self.write(offset, self.buf)
            end = time.monotonic()
            self.log.append((end, end - t))
            offset = (offset + 8192) % (self.size - 4096)


def measure_pace(workdir, ports, size, opts):
    """
    The guest's write latency at QD1 (4 KiB, over NBD into the primary)
    with the pair in sync, then while a full resync (drbd-invalidate) with
    @opts runs (only the writes that ended before it); then the rate of a
    full resync with the guest idle
    """
    pair = Pair(workdir, ports, size, opts, export=True)
    writes = args.pace_writes
    guest = None
    try:
        a, b = pair.a, pair.b
        guest = NbdGuest(pair.nbd_sock, 'a')
        guest.run(writes)
        quiet = statistics.mean(lat for _, lat in guest.log) * 1e6

        b.cmd('drbd-invalidate', node_name='b')
        deadline = time.monotonic() + 30
        while a.drbd()['connection'] != 'sync-source':
            if time.monotonic() > deadline:
                raise RuntimeError('no resync 30 s after drbd-invalidate')
            time.sleep(0.005)
        guest.log = []
        err = []

        def writer():
            try:
                guest.run(writes)
            except (RuntimeError, OSError) as e:
                err.append(e)

        th = threading.Thread(target=writer)
        th.start()
        # The last look that saw the resync running
        seen = time.monotonic()
        info = a.drbd()
        while th.is_alive():
            now = time.monotonic()
            i = a.drbd()
            if i['connection'] != 'sync-source':
                guest.stop.set()
                break
            seen, info = now, i
            time.sleep(0.01)
        th.join()
        if err:
            raise RuntimeError(f'the guest failed: {err[0]}')
        during = [lat for end, lat in guest.log if end <= seen]
        resynced = info['resync']['done'] / info['resync']['total']
        pair.wait_in_sync(wait_timeout(size))
    finally:
        if guest:
            guest.close()
        pair.stop()
        pair.remove_images()
    idle = measure_resync(workdir, ports, size, opts)
    if not during:
        log('    the resync ended before a write did')
    return {'rate': idle['sync_rate'], 'quiet': quiet,
            'busy': statistics.mean(during) * 1e6 if during else None,
            'writes': len(during), 'busy_done': resynced}


def pace_run(workdir, ports, size):
    out = {}
    for name, opts in (('off', {}), ('ctl', args.pace_ctl)):
        try:
            out[name] = r = measure_pace(workdir, ports, size, opts)
        except (RuntimeError, QMPError, EOFError, OSError) as e:
            log(f'  {name}: FAILED: {e}')
            out[name] = None
            continue
        log(f'  {name:4} QD1 write latency {r["quiet"]:7.1f} us without '
            f'a resync, {fmt(r["busy"], "7.1f")} us during it '
            f'({r["writes"]} writes; {r["busy_done"]:.1%} resynced by '
            f'their end); a resync with the guest idle: '
            f'{r["rate"]:7.1f} MiB/s')
    return out


def pace_report(label, size, runs):
    n = len(runs)
    quiet = statistics.median([r[m]['quiet'] for r in runs for m in r
                               if r[m] is not None] or [0]) or None
    print(f'pace: resync of {label} ({size} bytes), median of {n} run(s); '
          f'guest: {args.pace_writes} writes '
          '(QD1 4 KiB writes over NBD, those that ended while the resync '
          'ran); controller: ' +
          ','.join(f'{k}={v}' for k, v in args.pace_ctl.items()))
    print('| measure | value | ratio | ok runs |')
    print('| --- | --- | --- | --- |')
    print(f'| QD1 4k write latency, no resync | {fmt(quiet, ".1f")} us | 1 '
          f'| {n}/{n} |')
    for m, name in (('off', 'controller off (resync-rate 0)'),
                    ('ctl', 'controller on')):
        ok = sum(1 for r in runs if r[m] is not None and
                 r[m]['busy'] is not None)
        busy = statistics.median([r[m]['busy'] for r in runs
                                  if r[m] is not None and
                                  r[m]['busy'] is not None] or [0]) or None
        print(f'| QD1 4k write latency during a resync, {name} | '
              f'{fmt(busy, ".1f")} us | {fmt(ratio(busy, quiet), ".2f")} x '
              f'no resync | {ok}/{n} |')
    off, ctl = med(runs, 'off', 'rate'), med(runs, 'ctl', 'rate')
    ok = {m: sum(1 for r in runs if r[m] is not None) for m in runs[0]}
    print(f'| resync rate, guest idle, controller off | {fmt(off, ".1f")} '
          f'MiB/s | 1 | {ok["off"]}/{n} |')
    print(f'| resync rate, guest idle, controller on | {fmt(ctl, ".1f")} '
          f'MiB/s | {fmt(ratio(ctl, off), ".2f")} x controller off | '
          f'{ok["ctl"]}/{n} |')
    print()


def measure_verify(workdir, ports, size):
    pair = Pair(workdir, ports, size, {'verify-alg': 'crc32c'}, warm=True)
    try:
        a = pair.a
        w = Watch(pair, resync=False)
        t0 = time.time()
        a.cmd('drbd-verify', node_name='a')
        deadline = time.monotonic() + wait_timeout(size)
        while w.verify_ev is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f'verify not finished after '
                                   f'{wait_timeout(size):.0f} s')
            w.pump(0.5)
        ev = w.verify_ev['data']
        if ev.get('error') or ev['done'] != size:
            raise RuntimeError(f'verify stopped: {ev}')
        res = {'rate': size / MiB / (ev_time(w.verify_ev) - t0),
               'oos': ev['out-of-sync'], 'losses': w.losses(),
               'reasons': w.reasons}
        pair.stop()
        for name, img in zip('ab', pair.imgs):
            secs = img_bench(['-c', str(size // MiB), '-s', '1M', '-d', '8',
                              '-f', 'raw', img])
            res['read_' + name] = size / MiB / secs
        return res
    finally:
        pair.stop()
        pair.remove_images()


# --- the run ----------------------------------------------------------------

def ping_opts():
    opts = {'ping-timeout': args.ping_timeout}
    if args.ping_interval is not None:
        opts['ping-interval'] = args.ping_interval
    return opts


PING_OPTS = ','.join(f'{k}={v}' for k, v in ping_opts().items())


def one_run(workdir, ports, size):
    """Every measure once; a failed one is None, and says why"""
    out = {}
    steps = [
        ('link', lambda: measure_link(workdir, ports, size)),
        ('link-sparse', lambda: measure_link(workdir, ports, size,
                                             fill=False)),
        ('resync', lambda: measure_resync(workdir, ports, size, {})),
        ('resync-new', lambda: measure_new_replica(workdir, ports, size)),
        ('resync-sparse', lambda: measure_resync(workdir, ports, size, {},
                                                 fill=False)),
        ('resync-ping', lambda: measure_resync(
            workdir, ports, size, ping_opts())),
        ('resync-csums', lambda: measure_resync(
            workdir, ports, size, {'csums-alg': 'crc32c'})),
        ('verify', lambda: measure_verify(workdir, ports, size)),
    ]
    for name, fn in steps:
        if args.only and name not in args.only.split(','):
            out[name] = None
            continue
        try:
            out[name] = fn()
        except (RuntimeError, QMPError, EOFError, OSError) as e:
            log(f'  {name}: FAILED: {e}')
            out[name] = None
            continue
        r = out[name]
        line = f'  {name:13} {r["rate"]:8.1f} MiB/s'
        if 'nr' in r:
            line += (f'  resync proper {r["sync_rate"]:7.1f} MiB/s after '
                     f'{r["reconnect"]:.2f} s reconnecting  nr/dirty '
                     f'{r["nr"]:.4f}  same-csum/dirty {r["same"]:.3f}  '
                     f'losses {r["losses"]}')
        if 'read_a' in r:
            line += (f'  read a {r["read_a"]:.1f} b {r["read_b"]:.1f} MiB/s'
                     f'  oos found {r["oos"]}  losses {r["losses"]}')
        log(line)
        for reason in r.get('reasons', []):
            log(f'    connection lost: {reason}')
    return out


def med(runs, step, key):
    vals = [r[step][key] for r in runs if r[step] is not None]
    return statistics.median(vals) if vals else None


def fmt(v, spec):
    return 'n/a' if v is None else format(v, spec)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def report(label, size, runs):
    n = len(runs)
    ok = {s: sum(1 for r in runs if r[s] is not None)
          for s in runs[0]}
    link = med(runs, 'link', 'rate')
    rs = med(runs, 'resync', 'rate')
    csums = med(runs, 'resync-csums', 'rate')
    ver = med(runs, 'verify', 'rate')
    read_a = med(runs, 'verify', 'read_a')
    read_b = med(runs, 'verify', 'read_b')
    slower = None if read_a is None or read_b is None else min(read_a,
                                                                 read_b)

    def losses(step):
        vals = [r[step]['losses'] for r in runs if r[step] is not None]
        return 'n/a' if not vals else f'{sum(vals)} ({"/".join(map(str, vals))})'

    print(f'size {label} ({size} bytes), median of {n} run(s); '
          'MiB/s from the command to the end')
    print('| measure | MiB/s | ratio | goal | nr / dirty | same-csum / dirty '
          '| resync proper MiB/s | reconnect s | losses (per run) | ok runs |')
    print('|' + ' --- |' * 10)

    def row(name, rate, rat, goal, step=None, ok_step=None):
        extra = ['', '', '', '', '']
        if step and step.startswith('resync'):
            extra = [fmt(med(runs, step, 'nr'), '.4f'),
                     fmt(med(runs, step, 'same'), '.3f'),
                     fmt(med(runs, step, 'sync_rate'), '.1f'),
                     fmt(med(runs, step, 'reconnect'), '.2f'),
                     losses(step)]
        elif step == 'verify':
            extra = ['', '', '', '', losses(step)]
        print(f'| {name} | {fmt(rate, ".1f")} | {rat} | {goal} | ' +
              ' | '.join(extra) + f' | {ok[ok_step or step]}/{n} |')

    row('link (qemu-img bench -w 1M QD8 over NBD/TCP)', link, '', '', 'link')
    def vs(step, base_step, base_name):
        """Ratio from the command, and of the resyncs proper"""
        a = ratio(med(runs, step, 'rate'), med(runs, base_step, 'rate'))
        key = 'rate' if base_step.startswith('link') else 'sync_rate'
        b = ratio(med(runs, step, 'sync_rate'), med(runs, base_step, key))
        return (f'{fmt(a, ".2f")} x {base_name} (resync proper: '
                f'{fmt(b, ".2f")})')

    rp = med(runs, 'resync-ping', 'rate')
    rsp = med(runs, 'resync-sparse', 'rate')
    row('resync (bitmap, drbd-invalidate)', rs,
        vs('resync', 'link', 'link'), 'nr/dirty <= 1.01', 'resync')
    row('link into a sparse file', med(runs, 'link-sparse', 'rate'), '',
        '', 'link-sparse')
    row('resync onto a new replica (target a hole, b restarted)',
        med(runs, 'resync-new', 'rate'),
        vs('resync-new', 'link-sparse', 'link into a sparse file'),
        '>= 0.95 x', 'resync-new')
    row('resync, images as created (data area a hole)', rsp,
        vs('resync-sparse', 'link', 'link'), '', 'resync-sparse')
    row(f'resync, {PING_OPTS}', rp,
        vs('resync-ping', 'link', 'link'), 'no losses', 'resync-ping')
    row('resync, csums-alg=crc32c, equal data', csums,
        vs('resync-csums', 'resync', 'resync'), '>= 3 x resync',
        'resync-csums')
    row('verify (verify-alg=crc32c)', ver,
        f'{fmt(ratio(ver, slower), ".2f")} x slower read', '>= 0.9',
        'verify')
    row('local read, node a image (qemu-img bench 1M QD8)', read_a, '', '',
        ok_step='verify')
    row('local read, node b image (qemu-img bench 1M QD8)', read_b, '', '',
        ok_step='verify')
    print()


def main():
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *a: sys.exit(129))
    if not os.path.isdir('/dev/shm'):
        sys.exit('/dev/shm is needed (tmpfs)')
    for prog in (QSD, QEMU_IMG):
        if not os.access(prog, os.X_OK):
            sys.exit(f'{prog} is not there or not executable (a build '
                     'running?)')
    ports = Ports(args.port)
    results = []
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix='drbd-resync-bench-',
                                     dir='/dev/shm') as workdir:
        try:
            sizes = args.sizes
            run = one_run
            if args.pace:
                sizes = [(f'{args.pace_size // MiB}M', args.pace_size)]
                run = pace_run
            for label, size in sizes:
                runs = []
                for i in range(args.runs):
                    t = time.monotonic()
                    log(f'size {label}, run {i + 1}/{args.runs}:')
                    runs.append(run(workdir, ports, size))
                    log(f'  ({time.monotonic() - t:.0f} s)')
                results.append((label, size, runs))
        finally:
            # whatever went wrong, no daemon outlives the images
            for d in list(LIVE):
                d.kill()
    log(f'total {time.monotonic() - t_start:.0f} s')
    print()
    for label, size, runs in results:
        (pace_report if args.pace else report)(label, size, runs)
    print('reproduce: ' + shlex.join(['python3'] + sys.argv))


if __name__ == '__main__':
    main()
