#!/usr/bin/env python3
#
# Write latency and throughput of drbd against the alternatives, in one run.
#
# Every configuration is driven the same way: `qemu-img bench -w` in the
# client writes over NBD (a unix socket) into a first qemu-storage-daemon;
# what that daemon does with the write is what differs:
#
#   local        no daemon: qemu-img bench on a null-co node itself
#   nbd-hop      the first daemon writes to null-co
#   nbd-forward  the first daemon forwards over NBD (TCP) to a second
#                daemon, which writes to null-co
#   mirror-wb    the first daemon writes to null-co under a
#                blockdev-mirror job with copy-mode=write-blocking whose
#                target is an NBD export (TCP) of a second daemon
#   drbd-A/B/C   the first daemon is a drbd primary over null-co, its
#                peer (TCP) a drbd secondary over null-co in the second
#   drbd-C-io    drbd-C with both drbd nodes (and the front's NBD
#                export) in an iothread of their daemon
#   nbd-forward-tls  nbd-forward over TLS (tls-creds-psk)
#   drbd-C-tls   drbd-C over TLS (tls-creds-psk, both channels)
#   drbd-C-auth  drbd-C whose peers prove a shared secret (HMAC) when
#                they connect
#   drbd-C-crc32c  drbd-C with data-integrity-alg=crc32c
#   drbd-C-diskless  drbd-C whose primary is detached from its disk
#                (drbd-detach) before the runs: every write and read
#                goes to the peer only, as after a disk failure
#   drbd-C-remote, drbd-C-rr, drbd-C-least  drbd-C with read-balancing
#                prefer-remote, round-robin and least-pending
#   drbd-C-3node  drbd-C with two secondaries (peers, a full mesh of three
#                daemons): a write completes when both have it
#   drbd-C-target  the first daemon's drbd node is the target of a
#                resync that crawls (drbd-invalidate, resync-rate 4 KiB/s),
#                promoted while it runs: it lacks every block still, and
#                reads them from its peer
#
# --read measures reads instead of writes (qemu-img bench without -w):
# a drbd primary reads its local disk, a diskless one its peer's
# (DATA_REQUEST), NBD forwarding the second daemon's.
#
# null-co disks make the engines, not the disks, the thing measured.  The
# machines this runs on are noisy: all configurations are up at once, the
# runs go round-robin over them, each number is the median of --repeat
# runs, and the table shows ratios to nbd-forward and mirror-wb measured in
# the same run, and a second table compares the secured configurations
# with their plaintext ones (TLS to plaintext) and drbd over TLS with NBD
# forwarding over TLS.  It also shows the CPU time all processes of a
# configuration (the client included) spent per write: on a machine with
# few cores, throughput at a high queue depth is bounded by it.
#
# --disk-latency-ns gives every null-co disk a latency, as a real disk
# has: then what the engine does in parallel (a drbd primary writes
# locally and to the peer at once; mirror's write-blocking mode writes to
# the source, then to the target) shows.  null-co's latency is a timer, and
# a timer of the main loop fires late when the loop has nothing else to do:
# glib polls with a timeout in milliseconds, so an idle daemon's "100 us"
# disk takes up to 1 ms, a busy one's less.  That penalizes whichever
# daemon waits most (a protocol A secondary applies its writes in about
# 1.1 ms there, while its busier primary's take 0.4 ms).  A real disk
# completes through a file descriptor and has no such granularity; with
# --iothreads every daemon runs its nodes in an iothread, whose timers
# fire to the microsecond, and the latency series then compares engines
# on equal disks.
#
# --disk-dir DIR puts a real disk under the first daemon: its disk (the
# drbd primary's, nbd-hop's) is a raw file of 256 MiB in DIR, written full
# beforehand, opened with O_DIRECT (cache.direct=on, aio=native); the
# second daemon's disk (the drbd secondary's, NBD forwarding's target) a
# file on tmpfs.  The drbd nodes then have internal metadata (the images
# are `qemu-img create -f drbd`), and drbd-C-nomd is drbd-C with
# meta-disk=none; the kinds default to nbd-hop (the file alone behind the
# same NBD hop), nbd-forward (forwarding to the tmpfs peer), drbd-C and
# drbd-C-nomd, and a table gives each drbd kind against the slower of
# nbd-hop and nbd-forward.  DRBD's promise is a throughput overhead under
# 3% of min(disk, network).
#
# usage: drbd-bench.py BUILDDIR [--repeat N] [--quick] [--disk-latency-ns N]
#                      [--iothreads] [--kinds K1,K2,...] [--read]
#                      [--disk-dir DIR]
#
# SPDX-License-Identifier: GPL-2.0-or-later

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument('build')
parser.add_argument('--repeat', type=int, default=5)
parser.add_argument('--quick', action='store_true',
                    help='fewer requests per run, for a smoke test')
