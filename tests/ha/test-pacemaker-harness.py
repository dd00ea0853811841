#!/usr/bin/env python3
"""Failover test of the HA harness (tests/ha/cluster.py) with Pacemaker's
own agents: a promotable clone of ocf:pacemaker:Stateful, and a workload
(tests/ha/writer.py under ocf:qemu-drbd-test:writer, tests/ha/ocf/writer) colocated with the
promoted instance and started after the promotion.

In a loop, the promoted host is either killed (SIGKILL to every process
of it) or cut off (the switch drops all its packets).  Each time the test
checks that a survivor is promoted and the workload runs there, and
measures the time from the fault to the promotion and to the workload's
first write on the survivor; then it brings the host back (restart, or
links restored) and checks that it rejoins unpromoted while the survivor
stays promoted.

    test-pacemaker-harness.py [--hosts 2,3] [--failovers 10] [--kinds kill,cut]

Exits non-zero on any failure; ends with a summary line per cluster and a
line "N passed, N failed" (one case per failover).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster  # noqa: E402
from failover import (OCF_WRITER, RSC_DEFAULTS_XML, WRITER_AGENT,  # noqa: E402
                      Loop, arg_parser, constraints_xml, install_agent,
                      run_cluster, run_clusters)

HERE = os.path.dirname(os.path.abspath(__file__))
CLONE = "state-clone"
WORKLOAD = "workload"


def resources_xml(journal: str) -> str:
    writer = os.path.join(HERE, "writer.py")
    return f"""
<resources>
  <clone id="{CLONE}">
    <meta_attributes id="{CLONE}-meta">
      <nvpair id="{CLONE}-promotable" name="promotable" value="true"/>
      <nvpair id="{CLONE}-promoted-max" name="promoted-max" value="1"/>
    </meta_attributes>
    <primitive id="state" class="ocf" provider="pacemaker" type="Stateful">
      <operations>
        <op id="state-mon-p" name="monitor" interval="2s" role="Promoted" timeout="20s"/>
        <op id="state-mon-u" name="monitor" interval="3s" role="Unpromoted" timeout="20s"/>
      </operations>
    </primitive>
  </clone>
  <primitive id="{WORKLOAD}" class="ocf" provider="qemu-drbd-test" type="writer">
    <instance_attributes id="{WORKLOAD}-attrs">
      <nvpair id="{WORKLOAD}-python" name="python" value="{sys.executable}"/>
      <nvpair id="{WORKLOAD}-program" name="program" value="{writer}"/>
      <nvpair id="{WORKLOAD}-args" name="args" value="{journal}"/>
    </instance_attributes>
    <operations>
      <op id="{WORKLOAD}-mon" name="monitor" interval="2s" timeout="20s"/>
    </operations>
  </primitive>
</resources>"""


def setup(c: Cluster) -> Loop:
    """The Stateful clone and the workload, on a new cluster"""
    journal = os.path.join(c.workdir, "journal")
    c.set_test_properties()
    c.cib(RSC_DEFAULTS_XML)
    c.cib(resources_xml(journal))
    c.cib(constraints_xml(CLONE, WORKLOAD))
    return Loop(c, CLONE, WORKLOAD, journal, split_ok=len(c.hosts) == 2)


def main() -> int:
    ap = arg_parser(__doc__, "2,3",
                    "faults, taken in turn: kill, cut (default kill,cut)")
    args = ap.parse_args()
    install_agent(WRITER_AGENT, OCF_WRITER)
    return run_clusters(
        "ha-harness", ap, args,
        lambda n, kinds, workdir: run_cluster(
            Cluster(n, os.path.join(workdir, f"cluster{n}")),
            args.failovers, kinds, args.keep, setup))


if __name__ == "__main__":
    sys.exit(main())
