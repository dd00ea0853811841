#!/usr/bin/env python3
"""Failover of a qemu-drbd resource by a real cluster manager: corosync and
Pacemaker on two or three hosts (tests/ha/cluster.py), the resource as a
promotable clone of our agent ocf:qemu-drbd:drbd (each host's node a
qemu-storage-daemon that the agent starts, replicating over the hosts'
links), and a guest workload (tests/ha/nbdwriter.py: 4 KiB writes over
the promoted node's NBD export, each acknowledged one journalled)
colocated with the promoted instance and started after the promotion.

In a loop, the promoted host is killed (SIGKILL to every process of the
host at once: corosync, Pacemaker, the daemon, the workload) or, with
three hosts, cut off (its links drop every packet, no FIN, no RST; the
resource has quorum=majority, so the cut-off primary stops writing).
Each time a survivor must be promoted by Pacemaker and the workload must
write there; every write the workload saw acknowledged, on any host and
before any failover, must be on the new primary's disk; the old host
comes back (restarted, or its links restored), rejoins as secondary and
resyncs (its disk up to date again).  At the end the resource is
stopped and every replica must be byte-identical (qemu-img compare).

    test-drbd-failover.py BUILD_DIR [--hosts 3,2] [--failovers 10]
                          [--kinds kill,cut] [--keep]

With two hosts the resource has fencing=resource-and-stonith: the agent
must have placed its constraint when the survivor writes, and lift it
once the old host is up to date; only kill is run (a cut makes two
writers without node-level fencing, see README.rst).  Exits non-zero on any failure; prints the failover times and
"N passed, N failed" (one case per failover, one per final comparison).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, ClusterError, wait_for  # noqa: E402
from failover import (OCF_WRITER, REJOIN_TIMEOUT, RSC_DEFAULTS_XML,  # noqa: E402
                      WRITER_AGENT, Loop, arg_parser, constraints_xml,
                      install_agent, log, run_cluster, run_clusters)
from nbdwriter import Nbd, check_acked  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
AGENT = os.path.join(TOP, "tools", "ocf", "drbd")
DRBDADM = os.path.join(TOP, "tools", "qemu-drbdadm")
OCF_AGENT = "/usr/lib/ocf/resource.d/qemu-drbd/drbd"
CLONE = "drbd-clone"
WORKLOAD = "guest"
RES = "r0"
SIZE = 64 * 1024 * 1024
BLOCKS = 256
PORT = 7789
EXPORT = f"/run/qemu-drbd/{RES}.nbd"


def resource_file(c: Cluster) -> str:
    n = len(c.hosts)
    text = f"""[resource]
name = {RES}
protocol = C
role = secondary
connect-interval = 300
ping-interval = 300
ping-timeout = 600
max-peers = {n - 1}
"""
    if n >= 3:
        text += "quorum = majority\non-no-quorum = io-error\n"
    else:
        # No third vote: the agent fences the lost peer (a constraint
        # that keeps it from being promoted) before the survivor writes
        text += "fencing = resource-and-stonith\n"
    for h in c.hosts.values():
        text += f"""
[node {h.name}]
node-id = {h.index - 1}
address = {h.addr}:{PORT}
disk = {os.path.join(h.dir, RES + '.img')}
export = nbd:unix:{EXPORT}
"""
    return text


def resources_xml(c: Cluster, bld: str, config: str, journal: str) -> str:
    writer = os.path.join(HERE, "nbdwriter.py")
    params = {"resource": RES, "config": config, "drbdadm": DRBDADM,
              "bindir": bld, "python": sys.executable}
    attrs = "\n".join(
        f'        <nvpair id="drbd-{k}" name="{k}" value="{v}"/>'
        for k, v in params.items())
    return f"""
<resources>
  <clone id="{CLONE}">
    <meta_attributes id="{CLONE}-meta">
      <nvpair id="{CLONE}-promotable" name="promotable" value="true"/>
      <nvpair id="{CLONE}-promoted-max" name="promoted-max" value="1"/>
      <nvpair id="{CLONE}-clone-max" name="clone-max" value="{len(c.hosts)}"/>
      <nvpair id="{CLONE}-notify" name="notify" value="true"/>
    </meta_attributes>
    <primitive id="drbd" class="ocf" provider="qemu-drbd" type="drbd">
      <instance_attributes id="drbd-attrs">
{attrs}
      </instance_attributes>
      <operations>
        <op id="drbd-start" name="start" interval="0" timeout="60s"/>
        <op id="drbd-stop" name="stop" interval="0" timeout="60s"/>
        <op id="drbd-promote" name="promote" interval="0" timeout="60s"/>
        <op id="drbd-demote" name="demote" interval="0" timeout="60s"/>
        <op id="drbd-mon-p" name="monitor" interval="2s" role="Promoted" timeout="20s"/>
        <op id="drbd-mon-u" name="monitor" interval="3s" role="Unpromoted" timeout="20s"/>
      </operations>
    </primitive>
  </clone>
  <primitive id="{WORKLOAD}" class="ocf" provider="qemu-drbd-test" type="writer">
    <instance_attributes id="{WORKLOAD}-attrs">
      <nvpair id="{WORKLOAD}-python" name="python" value="{sys.executable}"/>
      <nvpair id="{WORKLOAD}-program" name="program" value="{writer}"/>
      <nvpair id="{WORKLOAD}-args" name="args"
              value="{EXPORT} {RES} {journal} {BLOCKS}"/>
      <nvpair id="{WORKLOAD}-log" name="log" value="{journal}.log"/>
    </instance_attributes>
    <operations>
      <op id="{WORKLOAD}-mon" name="monitor" interval="2s" timeout="20s"/>
    </operations>
  </primitive>
