# What the drbd iotests (tests/drbd-*) share: ports, daemon logs,
# qemu-storage-daemons started with their drbd nodes over QMP, waits with
# a deadline for a node's state or an event, replica comparison, a TCP
# proxy that cuts or freezes the link between two nodes, and main(),
# which runs a test's cases and records how each ended.
#
# The tests import it by name: ./check runs a test as a script, whose own
# directory is on sys.path.  It has no .out file, so ./check does not
# take it for a test.
#
# Copyright (c) 2026 The qemu-drbd authors
#
# SPDX-License-Identifier: GPL-2.0-or-later

import asyncio
import contextlib
import fcntl
import json
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import (Any, Callable, Dict, Iterator, List, Optional,
                    Sequence, Set, Tuple, TypeVar)

from qemu.qmp.legacy import QEMUMonitorProtocol

import iotests
from iotests import qemu_img, qemu_io

KiB = 1024
MiB = 1024 * KiB

T = TypeVar('T')
QMPEvent = Dict[str, Any]


# Ports

# Below the kernel's ephemeral ports (32768 and up), which outgoing
# connections take: a listener there could find its port in use
_port_base = 10000 + os.getpid() % 20000
_port_next = 0

# A port is this process's while it holds the lock on a file named after
# it, here: a port that is free now may be one that a node of another
# test, run at the same time, connects to (its peer restarting), and
# that node would then join this test's resource (same resource name,
# same node ids).  The locks go with the process.
_PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(),
                              f'drbd-iotests-ports-{os.getuid()}')
_port_locks: List[int] = []


