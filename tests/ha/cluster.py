"""A corosync + Pacemaker cluster of N hosts on one machine, for tests.

Each host h1..hN is a set of fresh namespaces (network, mount, UTS, IPC,
PID) whose PID 1 is tests/ha/hostinit.py.  Inside it, the cluster stack's
state and runtime directories are the host's own (bind mounts of
directories under the work directory, tmpfs on /run and /dev/shm), so the
daemons of one host never see those of another, nor the machine's.  The
hosts are joined by veth links to a bridge that lives in a network
namespace of its own ("the switch"); their only addresses are in SUBNET,
which exists nowhere but in these namespaces.

See tests/ha/README.rst.  Everything runs as root.

    with Cluster(2, "/tmp/ha") as c:
        c.start()
        c.wait_online()
        c.cib(RESOURCES_XML)
        print(c.where_promoted("state-clone"))
        c.kill_host("h1")
"""

from __future__ import annotations

import atexit
import ctypes
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence, Union

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTINIT = os.path.join(HERE, "hostinit.py")

SUBNET = "10.77.0"          # /24; host hN is SUBNET.N, nowhere else
BRIDGE = "br0"
NAMESPACES = ("-n", "-m", "-u", "-i", "-p")

# Directories of the cluster stack that each host gets to itself, with the
# subdirectories that the packages ship (owner and mode copied from the
# machine's own, which is never written to).
PRIVATE_DIRS: dict[str, tuple[str, ...]] = {
    "/etc/corosync": (),
    "/var/lib/corosync": (),
    "/var/log/corosync": (),
    "/var/lib/pacemaker": ("blackbox", "cib", "cores", "pengine"),
    "/var/log/pacemaker": ("bundles",),
}

# The daemons' environment: log to the host's files only, never to the
# machine's syslog (/dev/log is not private).
STACK_ENV = {
    "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "PCMK_logfile": "/var/log/pacemaker/pacemaker.log",
    "PCMK_logfacility": "none",
    "PCMK_debug": "no",
    "HA_LOGFACILITY": "none",
}

Cmd = Union[str, Sequence[str]]


class ClusterError(RuntimeError):
    pass


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the harness dies, however it dies."""
    PR_SET_PDEATHSIG = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _argv(cmd: Cmd) -> list[str]:
    return ["sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)


def _child_of(pid: int, timeout: float = 10.0) -> int:
    """The one child of pid (unshare --fork's child: the host's PID 1)."""
    path = f"/proc/{pid}/task/{pid}/children"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                kids = f.read().split()
        except FileNotFoundError:
            raise ClusterError(f"process {pid} exited before forking")
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise ClusterError(f"process {pid} has no child after {timeout}s")


def _own_netns(pid: int) -> None:
    """Refuse to act on a process that shares the machine's network
    namespace: a command meant for a test host must never reach it."""
    if os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net"):
        raise ClusterError(f"process {pid} is in the machine's network namespace")


def wait_for(what: str, check: Callable[[], bool], timeout: float,
              interval: float = 0.5) -> float:
    """Poll check() until true; return the seconds it took."""
    start = time.monotonic()
    while True:
        if check():
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


@dataclass
class Host:
    name: str
    index: int
    dir: str
    init: Optional[subprocess.Popen] = None   # the unshare process
    pid: int = 0                               # host's PID 1, as seen here
    daemons: list[subprocess.Popen] = field(default_factory=list)
    links_cut: bool = False

    @property
    def addr(self) -> str:
        return f"{SUBNET}.{self.index}"

    @property
    def port(self) -> str:
        """The switch's end of the host's veth link."""
        return f"sw-{self.name}"

    @property
    def alive(self) -> bool:
        return self.init is not None and self.init.poll() is None

    def path(self, inside: str) -> str:
        """A path inside the host's mount namespace, reachable from here."""
        if not self.alive:
            raise ClusterError(f"{self.name} is not running")
        return f"/proc/{self.pid}/root{inside}"


