"""How low provisioned/ideal can go on a trace when nothing is ever evicted: placement bounds.

Usage: `python bench/placement_bound.py [TRACE]` (default `../shared/traces/philly.csv`).

`sim_bench.py` measures the scaler; this script measures the room any scaler has. It replays the
same jobs in an idealised world (no reconcile loop, no queue: every job starts at its submit time on a
node that is there at once; a launch still costs `boot` seconds of the node's GPUs, an emptied node
is kept `idle` seconds and reused if a job arrives meanwhile) under placement rules that know more
and more. Only the placement differs between rows, so the rows bound what steering new pods (the
scheduler's scoring, attrition marks) can save:

- `migration floor`: ceil(busy GPUs / node GPUs) nodes at every instant, as if running jobs could be
  moved for free (what evicting consolidation reaches at best; not allowed for batch pods).
- `first-fit` (the baseline): the oldest node that fits, as the replay's old scheduler.
- `best-fit`: the node left with the fewest free GPUs (MostAllocated on GPUs).
- `oldest-job-first`: the node whose longest-running job started first (an online guess: on a
  heavy-tailed trace a job that has run long will run long, so its node stays anyway and its free
  GPUs are the ones to fill). The best rule found that uses only what a scaler can see.
- `clairvoyant`: knows every job's end. A job goes where it ends before the node's last job
  (best fit among those), else on the node it extends least; the rule an exact runtime estimate
  would allow. Not an optimum (offline placement is NP-hard), but a strong online bound.

Scenarios as sim_bench's: `one-group` (8-GPU nodes) and `pools` (1-, 4- and 8-GPU nodes, each job on
the smallest node that holds it whole, larger jobs on whole 8-GPU nodes).
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trace_input import add_trace_arguments, read_trace
from shared.local.sim.trace import Job

POOLS = (1, 4, 8)


@dataclass(slots=True, eq=False)
class _Node:
    born: int
    size: int
    free: int
    last_end: int = 0  # the latest end of the jobs it ran (known to the clairvoyant rule only)
    running: list[tuple[int, int]] = field(default_factory=list)  # (start, end) of its jobs
    empty_since: int | None = None

    def oldest_start(self, now: int) -> int:
        self.running = [r for r in self.running if r[1] > now]
        return min((start for start, _ in self.running), default=now)


Rule = Callable[[Sequence[_Node], int, int, int], _Node]  # (fitting nodes, gpus, now, end) -> node


def first_fit(nodes: Sequence[_Node], gpus: int, now: int, end: int) -> _Node:
    return nodes[0]


def best_fit(nodes: Sequence[_Node], gpus: int, now: int, end: int) -> _Node:
    return min(nodes, key=lambda n: n.free)


def oldest_job_first(nodes: Sequence[_Node], gpus: int, now: int, end: int) -> _Node:
    busy = [n for n in nodes if n.free < n.size]
    if not busy:
        return nodes[0]
    return min(busy, key=lambda n: (n.oldest_start(now), n.free))


def clairvoyant(nodes: Sequence[_Node], gpus: int, now: int, end: int) -> _Node:
    busy = [n for n in nodes if n.free < n.size]
    inside = [n for n in busy if n.last_end >= end]
    if inside:
        return min(inside, key=lambda n: (n.free, n.last_end))
    if busy:
        return min(busy, key=lambda n: end - n.last_end)
    return nodes[0]


RULES: tuple[tuple[str, Rule], ...] = (
    ("first-fit", first_fit),
    ("best-fit", best_fit),
    ("oldest-job-first", oldest_job_first),
    ("clairvoyant", clairvoyant),
)
BASELINE = "first-fit"


class _Pool:
    """The nodes of one size: launches, reuse of emptied nodes within `idle`, the GPU-seconds paid."""

    def __init__(self, size: int, boot: int, idle: int) -> None:
        self.size, self.boot, self.idle = size, boot, idle
        self.nodes: list[_Node] = []  # creation order
        self.paid = 0  # node-seconds, boot included
        self.empty = 0  # node-seconds of nodes running nothing (waiting out `idle` or reused)
        self.launches = 0

    def expire(self, now: int) -> None:
        kept: list[_Node] = []
        for node in self.nodes:
            if node.empty_since is not None and node.empty_since + self.idle <= now:
                self.paid += node.empty_since + self.idle - node.born + self.boot
                self.empty += self.idle
            else:
                kept.append(node)
        self.nodes = kept

    def launch(self, now: int) -> _Node:
        node = _Node(born=now, size=self.size, free=self.size)
        self.nodes.append(node)
        self.launches += 1
        return node

    def close(self) -> None:
        self.expire(2**62)


def _pool_sizes(scenario: str, gpus: int) -> tuple[int, int, int]:
    """(node size, whole nodes, GPUs on the last node) of a job in the scenario."""
    if scenario == "pools" and gpus <= max(POOLS):
        size = min(p for p in POOLS if p >= gpus)
        return size, 0, gpus
    whole, rest = divmod(gpus, 8)
    if rest == 0 and whole:
        return 8, whole - 1, 8
    return 8, whole, rest


@dataclass(frozen=True)
class Replayed:
    ratio: float  # provisioned over ideal GPU-seconds
    fragmented_hours: float  # free GPU-hours beside running jobs


def replay(jobs: Sequence[Job], scenario: str, rule: Rule, boot: int, idle: int) -> Replayed:
    """Provisioned over ideal GPU-seconds when every job is placed by `rule` at its submit time."""
    sizes = (8,) if scenario == "one-group" else POOLS
    pools = {size: _Pool(size, boot, idle) for size in sizes}
    ends: list[tuple[int, int, int, _Node]] = []  # (end, seq, gpus, node)
    seq = 0
    ideal = 0
    for job in jobs:
        now, end = job.submit, job.submit + job.duration
        while ends and ends[0][0] <= now:
            done, _, gpus, node = heapq.heappop(ends)
            node.free += gpus
            if node.free == node.size:
                node.empty_since = done
        for pool in pools.values():
            pool.expire(now)
        ideal += job.gpus * job.duration
        size, whole, last = _pool_sizes(scenario, job.gpus)
        pool = pools[size]
        empty = [n for n in pool.nodes if n.free == n.size]
        placed: list[tuple[_Node, int]] = [(n, size) for n in empty[:whole]]
        placed += [(pool.launch(now), size) for _ in range(whole - len(placed))]
        if last:
            taken = {id(n) for n, _ in placed}
            fitting = [n for n in pool.nodes if n.free >= last and id(n) not in taken]
            placed.append((rule(fitting, last, now, end) if fitting else pool.launch(now), last))
        for node, gpus in placed:
            if node.empty_since is not None:
                pool.empty += now - node.empty_since
            node.free -= gpus
            node.empty_since = None
            node.last_end = max(node.last_end, end)
            node.running.append((now, end))
            seq += 1
            heapq.heappush(ends, (end, seq, gpus, node))
    while ends:
        done, _, gpus, node = heapq.heappop(ends)
        node.free += gpus
        if node.free == node.size:
            node.empty_since = done
    paid = overhead = 0
    for pool in pools.values():
        pool.close()
        paid += pool.paid * pool.size
        overhead += (pool.empty + pool.launches * pool.boot) * pool.size
    return Replayed(paid / ideal if ideal else 0.0, (paid - ideal - overhead) / 3600)


def migration_floor(jobs: Sequence[Job], scenario: str) -> float:
    """Whole nodes for the busy GPUs of each size at every instant (free, instant moves)."""
    changes: dict[int, list[tuple[int, int]]] = {}
    ideal = 0
    for job in jobs:
        size, _, _ = _pool_sizes(scenario, job.gpus)
        changes.setdefault(size, []).extend(((job.submit, job.gpus), (job.submit + job.duration, -job.gpus)))
        ideal += job.gpus * job.duration
    paid = 0
    for size, events in changes.items():
        events.sort()
        busy = last = 0
        for moment, delta in events:
            paid += -(-busy // size) * size * (moment - last)
            busy, last = busy + delta, moment
    return paid / ideal if ideal else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_trace_arguments(parser)
    parser.add_argument("--idle", type=int, default=600, help="seconds an emptied node is kept")
    parser.add_argument("--boot-seconds", type=int, default=300, help="seconds of its GPUs a launch costs")
    args = parser.parse_args()
    path = Path(args.trace)
    trace = read_trace(path, args.limit, "placement_bound")
    if trace is None:
        return 2
    jobs = sorted(trace.jobs, key=lambda j: (j.submit, j.job_id))
    print(
        f"trace: {path} ({len(jobs):,} jobs); boot {args.boot_seconds}s, idle {args.idle}s; no queue, no"
        f" reconcile loop; baseline: {BASELINE}"
    )
    header = f"{'scenario':<10} {'placement':<17} {'prov/ideal':>10} {'vs base':>8}"
    print(f"{header} {'frag':>8} {'frag x':>7} {'wall_s':>7}")
    for scenario in ("one-group", "pools"):
        started = time.perf_counter()
        rows = [
            ("migration floor", Replayed(migration_floor(jobs, scenario), 0.0), time.perf_counter() - started)
        ]
        for name, rule in RULES:
            started = time.perf_counter()
            replayed = replay(jobs, scenario, rule, args.boot_seconds, args.idle)
            rows.append((name, replayed, time.perf_counter() - started))
        base = next(r for n, r, _ in rows if n == BASELINE)
        for name, row, wall in rows:
            frag_x = row.fragmented_hours / base.fragmented_hours if base.fragmented_hours else 0.0
            print(
                f"{scenario:<10} {name:<17} {row.ratio:>10.3f} {row.ratio / base.ratio:>8.3f}"
                f" {row.fragmented_hours:>8,.0f} {frag_x:>7.2f} {wall:>7.1f}",
                flush=True,
            )
    print(
        "prov/ideal: GPU-seconds of nodes (launch to removal, boot included) over the jobs' GPU-seconds."
        " frag: free GPU-hours beside running jobs (the floor has none). Rows above the migration floor"
        " are what no eviction allows; `clairvoyant` is what exact run times would allow."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
