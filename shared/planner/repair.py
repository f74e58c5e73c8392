"""Node health repair (pure): broken nodes are never counted as room, and are replaced without
evicting anything.

The rules, per managed group, level-triggered (each run decides anew from the node's signals,
`shared.planner.health`):
- From the first run a node is unhealthy, its free room is not counted for pending pods: the planner
  judges it as cordoned by someone else (`hide_unhealthy`), so nothing waits on it, scale-down and
  attrition keep their hands off, and repair alone decides about it.
- Past its toleration, a node running no busy pod (`safety.busy_pods`) is replaced: terminated, with
  the group's desired lowered unless the group still needs the node (at min size, or at max size
  with pods waiting for it), in which case the ASG launches its replacement.
- Past its toleration, a busy node is cordoned and tainted `backlog-scaler/unhealthy:NoSchedule`
  so nothing new lands; a Warning Event and the notification say so; it is never evicted, and it is
  replaced once empty (after `cordon_settle_seconds`, so a pod bound just before the cordon is seen).
- Circuit breaker (Karpenter's node.health controller): when more of a group's nodes are unhealthy
  than `max_unhealthy_fraction` of them, rounded up, nothing there is terminated for health (a bad
  AMI, driver or zone, not a broken machine): the plan lists the group in `repair_paused` (alarm);
  cordons still happen.
- An instance the ASG marks Unhealthy is being replaced by the ASG: the scaler waits.
- A node that recovers and carries the scaler's health taint is uncordoned and untainted.
- A node with bad input (`Health.bad_input`) gets no action this run, and the reason is shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared.config import ScalerConfig
from shared.domain.model import (
    ANNOTATION_CORDONED_AT,
    AsgInstance,
    AsgState,
    Node,
    Snapshot,
    Taint,
    TaintEffect,
    carries_taint,
)
from shared.domain.plan import NodeAction, NodeMark, RepairAction, RepairDecision, Termination
from shared.domain.safety import busy_pods, protection, removable_above_min
from shared.planner.context import Context, GroupView
from shared.planner.health import HEALTHY, Health, Signal, evidence, node_health
from shared.planner.memo import identity_memo

REPAIR_TAINT_KEY = "backlog-scaler/unhealthy"
REPAIR_CAUSE = "repair"


def repair_taint() -> Taint:
    """The taint the scaler puts on a busy unhealthy node (with its cordon): nothing new lands."""
    return Taint(REPAIR_TAINT_KEY, "", TaintEffect.NO_SCHEDULE)


def health_tainted(node: Node) -> bool:
    return carries_taint(node.taints, REPAIR_TAINT_KEY)


@dataclass(frozen=True)
class Assessment:
    """The health of every node of a managed group this run, before any decision."""

    health: Mapping[str, Health]  # node name -> health
    nodes: Mapping[str, Node]  # node name -> the node as read (hide_unhealthy changes the planner's copy)
    instances: Mapping[str, AsgInstance]  # node name -> its ASG instance
    foreign_statuses: tuple[str, ...] = ()  # instance statuses of no managed group's instance
    unhealthy: frozenset[str] = frozenset()  # nodes with a signal and no bad input
    # Healthy nodes still carrying the scaler's health taint: ours to lift.
    recovered: frozenset[str] = frozenset()
    notable: frozenset[str] = frozenset()  # nodes whose health is not HEALTHY: a signal or bad input


def assess(snapshot: Snapshot, config: ScalerConfig, now: datetime) -> Assessment:
    """Read every managed node's health signals (with repair switched off too: its room is still not
    counted, only the actions stop)."""
    policy = config.policy.repair
    managed = {g.asg_name for g in config.node_groups}
    groups = [_live_by_id(asg) for name, asg in snapshot.asgs.items() if name in managed]
    # One group (the usual case): its remembered index as it is, read only here.
    instances = groups[0] if len(groups) == 1 else {i: inst for group in groups for i, inst in group.items()}
    statuses = snapshot.instance_statuses or {}
    # Created after this instant: younger than the provisioning deadline, so booting.
    born_after = now - timedelta(seconds=config.policy.max_node_provision_seconds)
    first_seen = snapshot.state.instances_first_seen
    health: dict[str, Health] = {}
    nodes: dict[str, Node] = {}
    by_node: dict[str, AsgInstance] = {}
    unhealthy: list[str] = []
    recovered: list[str] = []
    notable: list[str] = []
    # Whether a taint list holds the health taint, by the list's identity: a group's nodes share theirs
    # (the nodes, so the ids, live all call), and every healthy node of every run is asked.
    tainted: dict[int, bool] = {}
    for node in snapshot.nodes:
        instance = instances.get(node.instance_id or "")
        if instance is None:
            continue
        name = node.name
        nodes[name], by_node[name] = node, instance
        status = statuses.get(instance.instance_id) if statuses else None
        found = health[name] = node_health(
            node, instance, status, policy, first_seen, now, born_after=born_after
        )
        if found is HEALTHY:  # most nodes of most runs: one identity test, no property read
            taints = node.taints
            if taints:
                ours = tainted.get(id(taints))
                if ours is None:
                    ours = tainted[id(taints)] = carries_taint(taints, REPAIR_TAINT_KEY)  # health_tainted
                if ours:
                    recovered.append(name)
            continue
        notable.append(node.name)
        if found.unhealthy:
            unhealthy.append(node.name)
        elif not found.signals and not found.bad_input and health_tainted(node):
            recovered.append(node.name)
    foreign = tuple(sorted(set(statuses) - set(instances)))
    return Assessment(
        health, nodes, by_node, foreign, frozenset(unhealthy), frozenset(recovered), frozenset(notable)
    )


def _index_live(asg: AsgState) -> dict[str, AsgInstance]:
    return {i.instance_id: i for i in asg.live_instances}


# A group's live instances by id, from the ASG alone: the simulator and a warm Lambda hand over the
# same frozen AsgState while the group does not change (shared.planner.memo).
_live_by_id = identity_memo(_index_live)


def hide_unhealthy(snapshot: Snapshot, assessment: Assessment) -> Snapshot:
    """The snapshot as the other planning rules judge it: unhealthy nodes cordoned by someone else
    (no room counted, hands off), recovered nodes without the scaler's health cordon (ours to lift)."""
    unhealthy, recovered = assessment.unhealthy, assessment.recovered
    if not unhealthy and not recovered:
        return snapshot
    nodes = tuple(
        _as_foreign_cordon(n) if n.name in unhealthy else _as_uncordoned(n) if n.name in recovered else n
        for n in snapshot.nodes
    )
    return replace(snapshot, nodes=nodes)


