"""Scale-down: cordon nodes idle long enough, terminate scaler-cordoned nodes still idle, replace
instances that never became usable. Batch-safe: a node running any non-DaemonSet pod is never touched."""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.domain.model import Node
from shared.domain.plan import NodeAction, Termination
from shared.domain.safety import busy_pods, protection, removable_above_min, scale_in_protection
from shared.planner.context import Context, GroupView


@dataclass
class ScaleDownResult:
    cordon: list[NodeAction] = field(default_factory=list)
    uncordon: list[NodeAction] = field(default_factory=list)
    terminate: list[Termination] = field(default_factory=list)
    idle_since: dict[str, datetime] = field(default_factory=dict)
    first_seen: dict[str, datetime] = field(default_factory=dict)
    backoff_groups: set[str] = field(default_factory=set)
    reasons: dict[str, list[str]] = field(default_factory=dict)  # group -> why idle nodes were kept


def is_idle(ctx: Context, node: Node) -> bool:
    """A node is idle when it runs nothing but DaemonSet and mirror pods."""
    return node.name not in ctx.busy_nodes


def _protected(ctx: Context, node: Node) -> str | None:
    view = ctx.group_of_node.get(node.name)
    return protection(node, ctx.pods_on_node.get(node.name, ()), view.asg if view else None)


def _emptying(ctx: Context, node: Node) -> bool:
    """Every pod keeping the node busy is already being deleted (a migration evicted them): the
    node empties, so its cordon stays and idle scale-down takes it (shared.planner.migration)."""
    busy = busy_pods(ctx.pods_on_node.get(node.name, ()), ctx.config.policy.pod_priority_cutoff, ctx.now)
    return bool(busy) and all(p.deleted_at is not None for p in busy)


def _recent(ctx: Context, when: datetime | None, seconds: int) -> bool:
    return when is not None and not ctx.older_than(when, seconds)


def grew_recently(ctx: Context, view: GroupView) -> bool:
    """The group grew less than `scale_down_delay_after_add_seconds` ago: it gives no node back yet
    (cluster-autoscaler's --scale-down-delay-after-add; idle scale-down and migration alike)."""
    return _recent(ctx, view.state.last_scale_up, ctx.config.policy.scale_down_delay_after_add_seconds)


def _replacements(ctx: Context, view: GroupView, out: ScaleDownResult) -> None:
    """Instances that never registered, or nodes stuck NotReady, past the provisioning deadline."""
    deadline = ctx.config.policy.max_node_provision_seconds
    stored = ctx.snapshot.state.instances_first_seen
    for instance in view.unregistered:
        first_seen = stored.get(instance.instance_id, ctx.now)
        out.first_seen[instance.instance_id] = first_seen
        if ctx.older_than(first_seen, deadline) and not scale_in_protection(instance.instance_id, view.asg):
            out.terminate.append(
                Termination(
                    None,
                    instance.instance_id,
                    view.name,
                    f"never registered as a node within {deadline}s: replacing it",
                    decrement=False,
                )
            )
            out.backoff_groups.add(view.name)
    repair = ctx.config.policy.repair.enabled
    for node in view.nodes:
        if node.ready or not is_idle(ctx, node) or _protected(ctx, node):
            continue
        ran = _went_not_ready(node, deadline)
        if ran and repair:
            continue  # a broken machine: repair's (its Ready toleration, no capacity backoff)
        since = node.ready_changed_at or node.created_at
        if ctx.older_than(since, deadline) and node.instance_id:
            why = "it ran, then broke (repair is off)" if ran else "the launch failed"
            out.terminate.append(
                Termination(
                    node.name,
                    node.instance_id,
                    view.name,
                    f"NotReady for more than {deadline}s, {why}: replacing it",
                    decrement=False,
                )
            )
            if not ran:  # a failed launch is a capacity failure; a machine that broke is not
                out.backoff_groups.add(view.name)


# The kubelet registers a node with its Ready condition already set (NotReady until the runtime's
# network is up: pkg/kubelet/kubelet_node_status.go, initialNode calls setNodeStatus), so a node never
# Ready has its condition's lastTransitionTime at its creation, within the API round trips.
_REGISTRATION_SLACK = timedelta(seconds=120)
# The conditions the kubelet sets beside Ready. When it stops posting, the node lifecycle controller
# sets all of them Unknown at once (pkg/controller/nodelifecycle, tryUpdateNodeHealth: "Kubelet
# stopped posting node status."); when it is back, its first status moves them all to what it sees,
# at the same instant. So a Ready change they share ends a silence, whatever Ready was before it.
_KUBELET_CONDITIONS = frozenset({"MemoryPressure", "DiskPressure", "PIDPressure"})
_SAME_UPDATE = timedelta(seconds=5)  # one status update; timestamps have whole seconds


