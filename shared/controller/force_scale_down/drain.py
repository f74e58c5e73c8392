"""The drain: the continuation every reconcile runs over the stored drain intents, and the steps the
first pass shares with it (evict, a fresh read of a node's workload, merging intents, the spot hold).

A pass evicts what is left, terminates nodes that only DaemonSet/mirror pods remain on, and gives up
(nodes left cordoned, reported) an hour after the grace. A spot interruption warning stores a hold-only
intent (INTERRUPTION_REQUESTER) through the same functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared.controller.applier import Applier
from shared.controller.deps import Deps
from shared.domain.errors import AuthError, ReadError, ScalerError, ThrottledError
from shared.domain.model import AsgState, Node, Pod
from shared.domain.operations import INTERRUPTION_REQUESTER, DrainIntent
from shared.domain.safety import busy_pods, removable_above_min
from shared.reporting import ActionKind, ActionStatus

# A drain still blocked this long after its grace is given up: its nodes stay cordoned and it is reported.
GIVE_UP_AFTER_GRACE = timedelta(hours=1)
# Spot interruption warnings store a hold-only intent (INTERRUPTION_REQUESTER): the node stays
# cordoned until EC2 reclaims it.
INTERRUPTION_HOLD = timedelta(minutes=10)


@dataclass
class DrainProgress:
    """What one pass over a drain did."""

    remaining: list[str] = field(default_factory=list)  # nodes still draining (cordoned, in the intent)
    terminated: list[str] = field(default_factory=list)  # nodes (or instance ids) terminated
    blocked: list[str] = field(default_factory=list)  # pods a PodDisruptionBudget kept (or a write failed)
    terminated_instances: list[str] = field(default_factory=list)

    @property
    def decrements(self) -> int:
        return len(self.terminated_instances)


@dataclass(frozen=True, slots=True)
class Removal:
    """An instance a drain terminated (with decrement), for the reconcile's tally."""

    group: str
    instance_id: str


def continue_drains(
    deps: Deps,
    applier: Applier,
    intents: Iterable[DrainIntent],
    asgs: Mapping[str, AsgState],
    now: datetime,
) -> list[Removal]:
    """One pass over every stored drain (each reconcile runs it after its terminations).

    `asgs` holds each group's ASG by group name, its desired already lowered by the run's own
    decrements; a group missing from it pauses its drain. Returns the instances terminated.
    """
    removed: list[Removal] = []
    for intent in intents:
        if intent.group not in deps.config.group_names:
            applier.note(
                ActionKind.DRAIN,
                intent.group,
                intent.group,
                "drain of an unknown group",
                ActionStatus.SKIPPED,
            )
            continue
        progress = step(deps, applier, intent, asgs.get(intent.group), now)
        removed.extend(Removal(intent.group, i) for i in progress.terminated_instances)
    return removed


def step(
    deps: Deps, applier: Applier, intent: DrainIntent, asg: AsgState | None, now: datetime
) -> DrainProgress:
    """One pass over a stored drain: evict what is left, terminate empty nodes, store what remains.

    Expired intents are deleted and their nodes left cordoned. A node uncordoned by someone else
    leaves the drain. Read failures keep the node for the next pass; nothing is guessed.
    """
    progress = DrainProgress()
    group = intent.group
    if now >= intent.expires_at:
        applier.note(
            ActionKind.DRAIN,
            group,
            group,
            f"gave up draining {', '.join(intent.nodes)}: expired at {intent.expires_at.isoformat()}; "
            "nodes left cordoned",
            ActionStatus.FAILED if len(intent.held) < len(intent.nodes) else ActionStatus.DONE,
            "drain expired",
        )
        applier.forget_intent(intent, "forget the expired drain")
        return progress
    if asg is None:
        # Without the group's instances nothing can be told apart: keep everything for later.
        applier.note(
            ActionKind.DRAIN,
            group,
            group,
            "drain paused",
            ActionStatus.SKIPPED,
            "Auto Scaling group not found",
        )
        progress.remaining.extend(intent.nodes)
        return progress
    for name in intent.nodes:
        _step_node(deps, applier, intent, asg, name, now, progress)
    if not progress.remaining:
        applier.note(ActionKind.DRAIN, group, group, f"drain of {', '.join(intent.nodes)} finished")
        applier.forget_intent(intent, "forget the finished drain")
    elif tuple(progress.remaining) != intent.nodes:
        applier.store_intent(
            replace(intent, nodes=tuple(progress.remaining)),
            f"drain of {', '.join(progress.remaining)} continues until {intent.expires_at.isoformat()}",
        )
    return progress