def _reserve_port(port: int) -> bool:
    """Whether @port is now this process's, against other test processes"""
    os.makedirs(_PORT_LOCK_DIR, exist_ok=True)
    fd = os.open(os.path.join(_PORT_LOCK_DIR, str(port)),
                 os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _port_locks.append(fd)
    return True


def new_port() -> int:
    """A TCP port of 127.0.0.1 for this test alone: free when asked for,
    and given to no other test process while this one runs"""
    global _port_next  # pylint: disable=global-statement
    while True:
        _port_next += 1
        port = _port_base + _port_next
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(('127.0.0.1', port))
            except OSError:
                continue
        if not _reserve_port(port):
            continue
        return port


def trace_args() -> List[str]:
    """The options that trace the events of DRBD_TRACE (patterns separated
    by commas, e.g. 'drbd_*' or 'drbd_uuids_set,drbd_new_uuid') into a
    daemon's log"""
    args: List[str] = []
    for pattern in os.environ.get('DRBD_TRACE', '').split(','):
        if pattern:
            args += ['--trace', pattern]
    return args


# Logs of the daemons

def log_path(name: str) -> str:
    return os.path.join(iotests.test_dir, f'qsd-{name}.log')


def remove_logs(*names: str) -> None:
    """Start the logs of the daemons @names afresh (a test's first run)"""
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.remove(log_path(name))


def mark_logs(case_id: str, *names: str) -> None:
    """Begin the section of test case @case_id in the logs of @names"""
    for name in names:
        with open(log_path(name), 'a', encoding='utf-8') as f:
            f.write(f'=== {case_id}\n')


def log_section(path: str) -> str:
    """What was written to the log at @path since its last mark"""
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if '=== ' not in text:
        return text
    return text.rsplit('=== ', 1)[-1].split('\n', 1)[-1]


def log_tail(name: str, length: int = 2000) -> str:
    """The end of what the daemon @name logged since the last mark"""
    return log_section(log_path(name))[-length:]


@contextlib.contextmanager
def output_to(path: str) -> Iterator[None]:
    """Let child processes started in the block write to @path"""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    saved = (os.dup(1), os.dup(2))
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for f in (*saved, fd):
            os.close(f)


# Options and commands

def keyval(opts: str) -> Dict[str, Any]:
    """A dotted key=value,... option string as a QMP argument dict"""
    d: Dict[str, Any] = {}
    for item in opts.split(','):
        key, value = item.split('=', 1)
        v: Any = value
        if value in ('on', 'off'):
            v = value == 'on'
        elif value.isdigit() and not key.endswith('port'):
            v = int(value)
        *path, last = key.split('.')
        cur = d
        for p in path:
            cur = cur.setdefault(p, {})
        cur[last] = v
    return d


def pair_opts(name: str, port: int, peer_port: Optional[int] = None) -> str:
    """
    The drbd options that make node @name one of a pair: 'a' (node-id 0)
    connects to 127.0.0.1:@peer_port (by default @port, where 'b' is; a
    proxy's otherwise), 'b' (node-id 1) listens on @port
    """
    if name == 'a':
        return ('node-id=0,connect-interval=200,peer.type=inet,'
                f'peer.host=127.0.0.1,peer.port={peer_port or port}')
    return ('node-id=1,listen.type=inet,listen.host=127.0.0.1,'
            f'listen.port={port}')


def raw_nbd(path: str, export: str) -> Any:
    """
    A connection to NBD export @export at unix socket @path through the
    cluster test's minimal NBD client (tests/ha/nbdwriter.py: write(),
    read(), close()), which sends only the requests it is asked for:
    unlike qemu-io's, it sends no flush when it closes
    """
    ha = os.path.join(os.path.dirname(os.path.realpath(__file__)),
                      '..', '..', 'ha')
    if ha not in sys.path:
        sys.path.insert(0, ha)
    # pylint: disable=import-outside-toplevel,import-error
    from nbdwriter import Nbd
    return Nbd(path, export)


def io_args(*cmds: str) -> List[str]:
    """qemu-io's arguments for the commands @cmds"""
    return [arg for c in cmds for arg in ('-c', c)]


# qemu-storage-daemons

# The thread of each IOThread of a daemon, by daemon pid and IOThread id
iothread_tids: Dict[int, Dict[str, int]] = {}

_late_cmds = {'--blockdev': 'blockdev-add', '--nbd-server': 'nbd-server-start',
              '--export': 'block-export-add'}


def _is_late(opt: str, val: str) -> bool:
    """Whether the option is created over QMP: a drbd node (also as the
    child of another node), the NBD server, an export"""
    drbd = any(kv == 'driver=drbd' or kv.endswith('.driver=drbd')
               for kv in val.split(','))
    return (opt == '--blockdev' and drbd) or \
        opt in ('--nbd-server', '--export')


def _new_iothread(pid: int, new: Set[str]) -> str:
    """
    The thread of the IOThread just added to daemon @pid, among its
    threads @new that were not there before: a worker of the main loop's
    thread pool (file-posix's I/O at start-up) may have come meanwhile.
    An IOThread waits in its event loop's poll, a worker for work on a
    futex (syscall 202): wait until one alone is elsewhere than a futex.
    """
    def syscall(tid: str) -> str:
        try:
            with open(f'/proc/{pid}/task/{tid}/syscall',
                      encoding='ascii') as f:
                return f.read().split()[0]
        except (OSError, IndexError):
            return 'gone'

    if len(new) == 1:
        return next(iter(new))
    polling: List[str] = []

    def one() -> bool:
        polling[:] = [tid for tid in new if syscall(tid) not in
                      ('202', 'running', 'gone')]
        return len(polling) == 1

    wait_until(one, 5, lambda: f'one IOThread among threads {new}: '
               f'{ {tid: syscall(tid) for tid in new} }')
    return polling[0]


def start_qsd(name: str, *args: str, instance_id: Optional[str] = None,
              qmp_timeout: Optional[float] = None,
              prog: Optional[str] = None) \
        -> iotests.QemuStorageDaemon:
    """
    A qemu-storage-daemon @name (its QMP socket named after @instance_id,
    by default @name), with command line options @args, whose output
    goes to its log, log_path(@name), not to ours.

    Its drbd nodes, NBD server and exports are created over QMP once the
    monitor is up: a DRBD_STATE_CHANGE emitted while the client
    negotiates QMP capabilities can reach the client before the answer
    to qmp_capabilities, which the client does not accept.  Its
    IOThreads are created over QMP too, one by one, so that
    iothread_tids knows which thread is which (the daemon has no
    query-iothreads).

    With @qmp_timeout, a QMP command that gets no answer in that many
    seconds fails the test (a daemon whose main loop hangs) instead of
    hanging it.

    With @prog, that binary runs instead of the build's
    qemu-storage-daemon (another release's, drbd-upgrade).
    """
    early: List[str] = []
    iothreads: List[Dict[str, Any]] = []
    late: List[Tuple[str, str]] = []
    for opt, val in zip(args[::2], args[1::2]):
        if _is_late(opt, val):
            late.append((opt, val))
        elif opt == '--object' and val.startswith('iothread,'):
            iothreads.append(keyval(val.split(',', 1)[1]))
        else:
            early += [opt, val]
    saved_prog = iotests.qsd_prog
    with output_to(log_path(name)):
        try:
            iotests.qsd_prog = prog or saved_prog
            qsd = iotests.QemuStorageDaemon(*early, qmp=True,
                                            instance_id=instance_id or name)
        finally:
            iotests.qsd_prog = saved_prog
    if qmp_timeout is not None:
        qsd.get_qmp().settimeout(qmp_timeout)
    try:
        pid = daemon_pid(qsd)
        tids = iothread_tids[pid] = {}
        for props in iothreads:
            before = set(os.listdir(f'/proc/{pid}/task'))
            qsd.cmd('object-add', {'qom-type': 'iothread', **props})
            new = set(os.listdir(f'/proc/{pid}/task')) - before
            tids[props['id']] = int(_new_iothread(pid, new))
        for opt, val in late:
            args_ = keyval(val)
            if opt == '--nbd-server':
                # nbd-server-start takes a SocketAddressLegacy
                addr = args_['addr']
                args_['addr'] = {'type': addr.pop('type'), 'data': addr}
            qsd.cmd(_late_cmds[opt], args_)
    except Exception:
        qsd.stop(kill_signal=9)
        raise
    return qsd


def daemon_pid(qsd: iotests.QemuStorageDaemon) -> int:
    # pylint: disable=protected-access
    assert qsd._p is not None, 'the daemon was stopped'
    return qsd._p.pid


def daemon_exited(qsd: iotests.QemuStorageDaemon) -> Optional[int]:
    """The exit status of @qsd if it is gone, None while it runs"""
    # pylint: disable=protected-access
    assert qsd._p is not None, 'the daemon was stopped'
    return qsd._p.poll()


def stop_qsd(qsd: iotests.QemuStorageDaemon, timeout: float = 15,
             sig: int = signal.SIGTERM) -> int:
    """
    @sig (SIGTERM), and SIGKILL if the daemon does not exit in time (a
    failure); returns its exit status
    """
    # pylint: disable=protected-access
    p = qsd._p
    if p is None:
        return 0
    p.send_signal(sig)
    try:
        ret = p.wait(timeout)
    except subprocess.TimeoutExpired as e:
        stacks = thread_stacks(p.pid)
        qsd.stop(kill_signal=9)
        raise AssertionError(f'qemu-storage-daemon did not exit on signal '
                             f'{sig}; its threads:\n{stacks}') from e
    qsd.stop()
    return ret


def thread_stacks(pid: int) -> str:
    """The stacks of @pid's threads, for a process that hangs (gdb)"""
    try:
        res = subprocess.run(['gdb', '-p', str(pid), '-batch', '-nx',
                              '-ex', 'thread apply all bt 30'],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=60,
                             check=False, universal_newlines=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f'(no stacks: {e})'
    return '\n'.join(line for line in res.stdout.splitlines()
                     if line.startswith(('#', 'Thread')))


def alive(qsd: Optional[iotests.QemuStorageDaemon],
          name: str) -> iotests.QemuStorageDaemon:
    """@qsd, the daemon @name, which must still be running: if it exited,
    the failure says how, with the end of its log"""
    assert qsd is not None, f'{name} is not running'
    ret = daemon_exited(qsd)
    if ret is not None:
        tail = log_tail(name)
        raise AssertionError(f'{name} exited with {ret}: {tail}')
    return qsd


def thread_cpu(pid: int, tid: int) -> float:
    """Seconds thread @tid of process @pid spent on a CPU"""
    with contextlib.suppress(FileNotFoundError):
        with open(f'/proc/{pid}/task/{tid}/schedstat', encoding='ascii') as f:
            return int(f.read().split()[0]) / 1e9
    with open(f'/proc/{pid}/task/{tid}/stat', encoding='ascii') as f:
        fields = f.read().rsplit(')', 1)[1].split()
    # utime and stime, the 14th and 15th fields (the 2nd is the name)
    return (int(fields[11]) + int(fields[12])) / \
        os.sysconf('SC_CLK_TCK')


def cpu_times(qsd: iotests.QemuStorageDaemon) -> Dict[str, float]:
    """The CPU seconds of @qsd's main thread ('main') and of each of its
    IOThreads, by id"""
    pid = daemon_pid(qsd)
    tids = {'main': pid, **iothread_tids[pid]}
    return {name: thread_cpu(pid, tid) for name, tid in tids.items()}


# VMs

class _QMPConnection(QEMUMonitorProtocol):
    """
    A QMP client whose capabilities negotiation is an ordinary command,
    so that an event that comes before its answer is kept as an event.

    QEMU may send one first: qmp_capabilities switches the monitor to
    the full command set, and the dispatcher yields before it answers,
    so that an event emitted meanwhile (a drbd node connecting at
    startup) goes out before the answer, which the library's own
    negotiation takes as a failure.
    """

    def connect(self, negotiate: bool = True) -> Optional[Dict[str, Any]]:
        self._qmp.await_greeting = True
        self._qmp.negotiate = False
        self._sync(self._qmp.connect(self._address))
        if negotiate:
            self.cmd('qmp_capabilities')
        return self._get_greeting()


class VM(iotests.VM):
    """
    iotests' VM, whose QMP client does not fail the launch when an event
    comes before the answer to qmp_capabilities (see _QMPConnection): a
    drbd node given on the command line emits its first state changes
    while the client negotiates
    """

    def _pre_launch(self) -> None:
        super()._pre_launch()
        if self._sock_pair is not None:
            self._qmp_connection = _QMPConnection(self._sock_pair[1],
                                                  nickname=self._name)


# The state of a drbd node

def drbd_info(mon: Any, name: str) -> Dict[str, Any]:
    """What query-drbd on @mon (a daemon or a VM) says of node @name"""
    for info in mon.cmd('query-drbd'):
        if info['node-name'] == name:
            return info
    raise AssertionError(f'query-drbd does not list {name}')


def state_is(info: Dict[str, Any], want: Dict[str, Any]) -> bool:
    """Whether the members (or counters) of @info are as in @want: a
    value, or a predicate on it"""
    def ok(k: str, v: Any) -> bool:
        got = info['counters'][k] if k in info['counters'] \
            else info.get(k)
        return bool(v(got)) if callable(v) else got == v

    return all(ok(k, v) for k, v in want.items())


def wait_until(cond: Callable[[], Optional[T]], timeout: float,
               what: Callable[[], str], interval: float = 0.05) -> T:
    """
    Poll @cond until it returns a true value, and return that; after
    @timeout seconds fail, saying what was waited for and what was last
    seen (@what)
    """
    deadline = time.monotonic() + timeout
    while True:
        ret = cond()
        if ret:
            return ret
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {timeout} s for {what()}')
        time.sleep(interval)


def wait_drbd(mon: Any, name: str, timeout: float = 20,
              **want: Any) -> Dict[str, Any]:
    """
    Poll query-drbd until @name's members (or counters) are as in @want
    (a value, or a predicate on it); '_' in a key stands for '-'
    """
    want = {k.replace('_', '-'): v for k, v in want.items()}
    last: List[Dict[str, Any]] = [{}]

    def done() -> Optional[Dict[str, Any]]:
        last[0] = drbd_info(mon, name)
        return last[0] if state_is(last[0], want) else None

    return wait_until(done, timeout,
                      lambda: f'{name} to be {want}; last state: {last[0]}')


def hold_still(seconds: float) -> None:
    """
    Let @seconds pass, in a test that shows that something does NOT
    happen (a node stays refused, a paused resync sends nothing): there is
    no event to wait for, only time in which it would have happened.  A
    sleep that waits for something to happen is a wait_until() instead.
    """
    time.sleep(seconds)


def read_file(path: str, offset: int, length: int) -> bytes:
    with open(path, 'rb') as f:
        f.seek(offset)
        return f.read(length)


def md_info(path: str) -> Dict[str, Any]:
    """What qemu-img info -f drbd says of an image's metadata"""
    out = qemu_img('info', '--output=json', '-U', '-f', 'drbd', path).stdout
    data: Dict[str, Any] = json.loads(out)['format-specific']['data']
    return data


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), as the metadata's checksums"""
    crc = 0xffffffff
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 & -(crc & 1))
    return crc ^ 0xffffffff