def _went_not_ready(node: Node, deadline: int) -> bool:
    """A machine that ran and broke, not a launch that failed: with repair on, repair judges it (its
    Ready toleration, no capacity backoff), as EKS and Karpenter node repair do.

    Ready=False since a transition after its registration, while the kubelet kept reporting: it was
    Ready in between (False follows False with no transition). Ready=Unknown also follows a kubelet
    that never became Ready and stopped reporting (the node lifecycle controller's grace), and so
    does a False its kubelet posted on coming back (Unknown -> False, its other conditions changing
    with it): only such a change later than the provisioning deadline tells that the node ran."""
    changed, created = node.ready_changed_at, node.created_at
    if changed is None or created is None:
        return False
    status = next((c.status for c in node.conditions if c.type == "Ready"), None)
    reporting = status == "False" and not _back_from_silence(node, changed)
    after = _REGISTRATION_SLACK if reporting else timedelta(seconds=deadline)
    return changed - created > after


def _back_from_silence(node: Node, ready_changed: datetime) -> bool:
    """Whether the kubelet's other conditions changed with Ready: its first status after a silence."""
    return any(
        c.type in _KUBELET_CONDITIONS
        and c.changed_at is not None
        and abs(c.changed_at - ready_changed) <= _SAME_UPDATE
        for c in node.conditions
    )


def _keep(out: ScaleDownResult, view: GroupView, count: int, why: str) -> None:
    """Say why `count` idle nodes of a group stay (it reaches the group's reason in the plan)."""
    if count > 0:
        out.reasons.setdefault(view.name, []).append(f"{count} idle node(s) kept: {why}")


def with_kept(reason: str, kept: Sequence[str]) -> str:
    """A group's reason with why its idle nodes were kept ("no change" gives way to them)."""
    if not kept:
        return reason
    return "; ".join(kept) if reason == "no change" else "; ".join((reason, *kept))


def _idle_nodes(
    ctx: Context, view: GroupView, busy_nodes: set[str], uncordoning: set[str], out: ScaleDownResult
) -> tuple[list[tuple[datetime, Node]], list[tuple[datetime, Node]]]:
    """The group's idle schedulable nodes (by idle-since) and the idle nodes it cordoned (by cordon
    time); busy nodes the scaler cordoned are uncordoned, and protected ones too."""
    stored_idle = ctx.snapshot.state.nodes
    idle_nodes: list[tuple[datetime, Node]] = []
    cordoned_idle: list[tuple[datetime, Node]] = []
    running = ctx.busy_nodes  # not is_idle(ctx, node), without a call: every node of every run
    for node in view.nodes:
        if node.name in busy_nodes or node.name in running:
            # unschedulable first: a field, where cordoned_by_scaler is a property (most nodes are busy)
            if (
                node.unschedulable
                and node.cordoned_by_scaler
                and node.name not in uncordoning
                and not _emptying(ctx, node)
            ):
                out.uncordon.append(NodeAction(node.name, view.name, "a pod started on it after the cordon"))
            continue
        previous = stored_idle.get(node.name)
        since = previous.idle_since if previous and previous.idle_since else ctx.now
        out.idle_since[node.name] = since
        if node.name in uncordoning or not node.ready:
            continue
        protected = _protected(ctx, node)
        if protected:
            if node.cordoned_by_scaler:
                out.uncordon.append(NodeAction(node.name, view.name, protected))
            continue
        if node.cordoned_by_scaler:
            cordoned_idle.append((node.cordoned_at or ctx.now, node))
        elif not node.unschedulable:
            idle_nodes.append((since, node))
    idle_nodes.sort(key=lambda item: (item[0], item[1].name))
    cordoned_idle.sort(key=lambda item: (item[0], item[1].name))
    return idle_nodes, cordoned_idle


def _shrink(
    ctx: Context,
    view: GroupView,
    idle_nodes: list[tuple[datetime, Node]],
    cordoned_idle: list[tuple[datetime, Node]],
    desired: int,
    out: ScaleDownResult,
) -> None:
    """Terminate settled cordoned nodes, then cordon nodes idle long enough, within the limits."""
    policy = ctx.config.policy
    removable = removable_above_min(desired, view.min_size)
    budget = max(1, math.floor(policy.max_scale_in_fraction * max(len(view.nodes), desired)))
    # One batch (the scale-in budget) of terminations per scale_down_delay_after_delete_seconds.
    if _recent(ctx, view.state.last_scale_down, policy.scale_down_delay_after_delete_seconds):
        wait = policy.scale_down_delay_after_delete_seconds
        _keep(out, view, len(idle_nodes) + len(cordoned_idle), f"terminated nodes less than {wait}s ago")
        return
    terminated = _terminate_settled(ctx, view, cordoned_idle, budget, removable, out)
    if grew_recently(ctx, view):
        _keep(out, view, len(idle_nodes), f"grew less than {policy.scale_down_delay_after_add_seconds}s ago")
        return
    _cordon_idle(ctx, view, idle_nodes, len(cordoned_idle), terminated, budget, removable, out)


