#!/usr/bin/env python3
"""Failover test of the HA harness (tests/ha/cluster.py) with Pacemaker's
own agents: a promotable clone of ocf:pacemaker:Stateful, and a workload
(tests/ha/writer.py under ocf:heartbeat:anything) colocated with the
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
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cluster import Cluster, ClusterError, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CLONE = "state-clone"
WORKLOAD = "workload"

FAILOVER_TIMEOUT = 90.0
REJOIN_TIMEOUT = 240.0
POLL = 0.25
CUT_HOLD = 10.0     # seconds a host stays cut off before its links come back


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
  <primitive id="{WORKLOAD}" class="ocf" provider="heartbeat" type="anything">
    <instance_attributes id="{WORKLOAD}-attrs">
      <nvpair id="{WORKLOAD}-bin" name="binfile" value="{sys.executable}"/>
      <nvpair id="{WORKLOAD}-args" name="cmdline_options" value="{writer} {journal}"/>
    </instance_attributes>
    <operations>
      <op id="{WORKLOAD}-mon" name="monitor" interval="2s" timeout="20s"/>
    </operations>
  </primitive>
</resources>"""


CONSTRAINTS_XML = f"""
<constraints>
  <rsc_colocation id="{WORKLOAD}-with-promoted" score="INFINITY"
                  rsc="{WORKLOAD}" with-rsc="{CLONE}" with-rsc-role="Promoted"/>
  <rsc_order id="{WORKLOAD}-after-promote" kind="Mandatory"
             first="{CLONE}" first-action="promote" then="{WORKLOAD}" then-action="start"/>
</constraints>"""

RSC_DEFAULTS_XML = """
<rsc_defaults>
  <meta_attributes id="rsc-options">
    <nvpair id="rsc-options-stickiness" name="resource-stickiness" value="100"/>
  </meta_attributes>
</rsc_defaults>"""


@dataclass
class Failover:
    kind: str
    old: str
    new: str
    promote_s: float
    write_s: float
    rejoin_s: float
    stale_s: float      # how long after the fault the old host still wrote
    split: bool         # the cut-off host was still writing when restored


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def first_write(journal: str, host: str, after_ns: int) -> Optional[int]:
    """MONOTONIC_NS of host's first journal line after after_ns, if any."""
    try:
        with open(journal) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0] == host and int(parts[1]) > after_ns:
                    return int(parts[1])
    except FileNotFoundError:
        pass
    return None


def last_write(journal: str, host: str, after_ns: int) -> Optional[int]:
    """MONOTONIC_NS of host's last journal line after after_ns, if any."""
    last = None
    with open(journal) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == host and int(parts[1]) > after_ns:
                last = int(parts[1])
    return last


def steady(c: Cluster, viewers: list[str]) -> Optional[str]:
    """The promoted host if, as every viewer sees it, exactly one instance
    is promoted, the workload runs there alone, and every viewer runs an
    instance of the clone; else None."""
    agreed = None
    for v in viewers:
        try:
            promoted = c.where_promoted(CLONE, host=v)
            running = c.resource_nodes(WORKLOAD, host=v)
            members = c.resource_nodes(CLONE, host=v)
        except ClusterError:
            return None
        if len(promoted) != 1 or running != promoted:
            return None
        if sorted(members) != sorted(viewers):
            return None
        if agreed not in (None, promoted[0]):
            return None
        agreed = promoted[0]
    return agreed


def wait_steady(c: Cluster, timeout: float) -> str:
    viewers = [h.name for h in c.hosts.values() if h.alive and not h.links_cut]
    found: list[str] = []

    def check() -> bool:
        p = steady(c, viewers)
        if p:
            found.append(p)
        return p is not None

    wait_for(f"one promoted instance and the workload with it on {viewers}",
              check, timeout, interval=1.0)
    return found[-1]


def wait_takeover(c: Cluster, old: str, fault_t: float,
                  journal: str) -> tuple[str, float, float]:
    """Wait for a survivor to be promoted and to write; return it, and the
    seconds from the fault to its promotion and to its first write."""
    survivors = [h.name for h in c.hosts.values()
                 if h.name != old and h.alive]
    viewer = survivors[0]
    new: list[str] = []

    def promoted() -> bool:
        try:
            p = c.where_promoted(CLONE, host=viewer)
        except ClusterError:
            return False
        if len(p) == 1 and p[0] in survivors:
            new.append(p[0])
            return True
        return False

    wait_for(f"promotion of a survivor of {old}", promoted,
              FAILOVER_TIMEOUT, interval=POLL)
    promote_s = time.monotonic() - fault_t
    fault_ns = int(fault_t * 1e9)
    written: list[int] = []

    def wrote() -> bool:
        w = first_write(journal, new[-1], fault_ns)
        if w is not None:
            written.append(w)
        return w is not None

    wait_for(f"the workload's first write on {new[-1]}", wrote,
              FAILOVER_TIMEOUT, interval=0.1)
    return new[-1], promote_s, written[-1] / 1e9 - fault_t