def _step_node(
    deps: Deps,
    applier: Applier,
    intent: DrainIntent,
    asg: AsgState,
    name: str,
    now: datetime,
    progress: DrainProgress,
) -> None:
    group = intent.group
    terms = intent.terms_of(name)
    try:
        node = deps.ports.cluster.get_node(name)
    except (AuthError, ReadError, ThrottledError) as exc:
        _read_failed(applier, exc, name, group, progress)
        return
    if node is None:
        return  # gone: done
    if not node.instance_id or node.instance_id not in {i.instance_id for i in asg.live_instances}:
        # Terminating or gone (e.g. reclaimed spot): done; the cloud controller removes the Node.
        applier.note(ActionKind.DRAIN, name, group, "its instance left the group")
        return
    if not node.unschedulable:
        applier.note(
            ActionKind.DRAIN,
            name,
            group,
            "uncordoned by someone else: no longer drained",
            ActionStatus.SKIPPED,
        )
        return
    progress.remaining.append(name)
    if terms.hold_only:
        return
    pods = workload(deps, applier, name, group)
    if pods is None:
        return
    if pods:
        delete = terms.delete_after is not None and now >= terms.delete_after
        evict(applier, pods, group, delete=delete, progress=progress)
        return
    if removable_above_min(asg.desired - progress.decrements, asg.min_size) < 1:
        applier.note(
            ActionKind.TERMINATE,
            name,
            group,
            "drained",
            ActionStatus.SKIPPED,
            f"group at min size {asg.min_size}",
        )
        return
    region = deps.config.region_of(deps.config.group(group))
    if applier.terminate(
        node.instance_id, name, group, "drained: only DaemonSet pods left", decrement=True, region=region
    ):
        progress.remaining.remove(name)
        progress.terminated.append(name)
        progress.terminated_instances.append(node.instance_id)


def workload(deps: Deps, applier: Applier, node: str, group: str) -> list[Pod] | None:
    """A fresh read of the pods keeping `node` busy; None when the read failed (recorded)."""
    try:
        pods = deps.ports.cluster.list_pods_on_node(node)
        return busy_pods(pods, deps.config.policy.pod_priority_cutoff, deps.clock.now())
    except (AuthError, ReadError, ThrottledError) as exc:
        _read_failed(applier, exc, node, group, DrainProgress())
        return None


def _read_failed(applier: Applier, exc: ScalerError, node: str, group: str, progress: DrainProgress) -> None:
    if isinstance(exc, AuthError):
        applier.forbid_destructive(exc)
    applier.note(ActionKind.DRAIN, node, group, "could not re-read the node", ActionStatus.FAILED, str(exc))
    progress.remaining.append(node)


def evict(
    applier: Applier, pods: Sequence[Pod], group: str, *, delete: bool, progress: DrainProgress
) -> None:
    """Evict (through PDBs) or, with `delete`, delete each pod; one that stays is `blocked`."""
    for pod in pods:
        if delete:
            done = applier.delete_pod(pod, group, f"forced drain of {pod.node_name}: grace over")
        else:
            done = applier.evict(pod, group, f"drain of {pod.node_name}")
        if not done:
            progress.blocked.append(pod.key)


def hold_interrupted(
    applier: Applier, deps: Deps, node: Node, group: str, at: datetime, now: datetime
) -> None:
    """A spot interruption warning: store a hold-only intent, then cordon the node (in that order)."""
    existing = next((i for i in deps.ports.state.drain_intents() if i.group == group), None)
    hold = DrainIntent(
        group=group,
        nodes=(node.name,),
        requested_at=now,
        expires_at=now + INTERRUPTION_HOLD,
        grace_seconds=0,
        requested_by=INTERRUPTION_REQUESTER,
    )
    merged = merge_intents(existing, hold)
    stored = applier.store_intent(merged, f"hold {node.name} cordoned until {merged.expires_at.isoformat()}")
    if stored is None:
        applier.note(
            ActionKind.CORDON,
            node.name,
            group,
            "spot interruption warning",
            ActionStatus.SKIPPED,
            "the hold could not be stored: not cordoned",
        )
        return
    if not node.cordoned_by_scaler:
        applier.cordon(
            node, group, f"spot interruption warning at {at.isoformat()}", now, retry_conflict=True
        )


def merge_intents(existing: DrainIntent | None, new: DrainIntent) -> DrainIntent:
    """One intent per group: a new request adds its nodes to a drain in progress, never drops any.

    Each node keeps the terms of the request that put it in the drain: a later request neither
    shortens its grace, nor forces or stops its deletions. Only an operator's request turns a node
    held for an interruption warning into a drained one (a hold never turns a drained node back).
    """
    if existing is None:
        return new
    terms = {node: existing.terms_of(node) for node in existing.nodes}
    for node in new.nodes:
        if node not in terms or terms[node].hold_only:
            terms[node] = new.terms_of(node)
    # The intent's own fields stay those of the drain in progress, unless that was only a hold and an
    # operator's request now joins it: then the operator's (a drain, not a hold, is reported).
    base = existing
    if existing.requested_by == INTERRUPTION_REQUESTER and new.requested_by != INTERRUPTION_REQUESTER:
        base = new
    merged = replace(
        base,
        nodes=tuple(sorted(terms)),
        expires_at=max(existing.expires_at, new.expires_at),
        revision=existing.revision,  # the write replaces exactly the intent read
    )
    return merged.with_terms(terms)
