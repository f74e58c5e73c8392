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

Then the rows of checkpoint-aware migration (issue 26), one group, `--checkpointable FRACTION ...`
(default 1 0.5; the same jobs sim_bench's `--checkpointable` picks):
- `+ boot and idle`: the migration floor with launches (`--boot-seconds`) and idle nodes (`--idle`)
  paid as the replays pay them: a lower bound for any policy that moves jobs.
- a greedy repack that knows every job's end: after each job end, the least busy nodes whose jobs
  all checkpoint are emptied onto other busy nodes when the node-time saved beats the cost, first
  with free moves, then a restart (`--restart-seconds`, 300) of all the job's GPUs per move, at most
  3 moves per job, plus the work lost since the last save (half of `--checkpoint-interval-seconds`,
  the expected case), at most 4 nodes emptied per hour, and a gain of 2 (the scaler's defaults);
  last, the same policy knowing no end: it expects each job to run as long again as it has run since
  its pods were created, as the scaler does.
- `booted`: the arrivals that find no room on the nodes that are up and need a launch (in a world
  with a queue, each waits a boot), against the same placement without moves (`no moves`).
"""

from __future__ import annotations

import argparse
import heapq
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trace_input import add_trace_arguments, read_trace
from shared.local.sim.loading import is_checkpointable
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


def launch_floor(jobs: Sequence[Job], scenario: str, boot: int, idle: int) -> float:
    """The migration floor when launches and idle nodes are paid as `replay` pays them: free, instant
    moves keep ceil(busy GPUs / node GPUs) nodes running; a node no longer needed waits `idle`
    seconds, and a need for one more node takes the latest emptied one back, else launches one
    (`boot` seconds of its GPUs). No policy that moves jobs pays less under the same boot and idle."""
    changes: dict[int, dict[int, int]] = {}
    ideal = 0
    for job in jobs:
        size, _, _ = _pool_sizes(scenario, job.gpus)
        deltas = changes.setdefault(size, {})
        deltas[job.submit] = deltas.get(job.submit, 0) + job.gpus
        end = job.submit + job.duration
        deltas[end] = deltas.get(end, 0) - job.gpus
        ideal += job.gpus * job.duration
    paid = 0
    for size, deltas in changes.items():
        paid += _nodes_paid(sorted(deltas.items()), size, boot, idle) * size
    return paid / ideal if ideal else 0.0


def _nodes_paid(deltas: Sequence[tuple[int, int]], size: int, boot: int, idle: int) -> int:
    """Node-seconds (boot included) of the fewest whole nodes for the busy GPUs (see `launch_floor`)."""
    emptied: deque[int] = deque()  # when each waiting node was emptied, oldest first
    paid = busy = running = last = 0
    for moment, delta in deltas:
        while emptied and emptied[0] + idle <= moment:
            emptied.popleft()
            paid += idle
        paid += running * (moment - last)
        busy, last = busy + delta, moment
        need = -(-busy // size)
        while running < need:
            running += 1
            if emptied:
                paid += moment - emptied.pop()
            else:
                paid += boot
        emptied.extend([moment] * (running - need))
        running = need
    return paid + idle * len(emptied)


# Checkpoint-aware migration in the same idealised world: which provisioned/ideal ANY migration
# policy can reach when only some jobs may move and every move costs what issue 26's cost model
# charges (the work since the job's last save plus `restart` seconds, of all its GPUs), at most
# `max_moves` per job. The policy is a greedy repack towards the migration floor, clairvoyant about
# ends: whenever a job ends, the least busy nodes whose jobs may all move are emptied onto the free
# GPUs of other busy nodes (fullest first) when the node-time saved beats `gain` x the cost.


@dataclass(frozen=True)
class MoveCost:
    """What a move costs and what bounds the moves (issue 26's model; seconds)."""

    restart: int = 300  # policy.migration.restart_seconds
    lost: int = 0  # work lost since the last save: 0 right after a save, interval / 2 expected
    max_moves: int | None = 3  # policy.migration.max_moves_per_job (None: no limit)
    per_hour: int | None = None  # nodes emptied per rolling hour (policy.migration.max_nodes_per_hour)
    gain: float = 1.0  # the saving must exceed this many times the cost (policy.migration.min_gain)
    # Knows every job's end; False: expects each job to run as long again as it has run since it was
    # (re)started, the estimate the scaler makes of a pod without `expected-runtime-seconds`.
    clairvoyant: bool = True
    # GPUs a move must leave free on the other nodes that stay up, for arrivals: the spare attrition
    # keeps and migration respects (policy.attrition.spare_gpus; the scaler's default is one node's)
    spare: int = 0


@dataclass(slots=True, eq=False)
class _Run:
    """A running job of the migration replay: its pieces, its end, how often it moved."""

    job: Job
    movable: bool
    end: int
    resumed: int  # when its work last (re)started: the move loses the work since then, at most
    created: int  # when its pods were last created: its arrival, then its last move
    pieces: list[tuple[_Node, int]] = field(default_factory=list)
    moves: int = 0


@dataclass(frozen=True)
class Migrated:
    ratio: float  # provisioned over ideal GPU-seconds
    emptied: int  # nodes emptied by moves
    moves: int  # job moves
    lost_over_used: float  # GPU-seconds lost to moves (restarts included) over GPU-seconds used
    moved_twice: int  # jobs moved more than once
    booted: int = 0  # arrivals that found no room and needed a launch (with a queue: a boot's wait)


def movable_jobs(jobs: Sequence[Job], fraction: float) -> list[bool]:
    """Which jobs checkpoint, by the simulator's own pick (`--checkpointable FRACTION`): by each
    job's index in the trace's order, so a bound row and a sim_bench run move the same jobs."""
    return [is_checkpointable(index, fraction) for index in range(len(jobs))]


class _MigratingReplay:
    """One group of 8-GPU nodes; arrivals placed by `rule`; the greedy repack after every end."""

    def __init__(self, rule: Rule, boot: int, idle: int, cost: MoveCost) -> None:
        self.rule, self.cost = rule, cost
        self.pool = _Pool(8, boot, idle)
        self.on: dict[int, list[_Run]] = {}  # id(node) -> runs with a piece on it
        self.ends: list[tuple[int, int, _Run]] = []  # (end, seq, run); stale once run.end moved
        self.seq = 0
        self.emptied = 0  # nodes emptied by moves
        self.recent: deque[int] = deque()  # when nodes were emptied in the last hour
        self.moves = self.lost = 0
        self.booted = 0  # arrivals that needed a launch
        self.runs: list[_Run] = []

    def arrive(self, job: Job, movable: bool) -> None:
        now, pool = job.submit, self.pool
        run = _Run(job, movable, now + job.duration, now, now)
        launches = pool.launches
        _, whole, last = _pool_sizes("one-group", job.gpus)
        empty = [n for n in pool.nodes if n.free == n.size]
        placed = [(n, 8) for n in empty[:whole]] + [
            (pool.launch(now), 8) for _ in range(whole - len(empty[:whole]))
        ]
        if last:
            taken = {id(n) for n, _ in placed}
            fitting = [n for n in pool.nodes if n.free >= last and id(n) not in taken]
            placed.append((self.rule(fitting, last, now, run.end) if fitting else pool.launch(now), last))
        if pool.launches > launches:
            self.booted += 1
        for node, gpus in placed:
            if node.empty_since is not None:
                pool.empty += now - node.empty_since
                node.empty_since = None
            self._put(run, node, gpus)
        self.runs.append(run)
        self._push(run)

    def _put(self, run: _Run, node: _Node, gpus: int) -> None:
        node.free -= gpus
        run.pieces.append((node, gpus))
        self.on.setdefault(id(node), []).append(run)
        self._refresh(node)

    def _refresh(self, node: _Node) -> None:
        runs = self.on.get(id(node), [])
        node.running = [(r.job.submit, r.end) for r in runs]
        node.last_end = max((r.end for r in runs), default=node.last_end)

    def _push(self, run: _Run) -> None:
        self.seq += 1
        heapq.heappush(self.ends, (run.end, self.seq, run))

    def advance(self, until: int) -> None:
        """Ends up to `until`, each moment followed by the repack; then idle nodes expire."""
        while self.ends and self.ends[0][0] <= until:
            moment = self.ends[0][0]
            while self.ends and self.ends[0][0] == moment:
                end, _, run = heapq.heappop(self.ends)
                if end == run.end:
                    self._finish(run, moment)
            self.pool.expire(moment)
            self.repack(moment)
        self.pool.expire(until)

    def _finish(self, run: _Run, now: int) -> None:
        for node, gpus in run.pieces:
            self.on[id(node)].remove(run)
            node.free += gpus
            self._refresh(node)
            if node.free == node.size:
                node.empty_since = now
        run.pieces = []

    def repack(self, now: int) -> None:
        """Empty the least busy nodes whose jobs may all move, onto the free GPUs of other busy
        nodes, while the nodes in use exceed the floor and the saving beats the cost."""
        busy = [n for n in self.pool.nodes if n.free < n.size]
        floor = -(-sum(n.size - n.free for n in busy) // 8)
        receiving: set[int] = set()
        order = {id(n): i for i, n in enumerate(self.pool.nodes)}
        for source in sorted(busy, key=lambda n: (n.size - n.free, -self._last_end(n, now), order[id(n)])):
            if len(busy) <= floor or not self._budget_left(now):
                return
            if id(source) in receiving or not self._may_move(source):
                continue
            targets = sorted(
                (n for n in busy if n is not source and n.free > 0), key=lambda n: (n.free, order[id(n)])
            )
            plan = self._fit(source, targets, now)
            if plan is not None and self._keeps_spare(source, busy, plan) and self._worth(source, plan, now):
                self._move(source, plan, now)
                busy.remove(source)
                receiving.update(id(n) for _, _, n in plan)

    def _budget_left(self, now: int) -> bool:
        while self.recent and now - self.recent[0] >= 3600:
            self.recent.popleft()
        return self.cost.per_hour is None or len(self.recent) < self.cost.per_hour

    def _may_move(self, node: _Node) -> bool:
        runs, limit = self.on.get(id(node), []), self.cost.max_moves
        return bool(runs) and all(r.movable and (limit is None or r.moves < limit) for r in runs)

    def _fit(self, source: _Node, targets: list[_Node], now: int) -> list[tuple[_Run, int, _Node]] | None:
        """(run, GPUs, target) for each piece on `source`, None when they do not all fit: each piece
        where it ends before the node's last job (fullest first), else where it extends it least
        (the `clairvoyant` placement rule), so a moved job need not move again."""
        free = {id(n): n.free for n in targets}
        last = {id(n): self._last_end(n, now) for n in targets}
        pieces = [(r, g) for r in self.on[id(source)] for n, g in r.pieces if n is source]
        plan: list[tuple[_Run, int, _Node]] = []
        for run, gpus in sorted(pieces, key=lambda p: -p[1]):
            end = self._end(run, now) + self._delay(run, now)
            fitting = [n for n in targets if free[id(n)] >= gpus]
            if not fitting:
                return None
            target = min(fitting, key=lambda n: (max(0, end - last[id(n)]), free[id(n)]))
            free[id(target)] -= gpus
            plan.append((run, gpus, target))
        return plan

    def _keeps_spare(self, source: _Node, busy: list[_Node], plan: list[tuple[_Run, int, _Node]]) -> bool:
        """The free GPUs left on the other busy nodes are at least `spare` once the moved pieces
        land. Stricter than the scaler, which also counts an empty schedulable node in its idle time;
        here a node a move emptied takes arrivals, where the scaler's is cordoned."""
        if not self.cost.spare:
            return True
        free = sum(n.free for n in busy if n is not source)
        return free - sum(gpus for _, gpus, _ in plan) >= self.cost.spare

    def _end(self, run: _Run, now: int) -> int:
        """When the policy expects `run` to end (see MoveCost.clairvoyant)."""
        return run.end if self.cost.clairvoyant else now + max(0, now - run.created)

    def _last_end(self, node: _Node, now: int) -> int:
        """When the policy expects the last job on `node` to end."""
        if self.cost.clairvoyant:
            return node.last_end
        return max((self._end(r, now) for r in self.on.get(id(node), [])), default=now)

    def _delay(self, run: _Run, now: int) -> int:
        """Seconds a move adds to the job: the work since its last save, then the restart."""
        return min(self.cost.lost, max(0, now - run.resumed)) + self.cost.restart

    def _worth(self, source: _Node, plan: list[tuple[_Run, int, _Node]], now: int) -> bool:
        """The node-time saved beats `gain` x (GPU-seconds lost by the moved jobs, all their GPUs,
        plus the node-time the moved pieces add beyond their targets' last end)."""
        runs = {id(r): r for r, _, _ in plan}
        saved = source.size * (self._last_end(source, now) - now)
        lost = sum(r.job.gpus * self._delay(r, now) for r in runs.values())
        longest: dict[int, tuple[_Node, int]] = {}
        for run, _, target in plan:
            end = self._end(run, now) + self._delay(run, now)
            longest[id(target)] = (target, max(end, longest.get(id(target), (target, 0))[1]))
        extended = sum(t.size * max(0, end - self._last_end(t, now)) for t, end in longest.values())
        return saved > self.cost.gain * (lost + extended)

    def _move(self, source: _Node, plan: list[tuple[_Run, int, _Node]], now: int) -> None:
        runs = {id(r): r for r, _, _ in plan}
        for run in runs.values():
            delay = self._delay(run, now)
            self.lost += run.job.gpus * delay
            run.end += delay
            run.resumed = now + self.cost.restart
            run.created = now
            run.moves += 1
            self.moves += 1
            run.pieces = [(n, g) for n, g in run.pieces if n is not source]
            self._push(run)
        self.on[id(source)] = []
        source.free = source.size
        source.empty_since = now
        self._refresh(source)
        for run, gpus, target in plan:
            self._put(run, target, gpus)
        for run in runs.values():
            for node, _ in run.pieces:
                self._refresh(node)  # a gang's other pieces end later too
        self.emptied += 1
        self.recent.append(now)


def replay_migrating(
    jobs: Sequence[Job], movable: Sequence[bool], rule: Rule, boot: int, idle: int, cost: MoveCost
) -> Migrated:
    """Provisioned over ideal GPU-seconds of one 8-GPU group when the jobs flagged `movable` may be
    moved at `cost` (see `MoveCost`); `jobs` in submit order."""
    world = _MigratingReplay(rule, boot, idle, cost)
    ideal = 0
    for job, may_move in zip(jobs, movable, strict=True):
        world.advance(job.submit)
        world.arrive(job, may_move)
        ideal += job.gpus * job.duration
    world.advance(2**62)
    world.pool.close()
    paid = world.pool.paid * world.pool.size
    used = ideal + world.lost
    return Migrated(
        paid / ideal if ideal else 0.0,
        world.emptied,
        world.moves,
        world.lost / used if used else 0.0,
        sum(1 for r in world.runs if r.moves > 1),
        world.booted,
    )


def migration_costs(interval: int, restart: int) -> tuple[tuple[str, MoveCost], ...]:
    """The migration rows, each one constraint of issue 26 more than the row above it."""
    expected = interval // 2
    return (
        ("free, unlimited", MoveCost(restart=0, lost=0, max_moves=None)),
        ("restart, unlimited", MoveCost(restart=restart, lost=0, max_moves=None)),
        ("restart, 3/job", MoveCost(restart=restart, lost=0)),
        ("+ half interval", MoveCost(restart=restart, lost=expected)),
        ("+ 4 nodes/hour", MoveCost(restart=restart, lost=expected, per_hour=4)),
        ("+ gain 2", MoveCost(restart=restart, lost=expected, per_hour=4, gain=2.0)),
        (
            "+ ends estimated",
            MoveCost(restart=restart, lost=expected, per_hour=4, gain=2.0, clairvoyant=False),
        ),
        (
            "+ 8 GPUs spare",
            MoveCost(restart=restart, lost=expected, per_hour=4, gain=2.0, clairvoyant=False, spare=8),
        ),
    )


def print_migration_rows(jobs: Sequence[Job], args: argparse.Namespace) -> None:
    """The checkpoint-aware migration bound: one 8-GPU group, arrivals by oldest-job-first."""
    print(
        f"\ncheckpoint-aware migration, one-group, arrivals by oldest-job-first; a move costs the job's"
        f" GPUs x (lost work + {args.restart_seconds}s restart); lost work 0 (right after a save) or"
        f" {args.checkpoint_interval_seconds // 2}s (half the {args.checkpoint_interval_seconds}s interval)"
    )
    print(
        f"{'moves':<18} {'ckpt':>5} {'prov/ideal':>10} {'emptied':>8} {'moves':>7} {'lost/used':>9}"
        f" {'moved 2+':>8} {'booted':>7} {'wait_s':>6} {'x none':>6} {'wall_s':>7}"
    )
    print(f"{'migration floor':<18} {'100%':>5} {migration_floor(jobs, 'one-group'):>10.3f}", flush=True)
    floor = launch_floor(jobs, "one-group", args.boot_seconds, args.idle)
    print(f"{'+ boot and idle':<18} {'100%':>5} {floor:>10.3f}", flush=True)
    rows = [("no moves", 0.0, MoveCost())]
    rows += [
        (name, fraction, cost)
        for name, cost in migration_costs(args.checkpoint_interval_seconds, args.restart_seconds)
        for fraction in args.checkpointable
    ]
    unmoved = 0.0
    for name, fraction, cost in rows:
        started = time.perf_counter()
        row = replay_migrating(
            jobs, movable_jobs(jobs, fraction), oldest_job_first, args.boot_seconds, args.idle, cost
        )
        wait = args.boot_seconds * row.booted / len(jobs) if jobs else 0.0
        unmoved = unmoved or wait
        print(
            f"{name:<18} {fraction:>5.0%} {row.ratio:>10.3f} {row.emptied:>8,} {row.moves:>7,}"
            f" {row.lost_over_used:>9.2%} {row.moved_twice:>8,} {row.booted / len(jobs):>7.1%} {wait:>6.1f}"
            f" {wait / unmoved if unmoved else 0.0:>6.2f} {time.perf_counter() - started:>7.1f}",
            flush=True,
        )
    print(
        "emptied: nodes emptied by moves; moves: job moves; lost/used: GPU-seconds lost to moves over"
        " GPU-seconds used; moved 2+: jobs moved more than once; booted: the arrivals that found no room"
        " and needed a launch; wait_s: the mean wait if each of them waited one boot (and nothing else"
        " waited); x none: over the row without moves. The two floors bound every policy that moves"
        " jobs; the other rows are what one strong policy reaches (it knows every job's end but in the"
        " last two rows; no queue, no reconcile loop, no per-run limit, moved jobs never wait): an"
        " estimate of the best, not a bound, and myopic (a constraint can help it by a hundredth)."
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_trace_arguments(parser)
    parser.add_argument("--idle", type=int, default=600, help="seconds an emptied node is kept")
    parser.add_argument("--boot-seconds", type=int, default=300, help="seconds of its GPUs a launch costs")
    parser.add_argument(
        "--checkpointable",
        type=float,
        nargs="*",
        default=[1.0, 0.5],
        metavar="FRACTION",
        help="shares of jobs that may move in the migration rows, picked as sim_bench picks them"
        " (default 1 0.5; none: no migration rows)",
    )
    parser.add_argument("--checkpoint-interval-seconds", type=int, default=1800, help="default 1800")
    parser.add_argument("--restart-seconds", type=int, default=300, help="default 300")
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
    if args.checkpointable:
        print_migration_rows(trace.jobs, args)  # the trace's order: the simulator's job indexes
    return 0


if __name__ == "__main__":
    sys.exit(main())
