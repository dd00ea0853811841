"""The failover loop of the cluster tests (tests/ha): a promotable clone
with a workload colocated with its promoted instance and started after
the promotion, whose promoted host is killed or cut off in turn.

Each failover waits for the cluster to be steady (one promoted instance,
the workload with it alone, an instance on every live host), faults the
promoted host, waits for a survivor to be promoted and for the workload's
first write there (from its journal: lines "HOST MONOTONIC_NS SEQ ...",
each a write the workload saw complete, CLOCK_MONOTONIC being the
machine's and so every host's), checks that the old host wrote nothing
it should not have, brings it back and waits for it to rejoin
unpromoted.  A test adds its own checks through the hooks of Loop.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass
from typing import Callable, Optional

from cluster import Cluster, ClusterError, wait_for

FAILOVER_TIMEOUT = 90.0
REJOIN_TIMEOUT = 240.0
POLL = 0.25
CUT_HOLD = 10.0     # seconds a host stays cut off before its links come back

# The workload's agent: ocf:heartbeat:anything would do, but it runs its
# program through "su - root", a login shell whose profile may take long
WRITER_AGENT = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "ocf", "writer")
OCF_WRITER = "/usr/lib/ocf/resource.d/qemu-drbd-test/writer"

RSC_DEFAULTS_XML = """
<rsc_defaults>
  <meta_attributes id="rsc-options">
    <nvpair id="rsc-options-stickiness" name="resource-stickiness" value="100"/>
  </meta_attributes>
</rsc_defaults>"""


def constraints_xml(clone: str, workload: str) -> str:
    """The workload runs with the promoted instance, after the promotion"""
    return f"""
<constraints>
  <rsc_colocation id="{workload}-with-promoted" score="INFINITY"
                  rsc="{workload}" with-rsc="{clone}" with-rsc-role="Promoted"/>
  <rsc_order id="{workload}-after-promote" kind="Mandatory"
             first="{clone}" first-action="promote" then="{workload}" then-action="start"/>
</constraints>"""


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


def _journal_times(journal: str, host: str, after_ns: int) -> list[int]:
    """MONOTONIC_NS of host's journal lines after after_ns"""
    times = []
    try:
        with open(journal) as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[0] == host and int(parts[1]) > after_ns:
                    times.append(int(parts[1]))
    except FileNotFoundError:
        pass
    return times


def first_write(journal: str, host: str, after_ns: int) -> Optional[int]:
    times = _journal_times(journal, host, after_ns)
    return times[0] if times else None


def last_write(journal: str, host: str, after_ns: int) -> Optional[int]:
    times = _journal_times(journal, host, after_ns)
    return times[-1] if times else None


def install_agent(mine: str, where: str) -> None:
    """Pacemaker finds agents in its OCF root only: this tree's agent goes
    there, as make install-tools puts the drbd agent"""
    with open(mine, "rb") as f:
        text = f.read()
    try:
        with open(where, "rb") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(where), exist_ok=True)
    shutil.copyfile(mine, where)
    os.chmod(where, 0o755)
    log(f"installed {mine} as {where}")