def _without_cordon_annotation(node: Node) -> dict[str, str]:
    return {k: v for k, v in node.annotations.items() if k != ANNOTATION_CORDONED_AT}


def _as_foreign_cordon(node: Node) -> Node:
    return replace(node, unschedulable=True, annotations=_without_cordon_annotation(node))


def _as_uncordoned(node: Node) -> Node:
    taints = tuple(t for t in node.taints if t.key != REPAIR_TAINT_KEY)
    if not node.cordoned_by_scaler:
        return replace(node, taints=taints)
    return replace(node, taints=taints, unschedulable=False, annotations=_without_cordon_annotation(node))


@dataclass
class RepairResult:
    decisions: list[RepairDecision] = field(default_factory=list)
    terminate: list[Termination] = field(default_factory=list)
    uncordon: list[NodeAction] = field(default_factory=list)
    unmark: list[NodeMark] = field(default_factory=list)
    clocks: dict[str, datetime] = field(default_factory=dict)  # first sightings to store
    paused: list[str] = field(default_factory=list)  # groups over the unhealthy threshold

    @property
    def owned(self) -> frozenset[str]:
        """Nodes repair decides about this run: the other rules leave them alone."""
        return frozenset(d.node for d in self.decisions if d.action is not RepairAction.IGNORED)


def unhealthy_threshold(nodes: int, fraction: float) -> int:
    """How many of `nodes` may be unhealthy before repair pauses: the fraction, rounded up (as
    Karpenter's allowedUnhealthyPercent and a PDB's maxUnavailable percentage round)."""
    return math.ceil(nodes * fraction)


def plan_repair(
    ctx: Context, assessment: Assessment, decrements: Mapping[str, int], saturated: Set[str]
) -> RepairResult:
    """Repair decisions for every managed group (see the module docstring).

    `decrements`: desired-lowering terminations already planned per group (scale-down's);
    `saturated`: groups at max size with pods waiting for them (a broken node there is replaced,
    never given up).
    """
    out = RepairResult()
    for view in ctx.groups:
        _plan_group(ctx, view, assessment, decrements.get(view.name, 0), view.name in saturated, out)
    if assessment.foreign_statuses:
        shown = ", ".join(assessment.foreign_statuses[:5])
        more = len(assessment.foreign_statuses) - 5
        reason = (
            f"instance status of {len(assessment.foreign_statuses)} instance(s) of no managed group ignored: "
        )
        out.decisions.append(
            RepairDecision(
                "",
                "",
                "",
                "instance-status",
                RepairAction.IGNORED,
                reason + shown + (f" and {more} more" if more > 0 else ""),
            )
        )
    out.decisions.sort(key=lambda d: (d.node, d.group))
    return out