def set_slot_bitmap_uuid(path: str, peer_node_id: int, uuid: int) -> None:
    """In the internal metadata of the image @path (version 2, several
    slots), give the bitmap slot of peer @peer_node_id (a free one if
    none is its yet) the bitmap UUID @uuid, and the superblock its
    checksum again (docs/interop/drbd-metadata.rst)"""
    with open(path, 'r+b') as f:
        f.seek(0, os.SEEK_END)
        sb_offset = f.tell() - 4096
        f.seek(sb_offset)
        sb = bytearray(f.read(4096))
        assert sb[:4] == b'DRBM', f'{path}: no superblock at the end'
        max_peers = struct.unpack('>I', sb[112:116])[0]
        ids = [struct.unpack('>I', sb[120 + 16 * i:124 + 16 * i])[0]
               for i in range(max_peers)]
        slot = ids.index(peer_node_id) if peer_node_id in ids else \
            ids.index(0xffffffff)
        sb[120 + 16 * slot:124 + 16 * slot] = struct.pack('>I', peer_node_id)
        at = 80 if slot == 0 else 128 + 16 * slot
        sb[at:at + 8] = struct.pack('>Q', uuid)
        sb[8:12] = b'\0' * 4
        sb[8:12] = struct.pack('>I', crc32c(bytes(sb)))
        f.seek(sb_offset)
        f.write(sb)


def unflagged(uuid: str) -> int:
    """A generation UUID without its "primary" bit"""
    return int(uuid, 16) & ~1


def replicas_differ(a: str, b: str, fmt_a: str = 'drbd',
                    fmt_b: str = 'drbd') -> Optional[str]:
    """None if the images @a and @b hold the same data, else what
    qemu-img compare says of them (the first offset that differs)"""
    res = qemu_img('compare', '-f', fmt_a, '-F', fmt_b, a, b, check=False)
    if res.returncode == 0:
        return None
    return (res.stdout or '').strip() or f'exit {res.returncode}'