parser.add_argument('--port', type=int, default=17900)
parser.add_argument('--disk-latency-ns', type=int, default=0,
                    help='latency of every null-co disk')
parser.add_argument('--iothreads', action='store_true',
                    help='run the nodes of every daemon in an iothread')
parser.add_argument('--kinds', help='comma-separated subset of: ' +
                    'local,nbd-hop,nbd-forward,mirror-wb,drbd-A,drbd-B,'
                    'drbd-C,drbd-C-io,nbd-forward-tls,drbd-C-tls,'
                    'drbd-C-auth,drbd-C-crc32c,drbd-C-diskless,'
                    'drbd-C-remote,drbd-C-rr,drbd-C-least,drbd-C-target,'
                    'drbd-C-3node (ratios need nbd-forward)')
parser.add_argument('--read', action='store_true',
                    help='measure reads instead of writes')
parser.add_argument('--tls-priority',
                    default='NORMAL:-CHACHA20-POLY1305:+CHACHA20-POLY1305',
                    help='the GnuTLS priority string of the TLS kinds\' '
                    'credentials (both ends; default: qemu-drbdadm\'s, '
                    'NORMAL with ChaCha20 last; "qemu": QEMU\'s own, NORMAL)')
parser.add_argument('--disk-dir',
                    help='a directory on a real disk: the first daemon\'s '
                    'disk is a file there, opened with O_DIRECT')
args = parser.parse_args()

BUILD = os.path.abspath(args.build)
sys.path.insert(0, os.path.join(BUILD, '..', 'qemu-src', 'python'))
from qemu.qmp.legacy import QEMUMonitorProtocol  # noqa: E402

QSD = os.path.join(BUILD, 'storage-daemon', 'qemu-storage-daemon')
QEMU_IMG = os.path.join(BUILD, 'qemu-img')
SIZE = str(256 * 1024 * 1024)