class Cluster:
    """N hosts h1..hN running corosync (knet) and Pacemaker."""

    def __init__(self, n: int, workdir: str, token_ms: int = 1000):
        if not 2 <= n <= 9:
            raise ValueError("a cluster has 2 to 9 hosts")
        if os.geteuid() != 0:
            raise ClusterError("the HA harness needs root (namespaces, mounts)")
        for tool in ("unshare", "nsenter", "ip", "corosync", "pacemakerd",
                     "crm_mon", "cibadmin"):
            if shutil.which(tool) is None:
                raise ClusterError(f"{tool} not found: run scripts/deps.sh")
        self.workdir = os.path.abspath(workdir)
        if self.workdir.startswith(("/run", "/dev/shm", "/proc")):
            raise ClusterError("workdir must not be under /run or /dev/shm")
        self.token_ms = token_ms
        self.hosts = {f"h{i}": Host(f"h{i}", i, os.path.join(self.workdir, f"h{i}"))
                      for i in range(1, n + 1)}
        self.switch: Optional[subprocess.Popen] = None
        self._stopped = False
        atexit.register(self.stop)

    # ---- context manager -------------------------------------------------

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- set up ----------------------------------------------------------

    def start(self) -> None:
        """Lay out the hosts' directories, start the switch, the hosts and
        their daemons.  Returns once every host's corosync is up; call
        wait_online() for Pacemaker, then set_test_properties()."""
        os.makedirs(self.workdir, exist_ok=True)
        authkey = os.urandom(256)
        for host in self.hosts.values():
            self._lay_out(host, authkey)
        self._start_switch()
        for host in self.hosts.values():
            self._boot(host)

    def _lay_out(self, host: Host, authkey: bytes) -> None:
        for target, subdirs in PRIVATE_DIRS.items():
            mine = self._private_dir(host, target)
            for d in (mine,) + tuple(os.path.join(mine, s) for s in subdirs):
                os.makedirs(d, exist_ok=True)
            for sub in ("",) + subdirs:
                st = os.stat(os.path.join(target, sub))
                os.chown(os.path.join(mine, sub), st.st_uid, st.st_gid)
                os.chmod(os.path.join(mine, sub), st.st_mode & 0o7777)
        etc = self._private_dir(host, "/etc/corosync")
        with open(os.path.join(etc, "corosync.conf"), "w") as f:
            f.write(self.corosync_conf())
        key = os.path.join(etc, "authkey")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
        with os.fdopen(fd, "wb") as f:
            f.write(authkey)

    def _private_dir(self, host: Host, target: str) -> str:
        return os.path.join(host.dir, target.strip("/").replace("/", "-"))

    def corosync_conf(self) -> str:
        nodes = "".join(
            f"    node {{\n        name: {h.name}\n        nodeid: {h.index}\n"
            f"        ring0_addr: {h.addr}\n    }}\n"
            for h in self.hosts.values())
        two_node = "    two_node: 1\n" if len(self.hosts) == 2 else ""
        return (
            "# Written by tests/ha/cluster.py for one test cluster.\n"
            "totem {\n"
            "    version: 2\n"
            "    cluster_name: qdrbd-test\n"
            "    transport: knet\n"
            f"    token: {self.token_ms}\n"
            "    crypto_cipher: aes256\n"
            "    crypto_hash: sha256\n"
            "}\n"
            "nodelist {\n" + nodes + "}\n"
            "quorum {\n"
            "    provider: corosync_votequorum\n" + two_node +
            "}\n"
            "logging {\n"
            "    to_stderr: no\n"
            "    to_syslog: no\n"
            "    to_logfile: yes\n"
            "    logfile: /var/log/corosync/corosync.log\n"
            "    timestamp: on\n"
            "}\n")

    def _start_switch(self) -> None:
        # The bridge is made inside the new namespace, by the process that
        # holds it, before it says ready: an nsenter to its PID any sooner
        # would land in the machine's namespace.
        self.switch = subprocess.Popen(
            ["unshare", "--net", "sh", "-c",
             f"ip link add {BRIDGE} type bridge && ip link set {BRIDGE} up && "
             "echo ready && exec sleep infinity"],
            preexec_fn=_die_with_parent, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE)
        assert self.switch.stdout is not None
        ready, _, _ = select.select([self.switch.stdout], [], [], 30)
        line = self.switch.stdout.readline().decode() if ready else ""
        self.switch.stdout.close()
        if line.strip() != "ready":
            raise ClusterError("the switch namespace did not come up")

    def _switch_ip(self, *args: str) -> None:
        self._in_switch("ip", *args)

    def _in_switch(self, *argv: str) -> None:
        assert self.switch is not None
        _own_netns(self.switch.pid)
        self._check(["nsenter", "-t", str(self.switch.pid), "-n", *argv])

    def _boot(self, host: Host) -> None:
        """Start the host's namespaces, link it to the switch, start its
        corosync and pacemakerd."""
        binds = [f"{t}={self._private_dir(host, t)}" for t in PRIVATE_DIRS]
        os.makedirs(host.dir, exist_ok=True)
        errlog = open(os.path.join(host.dir, "init.log"), "ab")
        host.init = subprocess.Popen(
            ["unshare", "--net", "--mount", "--uts", "--ipc", "--pid",
             "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
             sys.executable, HOSTINIT, host.name, host.dir, *binds],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errlog,
            preexec_fn=_die_with_parent)
        errlog.close()
        self._expect_ready(host)
        host.pid = _child_of(host.init.pid)
        host.links_cut = False
        self._link(host)
        self._start_daemons(host)

    def _expect_ready(self, host: Host, timeout: float = 30.0) -> None:
        assert host.init is not None and host.init.stdout is not None
        ready, _, _ = select.select([host.init.stdout], [], [], timeout)
        line = host.init.stdout.readline().decode() if ready else ""
        host.init.stdout.close()
        if line.strip() != "ready":
            raise ClusterError(f"{host.name} did not come up (see {host.dir}/init.log"
                               f" and the output above): {line!r}")

    def _link(self, host: Host) -> None:
        assert self.switch is not None
        self._switch_ip("link", "add", host.port, "type", "veth",
                        "peer", "name", "eth0", "netns", str(host.pid))
        self._switch_ip("link", "set", host.port, "master", BRIDGE, "up")
        self.run(host.name, ["ip", "addr", "add", f"{host.addr}/24", "dev", "eth0"],
                 check=True)
        self.run(host.name, ["ip", "link", "set", "eth0", "up"], check=True)

    def _start_daemons(self, host: Host) -> None:
        host.daemons = [self.spawn(host.name, ["corosync", "-f"], "corosync.out")]
        wait_for(f"corosync on {host.name}",
                  lambda: self.run(host.name, ["corosync-cfgtool", "-s"]).returncode == 0,
                  timeout=60)
        host.daemons.append(self.spawn(host.name, ["pacemakerd"], "pacemakerd.out"))

    # ---- running things in a host ----------------------------------------

    def _nsenter(self, host: str) -> list[str]:
        h = self.hosts[host]
        if not h.alive:
            raise ClusterError(f"{host} is not running")
        _own_netns(h.pid)
        return ["nsenter", "-t", str(h.pid), *NAMESPACES, "--wd=/"]

    def run(self, host: str, cmd: Cmd, check: bool = False, timeout: float = 60,
            input: Optional[str] = None) -> subprocess.CompletedProcess:
        """Run cmd (argv, or a string for sh -c) in host; capture its output."""
        done = subprocess.run(self._nsenter(host) + _argv(cmd), env=STACK_ENV,
                              input=input, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise ClusterError(f"{host}: {cmd!r} exited {done.returncode}: "
                               f"{(done.stderr or done.stdout).strip()}")
        return done

    def spawn(self, host: str, cmd: Cmd, logname: str) -> subprocess.Popen:
        """Start cmd in host in the background, output to the host's logname."""
        out = open(os.path.join(self.hosts[host].dir, logname), "ab")
        try:
            return subprocess.Popen(self._nsenter(host) + _argv(cmd), env=STACK_ENV,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT,
                                    preexec_fn=_die_with_parent)
        finally:
            out.close()

    def _check(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ClusterError(f"{shlex.join(argv)}: {done.stderr.strip()}")

    def any_live_host(self) -> str:
        for h in self.hosts.values():
            if h.alive and not h.links_cut:
                return h.name
        raise ClusterError("no host is running with its links up")

    # ---- the cluster's state ---------------------------------------------

    def crm_mon(self, host: Optional[str] = None) -> ET.Element:
        """crm_mon's XML status as host (default: any live host) sees it."""
        done = self.run(host or self.any_live_host(),
                        ["crm_mon", "-1", "--output-as=xml"], timeout=30)
        if done.returncode != 0:
            raise ClusterError(f"crm_mon: {done.stderr.strip() or done.stdout.strip()}")
        return ET.fromstring(done.stdout)

    def online_nodes(self, host: Optional[str] = None) -> set[str]:
        """Nodes that Pacemaker (as host sees it) has online, with a DC elected."""
        try:
            mon = self.crm_mon(host)
        except (ClusterError, ET.ParseError, subprocess.TimeoutExpired):
            return set()
        dc = mon.find("summary/current_dc")
        if dc is None or dc.get("present") != "true":
            return set()
        return {n.get("name", "") for n in mon.iter("node")
                if n.get("online") == "true" and n.get("type") == "member"}

    def wait_online(self, timeout: float = 180,
                    hosts: Optional[Sequence[str]] = None) -> float:
        """Wait until every (or the given) host is online as each sees it."""
        want = set(hosts or [h.name for h in self.hosts.values() if h.alive])
        return wait_for(f"{sorted(want)} online",
                         lambda: all(want <= self.online_nodes(h) for h in want),
                         timeout, interval=1.0)

    def resource_nodes(self, rsc: str, role: Optional[str] = None,
                       host: Optional[str] = None) -> list[str]:
        """Nodes where resource rsc (a primitive, or a clone's primitive
        or clone id) is active, with the given role if any."""
        mon = self.crm_mon(host)
        found = []
        for parent in mon.iter():
            for r in parent.findall("resource"):
                if rsc not in (r.get("id"), parent.get("id")):
                    continue
                if r.get("active") != "true" or r.get("failed") == "true":
                    continue
                if role is not None and r.get("role") != role:
                    continue
                found += [n.get("name", "") for n in r.findall("node")]
        return sorted(found)

    def where_promoted(self, rsc: str, host: Optional[str] = None) -> list[str]:
        return self.resource_nodes(rsc, "Promoted", host)

    # ---- configuration ---------------------------------------------------

    def cib(self, config: str, host: Optional[str] = None) -> None:
        """Add to the CIB: an XML fragment whose root is <resources>,
        <constraints>, <crm_config> or <rsc_defaults>, or crm shell
        commands (one per line, committed at once)."""
        on = host or self.any_live_host()
        text = config.strip()
        if text.startswith("<"):
            section = ET.fromstring(text).tag
            self.run(on, ["cibadmin", "--modify", "--allow-create",
                          "--scope", section, "--xml-pipe"],
                     input=text, check=True)
        else:
            self.run(on, ["crm", "-w", "configure"],
                     input=text + "\ncommit\n", check=True, timeout=120)

    def set_property(self, name: str, value: str, host: Optional[str] = None) -> None:
        self.run(host or self.any_live_host(),
                 ["crm_attribute", "--type", "crm_config", "--name", name,
                  "--update", value], check=True)

    def set_test_properties(self) -> None:
        """Options for a test cluster without fencing (yet)."""
        self.set_property("stonith-enabled", "false")
        self.set_property("no-quorum-policy",
                          "ignore" if len(self.hosts) == 2 else "stop")
        self.set_property("cluster-recheck-interval", "30s")

    # ---- faults ----------------------------------------------------------

    def kill_host(self, host: str) -> float:
        """SIGKILL the host's PID 1: the kernel kills every process of the
        PID namespace at once, and its network namespace (with its end of
        the veth) goes with them.  Returns time.monotonic() of the kill."""
        h = self.hosts[host]
        if not h.alive:
            raise ClusterError(f"{host} is not running")
        t = time.monotonic()
        self._kill(h)
        return t

    def _kill(self, h: Host) -> None:
        assert h.init is not None
        if h.pid > 0:
            os.kill(h.pid, signal.SIGKILL)
        else:
            # Not up yet: killing unshare makes it (--kill-child) kill PID 1.
            h.init.kill()
        self._reap(h)

    def _reap(self, h: Host) -> None:
        assert h.init is not None
        try:
            h.init.wait(timeout=30)
        except subprocess.TimeoutExpired:
            h.init.kill()
            h.init.wait(timeout=30)
        for d in h.daemons:
            try:
                d.wait(timeout=30)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()
        h.daemons = []
        h.pid = 0
        # The switch's end of the veth died with the host's network namespace.
        if self.switch is not None and self.switch.poll() is None:
            try:
                self._switch_ip("link", "del", h.port)
            except ClusterError:
                pass    # already gone

    def restart_host(self, host: str) -> None:
        """Boot a killed host again: same disks (the directories under
        workdir), fresh /run and /dev/shm, new namespaces and link."""
        h = self.hosts[host]
        if h.alive:
            raise ClusterError(f"{host} is still running")
        self._boot(h)

    def cut_links(self, host: str) -> float:
        """Stop the switch from forwarding anything to or from host: its
        packets vanish without FIN or RST, its link stays up (it sees no
        carrier change).  Returns time.monotonic() of the cut."""
        h = self.hosts[host]
        t = time.monotonic()
        # (ip link set ... type bridge_slave state 0 is accepted and ignored.)
        self._in_switch("bridge", "link", "set", "dev", h.port, "state", "0")
        h.links_cut = True
        return t

    def restore_links(self, host: str) -> None:
        h = self.hosts[host]
        self._in_switch("bridge", "link", "set", "dev", h.port, "state", "3")
        h.links_cut = False

    # ---- tear down -------------------------------------------------------

    def stop(self, keep_dir: bool = False) -> None:
        """Kill every host and the switch (their namespaces, mounts and
        links go with them) and remove the work directory."""
        if self._stopped:
            return
        self._stopped = True
        for h in self.hosts.values():
            if h.alive:
                self._kill(h)
        if self.switch is not None and self.switch.poll() is None:
            self.switch.kill()
            self.switch.wait()
        if not keep_dir and os.path.isdir(self.workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)