</resources>"""


def drbd_status(c: Cluster, host: str, config: str) -> dict:
    done = c.run(host, [DRBDADM, "status", RES, "--json", "--config", config],
                 check=True)
    info: dict = json.loads(done.stdout)[0]
    return info


FENCE_ID = f"drbd-fence-by-handler-{RES}-{CLONE}"


class DrbdChecks:
    """What the drbd cluster test checks at each failover; with @fencing,
    also the agent's fencing constraint"""

    def __init__(self, c: Cluster, config: str, journal: str,
                 fencing: bool):
        self.c = c
        self.config = config
        self.journal = journal
        self.fencing = fencing
        self.checked = 0

    def fence_constraint(self, host: str) -> str:
        """The agent's fencing constraint as the CIB has it, or ''"""
        done = self.c.run(host, ["cibadmin", "--query", "--xpath",
                                 f"//rsc_location[@id='{FENCE_ID}']"])
        return done.stdout if done.returncode == 0 else ""

    def after_takeover(self, new: str, old: str, fault_t: float) -> None:
        """Every write acknowledged so far, on any host, is on the disk
        of the new primary (read over its NBD export)"""
        nbd = Nbd(self.c.hosts[new].path(EXPORT), RES)
        try:
            n = check_acked(nbd, self.journal, BLOCKS)
        finally:
            nbd.close()
        self.checked += 1
        log(f"{new}: all {n} blocks written so far hold their last "
            "acknowledged write or a later one")
        if self.fencing:
            # The workload wrote: the agent fenced the old primary first
            xml = self.fence_constraint(new)
            if f'value="{new}"' not in xml or 'operation="ne"' not in xml:
                raise ClusterError(f"{new} writes, but the fencing "
                                   f"constraint is not in place: {xml!r}")

    def after_rejoin(self, primary: str, old: str) -> None:
        """The old host is a secondary again, and up to date once its
        resync is over"""
        def synced() -> bool:
            try:
                info = drbd_status(self.c, old, self.config)
            except (ClusterError, ValueError, IndexError):
                return False
            return info["role"] == "secondary" and info["disk"] == "up-to-date"

        wait_for(f"{old} to be an up-to-date secondary", synced,
                 REJOIN_TIMEOUT, interval=1.0)
        if self.fencing:
            # Up to date: the primary's next monitor lifts the constraint
            wait_for("the fencing constraint to be lifted",
                     lambda: not self.fence_constraint(primary), 60,
                     interval=0.5)


def compare_replicas(c: Cluster, bld: str) -> None:
    """Stop the resource (the workload first), then every replica holds
    the same data"""
    host = c.any_live_host()
    c.run(host, ["crm_resource", "--resource", WORKLOAD, "--set-parameter",
                 "target-role", "--meta", "--parameter-value", "Stopped"],
          check=True)
    c.run(host, ["crm_resource", "--resource", CLONE, "--set-parameter",
                 "target-role", "--meta", "--parameter-value", "Stopped"],
          check=True)
    wait_for("the resource to stop everywhere",
             lambda: not c.resource_nodes(CLONE, host=host), 120, interval=1.0)
    qemu_img = os.path.join(bld, "qemu-img")
    imgs = [os.path.join(h.dir, RES + ".img") for h in c.hosts.values()]
    for other in imgs[1:]:
        done = subprocess.run([qemu_img, "compare", "-f", "drbd", "-F", "drbd",
                               imgs[0], other], capture_output=True, text=True,
                              timeout=120)
        if done.returncode != 0:
            raise ClusterError(f"{imgs[0]} and {other} differ: "
                               f"{(done.stdout + done.stderr).strip()}")
    log(f"the {len(imgs)} replicas are identical")


def setup(c: Cluster, bld: str) -> Loop:
    """The resource file, the images, the clone and the workload, on a
    new cluster"""
    n = len(c.hosts)
    config = os.path.join(c.workdir, f"{RES}.res")
    with open(config, "w") as f:
        f.write(resource_file(c))
    for h in c.hosts.values():
        subprocess.run([os.path.join(bld, "qemu-img"), "create", "-q",
                        "-f", "drbd", "-o", f"max-peers={n - 1}",
                        os.path.join(h.dir, RES + ".img"), str(SIZE)],
                       check=True)
    journal = os.path.join(c.workdir, "journal")
    c.set_test_properties()
    c.cib(RSC_DEFAULTS_XML)
    c.cib(resources_xml(c, bld, config, journal))
    c.cib(constraints_xml(CLONE, WORKLOAD))
    checks = DrbdChecks(c, config, journal, fencing=n < 3)
    return Loop(c, CLONE, WORKLOAD, journal, checks.after_takeover,
                checks.after_rejoin)


def main() -> int:
    ap = arg_parser(__doc__, "3,2", "faults, taken in turn: kill, cut "
                    "(default kill,cut; two hosts: kill only)")
    ap.add_argument("build", help="QEMU's build directory (qemu-img, "
                    "storage-daemon/qemu-storage-daemon)")
    args = ap.parse_args()
    bld = os.path.abspath(args.build)
    install_agent(AGENT, OCF_AGENT)
    install_agent(WRITER_AGENT, OCF_WRITER)
    # The failovers, then the comparison of the replicas: a case each
    return run_clusters(
        "drbd", ap, args,
        lambda n, kinds, workdir: run_cluster(
            Cluster(n, os.path.join(workdir, f"drbd{n}")), args.failovers,
            kinds if n >= 3 else ["kill"], args.keep,
            lambda c: setup(c, bld), lambda c: compare_replicas(c, bld)))


if __name__ == "__main__":
    sys.exit(main())