# name, request size, queue depth, requests per run
WORKLOADS = [
    ('4k-qd1', '4k', 1, 20000),
    ('4k-qd32', '4k', 32, 100000),
    ('64k-qd32', '64k', 32, 20000),
]
if args.quick:
    WORKLOADS = [(n, s, d, c // 20) for n, s, d, c in WORKLOADS]


class Daemon:
    def __init__(self, workdir, name, argv):
        sock = os.path.join(workdir, name + '-qmp.sock')
        self.qmp = QEMUMonitorProtocol(sock, server=True)
        self.proc = subprocess.Popen(
            [QSD, '--chardev', f'socket,id=qmp,path={sock}',
             '--monitor', 'chardev=qmp'] + argv)
        try:
            self.qmp.accept(30)
        except Exception:
            self.proc.kill()
            raise

    def cmd(self, name, **kwargs):
        return self.qmp.cmd(name, **{k.replace('_', '-'): v
                                   for k, v in kwargs.items()})

    def stop(self):
        try:
            self.cmd('quit')
            self.proc.wait(30)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        try:
            self.qmp.close()
        except EOFError:
            pass


def null(name):
    latency = (f',latency-ns={args.disk_latency_ns}'
               if args.disk_latency_ns else '')
    return f'driver=null-co,node-name={name},size={SIZE}{latency}'


def disk(name, workdir, side, fmt='raw'):
    """
    The disk of the daemon on @side ('front' or 'back'): null-co, or with
    --disk-dir a file, of format @fmt (raw, or drbd for internal
    metadata), written full: front's in DIR with O_DIRECT, back's on tmpfs
    """
    if not args.disk_dir:
        return null(name)
    where = args.disk_dir if side == 'front' else '/dev/shm'
    path = os.path.join(where, f'drbd-bench-{os.getpid()}-'
                        f'{os.path.basename(workdir)}-{name}.img')
    FILES.append(path)
    subprocess.run([QEMU_IMG, 'create', '-q', '-f', fmt, path, SIZE],
                   check=True)
    # The data area (offset 0 in both formats) allocated and written
    subprocess.run([QEMU_IMG, 'bench', '-w', '-q', '-s', '1M', '-d', '8',
                    '-c', str(int(SIZE) >> 20), '--pattern', '0x5a',
                    '-f', 'raw', path], check=True,
                   stdout=subprocess.DEVNULL)
    direct = ',cache.direct=on,aio=native' if side == 'front' else ''
    return f'driver=file,node-name={name},filename={path}{direct}'


FILES = []      # the files of --disk-dir, removed at the end


def cpu_seconds(pid):
    """User and system CPU time of a running process, in seconds"""
    with open(f'/proc/{pid}/stat', encoding='ascii') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


class Setup:
    """Bring a configuration up; the client writes to self.target"""

    def __init__(self, kind, workdir, port):
        self.daemons = []
        self.kind = kind
        workdir = os.path.join(workdir, kind)
        os.mkdir(workdir)
        try:
            self.setup(kind, workdir, port)
        except BaseException:
            self.stop()
            raise

    def setup(self, kind, workdir, port):
        sock = os.path.join(workdir, 'front.sock')
        tcp = f'type=inet,host=127.0.0.1,port={port}'
        iothread = args.iothreads or kind.endswith('-io')
        io_obj = ['--object', 'iothread,id=io0'] if iothread else []
        io_opt = ',iothread=io0' if iothread else ''
        front_export = io_obj + [
            '--nbd-server', f'addr.type=unix,addr.path={sock}',
            '--export', 'type=nbd,id=e0,node-name=front,writable=on' + io_opt]
        self.target = ['-f', 'raw', f'nbd+unix:///front?socket={sock}']
        # TLS with a pre-shared key: one keys.psk for both ends, whose
        # client has QEMU's default username, "qemu"
        psk_dir = os.path.join(workdir, 'psk')
        os.mkdir(psk_dir)
        with open(os.path.join(psk_dir, 'keys.psk'), 'w',
                  encoding='ascii') as f:
            f.write('qemu:' + os.urandom(32).hex() + '\n')
        prio = (f',priority={args.tls_priority}'
                if args.tls_priority != 'qemu' else '')
        tls_server = ['--object', 'tls-creds-psk,id=tls0,endpoint=server,'
                      f'dir={psk_dir}{prio}']
        tls_client = ['--object', 'tls-creds-psk,id=tls0,endpoint=client,'
                      f'dir={psk_dir}{prio}']

        if kind == 'local':
            self.target = ['--image-opts', null('front')]
        elif kind == 'nbd-hop':
            self.start(workdir, 'front',
                       ['--blockdev', disk('front', workdir, 'front')] +
                       front_export)
        elif kind in ('nbd-forward', 'nbd-forward-tls'):
            tls = kind.endswith('-tls')
            self.start(workdir, 'back', io_obj + (tls_server if tls else [])
                       + [
                '--blockdev', disk('back', workdir, 'back'),
                '--nbd-server', 'addr.' + tcp.replace(',', ',addr.') +
                (',tls-creds=tls0' if tls else ''),
                '--export', 'type=nbd,id=e1,node-name=back,writable=on'
                + io_opt])
            self.start(workdir, 'front', (tls_client if tls else []) + [
                '--blockdev', 'driver=nbd,node-name=front,export=back,'
                'server.' + tcp.replace(',', ',server.') +
                (',tls-creds=tls0' if tls else '')] + front_export)
        elif kind == 'mirror-wb':
            self.start(workdir, 'back', io_obj + [
                '--blockdev', null('back'),
                '--nbd-server', 'addr.' + tcp.replace(',', ',addr.'),
                '--export', 'type=nbd,id=e1,node-name=back,writable=on'
                + io_opt])
            front = self.start(workdir, 'front', [
                '--blockdev', null('front'),
                '--blockdev', 'driver=nbd,node-name=tgt,export=back,'
                'server.' + tcp.replace(',', ',server.')] + front_export)
            front.cmd('blockdev-mirror', job_id='m0', device='front',
                      target='tgt', sync='full',
                      copy_mode='write-blocking')
            self.wait_ready(front)
        elif kind == 'drbd-C-3node':
            self.setup_three(workdir, port, io_obj, front_export)
        elif kind.startswith('drbd-'):
            proto = kind[5].lower()
            # With a real disk, internal metadata but for drbd-C-nomd
            internal = args.disk_dir and not kind.endswith('-nomd')
            fmt = 'drbd' if internal else 'raw'
            common = (f'driver=drbd,resource=bench,protocol={proto},' +
                      ('' if internal else 'meta-disk=none,'))
            back_objs, front_objs = [], []
            if kind.endswith('-tls'):
                common += 'tls-creds=tls0,'
                back_objs, front_objs = tls_server, tls_client
            elif kind.endswith('-auth'):
                common += 'secret=key0,'
                back_objs = front_objs = [
                    '--object', 'secret,id=key0,data=' + os.urandom(16).hex()]
            elif kind.endswith('-crc32c'):
                common += 'data-integrity-alg=crc32c,'
            elif kind.endswith(('-remote', '-rr', '-least')):
                policy = {'remote': 'prefer-remote', 'rr': 'round-robin',
                          'least': 'least-pending'}[kind.rsplit('-', 1)[1]]
                common += f'read-balancing={policy},'
            target = kind.endswith('-target')
            back = self.start(workdir, 'back', io_obj + back_objs + [
                '--blockdev', disk('back-null', workdir, 'back', fmt),
                '--blockdev', common + 'node-name=back,file=back-null,'
                'node-id=1,role=secondary,'
                + ('resync-rate=4096,' if target else '')
                + 'listen.' + tcp.replace(',', ',listen.')])
            if iothread:
                back.cmd('x-blockdev-set-iothread', node_name='back',
                         iothread='io0')
            front = self.start(workdir, 'front', front_objs + [
                '--blockdev', disk('front-null', workdir, 'front', fmt),
                '--blockdev', common + 'node-name=front,file=front-null,'
                'node-id=0,wfc-timeout=10000,'
                + ('role=secondary,' if target else 'role=primary,')
                + 'peer.' + tcp.replace(',', ',peer.')] + front_export)
            info = front.cmd('query-drbd')[0]
            if info['connection'] != 'connected':
                raise RuntimeError(f'{kind}: not connected: {info}')
            if internal:
                # Two new images: the first (full) resync is over first
                self.wait_drbd(front, 'connected', oos=0)
            if target:
                front.cmd('drbd-invalidate', node_name='front')
                self.wait_drbd(front, 'sync-target')
                front.cmd('drbd-promote', node_name='front')
            if kind.endswith('-diskless'):
                front.cmd('drbd-detach', node_name='front')
                info = front.cmd('query-drbd')[0]
                if info['disk'] != 'diskless':
                    raise RuntimeError(f'{kind}: not detached: {info}')
        else:
            raise ValueError(kind)

    def setup_three(self, workdir, port, io_obj, front_export):
        """
        A primary (node 0) and two secondaries (1, 2), every pair
        connected on a port of its own: port, port + 100, port + 200
        (the other kinds take port + their index)
        """
        ports = {(0, 1): port, (0, 2): port + 100, (1, 2): port + 200}

        def addr(p):
            return {'type': 'inet', 'host': '127.0.0.1', 'port': str(p)}

        def node(nid, role, name):
            peers = []
            for other in range(3):
                if other == nid:
                    continue
                pair = (min(nid, other), max(nid, other))
                key = 'address' if nid < other else 'listen'
                peers.append({'node-id': other, key: addr(ports[pair])})
            opts = {'driver': 'drbd', 'resource': 'bench', 'protocol': 'c',
                    'meta-disk': 'none', 'node-name': name,
                    'file': name + '-null', 'node-id': nid, 'role': role,
                    'peers': peers}
            if nid == 0:
                opts['wfc-timeout'] = 10000
            return ['--blockdev', null(name + '-null'),
                    '--blockdev', json.dumps(opts)]

        for nid, name in ((2, 'back2'), (1, 'back')):
            d = self.start(workdir, name, io_obj + node(nid, 'secondary',
                                                        name))
            if io_obj:
                d.cmd('x-blockdev-set-iothread', node_name=name,
                      iothread='io0')
        front = self.start(workdir, 'front',
                           node(0, 'primary', 'front') + front_export)
        info = front.cmd('query-drbd')[0]
        if any(p['connection'] != 'connected' for p in info['peers']):
            raise RuntimeError(f'drbd-C-3node: not connected: {info}')

    def start(self, workdir, name, argv):
        d = Daemon(workdir, name, argv)
        self.daemons.append(d)
        return d

    @staticmethod
    def wait_drbd(d, connection, oos=None):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            info = d.cmd('query-drbd')[0]
            if info['connection'] == connection and (
                    oos is None or info['counters']['oos'] == oos):
                return
            time.sleep(0.05)
        raise RuntimeError(f'drbd node not {connection}')

    @staticmethod
    def wait_ready(d):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            jobs = d.cmd('query-block-jobs')
            if jobs and jobs[0]['ready']:
                return
            time.sleep(0.05)
        raise RuntimeError('mirror job did not get ready')

    def stop(self):
        for d in reversed(self.daemons):
            d.stop()


def children_cpu_seconds():
    """CPU time of the reaped children (the qemu-img runs), in seconds"""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def bench_once(setup, size, depth, count):
    """IOPS, and CPU microseconds per write of all processes involved"""
    pids = [d.proc.pid for d in setup.daemons]
    before = sum(cpu_seconds(p) for p in pids) + children_cpu_seconds()
    mode = [] if args.read else ['-w']
    out = subprocess.run([QEMU_IMG, 'bench'] + mode + ['-c', str(count),
                          '-d', str(depth), '-s', size] + setup.target,
                         check=True, capture_output=True, text=True).stdout
    cpu = sum(cpu_seconds(p) for p in pids) + children_cpu_seconds() - before
    m = re.search(r'Run completed in ([0-9.]+) seconds', out)
    if not m:
        raise RuntimeError('unexpected qemu-img bench output: ' + out)
    return count / float(m.group(1)), cpu * 1e6 / count


KINDS = ['local', 'nbd-hop', 'nbd-forward', 'mirror-wb',
         'drbd-A', 'drbd-B', 'drbd-C', 'drbd-C-io',
         'nbd-forward-tls', 'drbd-C-tls', 'drbd-C-auth', 'drbd-C-crc32c',
         'drbd-C-diskless', 'drbd-C-remote', 'drbd-C-rr', 'drbd-C-least',
         'drbd-C-target', 'drbd-C-3node', 'drbd-C-nomd']
if args.disk_dir:
    KINDS = ['nbd-hop', 'nbd-forward', 'drbd-C', 'drbd-C-nomd']
    if args.read or args.disk_latency_ns:
        parser.error('--disk-dir measures writes on a real disk: no --read '
                     'or --disk-latency-ns with it')
else:
    KINDS.remove('drbd-C-nomd')
if args.kinds:
    KINDS = [k for k in KINDS if k in args.kinds.split(',')]


def main():
    """
    All configurations are up at once and the runs go round-robin, so that
    a slow spell of the machine spreads over all of them instead of
    skewing the one that happened to run then.
    """
    runs = {}
    cpus = {}
    setups = []
    with tempfile.TemporaryDirectory(prefix='drbd-bench-') as workdir:
        try:
            for i, kind in enumerate(KINDS):
                setups.append(Setup(kind, workdir, args.port + i))
            for rep in range(args.repeat):
                for setup in setups:
                    for name, size, depth, count in WORKLOADS:
                        iops, cpu = bench_once(setup, size, depth, count)
                        runs.setdefault((setup.kind, name), []).append(iops)
                        cpus.setdefault((setup.kind, name), []).append(cpu)
                        print(f'run {rep + 1}: {setup.kind:12} {name:9} '
                              f'{iops:10.0f} IOPS {cpu:7.1f} us CPU/write',
                              file=sys.stderr, flush=True)
        finally:
            for setup in setups:
                setup.stop()
            for path in FILES:
                os.unlink(path)
    results = {k: statistics.median(v) for k, v in runs.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}

    print_security(results)
    print_real_disk(results)
    if 'drbd-C-3node' in KINDS and 'drbd-C' in KINDS:
        print('two secondaries against one: drbd-C-3node / drbd-C, IOPS')
        print('| ' + ' | '.join(w[0] for w in WORKLOADS) + ' |')
        print('|' + ' --- |' * len(WORKLOADS))
        print('| ' + ' | '.join(
            f'{results[("drbd-C-3node", w[0])] / results[("drbd-C", w[0])]:.2f}'
            for w in WORKLOADS) + ' |')
        print()
    if 'nbd-forward' not in KINDS:
        return
    # The ratios to the alternatives measured in this run
    refs = [r for r in ('nbd-forward', 'mirror-wb') if r in KINDS]
    what = 'read' if args.read else 'write'
    print(f'{what}s, disk latency {args.disk_latency_ns} ns, median of '
          f'{args.repeat} runs')
    print('| configuration | ' +
          ' | '.join(f'{w[0]} IOPS' for w in WORKLOADS) + ' | ' +
          ' | '.join(f'{w[0]} vs {r}' for r in refs for w in WORKLOADS) +
          ' | ' + ' | '.join(f'{w[0]} CPU us/{what}' for w in WORKLOADS) +
          ' |')
    print('|' + ' --- |' * (1 + (2 + len(refs)) * len(WORKLOADS)))
    for kind in KINDS:
        row = [f'{results[(kind, w[0])]:.0f}' for w in WORKLOADS]
        row += [f'{results[(kind, w[0])] / results[(r, w[0])]:.2f}'
                for r in refs for w in WORKLOADS]
        row += [f'{cpu[(kind, w[0])]:.1f}' for w in WORKLOADS]
        print(f'| {kind} | ' + ' | '.join(row) + ' |')


def print_real_disk(results):
    """With --disk-dir: drbd against the slower of its two paths alone"""
    if not args.disk_dir or not {'nbd-hop', 'nbd-forward'} <= set(KINDS):
        return
    print(f'real disk ({args.disk_dir}, O_DIRECT) under the primary, its '
          f'peer on tmpfs; median of {args.repeat} runs, IOPS ratios')
    print('| ratio | ' + ' | '.join(w[0] for w in WORKLOADS) + ' |')
    print('|' + ' --- |' * (1 + len(WORKLOADS)))
    for kind in ('nbd-forward', 'drbd-C', 'drbd-C-nomd'):
        if kind not in KINDS:
            continue
        row = [f'{results[(kind, w[0])] / results[("nbd-hop", w[0])]:.2f}'
               for w in WORKLOADS]
        print(f'| {kind} / nbd-hop (the file alone) | ' + ' | '.join(row) +
              ' |')
    for kind in ('drbd-C', 'drbd-C-nomd'):
        if kind not in KINDS:
            continue
        row = [f'{results[(kind, w[0])] / min(results[("nbd-hop", w[0])], results[("nbd-forward", w[0])]):.2f}'
               for w in WORKLOADS]
        print(f'| {kind} / the slower of the two | ' + ' | '.join(row) +
              ' |')
    print()


def print_security(results):
    """The secured configurations against their plaintext ones"""
    pairs = [('drbd-C-tls', 'drbd-C'), ('nbd-forward-tls', 'nbd-forward'),
             ('drbd-C-tls', 'nbd-forward-tls'), ('drbd-C-auth', 'drbd-C'),
             ('drbd-C-crc32c', 'drbd-C')]
    pairs = [(a, b) for a, b in pairs if a in KINDS and b in KINDS]
    if not pairs:
        return
    print(f'security: disk latency {args.disk_latency_ns} ns, median of '
          f'{args.repeat} runs, IOPS ratios')
    print('| ratio | ' + ' | '.join(w[0] for w in WORKLOADS) + ' |')
    print('|' + ' --- |' * (1 + len(WORKLOADS)))
    for a, b in pairs:
        row = [f'{results[(a, w[0])] / results[(b, w[0])]:.2f}'
               for w in WORKLOADS]
        print(f'| {a} / {b} | ' + ' | '.join(row) + ' |')
    print()


if __name__ == '__main__':
    main()
