#!/usr/bin/env python3
"""A stand-in workload for the HA harness: append one line per write to a
journal shared by all hosts, so that the test can tell where and when the
workload ran.

    writer.py JOURNAL [INTERVAL_SECONDS]

Each line is "HOST MONOTONIC_NS SEQ"; it is written with O_APPEND and
fsync'd before the next, so a line in the journal is a write the workload
saw complete.  CLOCK_MONOTONIC is the machine's, shared by every host (no
time namespace), so the test can compare it with its own clock.
"""

import os
import signal
import socket
import sys
import time


def main() -> None:
    if len(sys.argv) not in (2, 3):
        raise SystemExit("usage: writer.py JOURNAL [INTERVAL_SECONDS]")
    journal = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) == 3 else 0.05
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    host = socket.gethostname()
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    seq = 0
    while True:
        seq += 1
        os.write(fd, f"{host} {time.monotonic_ns()} {seq}\n".encode())
        os.fsync(fd)
        time.sleep(interval)


if __name__ == "__main__":
    main()
