"""Node rotation without eviction (pure): outdated, expired and maintenance-bound nodes are replaced
as they empty, and capacity for the pods of nodes about to go is bought before they are gone.

Due for rotation (Karpenter's drift and expireAfter, EC2's scheduled events):
- drift: the instance was launched from another launch template, another version of it (`$Latest`
  and `$Default` resolved through DescribeLaunchTemplates), or another launch configuration than the
  group launches from now. A symbolic version that cannot be resolved (no template data this run) is
  not judged.
- lifetime: the node is older than `policy.max_node_lifetime_seconds` (unset: never).
- maintenance: EC2 scheduled an event for the instance (instance-retirement, instance-stop,
  system-reboot, instance-reboot, system-maintenance) that is not completed or canceled.
- rebalance: an EC2 rebalance recommendation put the mark on with the value `rebalance` (the
  AWS-events function; the taint is the only record of it).

What the plan does (level-triggered, per group):
- An idle node due is replaced at once: terminated, the group launches a new one (desired unchanged).
- A busy node due is marked `backlog-scaler/rotation:NoSchedule` so no new pods land, and replaced
  once it empties. Nothing is ever evicted.
- Drift and lifetime go `policy.rotation.max_in_flight` nodes per group at a time (marked nodes and
  instances still launching count); maintenance is not paced: EC2 acts on its own date.
- A mark whose node is no longer due (a template rolled back) is lifted.
- Buying ahead: each busy pod owned by a controller (it is recreated when its node goes) on a node
  under a Spot interruption warning or an EC2 scheduled event stands in as a pending pod
  (`with_replacement_pods`), so the capacity it will need is bought now, before the pod is gone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from shared.config import ScalerConfig
from shared.domain.constraints import HOSTNAME
from shared.domain.labels import Requirement
from shared.domain.model import (
    AsgInstance,
    AsgState,
    InstanceStatus,
    LaunchTemplateRef,
    LaunchTemplateVersions,
    Node,
    Pod,
    Snapshot,
    Taint,
    TaintEffect,
    carries_taint,
)
from shared.domain.numbers import whole_number
from shared.domain.plan import NodeMark, RotationCause, RotationDecision, Termination
from shared.domain.safety import busy_pods, protection
from shared.planner.context import Context, GroupView
from shared.planner.gangs import stand_ins

ROTATION_TAINT_KEY = "backlog-scaler/rotation"
ROTATION_CAUSE = "rotation"
REPLACEMENT = "replacement-"  # the kind of a stand-in for a pod whose node is going away
MAINTENANCE_EVENTS = frozenset(
    {"instance-retirement", "instance-stop", "system-reboot", "instance-reboot", "system-maintenance"}
)


REBALANCE = "rebalance"  # the rotation mark's value on a node EC2 recommended rebalancing


def rotation_taint() -> Taint:
    return Taint(ROTATION_TAINT_KEY, "", TaintEffect.NO_SCHEDULE)


def rebalance_taint() -> Taint:
    """The rotation mark put on at an EC2 rebalance recommendation: its value is the durable record
    of the recommendation (no event repeats it), so later runs keep rotating the node."""
    return Taint(ROTATION_TAINT_KEY, REBALANCE, TaintEffect.NO_SCHEDULE)


def _rotation_marked(node: Node) -> bool:
    return carries_taint(node.taints, ROTATION_TAINT_KEY)


def _resolve(ref: LaunchTemplateRef, templates: Mapping[str, LaunchTemplateVersions]) -> int | None:
    """The version number a launch template reference means now (None: cannot tell)."""
    number = whole_number(ref.version)
    if number is not None:
        return number
    known = templates.get(ref.template_id)
    if known is None:
        return None
    return {"$Latest": known.latest_version, "$Default": known.default_version}.get(ref.version)


def drift(
    asg: AsgState, instance: AsgInstance, templates: Mapping[str, LaunchTemplateVersions]
) -> str | None:
    """Why the instance was launched from something else than its group launches from now (None: same)."""
    if asg.launch_configuration or instance.launch_configuration:
        if asg.launch_configuration != instance.launch_configuration:
            was, is_now = (
                lc or "a launch template" for lc in (instance.launch_configuration, asg.launch_configuration)
            )
            return f"launched from {was}, the group now uses {is_now}"
        return None
    # An override with a template of its own is what the group launches for that type now
    group = asg.type_templates.get(instance.instance_type) or asg.launch_template
    own = instance.launch_template
    if group is None or own is None:
        return None
    if group.template_id != own.template_id:
        return f"launched from launch template {own.template_id}, the group now uses {group.template_id}"
    wanted, launched = _resolve(group, templates), _resolve(own, templates)
    if wanted is None or launched is None or wanted == launched:
        return None
    now_uses = f"the group now launches version {wanted} ({group.version})"
    return f"launched from version {launched} of {own.template_id}, {now_uses}"


def _maintenance(status: InstanceStatus | None) -> str | None:
    for event in status.events if status is not None else ():
        if event.code in MAINTENANCE_EVENTS and not event.is_done:
            when = f" not before {event.not_before.isoformat()}" if event.not_before else ""
            return f"EC2 scheduled {event.code}{when}"
    return None


def _may_be_due(asg: AsgState, snapshot: Snapshot, config: ScalerConfig) -> bool:
    """Whether any node of the group can be due without carrying the rotation mark: False when there
    are no EC2 statuses (no maintenance), no lifetime limit, and neither the group nor any of its
    instances names a launch template or configuration (`drift` finds nothing to compare). Then
    only marked nodes are judged (a rebalance mark, or a mark to lift): every node of every run is
    spared the rest of `due`."""
    if snapshot.instance_statuses or config.policy.max_node_lifetime_seconds is not None:
        return True
    if asg.launch_configuration or asg.launch_template is not None:
        return True
    return any(i.launch_configuration for i in asg.live_instances)


def due(
    node: Node, asg: AsgState, instance: AsgInstance, snapshot: Snapshot, config: ScalerConfig, now: datetime
) -> tuple[RotationCause, str] | None:
    """Why a node is due for rotation, maintenance first (EC2 will not wait), then drift, lifetime."""
    statuses = snapshot.instance_statuses  # None or empty mostly: no lookup then, for every node
    maintenance = _maintenance(statuses.get(instance.instance_id)) if statuses else None
    if maintenance:
        return RotationCause.MAINTENANCE, maintenance
    if _rotation_marked(node) and any(
        t.key == ROTATION_TAINT_KEY and t.value == REBALANCE for t in node.taints
    ):
        return RotationCause.REBALANCE, "EC2 rebalance recommendation (elevated Spot interruption risk)"
    drifted = drift(asg, instance, snapshot.launch_templates)
    if drifted:
        return RotationCause.DRIFT, drifted
    lifetime = config.policy.max_node_lifetime_seconds
    if (
        lifetime is not None
        and node.created_at is not None
        and (now - node.created_at).total_seconds() >= lifetime
    ):
        return RotationCause.LIFETIME, f"older than max_node_lifetime_seconds {lifetime}"
    return None


def going_away(snapshot: Snapshot) -> frozenset[str]:
    """Nodes whose instance EC2 is about to take: a Spot interruption warning or a scheduled event."""
    statuses = snapshot.instance_statuses
    if not statuses:  # not read this run, or no instance reported: no scheduled event to look up
        return snapshot.interrupted
    scheduled = {
        n.name
        for n in snapshot.nodes
        if n.instance_id and _maintenance(statuses.get(n.instance_id)) is not None
    }
    return frozenset(scheduled) | snapshot.interrupted


def with_replacement_pods(snapshot: Snapshot, config: ScalerConfig, now: datetime) -> Snapshot:
    """The snapshot with a pending stand-in for each busy, controller-owned pod of a node going away."""
    leaving = going_away(snapshot)
    if not leaving:
        return snapshot
    gang_label = config.policy.gang_label
    cutoff = config.policy.pod_priority_cutoff
    # The replacement never runs on a node going away: its own, or another leaving one (their free
    # room would count for it now, and the plan after their mark or hold would buy it a run late).
    hostnames = sorted(n.labels.get(HOSTNAME, n.name) for n in snapshot.nodes if n.name in leaving)
    elsewhere = Requirement(HOSTNAME, "NotIn", tuple(hostnames))
    extra: list[Pod] = []
    on_leaving = [p for p in snapshot.pods if p.node_name in leaving and p.owner_kind]
    for pod in busy_pods(on_leaving, cutoff, now):
        # Recreated alone by its controller: bought as one pod, not as a gang waiting for members.
        labels = {k: v for k, v in pod.labels.items() if k != gang_label}
        terms = tuple((*term, elsewhere) for term in pod.scheduling.affinity_terms) or ((elsewhere,),)
        scheduling = replace(pod.scheduling, affinity_terms=terms)
        extra += stand_ins(replace(pod, labels=labels, scheduling=scheduling), pod.name, REPLACEMENT, 1)
    return replace(snapshot, pods=snapshot.pods + tuple(extra))


@dataclass
class RotationResult:
    decisions: list[RotationDecision] = field(default_factory=list)
    terminate: list[Termination] = field(default_factory=list)
    mark: list[NodeMark] = field(default_factory=list)
    unmark: list[NodeMark] = field(default_factory=list)

    @property
    def owned(self) -> frozenset[str]:
        return frozenset(t.node for t in self.terminate if t.node)


def plan_rotation(ctx: Context, nodes: Mapping[str, Node], skip: frozenset[str]) -> RotationResult:
    """Rotation decisions for every group (see the module docstring).

    `nodes`: the nodes as read (the planner's copies may hide marks); `skip`: nodes another rule
    decides about this run (repair, scale-down's cordons and terminations).
    """
    out = RotationResult()
    if not ctx.config.policy.rotation.enabled:
        return out
    for view in ctx.groups:
        if view.asg is not None:
            _plan_group(ctx, view, view.asg, nodes, skip, out)
    out.decisions.sort(key=lambda d: d.node)
    return out


def _plan_group(
    ctx: Context,
    view: GroupView,
    asg: AsgState,
    nodes: Mapping[str, Node],
    skip: frozenset[str],
    out: RotationResult,
) -> None:
    instances: dict[str, AsgInstance] | None = None  # built for the first node judged (most runs: none)
    found: list[tuple[Node, RotationCause, str]] = []
    if _may_be_due(asg, ctx.snapshot, ctx.config):
        judged = [nodes.get(planned.name, planned) for planned in view.nodes]
    else:
        judged = _rotation_marked_nodes(view, nodes)
    for node in judged:
        if instances is None:
            instances = {i.instance_id: i for i in asg.live_instances}
        instance = instances.get(node.instance_id or "")
        reason = due(node, asg, instance, ctx.snapshot, ctx.config, ctx.now) if instance else None
        if reason is None or node.name in skip:
            if reason is None and _rotation_marked(node) and node.name not in skip:
                why = "no longer due for rotation"
                out.unmark.append(
                    NodeMark(node.name, view.name, why, ROTATION_TAINT_KEY, TaintEffect.NO_SCHEDULE)
                )
            continue
        found.append((node, *reason))
    if not found:
        return  # nothing due: no slot to count, no decision (most groups of most runs)
    # Maintenance first, then nodes already marked (finish what started), then the oldest.
    found.sort(
        key=lambda f: (
            f[1] is not RotationCause.MAINTENANCE,
            not _rotation_marked(f[0]),
            f[0].created_at or ctx.now,
            f[0].name,
        )
    )
    in_flight = sum(1 for i in asg.live_instances if i.is_coming) + sum(
        1 for n, _, _ in found if _rotation_marked(n)
    )
    slots = max(0, ctx.config.policy.rotation.max_in_flight - in_flight)
    for node, cause, why in found:
        paced = cause is not RotationCause.MAINTENANCE and not _rotation_marked(node)
        if paced and slots <= 0:
            out.decisions.append(
                RotationDecision(
                    node.name,
                    view.name,
                    cause,
                    "wait",
                    f"{why}; max_in_flight {ctx.config.policy.rotation.max_in_flight} reached",
                )
            )
            continue
        slots -= 1 if paced else 0
        _rotate(ctx, view, node, cause, why, out)


def _rotation_marked_nodes(view: GroupView, nodes: Mapping[str, Node]) -> list[Node]:
    """The group's nodes, as read, that carry the rotation mark: when nothing can make a node due
    (_may_be_due), `due` finds nothing for the others and they have no mark to lift. Whether a taint
    list carries the mark is judged once per list (_rotation_marked): a group's nodes share theirs,
    and the lists live as long as the nodes, so their ids are stable over the call."""
    marks: dict[int, bool] = {}
    found: list[Node] = []
    for planned in view.nodes:
        node = nodes.get(planned.name, planned)
        marked = marks.get(id(node.taints))
        if marked is None:
            marked = marks[id(node.taints)] = carries_taint(node.taints, ROTATION_TAINT_KEY)
        if marked:
            found.append(node)
    return found


def _rotate(
    ctx: Context, view: GroupView, node: Node, cause: RotationCause, why: str, out: RotationResult
) -> None:
    pods = ctx.pods_on_node.get(node.name, [])
    protected = protection(node, pods, view.asg)
    if protected:
        out.decisions.append(RotationDecision(node.name, view.name, cause, "wait", f"{why}; {protected}"))
        return
    busy = busy_pods(pods, ctx.config.policy.pod_priority_cutoff, ctx.now)
    if not busy and node.instance_id:
        reason = f"{why}; runs no busy pod: replaced"
        out.decisions.append(RotationDecision(node.name, view.name, cause, "replace", reason))
        out.terminate.append(
            Termination(node.name, node.instance_id, view.name, reason, decrement=False, cause=ROTATION_CAUSE)
        )
        return
    reason = f"{why}; {len(busy)} busy pod(s): no new pods land, replaced once empty, never evicted"
    out.decisions.append(RotationDecision(node.name, view.name, cause, "mark", reason))
    if not _rotation_marked(node):
        out.mark.append(NodeMark(node.name, view.name, reason, ROTATION_TAINT_KEY, TaintEffect.NO_SCHEDULE))
