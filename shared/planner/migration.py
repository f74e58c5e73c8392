"""Migration of jobs that checkpoint: empty a node when moving its jobs costs less than keeping it (pure).

Attrition never evicts, so a node stays up as long as its longest job (bench/placement_bound.py: the
limit of any placement that never moves a running job). Jobs that save their work often restart
cheaply elsewhere; for them the scaler may go past that limit, opt-in per pod
(shared.domain.checkpoint), unlike cluster-autoscaler and Karpenter consolidation, which evict
whatever a PDB allows, blind to when a job last saved.

The rules, per group, level-triggered (off unless `policy.migration.enabled`):
- Candidates: registered, Ready, schedulable GPU nodes of the group, not protected from scale-down
  (`safety.protection`), not receiving a pending pod in this plan and not cordoned or terminated by
  it, with busy pods (`safety.busy_pods`) every one of which is movable (`checkpoint.not_movable`)
  and has saved since it started (`checkpoint.not_saved_yet`: a move before its first save loses all
  it did, and a job just moved does not move again before it made progress); a gang member only
  when every member of its gang, wherever it runs, is movable: the gang then moves whole and its
  lost work is counted whole.
- Cost and saving, in GPU-seconds: the cost is each moved pod's GPUs x (the work lost since its last
  checkpoint, `checkpoint.lost_seconds`, plus `restart_seconds`); the saving is the node's GPUs x
  the time its jobs were expected to keep it up (attrition's `expected_remaining_seconds`). A node is
  worth emptying only when saving > cost x `min_gain`; the largest net saving goes first.
- Fit: the node's pods must all fit now, by the scheduler's filters (shared.planner.simulation), on
  free room of other Ready, schedulable, unmarked nodes not leaving in this plan, after the room the
  plan counts for pending pods: never on a node being bought, so a move never waits for a boot.
  A node that receives moved pods is not emptied in the same run.
- Spare: the free GPUs left on the group's nodes that stay (marked ones included: new pods still get
  their room) must still be the spare attrition keeps for new pods (`attrition.spare_gpus`), so a
  move does not make an arrival wait for a boot.
- Not while the group grows: no node is emptied in a group whose pending pods wait for a node
  (booting or bought by this plan), or that grew less than `scale_down_delay_after_add_seconds`
  ago (as idle scale-down: cluster-autoscaler's --scale-down-delay-after-add).
- Limits: a job moved `max_moves_per_job` times (the store remembers a job while it is present) is
  not moved again; `max_nodes_per_run` per group per run, `max_nodes_per_hour` per group from the
  stored migrations (`GroupState.migrated_at`), and never below the group's min size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from shared.config import MigrationConfig, ScalerConfig
from shared.domain.checkpoint import MIGRATION_WINDOW, job_key, lost_seconds, not_movable, not_saved_yet
from shared.domain.durations import short_duration
from shared.domain.model import Node, Pod, Snapshot
from shared.domain.plan import Migration
from shared.domain.resources import GPU
from shared.domain.safety import busy_pods, protection
from shared.planner.attrition import expected_remaining_seconds, marked_nodes, spare_gpus, without_marks
from shared.planner.context import Context, GroupView, build_context
from shared.planner.filters.framework import SimNode
from shared.planner.filters.node_ports import port_key
from shared.planner.filters.volume_binding import Volumes
from shared.planner.gangs import GangIndex, largest_first
from shared.planner.scale_down import grew_recently
from shared.planner.scale_up import plan_scale_up
from shared.planner.simulation import Simulation


@dataclass(frozen=True)
class _Candidate:
    node: Node
    pods: tuple[Pod, ...]  # the node's busy pods
    moved: tuple[Pod, ...]  # every pod evicted: the node's and their gangs' members elsewhere
    lost: float  # GPU-seconds
    saved: float  # GPU-seconds
    remaining: float  # seconds the node's jobs were expected to keep it up

    @property
    def net(self) -> float:
        return self.saved - self.lost

    def worth(self, policy: MigrationConfig) -> bool:
        return self.saved > self.lost * policy.min_gain


def plan_migration(
    ctx: Context,
    marked: frozenset[str],
    counted_on: Mapping[str, str],
    leaving: frozenset[str],
    waiting: frozenset[str] = frozenset(),
) -> tuple[Migration, ...]:
    """Nodes to empty by moving their checkpointing pods this run (see the module docstring).

    `marked`: nodes that carry (or get) the attrition mark this run; `counted_on`: pending pod ->
    registered node the plan counts it on; `leaving`: nodes this plan cordons or terminates;
    `waiting`: groups whose pending pods wait for a node (booting, or bought by this plan).
    """
    policy = ctx.config.policy.migration
    if not policy.enabled:
        return ()
    incoming = _incoming(ctx, counted_on)
    movers = _movers(ctx)
    by_group = [
        (
            view,
            _candidates(ctx, view, policy, movers, incoming, leaving)
            if _may_shrink(ctx, view, waiting)
            else [],
        )
        for view in ctx.groups
    ]
    if not any(candidates for _, candidates in by_group):
        return ()  # the scheduler's picture is built only when some node is worth emptying
    room = _Room(ctx, frozenset(marked) | leaving, incoming)
    chosen: list[Migration] = []
    for view, candidates in by_group:
        held = _held_gpus(ctx, view, marked, leaving, incoming)
        chosen.extend(_choose(ctx, view, policy, candidates, room, held))
    return tuple(sorted(chosen, key=lambda m: m.node))


def _may_shrink(ctx: Context, view: GroupView, waiting: frozenset[str]) -> bool:
    """Whether the group may give a node back by migration this run: not while it grows, i.e. its
    pending pods wait for one of its nodes (booting, or bought by this plan) or it grew less than
    `scale_down_delay_after_add_seconds` ago (`scale_down.grew_recently`, as idle scale-down:
    cluster-autoscaler's --scale-down-delay-after-add). Emptying a node then spends free room the
    arrivals are about to need, and the group buys it back a boot later."""
    return view.name not in waiting and not grew_recently(ctx, view)


def _incoming(ctx: Context, counted_on: Mapping[str, str]) -> dict[str, list[Pod]]:
    """The pending pods the plan counts on each registered node (their room is taken)."""
    pending = {p.key: p for p in ctx.snapshot.pods if p.key in counted_on}
    incoming: dict[str, list[Pod]] = {}
    for key, node in sorted(counted_on.items()):
        if key in pending:
            incoming.setdefault(node, []).append(pending[key])
    return incoming


@dataclass(frozen=True)
class _Movers:
    """What decides whether pods may move: the gangs they belong to, and how often jobs moved."""

    index: GangIndex
    members: dict[str, list[Pod]]  # every bound, live member of each gang, by gang key
    moves: dict[str, int]  # moves per job (checkpoint.job_key) the store remembers
    max_moves: int
    now: datetime
    # Why each node that runs a gang member is protected (do-not-disrupt, scale-down disabled,
    # scale-in protection): a gang mate there may not be evicted either, wherever the move starts.
    guarded: dict[str, str]

    def why_not(self, pod: Pod) -> str | None:
        moved = self.moves.get(job_key(pod), 0)
        if moved >= self.max_moves:
            return f"{pod.key}: its job was moved {moved} time(s) already (max_moves_per_job)"
        guard = self.guarded.get(pod.node_name or "")
        if guard:
            return f"{pod.key} runs on {pod.node_name}: {guard}"
        return not_movable(pod) or not_saved_yet(pod, self.now)


def _movers(ctx: Context) -> _Movers:
    """The gangs of the bound pods and the stored moves per job, for `movable_set`."""
    index, members = _gangs(ctx)
    moves: dict[str, int] = {}  # a group remembers the moves made from it: a job's are their sum
    for state in ctx.snapshot.state.groups.values():
        for job, (count, _) in state.moved_jobs.items():
            moves[job] = moves.get(job, 0) + count
    guarded: dict[str, str] = {}
    for name in sorted({p.node_name for gang in members.values() for p in gang if p.node_name}):
        node = ctx.nodes_by_name.get(name)
        view = ctx.group_of_node.get(name)
        why = protection(node, ctx.pods_on_node.get(name, ()), view.asg if view else None) if node else None
        if why:
            guarded[name] = why
    return _Movers(index, members, moves, ctx.config.policy.migration.max_moves_per_job, ctx.now, guarded)


def _gangs(ctx: Context) -> tuple[GangIndex, dict[str, list[Pod]]]:
    """The gang index and every bound, live member of each gang, by gang key."""
    index = GangIndex(ctx.config.policy, ctx.snapshot.pod_groups)
    members: dict[str, list[Pod]] = {}
    for pods in ctx.pods_on_node.values():
        for pod in pods:
            mark = index.mark(pod) if not pod.is_terminal and (pod.labels or pod.annotations) else None
            if mark is not None:
                members.setdefault(mark.key, []).append(pod)
    return index, members


def movable_set(pods: list[Pod], movers: _Movers) -> tuple[tuple[Pod, ...], str | None]:
    """Every pod a move of `pods` evicts (their gangs' members too), or why they may not move."""
    moved: dict[str, Pod] = {}
    for pod in pods:
        mark = movers.index.mark(pod)
        for member in movers.members.get(mark.key, [pod]) if mark is not None else [pod]:
            why = movers.why_not(member)
            if why:
                gang = f" (gang {mark.key} moves whole or not at all)" if mark is not None else ""
                return (), why + gang
            moved[member.key] = member
    return tuple(moved[k] for k in sorted(moved)), None


def _candidates(
    ctx: Context,
    view: GroupView,
    policy: MigrationConfig,
    movers: _Movers,
    incoming: Mapping[str, list[Pod]],
    leaving: frozenset[str],
) -> list[_Candidate]:
    """The group's nodes worth emptying by migration, largest net saving first."""
    cutoff = ctx.config.policy.pod_priority_cutoff
    found: list[_Candidate] = []
    for node in view.nodes:
        gpus = node.allocatable.gpus
        pods = ctx.pods_on_node.get(node.name, [])
        if gpus <= 0 or not node.ready or node.unschedulable or node.name in leaving:
            continue
        if node.name in incoming or protection(node, pods, view.asg):
            continue
        busy = busy_pods(pods, cutoff, ctx.now)
        moved, why = movable_set(busy, movers)
        if busy and not why:
            cand = _weigh(ctx, policy, node, busy, moved)
            if cand.worth(policy):
                found.append(cand)
    return sorted(found, key=lambda c: (-c.net, c.node.name))


def _weigh(
    ctx: Context, policy: MigrationConfig, node: Node, busy: list[Pod], moved: tuple[Pod, ...]
) -> _Candidate:
    """The cost (GPU-seconds lost, restarts included) and the saving of emptying `node` now."""
    lost = sum(p.requests.gpus * (lost_seconds(p, ctx.now) + policy.restart_seconds) for p in moved)
    remaining = expected_remaining_seconds(ctx.now, busy)
    return _Candidate(node, tuple(busy), moved, lost, node.allocatable.gpus * remaining, remaining)


def _held_gpus(
    ctx: Context,
    view: GroupView,
    marked: frozenset[str],
    leaving: frozenset[str],
    incoming: Mapping[str, list[Pod]],
) -> dict[str, int]:
    """Free GPUs of the group's marked, schedulable nodes, by node: room new pods still get (the mark
    is PreferNoSchedule, or lifted the run a pod needs it), though moved pods are never sent there."""
    held: dict[str, int] = {}
    for node in view.nodes:
        if node.name in marked and node.ready and not node.unschedulable and node.name not in leaving:
            pods = [*ctx.pods_on_node.get(node.name, []), *incoming.get(node.name, [])]
            used = sum(p.requests.gpus for p in pods if not p.is_terminal)
            held[node.name] = max(0, node.allocatable.gpus - used)
    return held


def _choose(
    ctx: Context,
    view: GroupView,
    policy: MigrationConfig,
    candidates: list[_Candidate],
    room: _Room,
    held: dict[str, int],
) -> list[Migration]:
    """The first candidates whose pods fit elsewhere, within the group's limits."""
    recent = sum(1 for at in view.state.migrated_at if ctx.now - at < MIGRATION_WINDOW)
    limit = min(policy.max_nodes_per_run, policy.max_nodes_per_hour - recent)
    limit = min(limit, len(view.nodes) - view.min_size)
    members = frozenset(n.name for n in view.nodes)
    gpus_per_node = max((n.allocatable.gpus for n in view.nodes), default=0)
    spare = spare_gpus(view, ctx.config.policy.attrition, gpus_per_node)
    chosen: list[Migration] = []
    for cand in candidates:
        if len(chosen) >= limit:
            break
        if cand.node.name in room.receiving or not room.may_fit(cand.node.name, cand.pods):
            continue
        kept = sum(gpus for name, gpus in held.items() if name != cand.node.name)
        if room.take(cand.node.name, cand.pods, partial(_keeps_spare, room, members, spare - kept)):
            held.pop(cand.node.name, None)
            chosen.append(
                Migration(
                    cand.node.name,
                    view.name,
                    tuple(p.key for p in cand.moved),
                    round(cand.lost, 1),
                    round(cand.saved, 1),
                    _reason(cand, policy),
                )
            )
    return chosen


def _keeps_spare(room: _Room, members: frozenset[str], spare: int) -> bool:
    return room.free_gpus(members) >= spare


def _reason(cand: _Candidate, policy: MigrationConfig) -> str:
    hours = 3600.0
    return (
        f"its {len(cand.pods)} pod(s) checkpoint and fit on free room elsewhere: moving them loses"
        f" {cand.lost / hours:.2f} GPU-hour(s) (work since their last checkpoints and"
        f" {policy.restart_seconds}s restarts), emptying it saves {cand.saved / hours:.2f} GPU-hour(s)"
        f" (its jobs were expected to keep it up {short_duration(cand.remaining)}; needed: more than"
        f" {policy.min_gain:g}x the loss)"
    )


class _Room:
    """Free room of the nodes moved pods may go to, by the scheduler's filters; it shrinks as the
    run places pods, and nodes emptied in the run are no longer room."""

    def __init__(self, ctx: Context, excluded: frozenset[str], incoming: Mapping[str, list[Pod]]) -> None:
        self._ctx = ctx
        snapshot = ctx.snapshot
        self._sim = Simulation(
            ctx.pods_on_node,
            snapshot.namespaces,
            Volumes.of(snapshot.pvcs, snapshot.pvs, snapshot.storage_classes),
        )
        self._emptied: set[str] = set()
        self._gpu_room: tuple[int, list[tuple[int, str]]] | None = None  # total free GPUs, the 2 freest
        self.receiving: set[str] = set()
        for node in sorted(snapshot.nodes, key=lambda n: n.name):
            if node.ready and not node.unschedulable and not node.deleting and node.name not in excluded:
                self._sim.add_node(self._sim_node(node, incoming.get(node.name, [])))
        self._sim.prepare([p for pods in ctx.pods_on_node.values() for p in pods if not p.is_terminal])

    def _sim_node(self, node: Node, arriving: list[Pod]) -> SimNode:
        ctx = self._ctx
        bound = [p for p in ctx.pods_on_node.get(node.name, ()) if not p.is_terminal]
        free = ctx.room(node.allocatable, bound + arriving)
        ports = {port_key(port) for pod in bound + arriving for port in pod.constraints.host_ports}
        return SimNode(node.name, node.labels, node.taints, free, False, ports)

    def _targets(self, source: str) -> list[SimNode]:
        """Fullest first (ties by name): moved pods fill fragments rather than spread."""
        gpu = self._ctx.dim_index.get(GPU)
        nodes = [n for name, n in self._sim.nodes.items() if name != source and name not in self._emptied]
        return sorted(nodes, key=lambda n: (n.free[gpu] if gpu is not None else 0, n.name))

    def may_fit(self, source: str, pods: tuple[Pod, ...]) -> bool:
        """A cheap necessary test before `take`: the pods' GPUs fit the free GPUs of the other nodes
        in total, and the largest pod fits the freest node."""
        gpu = self._ctx.dim_index.get(GPU)
        if gpu is None:
            return True
        if self._gpu_room is None:
            free = sorted(
                (max(0, n.free[gpu]), name)
                for name, n in self._sim.nodes.items()
                if name not in self._emptied
            )
            self._gpu_room = (sum(f for f, _ in free), free[-2:])
        total, top = self._gpu_room
        own = self._sim.nodes[source].free[gpu] if source in self._sim.nodes else 0
        largest = max((f for f, name in top if name != source), default=0)
        need = [p.requests.gpus for p in pods]
        return sum(need) <= total - max(0, own) and max(need, default=0) <= largest

    def free_gpus(self, names: frozenset[str]) -> int:
        """Free GPUs left on the nodes of `names` that are still room (not emptied in this run)."""
        gpu = self._ctx.dim_index.get(GPU)
        if gpu is None:
            return 0
        return sum(
            max(0, n.free[gpu])
            for name, n in self._sim.nodes.items()
            if name in names and name not in self._emptied
        )

    def take(self, source: str, pods: tuple[Pod, ...], keeps: Callable[[], bool] = lambda: True) -> bool:
        """Place every pod of `source` elsewhere (all or nothing); True when they all fit and, once
        placed, `keeps()` holds (the spare room new pods need)."""
        sim, ctx = self._sim, self._ctx
        sim.checkpoint()
        placed: list[str] = []
        for pod in largest_first(list(pods)):
            state, request = sim.state(pod), ctx.request(pod.requests)
            target = next(
                (
                    n
                    for n in self._targets(source)
                    if sim.dynamic(pod, state, n, request, ctx.dims) is None
                    and sim.static(pod, state, n) is None
                ),
                None,
            )
            if target is None:
                sim.rollback()
                return False
            sim.record(pod, target, request)
            placed.append(target.name)
        self._emptied.add(source)  # its room is no room once it is emptied
        if not keeps():
            self._emptied.discard(source)
            sim.rollback()
            return False
        sim.commit()
        self._gpu_room = None
        self.receiving.update(placed)
        return True


def migration_blocker(snapshot: Snapshot, config: ScalerConfig, now: datetime, move: Migration) -> str | None:
    """Why a planned migration must not go on (None: evict), judged on a fresh snapshot taken after
    the node was cordoned: the same pods, all still movable and in whole gangs, the saving still
    beating the loss (a checkpoint gone stale costs its full interval), no pending pod counting on
    the node, and room for its pods still free elsewhere. Pure, like `plan`."""
    marked = marked_nodes(snapshot)
    ctx = build_context(without_marks(snapshot, marked), config, now)
    policy = config.policy.migration
    node = ctx.nodes_by_name.get(move.node)
    if node is None:
        return "the node is gone"
    view = ctx.group_of_node.get(move.node)
    pods = ctx.pods_on_node.get(move.node, [])
    protected = protection(node, pods, view.asg if view is not None else None)
    if protected:
        return protected
    busy = busy_pods(pods, config.policy.pod_priority_cutoff, now)
    moved, why = movable_set(busy, _movers(ctx))
    if why:
        return why
    if tuple(p.key for p in moved) != move.pods:
        return f"its pods changed: now {', '.join(p.key for p in moved) or 'none'}"
    cand = _weigh(ctx, policy, node, busy, moved)
    if not cand.worth(policy):
        return (
            f"no longer worth it: {cand.lost / 3600:.2f} GPU-hour(s) lost x {policy.min_gain:g}"
            f" against {cand.saved / 3600:.2f} saved"
        )
    counted_on = plan_scale_up(ctx).counted_on
    waiting = sorted(pod for pod, on in counted_on.items() if on == move.node)
    if waiting:
        return f"pending {waiting[0]} fits only there: the room is needed"
    incoming = _incoming(ctx, counted_on)
    if not _Room(ctx, marked | {move.node}, incoming).take(move.node, cand.pods):
        return "its pods no longer fit on free room elsewhere"
    return None