def _plan_group(
    ctx: Context, view: GroupView, assessment: Assessment, decrements: int, saturated: bool, out: RepairResult
) -> None:
    health, recovered, notable = assessment.health, assessment.recovered, assessment.notable
    # Most runs have every node HEALTHY with no cordon to lift: then no node is read here at all.
    anything = notable or recovered or assessment.unhealthy
    names = [n.name for n in view.nodes] if anything else []  # in name order (GroupView.nodes)
    for name in names:
        if name not in notable and name not in recovered:
            continue  # HEALTHY with no cordon to lift, or not assessed: most nodes of most runs
        h = health[name]
        if h.signals:
            out.clocks.update({s.clock: s.since for s in h.signals if s.clock})
        instance_id = assessment.instances[name].instance_id
        if h.bad_input:
            out.decisions.append(
                RepairDecision(name, view.name, instance_id, "", RepairAction.IGNORED, h.bad_input)
            )
        elif name in recovered:
            _recover(assessment.nodes[name], view, instance_id, out)
    unhealthy = [name for name in names if name in assessment.unhealthy]
    threshold = unhealthy_threshold(len(view.nodes), ctx.config.policy.repair.max_unhealthy_fraction)
    paused = ctx.config.policy.repair.enabled and len(unhealthy) > threshold
    if paused:
        out.paused.append(view.name)
    removable = removable_above_min(view.current_desired - decrements, view.min_size)
    for name in unhealthy:
        decision = _decide(
            ctx, view, assessment.nodes[name], assessment.instances[name], health[name], paused, threshold
        )
        if decision.action is RepairAction.REPLACE:
            decrement = removable > 0 and not saturated
            removable -= 1 if decrement else 0
            out.terminate.append(
                Termination(
                    name,
                    decision.instance_id,
                    view.name,
                    decision.reason,
                    decrement=decrement,
                    cause=REPAIR_CAUSE,
                    evidence=evidence(assessment.nodes[name], health[name].due(ctx.now)),
                )
            )
        out.decisions.append(decision)


def _recover(node: Node, view: GroupView, instance_id: str, out: RepairResult) -> None:
    reason = "healthy again: the scaler lifts its health cordon"
    out.decisions.append(RepairDecision(node.name, view.name, instance_id, "", RepairAction.UNCORDON, reason))
    out.unmark.append(NodeMark(node.name, view.name, reason, REPAIR_TAINT_KEY, TaintEffect.NO_SCHEDULE))
    if node.cordoned_by_scaler:
        out.uncordon.append(NodeAction(node.name, view.name, reason))


def _signals_text(signals: tuple[Signal, ...]) -> str:
    return ", ".join(s.condition for s in signals)


def _not_yet(ctx: Context, health: Health) -> str | None:
    """Why no action is due on an unhealthy node yet (None: a signal is past its toleration)."""
    if any(s.asg_replaces for s in health.signals):
        return "the Auto Scaling group marks it Unhealthy and replaces it itself"
    if health.due(ctx.now):
        return None
    first = min(health.signals, key=lambda s: s.since.timestamp() + s.toleration)
    left = first.toleration - int((ctx.now - first.since).total_seconds())
    return f"{first.detail} since {first.since.isoformat()}: tolerated {left}s more"


def _decide(
    ctx: Context,
    view: GroupView,
    node: Node,
    instance: AsgInstance,
    health: Health,
    paused: bool,
    threshold: int,
) -> RepairDecision:
    """The action for one unhealthy node of a group (its room is never counted, whatever the action)."""
    due = health.due(ctx.now)
    shown = _signals_text(due or health.signals)

    def decision(action: RepairAction, reason: str) -> RepairDecision:
        return RepairDecision(node.name, view.name, instance.instance_id, shown, action, reason)

    waiting = _not_yet(ctx, health)
    if not ctx.config.policy.repair.enabled:
        waiting = "repair is switched off (policy.repair.enabled: false)"
    if waiting:
        return decision(RepairAction.WAIT, f"{waiting}; its room is not counted")
    what = "; ".join(s.detail for s in due)
    pods = ctx.pods_on_node.get(node.name, [])
    protected = protection(node, pods, view.asg)
    if protected:
        return decision(RepairAction.WAIT, f"{what}; {protected}: never replaced automatically")
    busy = busy_pods(pods, ctx.config.policy.pod_priority_cutoff, ctx.now)
    if busy and health_tainted(node) and node.unschedulable:
        why = f"cordoned for health, replaced once its {len(busy)} busy pod(s) finish (never evicted)"
        return decision(RepairAction.WAIT, f"{what}; {why}")
    if busy:
        why = f"runs {len(busy)} busy pod(s) ({busy[0].key}): cordoned so nothing new lands"
        return decision(RepairAction.CORDON, f"{what}; {why}, replaced once empty, never evicted")
    if paused:
        why = f"more than {threshold} of the group's {len(view.nodes)} node(s) are unhealthy"
        return decision(RepairAction.PAUSED, f"{what}; repair paused: {why} (a bad AMI, driver or zone?)")
    settle = ctx.config.policy.cordon_settle_seconds
    cordoned = node.cordoned_at if health_tainted(node) else None
    if cordoned is not None and not ctx.older_than(cordoned, settle):
        return decision(RepairAction.WAIT, f"{what}; emptied, replaced once its cordon is {settle}s old")
    return decision(RepairAction.REPLACE, f"{what}; runs no busy pod: replaced")
