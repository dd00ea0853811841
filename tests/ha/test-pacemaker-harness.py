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

import argparse
import os
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster  # noqa: E402
from failover import (OCF_WRITER, REJOIN_TIMEOUT, RSC_DEFAULTS_XML,  # noqa: E402
                      WRITER_AGENT, Failover, Loop, constraints_xml,
                      install_agent, log, summary)

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


def run_cluster(n: int, failovers: int, kinds: list[str],
                workdir: str, keep: bool) -> tuple[list[Failover], int]:
    """Run the failovers on a new cluster of n hosts; return the results
    and how many failovers failed or were not run because one failed."""
    results: list[Failover] = []
    c = Cluster(n, os.path.join(workdir, f"cluster{n}"))
    try:
        c.start()
        log(f"{n} hosts up after {c.wait_online(REJOIN_TIMEOUT):.1f}s")
        journal = os.path.join(c.workdir, "journal")
        c.set_test_properties()
        c.cib(RSC_DEFAULTS_XML)
        c.cib(resources_xml(journal))
        c.cib(constraints_xml(CLONE, WORKLOAD))
        loop = Loop(c, CLONE, WORKLOAD, journal, split_ok=n == 2)
        for i in range(failovers):
            kind = kinds[i % len(kinds)]
            log(f"failover {i + 1}/{failovers} of {n} hosts: {kind}")
            results.append(loop.fail_over(kind))
    except Exception:
        # The cluster is in an unknown state: the failovers left count as failed.
        log(f"FAILED after {len(results)} failovers of {n} hosts")
        traceback.print_exc()
    finally:
        if keep:
            log(f"keeping {c.workdir}")
        c.stop(keep_dir=keep)
    return results, failovers - len(results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", default="2,3",
                    help="cluster sizes to test, comma-separated (default 2,3)")
    ap.add_argument("--failovers", type=int, default=10,
                    help="failovers per cluster (default 10)")
    ap.add_argument("--kinds", default="kill,cut",
                    help="faults, taken in turn: kill, cut (default kill,cut)")
    ap.add_argument("--workdir", default=None,
                    help="where the hosts' directories go (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (logs) at the end")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    if not set(kinds) <= {"kill", "cut"}:
        ap.error("--kinds takes kill and cut")
    install_agent(WRITER_AGENT, OCF_WRITER)
    workdir = args.workdir or tempfile.mkdtemp(prefix="qdrbd-ha-", dir="/var/tmp")
    lines = []
    passed = failed = 0
    for n in (int(x) for x in args.hosts.split(",")):
        results, bad = run_cluster(n, args.failovers, kinds, workdir, args.keep)
        passed += len(results)
        failed += bad
        lines.append(summary("ha-harness", n, results, bad))
    if not args.keep and os.path.isdir(workdir) and not os.listdir(workdir):
        os.rmdir(workdir)
    for line in lines:
        print(line)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
