"""`plan(snapshot, config, now) -> Plan`: the whole decision, pure and deterministic."""

from __future__ import annotations

from datetime import datetime

from shared.config import ScalerConfig
from shared.domain.model import Snapshot
from shared.domain.plan import GroupDecision, NodeAction, Outcome, Plan, PodOutcome
from shared.planner.context import Context, GroupView, build_context
from shared.planner.scale_down import ScaleDownResult, plan_scale_down
from shared.planner.scale_up import ScaleUpResult, plan_scale_up


def _headroom(ctx: Context, view: GroupView, up: ScaleUpResult, new_nodes: int, limit: int) -> int:
    """Extra nodes so the group has `headroom_nodes` spare (idle or booting) nodes."""
    want = view.config.headroom_nodes
    if not want or view.in_backoff or view.unavailable_reason:
        return 0
    idle_registered = sum(
        1
        for node in view.nodes
        if node.ready
        and not node.unschedulable
        and node.name not in up.busy_nodes
        and node.name not in ctx.busy_nodes
    )
    spare = idle_registered + up.spare_bins.get(view.name, 0)
    return max(0, min(want - spare, limit - new_nodes))


def _group_reason(
    view: GroupView, pods: list[PodOutcome], new_nodes: int, extra: int, decrements: int, desired: int
) -> str:
    parts: list[str] = []
    if view.unavailable_reason:
        return view.unavailable_reason
    scale_up = [p for p in pods if p.outcome is Outcome.SCALE_UP]
    in_flight = [p for p in pods if p.outcome is Outcome.IN_FLIGHT]
    if new_nodes:
        gpus = sum(p.gpus for p in scale_up)
        parts.append(f"+{new_nodes} node(s) for {len(scale_up)} pending pod(s) ({gpus} GPUs)")
    if extra:
        parts.append(f"+{extra} headroom node(s)")
    if in_flight:
        parts.append(f"{len(in_flight)} pod(s) wait for booting nodes")
    if decrements:
        parts.append(f"-{decrements} idle node(s) terminated")
    if view.in_backoff and view.state.backoff_until:
        parts.append(f"capacity backoff until {view.state.backoff_until.isoformat()}")
        if view.asg and desired < view.current_desired:
            parts.append(f"desired set back to the {len(view.asg.live_instances)} instance(s) that run")
    if desired >= view.max_size and scale_up:
        parts.append(f"at max size {view.max_size}")
    return "; ".join(parts) or "no change"


def _decide_group(
    ctx: Context, view: GroupView, up: ScaleUpResult, down: ScaleDownResult, pods: list[PodOutcome]
) -> GroupDecision:
    current = view.current_desired
    if view.asg is None:
        return GroupDecision(
            view.name, view.config.asg_name, 0, 0, 0, 0, _group_reason(view, pods, 0, 0, 0, 0)
        )
    new_nodes = up.new_nodes.get(view.name, 0)
    extra = _headroom(ctx, view, up, new_nodes, max(0, view.max_size - current))
    decrements = sum(1 for t in down.terminate if t.group == view.name and t.decrement)
    desired = current + new_nodes + extra - decrements
    if view.in_backoff:
        # Launches are failing: stop asking for capacity that will not come.
        desired = min(desired, len(view.asg.live_instances) - decrements)
    desired = max(view.min_size, min(desired, max(view.max_size, view.min_size)))
    return GroupDecision(
        name=view.name,
        asg_name=view.config.asg_name,
        current_desired=current,
        desired=desired,
        min_size=view.min_size,
        max_size=view.max_size,
        reason=_group_reason(view, pods, new_nodes, extra, decrements, desired),
        new_nodes=new_nodes + extra,
        enter_backoff=view.name in down.backoff_groups,
    )


def plan(snapshot: Snapshot, config: ScalerConfig, now: datetime) -> Plan:
    """Decide desired sizes, cordons, uncordons and terminations, with a reason for every pod.

    Pure: reads only its arguments (`now` is passed in), returns absolute decisions, and gives the
    same plan for the same inputs in any order. Groups appear in config order; actions and pods
    are sorted by name.
    """
    ctx = build_context(snapshot, config, now)
    up = plan_scale_up(ctx)
    after_up = {
        view.name: view.current_desired + up.new_nodes.get(view.name, 0) if view.asg else 0
        for view in ctx.groups
    }
    down = plan_scale_down(ctx, up.busy_nodes, set(up.uncordon), after_up, up.saturated)

    pods_by_group: dict[str, list[PodOutcome]] = {}
    for outcome in up.outcomes.values():
        if outcome.group:
            pods_by_group.setdefault(outcome.group, []).append(outcome)
    groups = tuple(
        _decide_group(ctx, view, up, down, pods_by_group.get(view.name, [])) for view in ctx.groups
    )

    uncordon = {a.node: a for a in down.uncordon}
    for node, group in up.uncordon.items():
        uncordon[node] = NodeAction(node, group, "pending pods fit on it")
    return Plan(
        groups=groups,
        cordon=tuple(sorted(down.cordon, key=lambda a: a.node)),
        uncordon=tuple(sorted(uncordon.values(), key=lambda a: a.node)),
        terminate=tuple(sorted(down.terminate, key=lambda t: (t.group, t.instance_id))),
        pods=tuple(sorted(up.outcomes.values(), key=lambda p: p.pod)),
        idle_since=dict(sorted(down.idle_since.items())),
        instances_first_seen=dict(sorted(down.first_seen.items())),
        pod_memory=up.pod_memory(now),
        model_errors=tuple(sorted(up.recalled.errors, key=lambda e: (e.pod, e.node))),
    )
