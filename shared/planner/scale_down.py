"""Scale-down: cordon nodes idle long enough, terminate scaler-cordoned nodes still idle, replace
instances that never became usable. Batch-safe: a node running any non-DaemonSet pod is never touched."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

from shared.domain.model import Node
from shared.domain.plan import NodeAction, Termination
from shared.planner.context import Context, GroupView


@dataclass
class ScaleDownResult:
    cordon: list[NodeAction] = field(default_factory=list)
    uncordon: list[NodeAction] = field(default_factory=list)
    terminate: list[Termination] = field(default_factory=list)
    idle_since: dict[str, datetime] = field(default_factory=dict)
    first_seen: dict[str, datetime] = field(default_factory=dict)
    backoff_groups: set[str] = field(default_factory=set)
    notes: dict[str, list[str]] = field(default_factory=dict)  # group -> why nothing was removed


def is_idle(ctx: Context, node: Node) -> bool:
    """A node is idle when it runs nothing but DaemonSet and mirror pods."""
    return node.name not in ctx.busy_nodes


def _protected(ctx: Context, node: Node) -> str | None:
    if node.scale_down_disabled:
        return "scale-down disabled by annotation"
    if any(pod.do_not_disrupt for pod in ctx.pods_on_node.get(node.name, ())):
        return "runs a pod annotated karpenter.sh/do-not-disrupt"
    return None


def _recent(ctx: Context, when: datetime | None, seconds: int) -> bool:
    return when is not None and not ctx.older_than(when, seconds)


def _replacements(ctx: Context, view: GroupView, out: ScaleDownResult) -> None:
    """Instances that never registered, or nodes stuck NotReady, past the provisioning deadline."""
    deadline = ctx.config.policy.max_node_provision_seconds
    stored = ctx.snapshot.state.instances_first_seen
    for instance in view.unregistered:
        first_seen = stored.get(instance.instance_id, ctx.now)
        out.first_seen[instance.instance_id] = first_seen
        if ctx.older_than(first_seen, deadline):
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
    for node in view.nodes:
        if node.ready or not is_idle(ctx, node) or _protected(ctx, node):
            continue
        since = node.ready_changed_at or node.created_at
        if ctx.older_than(since, deadline) and node.instance_id:
            out.terminate.append(
                Termination(
                    node.name,
                    node.instance_id,
                    view.name,
                    f"NotReady for more than {deadline}s: replacing it",
                    decrement=False,
                )
            )
            out.backoff_groups.add(view.name)


def plan_scale_down(
    ctx: Context,
    busy_nodes: set[str],
    uncordoning: set[str],
    desired_after_scale_up: dict[str, int],
    saturated: set[str] = frozenset(),  # type: ignore[assignment]
) -> ScaleDownResult:
    """Choose nodes to cordon, uncordon and terminate, group by group.

    `busy_nodes` receive backlog pods this run; `uncordoning` are already being uncordoned for them.
    A `saturated` group (at max size with pods waiting for it) is not shrunk: a node removed there
    would only be bought again for those pods.
    Limits: the group's min size (against the desired after scale-up), `max_scale_in_fraction` of
    the group per run (at least one node), the delay after the group last grew, headroom nodes.
    """
    policy = ctx.config.policy
    out = ScaleDownResult()
    stored_idle = ctx.snapshot.state.nodes
    for view in ctx.groups:
        _replacements(ctx, view, out)
        idle_seconds = (
            view.config.idle_seconds if view.config.idle_seconds is not None else policy.idle_seconds
        )
        idle_nodes: list[tuple[datetime, Node]] = []
        cordoned_idle: list[tuple[datetime, Node]] = []
        for node in view.nodes:
            busy = node.name in busy_nodes or not is_idle(ctx, node)
            if busy:
                if node.cordoned_by_scaler and node.name not in uncordoning:
                    out.uncordon.append(
                        NodeAction(node.name, view.name, "a pod started on it after the cordon")
                    )
                continue
            previous = stored_idle.get(node.name)
            since = previous.idle_since if previous and previous.idle_since else ctx.now
            out.idle_since[node.name] = since
            if node.name in uncordoning or not node.ready:
                continue
            protection = _protected(ctx, node)
            if protection:
                if node.cordoned_by_scaler:
                    out.uncordon.append(NodeAction(node.name, view.name, protection))
                continue
            if node.cordoned_by_scaler:
                cordoned_idle.append((node.cordoned_at or ctx.now, node))
            elif not node.unschedulable:
                idle_nodes.append((since, node))

        desired = desired_after_scale_up[view.name]
        if view.name in saturated:
            if idle_nodes or cordoned_idle:
                out.notes.setdefault(view.name, []).append("at max size with pods waiting for it")
            continue
        removable = max(0, desired - view.min_size)
        budget = max(1, math.floor(policy.max_scale_in_fraction * max(len(view.nodes), desired)))
        notes = out.notes.setdefault(view.name, [])

        # Terminate scaler-cordoned nodes that stayed idle through the settle time; one batch
        # (the scale-in budget) per scale_down_delay_after_delete_seconds.
        cordoned_idle.sort(key=lambda item: (item[0], item[1].name))
        terminated = 0
        if _recent(ctx, view.state.last_scale_down, policy.scale_down_delay_after_delete_seconds):
            notes.append(f"terminated nodes less than {policy.scale_down_delay_after_delete_seconds}s ago")
            continue
        for cordoned_at, node in cordoned_idle:
            if not ctx.older_than(cordoned_at, policy.cordon_settle_seconds):
                continue
            if terminated >= min(budget, removable):
                notes.append(
                    "scale-in limit reached" if terminated >= budget else f"at min size {view.min_size}"
                )
                break
            assert node.instance_id is not None
            out.terminate.append(
                Termination(
                    node.name,
                    node.instance_id,
                    view.name,
                    f"idle and cordoned since {cordoned_at.isoformat()}",
                )
            )
            terminated += 1

        # Cordon nodes idle long enough, longest idle first, keeping headroom and min size.
        if _recent(ctx, view.state.last_scale_up, policy.scale_down_delay_after_add_seconds):
            if idle_nodes:
                notes.append(f"grew less than {policy.scale_down_delay_after_add_seconds}s ago")
            continue
        idle_nodes.sort(key=lambda item: (item[0], item[1].name))
        keep = view.config.headroom_nodes
        candidates = idle_nodes[: max(0, len(idle_nodes) - keep)]
        # Nodes already cordoned and waiting count against the budget: it limits scale-in in
        # progress, so planning again right after applying a plan asks for nothing more.
        waiting = len(cordoned_idle) - terminated  # cordoned, still to be terminated
        room = min(budget - waiting, removable - len(cordoned_idle))
        for since, node in candidates:
            if not ctx.older_than(since, idle_seconds):
                continue
            if room <= 0:
                notes.append(
                    f"at min size {view.min_size}" if removable <= terminated else "scale-in limit reached"
                )
                break
            out.cordon.append(
                NodeAction(node.name, view.name, f"idle since {since.isoformat()} (>= {idle_seconds}s)")
            )
            room -= 1
    return out