# Events

def event_is(ev: QMPEvent, event: str, **data: Any) -> bool:
    """Whether @ev is an @event whose data members are as in @data ('_'
    stands for '-')"""
    return ev['event'] == event and \
        all(ev['data'].get(k.replace('_', '-')) == v for k, v in data.items())


def pull_events(qmp: QEMUMonitorProtocol, into: List[QMPEvent]) -> int:
    """Add the events pending on @qmp to @into; return how many it has"""
    while True:
        ev = qmp.pull_event(wait=False)
        if ev is None:
            return len(into)
        into.append(ev)


def wait_event(qmp: Callable[[], QEMUMonitorProtocol],
               ok: Callable[[QMPEvent], bool], backlog: List[QMPEvent],
               timeout: float, what: str) -> QMPEvent:
    """
    The first event that @ok accepts, from @backlog (out of which it is
    taken) or the next ones the monitor @qmp() gets within @timeout
    seconds; the others are left in @backlog for later
    """
    for old in backlog:
        if ok(old):
            backlog.remove(old)
            return old
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            seen = [(e['event'], e['data']) for e in backlog]
            raise AssertionError(f'no {what} in {timeout} s; events seen: '
                                 f'{seen}')
        try:
            ev = qmp().pull_event(wait=float(left))
        except (asyncio.TimeoutError, TimeoutError):
            continue
        if ev is None:
            continue
        if ok(ev):
            return ev
        backlog.append(ev)


def wait_event_since(qmp: Callable[[], QEMUMonitorProtocol],
                     events: List[QMPEvent], since: int,
                     ok: Callable[[QMPEvent], bool], timeout: float,
                     what: str) -> int:
    """
    The index in @events, which keeps every event of the monitor @qmp()
    in order, of the first from the @since'th on that @ok accepts; waits
    @timeout seconds for it
    """
    def find() -> Optional[int]:
        pull_events(qmp(), events)
        for i in range(since, len(events)):
            if ok(events[i]):
                return i
        return None

    return wait_until(find, timeout, lambda: f'{what}; events: '
                      f'{[e["data"] for e in events[since:]]}')


# Wire

def recv_exact(sock: socket.socket, n: int) -> bytes:
    """@n bytes from @sock; EOFError if it closes first"""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError(f'connection closed after {len(buf)} of {n} '
                           'bytes')
        buf += chunk
    return bytes(buf)


def closed_by_peer(sock: socket.socket, timeout: float = 5) -> bool:
    """Whether the other side closes @sock within @timeout seconds"""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        sock.settimeout(left)
        try:
            if sock.recv(65536) == b'':
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


Pair = Tuple[socket.socket, socket.socket]


class Proxy:
    # pylint: disable=too-many-instance-attributes
    """
    A TCP proxy on 127.0.0.1 that forwards every connection made to it to
    @target_port, each in its own pair of sockets (the one accepted from
    the connecting node, the one to the target): a drbd connection is two
    TCP connections (data and meta), and a reconnection makes new ones.

    cut() closes every forwarded connection, both sides, and refuses new
    ones (accepts and closes them at once) until restore().  freeze()
    stops forwarding without closing anything, no FIN nor RST, as a peer
    that hangs would, until restore().

    With @rate (bytes per second), the proxy is a slow link: what goes
    to the target, over all its connections, passes at that rate.

    A subclass sees the bytes that pass in passing(), or forwards a
    direction its own way in start_pumps().
    """

    def __init__(self, target_port: int, rate: Optional[float] = None) -> None:
        self.target_port = target_port
        self.rate = rate
        self.link_free = 0.0    # when the slow link is free again
        self.lock = threading.Lock()
        self.pairs: List[Pair] = []
        self.refusing = False
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = False
        self.accepted = 0
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.port = new_port()
        self.listener.bind(('127.0.0.1', self.port))
        self.listener.listen(16)
        self.listener.settimeout(0.1)
        self.thread = threading.Thread(target=self.accept_loop, daemon=True)
        self.thread.start()

    def accept_loop(self) -> None:
        while not self.closed:
            try:
                down, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            with self.lock:
                refuse = self.refusing or self.closed
            if refuse:
                self.close_socket(down)
                continue
            try:
                up = socket.create_connection(('127.0.0.1', self.target_port),
                                              timeout=2)
            except OSError:
                self.close_socket(down)
                continue
            pair = (down, up)
            for s in pair:
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                if self.refusing or self.closed:
                    refuse = True
                else:
                    self.pairs.append(pair)
                    self.accepted += 1
            if refuse:
                self.drop(pair)
                continue
            self.start_pumps(pair)

    def start_pumps(self, pair: Pair) -> None:
        """Forward both directions of @pair, each in a thread"""
        for src, dst in (pair, pair[::-1]):
            threading.Thread(target=self.pump, args=(src, dst, pair),
                             daemon=True).start()

    def passing(self, pair: Pair, to_target: bool, data: bytes) -> None:
        """@data is forwarded on @pair, to the target or from it"""

    def pump(self, src: socket.socket, dst: socket.socket,
             pair: Pair) -> None:
        try:
            while True:
                self.flowing.wait()
                data = src.recv(65536)
                if not data:
                    break
                self.flowing.wait()
                self.passing(pair, src is pair[0], data)
                if self.rate and src is pair[0]:
                    self.throttle(len(data))
                dst.sendall(data)
        except OSError:
            pass
        finally:
            self.drop(pair)

    def throttle(self, n: int) -> None:
        """Wait until @n more bytes may pass the slow link"""
        assert self.rate
        with self.lock:
            now = time.monotonic()
            self.link_free = max(self.link_free, now) + n / self.rate
            until = self.link_free
        time.sleep(max(0.0, until - now))

    @staticmethod
    def close_socket(s: socket.socket) -> None:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()

    def drop(self, pair: Pair) -> None:
        with self.lock:
            if pair not in self.pairs:
                return
            self.pairs.remove(pair)
        for s in pair:
            self.close_socket(s)

    def cut(self) -> int:
        """Close all forwarded connections; refuse new ones"""
        with self.lock:
            self.refusing = True
            pairs = list(self.pairs)
        for pair in pairs:
            self.drop(pair)
        return len(pairs)

    def freeze(self) -> None:
        """Forward nothing more, close nothing"""
        self.flowing.clear()

    def restore(self) -> None:
        with self.lock:
            self.refusing = False
        self.flowing.set()

    def close(self) -> None:
        self.closed = True
        self.cut()
        self.flowing.set()
        self.listener.close()
        self.thread.join(5)