def _terminate_settled(
    ctx: Context,
    view: GroupView,
    cordoned_idle: list[tuple[datetime, Node]],
    budget: int,
    removable: int,
    out: ScaleDownResult,
) -> int:
    """Terminate scaler-cordoned nodes that stayed idle through the settle time, within the limits."""
    settle = ctx.config.policy.cordon_settle_seconds
    limit = min(budget, removable)
    settled = [(at, node) for at, node in cordoned_idle if ctx.older_than(at, settle)]
    for cordoned_at, node in settled[:limit]:
        assert node.instance_id is not None
        reason = f"idle and cordoned since {cordoned_at.isoformat()}"
        out.terminate.append(Termination(node.name, node.instance_id, view.name, reason))
    if len(settled) > limit:
        why = f"at min size {view.min_size}" if removable < budget else "scale-in limit reached"
        _keep(out, view, len(settled) - limit, why)
    return min(len(settled), limit)


def _cordon_idle(
    ctx: Context,
    view: GroupView,
    idle_nodes: list[tuple[datetime, Node]],
    cordoned: int,
    terminated: int,
    budget: int,
    removable: int,
    out: ScaleDownResult,
) -> None:
    """Cordon nodes idle long enough, longest idle first, keeping headroom and min size."""
    idle_seconds = view.config.idle_seconds
    if idle_seconds is None:
        idle_seconds = ctx.config.policy.idle_seconds
    candidates = idle_nodes[: max(0, len(idle_nodes) - view.config.headroom_nodes)]
    _keep(out, view, len(idle_nodes) - len(candidates), "headroom")
    ready = [(since, node) for since, node in candidates if ctx.older_than(since, idle_seconds)]
    # Nodes already cordoned and waiting count against the budget: it limits scale-in in
    # progress, so planning again right after applying a plan asks for nothing more.
    by_budget = budget - (cordoned - terminated)  # cordoned, still to be terminated
    by_min_size = removable - cordoned
    room = max(0, min(by_budget, by_min_size))
    for since, node in ready[:room]:
        out.cordon.append(
            NodeAction(node.name, view.name, f"idle since {since.isoformat()} (>= {idle_seconds}s)")
        )
    if len(ready) > room:
        why = f"at min size {view.min_size}" if by_min_size <= by_budget else "cordon budget used"
        _keep(out, view, len(ready) - room, why)


def plan_scale_down(
    ctx: Context,
    busy_nodes: set[str],
    uncordoning: set[str],
    desired_after_scale_up: dict[str, int],
    saturated: AbstractSet[str] = frozenset(),
) -> ScaleDownResult:
    """Choose nodes to cordon, uncordon and terminate, group by group.

    `busy_nodes` receive backlog pods this run; `uncordoning` are already being uncordoned for them.
    A `saturated` group (at max size with pods waiting for it) is not shrunk: a node removed there
    would only be bought again for those pods.
    Limits: the group's min size (against the desired after scale-up), `max_scale_in_fraction` of
    the group per run (at least one node), the delay after the group last grew, headroom nodes.
    """
    out = ScaleDownResult()
    for view in ctx.groups:
        _replacements(ctx, view, out)
        idle_nodes, cordoned_idle = _idle_nodes(ctx, view, busy_nodes, uncordoning, out)
        if view.name in saturated:
            if idle_nodes or cordoned_idle:
                kept = len(idle_nodes) + len(cordoned_idle)
                _keep(out, view, kept, "at max size with pods waiting for it")
            continue
        _shrink(ctx, view, idle_nodes, cordoned_idle, desired_after_scale_up[view.name], out)
    return _aws_limits(ctx, out)


def _aws_limits(ctx: Context, out: ScaleDownResult) -> ScaleDownResult:
    """What AWS allows on top of the batch-safe rules (shared.planner.capacity): nothing is
    terminated in a group whose Terminate process is suspended (cordons stay, so no new pod lands
    on a node the scaler would remove); every node of a group whose Capacity Block ends within
    the margin is cordoned and none is uncordoned (EC2 terminates them at the block's end; running
    pods are never evicted)."""
    blocked = {v.name: v.capacity.terminate_blocked for v in ctx.groups if v.capacity.terminate_blocked}
    for name, reason in blocked.items():
        if any(t.group == name for t in out.terminate):
            out.reasons.setdefault(name, []).append(reason or "")
    out.terminate = [t for t in out.terminate if t.group not in blocked]
    ending = {v.name: v for v in ctx.groups if v.capacity.block_cordon}
    if not ending:
        return out
    out.uncordon = [a for a in out.uncordon if a.group not in ending]
    cordoning = {a.node for a in out.cordon}
    for name, view in ending.items():
        reason = f"{view.capacity.block_cordon}: cordoned before EC2 reclaims its instances"
        for node in view.nodes:
            if not node.unschedulable and node.name not in cordoning:
                out.cordon.append(NodeAction(node.name, name, reason))
    return out
