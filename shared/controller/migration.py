"""Migration of jobs that checkpoint, on the apply side: cordon, re-validate, evict, like every
destructive step (decide-then-act with re-validation, as Karpenter's disruption controller does:
pkg/controllers/disruption/).

For each planned migration (nodes a forced scale-down drains are left alone):
1. a fresh read of the node: still there, not cordoned;
2. the node is cordoned (with the read's resourceVersion, so a node changed in between is a conflict,
   skipped) and carries the scaler's cordon annotation: idle scale-down takes it once it is empty,
   and keeps it cordoned while its evicted pods terminate (shared.planner.scale_down);
3. a fresh snapshot re-validates the move (`migration.migration_blocker`: the same pods, still
   movable, the checkpoints still fresh enough for the saving to beat the loss, room still free
   elsewhere, no pending pod counting on the node); a refusal uncordons the node;
4. the move's evictions are judged as one before any is made, so that a gang moves whole or not at
   all (the Eviction API takes one pod at a time): the PodDisruptionBudgets are read and none may be
   drawn on by more of the move's pods than its status.disruptionsAllowed
   (`safety.overdrawn_budget`: a dry run never uses a budget up, so the dry runs alone would each
   pass against the same count), then every pod's eviction is tried as a dry run (dryRun=All: the
   API server judges everything else and evicts nothing); a refusal, or budgets that cannot be
   read, calls the move off and uncordons the node;
5. the pods are evicted through the Eviction API (PodDisruptionBudgets apply). A 429 (or any failed
   eviction: a budget that changed since it was read) stops that node's migration; the node is
   uncordoned when nothing was evicted, and stays cordoned (emptying) otherwise. A lease lost on the
   way ends the run before any further eviction (the applier fences the eviction batch).
Each evicted pod gets an Event saying why; the group's migrations and the GPU-seconds they cost are
counted (metrics) and the migration is stored for the per-hour budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial

from shared.config import ScalerConfig
from shared.controller.applier import Applier
from shared.controller.report import Tally
from shared.domain.checkpoint import job_key
from shared.domain.model import Node, Pod, Snapshot
from shared.domain.operations import ClusterEvent, EventType, ObjectRef
from shared.domain.plan import Migration, Plan
from shared.planner.migration import migration_blocker
from shared.ports import StateStore
from shared.reporting import ActionKind, ActionStatus

FreshNode = Callable[[str], "tuple[Node | None, tuple[Pod, ...]] | str"]  # a node and its pods, or why not
FreshSnapshot = Callable[[], "Snapshot | str"]  # the cluster re-listed, or why not
# Why the API server would not evict every one of the pods now, one after another, or None.
EvictionCheck = Callable[[Sequence[Pod]], "str | None"]
Reads = tuple[FreshNode, FreshSnapshot, EvictionCheck]
EVENT_REASON = "MovedForConsolidation"


def apply_migrations(
    applier: Applier,
    plan: Plan,
    config: ScalerConfig,
    now: datetime,
    draining: frozenset[str],
    reads: Reads,
    store: tuple[StateStore, Tally],
) -> None:
    """Carry out the plan's migrations (see the module docstring)."""
    for move in plan.migrate:
        if move.node in draining:
            continue
        evicted, present = _migrate(applier, move, config, now, reads)
        if evicted:
            _record(applier, move, (evicted, present), now, store)


def _skip(applier: Applier, move: Migration, why: str) -> None:
    applier.note(ActionKind.MIGRATE, move.node, move.group, move.reason, ActionStatus.SKIPPED, why)


def _migrate(
    applier: Applier,
    move: Migration,
    config: ScalerConfig,
    now: datetime,
    reads: Reads,
) -> tuple[list[Pod], frozenset[str]]:
    """Cordon, re-validate and evict one node's pods; the pods evicted and the jobs of the cluster's
    pods on the fresh read (whose moves the store keeps remembering)."""
    fresh_node, fresh_snapshot, evictions_refused = reads
    read = fresh_node(move.node)
    node = None if isinstance(read, str) else read[0]
    if isinstance(read, str) or node is None or node.unschedulable:
        _skip(applier, move, read if isinstance(read, str) else "the node is gone or already cordoned")
        return [], frozenset()
    if not applier.cordon(node, move.group, f"migration: {move.reason}", now, retry_conflict=False):
        return [], frozenset()
    snapshot = fresh_snapshot()
    blocker = snapshot if isinstance(snapshot, str) else migration_blocker(snapshot, config, now, move)
    if blocker:
        _skip(applier, move, blocker)
        applier.uncordon(move.node, move.group, f"migration called off: {blocker}")
        return [], frozenset()
    assert not isinstance(snapshot, str)
    by_key = {p.key: p for p in snapshot.pods}
    # The whole move judged first (its budgets, then a dry run of each eviction), so that a gang moves
    # whole or not at all: the Eviction API takes one pod at a time, and a 429 on a later member
    # would leave the earlier ones evicted and the gang split.
    refused = evictions_refused([by_key[key] for key in move.pods])
    if refused:
        _skip(applier, move, refused)
        applier.uncordon(move.node, move.group, f"migration called off: {refused}, nothing was evicted")
        return [], frozenset()
    evicted: list[Pod] = []
    for key in move.pods:
        pod = by_key[key]  # the re-validation found every one of them
        if not applier.evict(pod, move.group, f"migration of {move.node}: {move.reason}"):
            _stopped(applier, move, pod, evicted)
            break
        evicted.append(pod)
    return evicted, frozenset(job_key(p) for p in snapshot.pods)


def _stopped(applier: Applier, move: Migration, pod: Pod, evicted: list[Pod]) -> None:
    """An eviction was refused (a PodDisruptionBudget's 429) or failed: the rest waits for a later run."""
    why = f"the eviction of {pod.key} was refused; a later run decides again"
    _skip(applier, move, why)
    if not evicted:
        applier.uncordon(move.node, move.group, f"migration called off: {why}, nothing was evicted")


def _record(
    applier: Applier,
    move: Migration,
    moved: tuple[list[Pod], frozenset[str]],
    now: datetime,
    store: tuple[StateStore, Tally],
) -> None:
    """Events on the moved pods, the group's tally (metrics) and the stored migration (budget)."""
    state, tally = store
    evicted, present = moved
    message = (
        f"moved off {move.node} so the node can be given back (backlog-scaler migration of jobs that"
        f" checkpoint): {move.reason}"
    )
    if not applier.dry_run:
        applier.record_events(
            [
                ClusterEvent(
                    ObjectRef("Pod", p.name, p.namespace, p.uid), EVENT_REASON, message, EventType.NORMAL
                )
                for p in evicted
            ]
        )
        tally.migrations[move.group] += 1
        tally.migration_lost[move.group] += round(move.lost_gpu_seconds)
    jobs = tuple(job_key(p) for p in evicted)
    applier.save(
        f"migration {move.group}",
        partial(state.record_migration, group=move.group, at=now, jobs=jobs, present=present),
    )
