#!/usr/bin/env python3
"""PID 1 of one test host of tests/ha/cluster.py.

Run by cluster.py as

    unshare --net --mount --uts --ipc --pid --fork --kill-child \
            --mount-proc python3 hostinit.py NAME HOSTDIR TARGET=SOURCE...

it turns the fresh namespaces into a host: a private tmpfs on /run and
/dev/shm, each SOURCE directory bind-mounted over TARGET, the hostname
set to NAME and the loopback up.  It then prints "ready" on its
standard output and reaps orphans until it is killed; killing it (from
outside the PID namespace) kills every process of the host.

SIGTERM asks every process of the host to stop, waits a few seconds,
then kills what is left and exits.
"""

import os
import signal
import socket
import subprocess
import sys
import time

STOP_GRACE_SECONDS = 5.0


def run(*argv: str) -> None:
    """Run a setup command, failing loudly: a half-built host is useless."""
    done = subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise SystemExit(f"hostinit: {' '.join(argv)} failed "
                         f"({done.returncode}): {done.stdout.strip()}")


def set_up_mounts(binds: list[tuple[str, str]]) -> None:
    # unshare already makes the tree private; say it again so that no
    # mount of ours can ever propagate to the machine's namespace.
    run("mount", "--make-rprivate", "/")
    run("mount", "-t", "tmpfs", "-o", "mode=0755,nosuid,nodev", "tmpfs", "/run")
    run("mount", "-t", "tmpfs", "-o", "mode=1777,nosuid,nodev", "tmpfs",
        "/dev/shm")
    for sub in ("lock", "resource-agents"):
        os.mkdir(os.path.join("/run", sub), 0o755)
    for target, source in binds:
        if not os.path.isdir(target):
            raise SystemExit(f"hostinit: mount point {target} missing")
        run("mount", "--bind", source, target)


def parse_binds(args: list[str]) -> list[tuple[str, str]]:
    binds = []
    for arg in args:
        target, sep, source = arg.partition("=")
        if not sep or not target.startswith("/") or not source.startswith("/"):
            raise SystemExit(f"hostinit: bad bind {arg!r} (TARGET=SOURCE)")
        binds.append((target, source))
    return binds


def stop_everything(signum: int, frame: object) -> None:
    """Stop every process of the host (kill(-1) spares only us), then exit."""
    try:
        os.kill(-1, signal.SIGTERM)
    except ProcessLookupError:
        sys.exit(0)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    while time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            sys.exit(0)
        time.sleep(0.1)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    sys.exit(0)


def reap_forever() -> None:
    while True:
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(0.5)


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit("usage: hostinit.py NAME HOSTDIR [TARGET=SOURCE...]")
    name, hostdir = sys.argv[1], sys.argv[2]
    if os.getpid() != 1:
        raise SystemExit("hostinit: must be PID 1 of a new PID namespace")
    set_up_mounts(parse_binds(sys.argv[3:]))
    socket.sethostname(name)
    run("ip", "link", "set", "lo", "up")
    signal.signal(signal.SIGTERM, stop_everything)
    print("ready", flush=True)
    # From now on our output goes to the host's own log, not the harness pipe.
    log = os.open(os.path.join(hostdir, "init.log"),
                  os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    reap_forever()


if __name__ == "__main__":
    main()