def stale_writes(c: Cluster, kind: str, old: str, fault_t: float,
                 journal: str) -> tuple[float, bool]:
    """How long after the fault the old host still wrote, and whether it
    still does.  A killed host must not have written at all; a cut-off
    one is given until CUT_HOLD seconds after the cut to stop."""
    if kind == "cut":
        time.sleep(max(0.0, fault_t + CUT_HOLD - time.monotonic()))
    last = last_write(journal, old, int(fault_t * 1e9))
    if last is None:
        return 0.0, False
    stale_s = last / 1e9 - fault_t
    if kind == "kill":
        raise ClusterError(f"{old} wrote {stale_s:.3f}s after it was killed")
    writing = time.monotonic() - last / 1e9 < 1.0
    if writing:
        log(f"{old}, cut off, is still writing {stale_s:.1f}s after the cut "
            "(split brain: no quorum loss, no fencing)")
    else:
        log(f"{old}, cut off, stopped writing {stale_s:.2f}s after the cut")
    return stale_s, writing


def fail_over(c: Cluster, kind: str, journal: str) -> Failover:
    old = wait_steady(c, REJOIN_TIMEOUT)
    if kind == "kill":
        t = c.kill_host(old)
    else:
        t = c.cut_links(old)
    new, promote_s, write_s = wait_takeover(c, old, t, journal)
    log(f"{kind} {old}: {new} promoted after {promote_s:.2f}s, "
        f"first write after {write_s:.2f}s")
    stale_s, writing = stale_writes(c, kind, old, t, journal)
    t_back = time.monotonic()
    if kind == "kill":
        c.restart_host(old)
    else:
        c.restore_links(old)
    c.wait_online(REJOIN_TIMEOUT)
    after = wait_steady(c, REJOIN_TIMEOUT)
    rejoin_s = time.monotonic() - t_back
    if writing:
        # Both sides were promoted and wrote: Pacemaker keeps one of them,
        # not necessarily the survivor.  Only fencing (or a quorum) can
        # prevent this; see README.rst.
        log(f"{old} back after {rejoin_s:.1f}s: split brain resolved, "
            f"{after} kept promoted")
    elif after != new:
        raise ClusterError(f"after {old} came back, {after} is promoted, "
                           f"not the survivor {new}")
    else:
        log(f"{old} back as unpromoted after {rejoin_s:.1f}s; {new} still promoted")
    return Failover(kind, old, new, promote_s, write_s, rejoin_s, stale_s, writing)


def summary(n: int, results: list[Failover], failed: int) -> str:
    def stats(xs: list[float]) -> str:
        if not xs:
            return "-"
        return f"median {statistics.median(xs):.2f}s max {max(xs):.2f}s"

    stopped = [r.stale_s for r in results if r.kind == "cut" and not r.split]
    split = sum(r.split for r in results)
    kinds = ", ".join(f"{sum(r.kind == k for r in results)} {k}"
                      for k in sorted({r.kind for r in results}))
    return (f"ha-harness {n} hosts: {len(results)} failovers ({kinds or 'none'}), "
            f"{failed} failed; fault->promoted {stats([r.promote_s for r in results])}; "
            f"fault->first write {stats([r.write_s for r in results])}; "
            f"rejoin {stats([r.rejoin_s for r in results])}; "
            f"cut-off host stopped writing {stats(stopped)}"
            f"{f', kept writing (split brain) in {split} cuts' if split else ''}")


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
        c.cib(CONSTRAINTS_XML)
        for i in range(failovers):
            kind = kinds[i % len(kinds)]
            log(f"failover {i + 1}/{failovers} of {n} hosts: {kind}")
            results.append(fail_over(c, kind, journal))
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
    workdir = args.workdir or tempfile.mkdtemp(prefix="qdrbd-ha-", dir="/var/tmp")
    lines = []
    passed = failed = 0
    for n in (int(x) for x in args.hosts.split(",")):
        results, bad = run_cluster(n, args.failovers, kinds, workdir, args.keep)
        passed += len(results)
        failed += bad
        lines.append(summary(n, results, bad))
    if not args.keep and os.path.isdir(workdir) and not os.listdir(workdir):
        os.rmdir(workdir)
    for line in lines:
        print(line)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
