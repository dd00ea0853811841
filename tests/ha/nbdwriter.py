#!/usr/bin/env python3
"""The guest workload of the drbd cluster test: writes to the replicated
disk over NBD, one 4 KiB block at a time, and journals each write the
disk acknowledged.

    nbdwriter.py SOCKET EXPORT JOURNAL [BLOCKS]

Write number SEQ (counting on from the highest in the journal, so that
the writer that a failover starts on another host goes on) goes to block
SEQ % BLOCKS of the disk; the block holds its own header (magic, SEQ,
host), so that a reader can tell which write it holds.  Once the NBD
server acknowledged it, the writer appends "HOST MONOTONIC_NS SEQ BLOCK"
to JOURNAL (shared by all hosts) and fsyncs it: a line is a write that
the workload saw complete, and must survive any failover.  A failed
write or a lost connection ends the writer (non-zero): the cluster
manager restarts it where the disk is served.

The module also holds the NBD client and the check that the test uses.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys
import time
from typing import Optional

BLOCK = 4096
MAGIC = b"QDRBDWR1"
HEADER = struct.Struct(">8sQ16s")

NBD_OPTS_MAGIC = 0x49484156454F5054
NBD_FLAG_FIXED_NEWSTYLE = 1
NBD_FLAG_NO_ZEROES = 2
NBD_OPT_EXPORT_NAME = 1
NBD_REQUEST_MAGIC = 0x25609513
NBD_REPLY_MAGIC = 0x67446698
NBD_CMD_READ = 0
NBD_CMD_WRITE = 1
NBD_CMD_DISC = 2


class NbdError(RuntimeError):
    pass


class Nbd:
    """A minimal NBD client (fixed newstyle, simple replies), one request
    at a time"""

    def __init__(self, path: str, export: str, timeout: float = 30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.handle = 0
        magic, opts, flags = struct.unpack(">8sQH", self._recv(18))
        if magic != b"NBDMAGIC" or opts != NBD_OPTS_MAGIC:
            raise NbdError("not a newstyle NBD server")
        no_zeroes = flags & NBD_FLAG_NO_ZEROES
        self.sock.sendall(struct.pack(
            ">I", NBD_FLAG_FIXED_NEWSTYLE | (no_zeroes and NBD_FLAG_NO_ZEROES)))
        name = export.encode()
        self.sock.sendall(struct.pack(">QII", NBD_OPTS_MAGIC,
                                      NBD_OPT_EXPORT_NAME, len(name)) + name)
        self.size, _ = struct.unpack(">QH", self._recv(10))
        if not no_zeroes:
            self._recv(124)

    def _recv(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise NbdError("the server closed the connection")
            buf += chunk
        return buf

    def _request(self, cmd: int, offset: int, length: int,
                 data: bytes = b"") -> bytes:
        self.handle += 1
        self.sock.sendall(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0, cmd,
                                      self.handle, offset, length) + data)
        magic, error, handle = struct.unpack(">IIQ", self._recv(16))
        if magic != NBD_REPLY_MAGIC or handle != self.handle:
            raise NbdError("bad NBD reply")
        if error:
            raise NbdError(f"NBD error {error} at offset {offset}")
        return self._recv(length) if cmd == NBD_CMD_READ else b""

    def read(self, offset: int, length: int) -> bytes:
        return self._request(NBD_CMD_READ, offset, length)

    def write(self, offset: int, data: bytes) -> None:
        self._request(NBD_CMD_WRITE, offset, len(data), data)

    def close(self) -> None:
        try:
            self.sock.sendall(struct.pack(">IHHQQI", NBD_REQUEST_MAGIC, 0,
                                          NBD_CMD_DISC, 0, 0, 0))
        except OSError:
            pass
        self.sock.close()


def block_data(seq: int, host: str) -> bytes:
    head = HEADER.pack(MAGIC, seq, host.encode()[:16])
    return (head * (BLOCK // len(head) + 1))[:BLOCK]


def block_seq(data: bytes) -> Optional[int]:
    """The SEQ of the write a block holds, None for a block never written;
    raises on a block that is neither (a torn or foreign one)"""
    if data == bytes(len(data)):
        return None
    magic, seq, _ = HEADER.unpack_from(data)
    if magic != MAGIC or data != block_data(seq, data[16:32].rstrip(b"\0")
                                            .decode()):
        raise NbdError("a block that no single write of the writer made")
    return seq


def journal_acked(journal: str, before_ns: Optional[int] = None
                  ) -> dict[int, int]:
    """The highest acknowledged SEQ of each block, of the writes journalled
    before @before_ns (MONOTONIC_NS) if given"""
    acked: dict[int, int] = {}
    try:
        with open(journal) as f:
            for line in f:
                parts = line.split()
                if len(parts) != 4:
                    continue
                t, seq, blk = int(parts[1]), int(parts[2]), int(parts[3])
                if before_ns is None or t < before_ns:
                    acked[blk] = max(acked.get(blk, -1), seq)
    except FileNotFoundError:
        pass
    return acked


def check_acked(nbd: Nbd, journal: str, blocks: int,
                before_ns: Optional[int] = None) -> int:
    """Every write journalled (before @before_ns) is on the disk that @nbd
    serves: each block holds its last acknowledged write or a later one.
    Returns the number of blocks checked; raises on a lost write."""
    acked = journal_acked(journal, before_ns)
    for blk in range(blocks):
        want = acked.get(blk)
        got = block_seq(nbd.read(blk * BLOCK, BLOCK))
        if want is not None and (got is None or got < want):
            raise NbdError(f"block {blk} holds write {got}, but write {want} "
                           "was acknowledged")
    return len(acked)


def last_seq(journal: str) -> int:
    seq = 0
    try:
        with open(journal) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4:
                    seq = max(seq, int(parts[2]))
    except FileNotFoundError:
        pass
    return seq


def main() -> int:
    if len(sys.argv) not in (4, 5):
        raise SystemExit("usage: nbdwriter.py SOCKET EXPORT JOURNAL [BLOCKS]")
    path, export, journal = sys.argv[1:4]
    blocks = int(sys.argv[4]) if len(sys.argv) == 5 else 256
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host = socket.gethostname()
    nbd = Nbd(path, export)
    if nbd.size < blocks * BLOCK:
        raise SystemExit(f"the disk has {nbd.size} bytes, less than "
                         f"{blocks} blocks")
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    # A write in flight when the last writer died may be on the disk:
    # start after it
    seq = last_seq(journal) + 1
    while True:
        blk = seq % blocks
        try:
            nbd.write(blk * BLOCK, block_data(seq, host))
        except (NbdError, OSError) as e:
            print(f"nbdwriter: write {seq} failed: {e}", file=sys.stderr)
            return 1
        os.write(fd, f"{host} {time.monotonic_ns()} {seq} {blk}\n".encode())
        os.fsync(fd)
        seq += 1


if __name__ == "__main__":
    sys.exit(main())