class Writer:
    # pylint: disable=too-many-instance-attributes
    """
    A guest: @clients qemu-io processes connected to the NBD export @uri
    (of a disk of @size bytes) for as long as the writer runs, each
    writing 4k to 64k with random patterns (from @seed) at random places
    of its own part of the disk, one write after the other, and a flush
    every 32 writes, until stopped.  No two writes in flight overlap, so
    that the order in which the primary and its peer apply them cannot
    make the replicas differ.  Each completed write goes to @record
    ('acked', offset, length, pattern); a failed one ends its client, and
    goes to @record as 'unknown'.

    The clients stay connected: QEMU's NBD server asserts (nbd/server.c,
    blk_aio_attached: client->recv_coroutine == NULL) when a client that
    connects while the exported node is drained for a move to another
    AioContext is still there when the move ends, with any block driver
    (a file node alone does it), so a writer that connects anew for every
    batch cannot be used while nodes are moved.

    With @interval, each client waits that many seconds after each
    write: a guest that writes at a bounded rate.
    """

    def __init__(self, uri: str, size: int, seed: int,
                 record: Optional[Callable[[str, int, int, int], None]] = None,
                 clients: int = 4, interval: float = 0.0) -> None:
        self.size = size
        self.record = record
        self.interval = interval
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.writes = 0
        self.errors: List[Tuple[float, str]] = []
        self.procs = [iotests.QemuIoInteractive('-f', 'raw', uri)
                      for _ in range(clients)]
        self.threads = [threading.Thread(target=self.run,
                                         args=(k, seed * 100 + k),
                                         daemon=True)
                        for k in range(clients)]
        for t in self.threads:
            t.start()

    def run(self, k: int, seed: int) -> None:
        rng = random.Random(seed)
        qio = self.procs[k]
        region = self.size // len(self.procs)
        n = 0
        while not self.stop_ev.is_set():
            length = rng.randint(1, 16) * 4096
            offset = k * region + rng.randrange(region // 65536) * 65536 + \
                rng.randint(0, 16 - length // 4096) * 4096
            pattern = rng.randint(1, 255)
            cmd = f'write -P {pattern:#x} {offset} {length}'
            expect = f'wrote {length}/{length} bytes'
            n += 1
            is_write = n % 32 != 0
            if not is_write:
                cmd, expect = 'flush', ''
            try:
                out = qio.cmd(cmd)
            except Exception as e:  # pylint: disable=broad-except
                out = f'qemu-io died: {e!r}'
                expect = 'qemu-io alive'
            if 'failed' in out or expect not in out:
                with self.lock:
                    self.errors.append((time.monotonic(),
                                        f'client {k}: {cmd}: {out[-1000:]}'))
                if is_write and self.record:
                    self.record('unknown', offset, length, pattern)
                return
            if is_write:
                if self.record:
                    self.record('acked', offset, length, pattern)
                with self.lock:
                    self.writes += 1
            if self.interval:
                self.stop_ev.wait(self.interval)

    def alive(self) -> bool:
        return all(t.is_alive() for t in self.threads)

    def error_texts(self) -> List[str]:
        with self.lock:
            return [e[1] for e in self.errors]

    def stop(self) -> None:
        self.stop_ev.set()
        deadline = time.monotonic() + 60
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        hung = any(t.is_alive() for t in self.threads)
        if hung:
            with self.lock:
                self.errors.append((time.monotonic(),
                                    'a write did not complete in 60 s'))
        for qio in self.procs:
            # pylint: disable=protected-access
            if hung:
                qio._p.kill()
                qio._p.communicate()
            else:
                with contextlib.suppress(Exception):
                    qio.close()


class NodeEvents:
    """
    wait_event() for a test case whose daemons are q(name), each with the
    drbd node node[name] and the events seen and not taken, backlog[name]
    """
    node: Dict[str, str]
    backlog: Dict[str, List[QMPEvent]]

    def q(self, name: str) -> iotests.QemuStorageDaemon:
        raise NotImplementedError

    def wait_event(self, name: str, timeout: float = 20,
                   event: str = 'DRBD_STATE_CHANGE',
                   **match: Any) -> Dict[str, Any]:
        """Wait for an @event of @name with data as in @match"""
        match['node_name'] = self.node[name]
        return wait_event(lambda: self.q(name).get_qmp(),
                          lambda ev: event_is(ev, event, **match),
                          self.backlog[name], timeout,
                          f'{event} {match} of node {name}')


class PairTestCase(NodeEvents, iotests.QMPTestCase):
    """
    A test case over a pair of qemu-storage-daemons that each export
    their drbd node over NBD: 'a' (node-id 0, drbd0) connects to 'b'
    (node-id 1, drbd1), which listens.  A subclass names their images
    (@images, made afresh with @size bytes for each case) and NBD
    sockets (@sockets).
    """
    size = 4 * MiB
    images: Dict[str, str] = {}
    sockets: Dict[str, str] = {}
    node = {'a': 'drbd0', 'b': 'drbd1'}
    qsd: Dict[str, Optional[iotests.QemuStorageDaemon]]
    backlog: Dict[str, List[QMPEvent]]

    def setUp(self) -> None:
        for f in self.images.values():
            qemu_img('create', '-f', 'drbd', f, str(self.size))
        self.port = new_port()
        self.qsd = {'a': None, 'b': None}
        self.backlog = {'a': [], 'b': []}
        mark_logs(self.id(), *self.images)

    def tearDown(self) -> None:
        for name in self.images:
            self.stop(name)
        for f in self.images.values():
            os.remove(f)

    def start(self, name: str, role: str,
              extra: str = '') -> iotests.QemuStorageDaemon:
        """Node @name as @role, with the drbd options @extra"""
        qsd = start_qsd(
            name,
            '--blockdev', f'driver=file,node-name=file-{name},'
            f'filename={self.images[name]},discard=unmap',
            '--blockdev', f'driver=drbd,node-name={self.node[name]},'
            f'file=file-{name},role={role},discard=unmap,'
            f'{pair_opts(name, self.port)}{extra}',
            '--nbd-server',
            f'addr.type=unix,addr.path={self.sockets[name]}',
            '--export', f'type=nbd,id=exp-{name},'
            f'node-name={self.node[name]},writable=on')
        self.qsd[name] = qsd
        return qsd

    def stop(self, name: str) -> None:
        qsd = self.qsd[name]
        if qsd is not None:
            self.qsd[name] = None
            stop_qsd(qsd)

    def q(self, name: str) -> iotests.QemuStorageDaemon:
        return alive(self.qsd[name], name)

    def info(self, name: str) -> Dict[str, Any]:
        return drbd_info(self.q(name), self.node[name])

    def wait(self, name: str, **want: Any) -> Dict[str, Any]:
        return wait_drbd(self.q(name), self.node[name], **want)

    def io(self, name: str, *cmds: str) -> str:
        """Run qemu-io commands on @name's drbd node through NBD"""
        res = qemu_io('-f', 'raw', *io_args(*cmds),
                      f'nbd+unix:///{self.node[name]}?'
                      f'socket={self.sockets[name]}', check=False)
        self.q(name)    # still alive
        return res.stdout

    def io_ok(self, name: str, *cmds: str) -> None:
        out = self.io(name, *cmds)
        self.assertNotIn('failed', out)

    def start_pair(self) -> None:
        """A primary, B secondary, connected"""
        self.start('b', 'secondary')
        self.start('a', 'primary')
        self.wait('a', connection='connected', peer_role='secondary')
        self.wait('b', connection='connected', peer_role='primary')


class PrimarySecondaryCase(iotests.QMPTestCase):
    """
    A test case over a primary's and a secondary's qemu-storage-daemon
    (named 'primary' and 'secondary'), started by the subclass
    """
    primary: Optional[iotests.QemuStorageDaemon]
    secondary: Optional[iotests.QemuStorageDaemon]

    def p(self) -> iotests.QemuStorageDaemon:
        """The primary's daemon, which must still be running"""
        return alive(self.primary, 'primary')

    def s(self) -> iotests.QemuStorageDaemon:
        """The secondary's daemon, which must still be running"""
        return alive(self.secondary, 'secondary')

    def stop_primary(self, sig: int = signal.SIGTERM) -> None:
        stop_qsd(self.p(), sig=sig)
        self.primary = None

    def stop_secondary(self, sig: int = signal.SIGTERM) -> None:
        stop_qsd(self.s(), sig=sig)
        self.secondary = None

    @staticmethod
    def refusals(option: str, alg_p: Optional[str],
                 alg_s: Optional[str]) -> Dict[str, str]:
        """Why each node (drbd0, the primary's; drbd1, the secondary's)
        refuses the other when their @option are @alg_p and @alg_s"""
        p, s = alg_p or 'none', alg_s or 'none'
        return {'drbd0': f"the peer's {option} is {s}, this node's {p}",
                'drbd1': f"the peer's {option} is {p}, this node's {s}"}

    def wait_refused(self, option: str, alg_p: Optional[str],
                     alg_s: Optional[str]) -> None:
        """
        The primary and the secondary, whose @option are @alg_p and
        @alg_s, refuse each other: neither ever connects, and each says
        why in last-error, naming both
        """
        reasons = self.refusals(option, alg_p, alg_s)
        daemon = {'drbd0': self.p, 'drbd1': self.s}
        pending = dict(reasons)

        def refused() -> bool:
            for node, reason in list(pending.items()):
                info = drbd_info(daemon[node](), node)
                self.assertNotEqual(info['connection'], 'connected', info)
                self.assertEqual(info['peer-role'], 'unknown', info)
                if reason in info.get('last-error', ''):
                    del pending[node]
            return not pending

        wait_until(refused, 20, lambda: f'last-errors {pending}')

    def assert_refusal_logged(self, option: str, alg_p: Optional[str],
                              alg_s: Optional[str]) -> None:
        """Each daemon's log says why its node refused the other"""
        for node, reason in self.refusals(option, alg_p, alg_s).items():
            name = 'primary' if node == 'drbd0' else 'secondary'
            line = f"qemu-storage-daemon: warning: drbd node '{node}': " \
                f'{reason}'
            self.assertIn(line, log_section(log_path(name)))


# Running a test

def _cases(suite: Any) -> Iterator[unittest.TestCase]:
    if isinstance(suite, unittest.TestSuite):
        for t in suite:
            yield from _cases(t)
    else:
        yield suite


class CaseRecord:
    """
    Appends how each test case ended to a file, for scripts/check.sh:
    the plan first, a line "# plan TEST CASE" for each case that is to
    run, then a line per case as it ends, "ok TEST CASE", "not ok TEST
    CASE" or "ok TEST CASE # SKIP why".  A planned case without its line
    did not end: the test crashed or hung.

    The file is $DRBD_IOTEST_CASES, or TEST.cases in the test's
    directory.
    """

    def __init__(self) -> None:
        self.test = os.path.basename(sys.argv[0])
        self.path = os.environ.get('DRBD_IOTEST_CASES') or \
            os.path.join(iotests.test_dir, f'{self.test}.cases')

    def write(self, *lines: str) -> None:
        with open(self.path, 'a', encoding='utf-8') as f:
            for line in lines:
                f.write(line.replace('\n', ' ') + '\n')

    def plan(self, cases: Sequence[unittest.TestCase]) -> None:
        self.write(*(f'# plan {self.test} {c.id()}' for c in cases))

    def ended(self, case: unittest.TestCase, ok: bool,
              skip: Optional[str] = None) -> None:
        line = f'{"ok" if ok else "not ok"} {self.test} {case.id()}'
        if skip is not None:
            line += f' # SKIP {skip}'
        self.write(line)


_record = CaseRecord()


class _RecordingResult(iotests.ReproducibleTestResult):
    # pylint: disable=invalid-name  (unittest's names)
    def addSuccess(self, test: unittest.TestCase) -> None:
        super().addSuccess(test)
        _record.ended(test, True)

    def addError(self, test: unittest.TestCase, err: Any) -> None:
        super().addError(test, err)
        _record.ended(test, False)

    def addFailure(self, test: unittest.TestCase, err: Any) -> None:
        super().addFailure(test, err)
        _record.ended(test, False)

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        super().addSkip(test, reason)
        _record.ended(test, True, reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: Any) -> None:
        super().addExpectedFailure(test, err)
        _record.ended(test, True)

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        super().addUnexpectedSuccess(test)
        _record.ended(test, False)


class _RecordingRunner(iotests.ReproducibleTestRunner):
    def __init__(self, stream: Any = None, **kwargs: Any) -> None:
        super().__init__(stream, resultclass=_RecordingResult, **kwargs)

    def run(self, test: Any) -> unittest.TestResult:
        _record.plan(list(_cases(test)))
        return super().run(test)


# What a daemon's log must never say
FATAL_LOG = ('Assertion', 'Aborted')


class MeshTestCase(NodeEvents, iotests.QMPTestCase):
    """
    A test case over a resource of several qemu-storage-daemons, one per
    name of @names (node ids 0, 1, ...), each exporting its drbd node
    (drbd0, drbd1, ...) over NBD, configured with the peers option: every
    pair connects, the lower node id to the higher one's port for that
    pair.  With @proxied, each connection goes through a Proxy, so that a
    test can cut or freeze any link: self.link[(x, y)].  A subclass names
    the nodes, and may give some no image (@diskless: diskless clients).
    With @iothreads, each node's export (and so its drbd node) is in an
    IOThread of its own.
    """
    size = 8 * MiB
    names: List[str] = ['a', 'b', 'c']
    diskless: List[str] = []
    proxied = False
    iothreads = False
    qsd: Dict[str, Optional[iotests.QemuStorageDaemon]]

    def setUp(self) -> None:
        self.img = {n: os.path.join(iotests.test_dir, f'mesh-{n}.img')
                    for n in self.names if n not in self.diskless}
        self.sock = {n: os.path.join(iotests.sock_dir,
                                     f'drbd-mesh-{os.getpid()}-{n}.sock')
                     for n in self.names}
        self.node = {n: f'drbd{i}' for i, n in enumerate(self.names)}
        self.node_id = {n: i for i, n in enumerate(self.names)}
        for f in self.img.values():
            qemu_img('create', '-f', 'drbd', '-o',
                     f'max-peers={len(self.names) - 1}', f, str(self.size))
        self.ports: Dict[Tuple[str, str], int] = {}
        self.link: Dict[Tuple[str, str], Proxy] = {}
        for x in self.names:
            for y in self.names:
                if self.node_id[x] < self.node_id[y]:
                    self.ports[(x, y)] = new_port()
                    if self.proxied:
                        self.link[(x, y)] = Proxy(self.ports[(x, y)])
        self.qsd = {n: None for n in self.names}
        self.backlog: Dict[str, List[QMPEvent]] = {n: [] for n in self.names}
        mark_logs(self.id(), *self.names)

    def tearDown(self) -> None:
        for n in self.names:
            self.stop(n)
        for p in self.link.values():
            p.close()
        for f in self.img.values():
            os.remove(f)

    @staticmethod
    def inet(port: int) -> Dict[str, Any]:
        return {'type': 'inet', 'host': '127.0.0.1', 'port': str(port)}

    def pair(self, x: str, y: str) -> Tuple[str, str]:
        return (x, y) if self.node_id[x] < self.node_id[y] else (y, x)

    def peers(self, name: str) -> List[Dict[str, Any]]:
        """The peers option of node @name"""
        out = []
        for other in self.names:
            if other == name:
                continue
            entry: Dict[str, Any] = {'node-id': self.node_id[other]}
            pair = self.pair(name, other)
            if pair[0] == name:
                port = self.link[pair].port if self.proxied else \
                    self.ports[pair]
                entry['address'] = self.inet(port)
            else:
                entry['listen'] = self.inet(self.ports[pair])
            out.append(entry)
        return out

    def start(self, name: str, role: str,
              rules: Optional[Dict[str, Any]] = None,
              **extra: Any) -> iotests.QemuStorageDaemon:
        """Node @name as @role, with the drbd options @extra; with
        @rules, a blkdebug node with these rules (a failing disk) is
        between the drbd node and its file"""
        args = trace_args()
        child = f'file-{name}'
        if name in self.img:
            args += ['--blockdev', f'driver=file,node-name=file-{name},'
                     f'filename={self.img[name]}']
        qsd = start_qsd(name, *args)
        if rules is not None:
            qsd.cmd('blockdev-add', {'driver': 'blkdebug',
                                     'node-name': f'dbg-{name}',
                                     'image': child, **rules})
            child = f'dbg-{name}'
        self.qsd[name] = qsd
        self.backlog[name] = []
        opts: Dict[str, Any] = {
            'driver': 'drbd', 'node-name': self.node[name], 'role': role,
            'node-id': self.node_id[name], 'connect-interval': 200,
            'peers': self.peers(name), **extra}
        if name in self.img:
            opts['file'] = child
        else:
            opts['size'] = self.size
        qsd.cmd('blockdev-add', opts)
        qsd.cmd('nbd-server-start', {
            'addr': {'type': 'unix', 'data': {'path': self.sock[name]}}})
        export = {'type': 'nbd', 'id': f'exp-{name}',
                  'node-name': self.node[name], 'writable': True}
        if self.iothreads:
            qsd.cmd('object-add', {'qom-type': 'iothread',
                                   'id': f'io-{name}'})
            export['iothread'] = f'io-{name}'
            export['fixed-iothread'] = True
        qsd.cmd('block-export-add', export)
        return qsd

    def stop(self, name: str, sig: int = signal.SIGTERM) -> Optional[int]:
        """Stop node @name (SIGKILL, or SIGTERM for any other @sig): its
        exit status, None if it was not running"""
        qsd = self.qsd[name]
        if qsd is None:
            return None
        self.qsd[name] = None
        if sig == signal.SIGKILL:
            qsd.stop(kill_signal=signal.SIGKILL)
            return -signal.SIGKILL
        return stop_qsd(qsd)

    def q(self, name: str) -> iotests.QemuStorageDaemon:
        return alive(self.qsd[name], name)

    def healthy(self) -> None:
        """Every node that should run does, and no log shows a crash"""
        for n in self.names:
            if self.qsd[n] is not None:
                self.q(n)
            text = log_section(log_path(n))
            for word in FATAL_LOG:
                if word in text:
                    raise AssertionError(f'the log of {n} says {word!r}: '
                                         f'{text[-3000:]}')

    def info(self, name: str) -> Dict[str, Any]:
        return drbd_info(self.q(name), self.node[name])

    def wait(self, name: str, timeout: float = 30,
             **want: Any) -> Dict[str, Any]:
        return wait_drbd(self.q(name), self.node[name], timeout, **want)

    def peer(self, name: str, other: str) -> Dict[str, Any]:
        for p in self.info(name)['peers']:
            if p['node-id'] == self.node_id[other]:
                return dict(p)
        raise AssertionError(f'{name} does not list peer {other}')

    def wait_peer(self, name: str, other: str, timeout: float = 30,
                  **want: Any) -> None:
        """Wait until @name sees peer @other as in @want ('_' is '-')"""
        want = {k.replace('_', '-'): v for k, v in want.items()}

        def ok() -> bool:
            p = self.peer(name, other)
            return all(p.get(k) == v for k, v in want.items())

        wait_until(ok, timeout, lambda: f'{name} to see {other} as {want}; '
                   f'last: {self.peer(name, other)}')

    def wait_mesh(self, timeout: float = 30) -> None:
        """Every running node connected to every other, in sync"""
        for x in self.names:
            for y in self.names:
                if x == y or self.qsd[x] is None or self.qsd[y] is None:
                    continue
                if x in self.diskless or y in self.diskless:
                    # Nothing to resync with a node without data
                    self.wait_peer(x, y, timeout, connection='connected')
                else:
                    self.wait_peer(x, y, timeout, connection='connected',
                                   out_of_sync=0)

    def uri(self, name: str) -> str:
        return f'nbd+unix:///{self.node[name]}?socket={self.sock[name]}'

    def io(self, name: str, *cmds: str) -> str:
        """Run qemu-io commands on @name's drbd node through NBD"""
        res = qemu_io('-f', 'raw', *io_args(*cmds), self.uri(name),
                      check=False)
        self.q(name)    # still alive
        return res.stdout

    def io_ok(self, name: str, *cmds: str) -> None:
        out = self.io(name, *cmds)
        self.assertNotIn('failed', out)

    def isolate(self, name: str) -> None:
        """Freeze every link of @name (@proxied): no FIN, no RST"""
        for (x, y), p in self.link.items():
            if name in (x, y):
                p.freeze()

    def restore_all(self) -> None:
        """Every link (@proxied) forwards again"""
        for p in self.link.values():
            p.restore()

    def promote(self, name: str, force: bool = False) -> Dict[str, Any]:
        """drbd-promote of @name: the QMP answer, an error or not"""
        args: Dict[str, Any] = {'node-name': self.node[name]}
        if force:
            args['force'] = True
        res: Dict[str, Any] = self.q(name).qmp('drbd-promote', args)
        return res

    @staticmethod
    def ledger_recorder() -> Tuple[Dict[int, Optional[int]],
                                   Callable[[str, int, int, int], None]]:
        """A ledger of the last pattern acknowledged per 4 KiB block (None
        where a write failed: its data is not known), and its recorder
        (a Writer's @record)"""
        ledger: Dict[int, Optional[int]] = {}
        lock = threading.Lock()

        def record(kind: str, offset: int, length: int,
                   pattern: int) -> None:
            with lock:
                for block in range(offset // 4096,
                                   (offset + length) // 4096):
                    ledger[block] = pattern if kind == 'acked' else None

        return ledger, record

    def check_ledger(self, name: str,
                     ledger: Dict[int, Optional[int]]) -> None:
        """Every write acknowledged (the last one of each block) is on
        @name"""
        cmds = [f'read -P {p:#x} {b * 4096} 4k'
                for b, p in sorted(ledger.items()) if p is not None]
        self.assertGreater(len(cmds), 50)
        out = qemu_io('-f', 'raw', *io_args(*cmds), self.uri(name),
                      check=False).stdout
        bad = [line for line in out.splitlines()
               if 'fail' in line or 'Pattern verification' in line]
        self.assertEqual(bad[:10], [], f'{len(bad)} of {len(cmds)} blocks '
                         f'of the ledger differ on {name}')

    def rejoin_old_primary(self, old: str, new: str) -> None:
        """The old primary, cut off and demoted (or killed and started
        again as a secondary), connects to the new one as its sync
        target: it may have started a generation of writes before it saw
        it had lost both peers (they went together), but none of those
        was acknowledged, and they yield - no split brain for the
        operator to resolve"""
        def settled() -> Optional[str]:
            states = {self.peer(old, new)['connection'],
                      self.peer(new, old)['connection']}
            if 'standalone' in states:
                return 'standalone'
            return 'connected' if states <= {'connected', 'sync-source',
                                             'sync-target'} else None

        self.assertEqual(wait_until(settled, 60,
                                    lambda: f'{old} to settle with {new}'),
                         'connected')

    def all_identical(self, *which: str) -> None:
        """Stop every node; the images of @which hold the same data"""
        for n in self.names:
            self.stop(n)
        for other in which[1:]:
            self.assertIsNone(replicas_differ(self.img[which[0]],
                                              self.img[other]),
                              f'{which[0]} and {other} differ')


def main(not_run: Optional[str] = None) -> None:
    """
    iotests.main() for a drbd test (raw images on files), which records
    how each case ended (CaseRecord).  With @not_run, the test does not
    run, for that reason, and its cases are recorded skipped.
    """
    try:
        if not_run is not None:
            iotests.notrun(not_run)
        debug = iotests.execute_setup_common(supported_fmts=['raw'],
                                             supported_protocols=['file'])
    except SystemExit:
        # iotests.notrun(): the cases are skipped
        why = not_run or 'not run'
        with contextlib.suppress(OSError):
            with open(os.path.join(iotests.test_dir, f'{_record.test}.notrun'),
                      encoding='utf-8') as f:
                why = f.read().strip()
        cases = list(_cases(unittest.defaultTestLoader.loadTestsFromModule(
            sys.modules['__main__'])))
        _record.plan(cases)
        for case in cases:
            _record.ended(case, True, why)
        raise
    # As iotests.execute_unittest(), with the recording runner
    unittest.main(argv=sys.argv, testRunner=_RecordingRunner,
                  verbosity=2 if debug else 1,
                  warnings=None if sys.warnoptions else 'ignore')