def stats(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"median {statistics.median(xs):.2f}s max {max(xs):.2f}s"


class Loop:
    """Failovers of @clone (its workload @workload, journal @journal) on
    cluster @c.  @after_takeover(new, old, fault_t) and @after_rejoin(new,
    old) are the test's own checks (they raise on a failure).  With
    @split_ok, a cut-off host that keeps writing (two hosts, no fencing:
    a split brain) is reported rather than failed."""

    def __init__(self, c: Cluster, clone: str, workload: str, journal: str,
                 after_takeover: Optional[Callable[[str, str, float], None]] = None,
                 after_rejoin: Optional[Callable[[str, str], None]] = None,
                 split_ok: bool = False):
        self.c = c
        self.clone = clone
        self.workload = workload
        self.journal = journal
        self.after_takeover = after_takeover
        self.after_rejoin = after_rejoin
        self.split_ok = split_ok

    def steady(self, viewers: list[str]) -> Optional[str]:
        """The promoted host if, as every viewer sees it, exactly one
        instance is promoted, the workload runs there alone, and every
        viewer runs an instance of the clone; else None."""
        agreed = None
        for v in viewers:
            try:
                promoted = self.c.where_promoted(self.clone, host=v)
                running = self.c.resource_nodes(self.workload, host=v)
                members = self.c.resource_nodes(self.clone, host=v)
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

    def wait_steady(self, timeout: float = REJOIN_TIMEOUT) -> str:
        viewers = [h.name for h in self.c.hosts.values()
                   if h.alive and not h.links_cut]
        found: list[str] = []

        def check() -> bool:
            p = self.steady(viewers)
            if p:
                found.append(p)
            return p is not None

        wait_for(f"one promoted instance and the workload with it on {viewers}",
                 check, timeout, interval=1.0)
        return found[-1]

    def wait_takeover(self, old: str, fault_t: float) -> tuple[str, float, float]:
        """Wait for a survivor to be promoted and to write; return it, and
        the seconds from the fault to its promotion and to its first
        write."""
        survivors = [h.name for h in self.c.hosts.values()
                     if h.name != old and h.alive]
        viewer = survivors[0]
        new: list[str] = []

        def promoted() -> bool:
            try:
                p = self.c.where_promoted(self.clone, host=viewer)
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
            w = first_write(self.journal, new[-1], fault_ns)
            if w is not None:
                written.append(w)
            return w is not None

        wait_for(f"the workload's first write on {new[-1]}", wrote,
                 FAILOVER_TIMEOUT, interval=0.1)
        return new[-1], promote_s, written[-1] / 1e9 - fault_t

    def stale_writes(self, kind: str, old: str,
                     fault_t: float) -> tuple[float, bool]:
        """How long after the fault the old host still wrote, and whether
        it still does.  A killed host must not have written at all; a
        cut-off one is given until CUT_HOLD seconds after the cut to
        stop."""
        if kind == "cut":
            time.sleep(max(0.0, fault_t + CUT_HOLD - time.monotonic()))
        last = last_write(self.journal, old, int(fault_t * 1e9))
        if last is None:
            return 0.0, False
        stale_s = last / 1e9 - fault_t
        if kind == "kill":
            raise ClusterError(f"{old} wrote {stale_s:.3f}s after it was killed")
        writing = time.monotonic() - last / 1e9 < 1.0
        if writing and not self.split_ok:
            raise ClusterError(f"{old}, cut off, still writes {stale_s:.1f}s "
                               "after the cut: two writers")
        if writing:
            log(f"{old}, cut off, is still writing {stale_s:.1f}s after the cut "
                "(split brain: no quorum loss, no fencing)")
        else:
            log(f"{old}, cut off, stopped writing {stale_s:.2f}s after the cut")
        return stale_s, writing

    def fail_over(self, kind: str) -> Failover:
        old = self.wait_steady()
        t = self.c.kill_host(old) if kind == "kill" else self.c.cut_links(old)
        # Killed, the host's processes are all gone once kill_host()
        # returns; a write it completed in between was not after its end
        t_gone = time.monotonic() if kind == "kill" else t
        new, promote_s, write_s = self.wait_takeover(old, t)
        log(f"{kind} {old}: {new} promoted after {promote_s:.2f}s, "
            f"first write after {write_s:.2f}s")
        if self.after_takeover:
            self.after_takeover(new, old, t)
        stale_s, writing = self.stale_writes(kind, old, t_gone)
        t_back = time.monotonic()
        if kind == "kill":
            self.c.restart_host(old)
        else:
            self.c.restore_links(old)
        self.c.wait_online(REJOIN_TIMEOUT)
        after = self.wait_steady()
        rejoin_s = time.monotonic() - t_back
        if writing:
            # Both sides were promoted and wrote: Pacemaker keeps one of
            # them, not necessarily the survivor.  Only fencing (or a
            # quorum) can prevent this; see README.rst.
            log(f"{old} back after {rejoin_s:.1f}s: split brain resolved, "
                f"{after} kept promoted")
        elif after != new:
            raise ClusterError(f"after {old} came back, {after} is promoted, "
                               f"not the survivor {new}")
        else:
            log(f"{old} back as unpromoted after {rejoin_s:.1f}s; {new} still promoted")
        if self.after_rejoin:
            self.after_rejoin(after, old)
        return Failover(kind, old, new, promote_s, write_s, rejoin_s, stale_s, writing)


def summary(what: str, n: int, results: list[Failover], failed: int) -> str:
    stopped = [r.stale_s for r in results if r.kind == "cut" and not r.split]
    split = sum(r.split for r in results)
    kinds = ", ".join(f"{sum(r.kind == k for r in results)} {k}"
                      for k in sorted({r.kind for r in results}))
    return (f"{what} {n} hosts: {len(results)} failovers ({kinds or 'none'}), "
            f"{failed} failed; fault->promoted {stats([r.promote_s for r in results])}; "
            f"fault->first write {stats([r.write_s for r in results])}; "
            f"rejoin {stats([r.rejoin_s for r in results])}; "
            f"cut-off host stopped writing {stats(stopped)}"
            f"{f', kept writing (split brain) in {split} cuts' if split else ''}")


def run_cluster(c: Cluster, failovers: int, kinds: list[str], keep: bool,
                setup: Callable[[Cluster], Loop],
                finish: Optional[Callable[[Cluster], None]] = None
                ) -> tuple[list[Failover], int, int]:
    """Start cluster @c, let @setup configure it, run @failovers
    failovers (faults taken in turn from @kinds), then @finish (a case of
    its own), and stop it.  Returns the failovers and how many cases
    passed and failed: after a failure the cluster is in an unknown
    state, and the cases left count as failed."""
    results: list[Failover] = []
    finished = False
    n = len(c.hosts)
    try:
        c.start()
        log(f"{n} hosts up after {c.wait_online(REJOIN_TIMEOUT):.1f}s")
        loop = setup(c)
        for i in range(failovers):
            kind = kinds[i % len(kinds)]
            log(f"failover {i + 1}/{failovers} of {n} hosts: {kind}")
            results.append(loop.fail_over(kind))
        if finish:
            finish(c)
        finished = True
    except Exception:
        log(f"FAILED after {len(results)} failovers of {n} hosts")
        traceback.print_exc()
    finally:
        if keep:
            log(f"keeping {c.workdir}")
        c.stop(keep_dir=keep)
    extra = 1 if finish else 0
    return (results, len(results) + (extra if finished else 0),
            failovers - len(results) + (0 if finished else extra))


def arg_parser(doc: str, hosts: str, kinds_help: str) -> argparse.ArgumentParser:
    """The options of a cluster test: --hosts (default @hosts),
    --failovers, --kinds, --workdir, --keep"""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--hosts", default=hosts,
                    help=f"cluster sizes to test, comma-separated (default {hosts})")
    ap.add_argument("--failovers", type=int, default=10,
                    help="failovers per cluster (default 10)")
    ap.add_argument("--kinds", default="kill,cut", help=kinds_help)
    ap.add_argument("--workdir", default=None,
                    help="where the hosts' directories go (default: a new temp dir)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work directory (logs) at the end")
    return ap


def run_clusters(what: str, ap: argparse.ArgumentParser,
                 args: argparse.Namespace,
                 run_one: Callable[[int, list[str], str],
                                   tuple[list[Failover], int, int]]) -> int:
    """Run @run_one(hosts, kinds, workdir) for each cluster size of
    --hosts; print a summary line per cluster and "N passed, N failed";
    return the exit status"""
    kinds = args.kinds.split(",")
    if not set(kinds) <= {"kill", "cut"}:
        ap.error("--kinds takes kill and cut")
    workdir = args.workdir or tempfile.mkdtemp(prefix="qdrbd-ha-", dir="/var/tmp")
    lines = []
    passed = failed = 0
    for n in (int(x) for x in args.hosts.split(",")):
        results, good, bad = run_one(n, kinds, workdir)
        passed += good
        failed += bad
        lines.append(summary(what, n, results, bad))
    if not args.keep and os.path.isdir(workdir) and not os.listdir(workdir):
        os.rmdir(workdir)
    for line in lines:
        print(line)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0
