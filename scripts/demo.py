#!/usr/bin/env python3
#
# The main job: a replicated pair on loopback.
#
# A qemu-storage-daemon holds the secondary; a second one holds the primary
# and exports it over NBD.  Writes go through the primary, both nodes show
# their status, and qemu-img compare proves the replica identical.
#
# usage: demo.py BUILDDIR
#
# SPDX-License-Identifier: GPL-2.0-or-later

import os
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
sys.path.insert(0, os.path.join(BUILD, '..', 'qemu-src', 'python'))

from qemu.qmp.legacy import QEMUMonitorProtocol  # noqa: E402

QSD = os.path.join(BUILD, 'storage-daemon', 'qemu-storage-daemon')
QEMU_IMG = os.path.join(BUILD, 'qemu-img')
QEMU_IO = os.path.join(BUILD, 'qemu-io')
PORT = int(os.environ.get('DRBD_DEMO_PORT', '7789'))
SIZE = '64M'


def show(cmd):
    print('$ ' + ' '.join(cmd).replace(BUILD + '/', ''), flush=True)
    subprocess.run(cmd, check=True)


# DRBD's spelling of the QAPI states, as in block/drbd/proc.c
PROC_NAMES = {
    'standalone': 'StandAlone', 'wf-connection': 'WFConnection',
    'wf-report-params': 'WFReportParams', 'connected': 'Connected',
    'sync-source': 'SyncSource', 'sync-target': 'SyncTarget',
    'ahead': 'Ahead', 'behind': 'Behind',
    'primary': 'Primary', 'secondary': 'Secondary', 'unknown': 'Unknown',
    'diskless': 'Diskless', 'attaching': 'Attaching', 'failed': 'Failed',
    'inconsistent': 'Inconsistent', 'outdated': 'Outdated',
    'dunknown': 'DUnknown', 'consistent': 'Consistent',
    'up-to-date': 'UpToDate',
}


class Node:
    """One qemu-storage-daemon holding one drbd node"""

    def __init__(self, name, workdir, drbd_opts, extra=()):
        self.name = name
        self.img = os.path.join(workdir, name + '.img')
        sock = os.path.join(workdir, name + '-qmp.sock')
        subprocess.run([QEMU_IMG, 'create', '-q', '-f', 'drbd', self.img,
                        SIZE], check=True)
        self.qmp = QEMUMonitorProtocol(sock, server=True)
        args = [QSD,
                '--blockdev',
                f'driver=file,node-name={name}-file,filename={self.img}',
                '--blockdev',
                f'driver=drbd,node-name={name},file={name}-file,'
                + drbd_opts,
                '--chardev', f'socket,id=qmp,path={sock}',
                '--monitor', 'chardev=qmp'] + list(extra)
        print('$ ' + ' '.join(args).replace(BUILD + '/', '') + ' &',
              flush=True)
        self.proc = subprocess.Popen(args)
        try:
            self.qmp.accept(30)
        except Exception:
            self.proc.kill()
            sys.exit(f'{name}: qemu-storage-daemon did not start')

    def info(self):
        return self.qmp.cmd('query-drbd')[0]

    def wait(self, what, pred, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            info = self.info()
            if pred(info):
                return info
            time.sleep(0.1)
        sys.exit(f'{self.name}: gave up waiting for {what}: {self.info()}')

    def print_status(self):
        """As HMP "info drbd" shows a node: /proc/drbd's names, KiB"""
        i = self.info()
        c = dict(i['counters'])
        for k in ('ns', 'nr', 'dw', 'dr', 'oos'):
            c[k] //= 1024       # QMP counts bytes
        print(f"{i['node-name']}: resource {i['resource']}, "
              f"node-id {i['node-id']}")
        print(f" 0: cs:{PROC_NAMES.get(i['connection'])}"
              f" ro:{PROC_NAMES.get(i['role'])}/"
              f"{PROC_NAMES.get(i['peer-role'])}"
              f" ds:{PROC_NAMES.get(i['disk'])}/"
              f"{PROC_NAMES.get(i['peer-disk'])}"
              f" {i['protocol'].upper()} r-----")
        print('    ' + ' '.join(f'{k}:{c[k]}' for k in
                                ('ns', 'nr', 'dw', 'dr', 'al', 'bm', 'lo',
                                 'pe', 'ua', 'ap', 'ep'))
              + f" wo:f oos:{c['oos']}")
        u = i['uuids']
        print(f"    uuids: {u['current']}:{u['bitmap']}:"
              + ':'.join(u['history']))

    def stop(self):
        try:
            self.qmp.cmd('quit')
            self.proc.wait(30)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        try:
            self.qmp.close()
        except EOFError:
            pass    # the daemon closed the monitor as it quit


def main():
    with tempfile.TemporaryDirectory(prefix='drbd-demo-') as workdir:
        nbd = os.path.join(workdir, 'primary-nbd.sock')
        addr = f'type=inet,host=127.0.0.1,port={PORT}'
        opts = 'resource=r0,protocol=c,'

        print('== start the secondary (the standalone target) and the '
              'primary')
        secondary = Node('secondary', workdir,
                         opts + 'node-id=1,peer-node-id=0,role=secondary,'
                         + ','.join('listen.' + kv for kv in
                                    addr.split(',')))
        primary = Node('primary', workdir,
                       opts + 'node-id=0,peer-node-id=1,role=primary,'
                       + ','.join('peer.' + kv for kv in addr.split(',')),
                       ['--nbd-server', f'addr.type=unix,addr.path={nbd}',
                        '--export', 'type=nbd,id=e0,node-name=primary,'
                        'writable=on'])
        try:
            primary.wait('the connection',
                         lambda i: i['connection'] == 'connected')

            print('== write through the primary')
            show([QEMU_IO, '-f', 'raw',
                  '-c', 'write -P 0xa5 0 4M',
                  '-c', 'write -P 0x5a 16M 1M',
                  '-c', 'write -z 32M 2M',
                  '-c', 'write -P 0x33 -f 60M 64k',
                  '-c', 'flush',
                  f'nbd+unix:///primary?socket={nbd}'])

            print('== status of both nodes')
            primary.print_status()
            secondary.print_status()
        finally:
            primary.stop()
            secondary.stop()

        print('== the replica is identical')
        show([QEMU_IMG, 'compare', '-f', 'drbd', '-F', 'drbd', primary.img,
              secondary.img])


if __name__ == '__main__':
    main()
