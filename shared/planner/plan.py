"""`plan(snapshot, config, now) -> Plan`: the whole decision, pure and deterministic."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime

from shared.config import ScalerConfig
from shared.domain.model import AsgState, Snapshot
from shared.domain.plan import (
    GroupDecision,
    Migration,
    NodeAction,
    Outcome,
    Plan,
    PodOutcome,
    RepairAction,
    Termination,
)
from shared.domain.provisioning import RequestAnswer, RequestOutcome
from shared.domain.safety import desired_after
from shared.planner.attrition import AttritionResult, marked_nodes, plan_attrition, without_marks
from shared.planner.capacity import launch_clock_key, next_launch_clock
from shared.planner.context import Context, GroupView, build_context
from shared.planner.gangs import STAND_IN_SEPARATOR, gang_summary, is_stand_in
from shared.planner.leftovers import leftover_nodes
from shared.planner.provisioning import answer_requests, prepare_requests
from shared.planner.repair import Assessment, RepairResult, assess, hide_unhealthy, plan_repair
from shared.planner.rotation import RotationResult, plan_rotation, with_replacement_pods
from shared.planner.scale_down import ScaleDownResult, plan_scale_down, with_kept
from shared.planner.scale_up import ScaleUpResult, plan_scale_up


def _headroom(ctx: Context, view: GroupView, up: ScaleUpResult, new_nodes: int, limit: int) -> int:
    """Extra nodes so the group has `headroom_nodes` spare (idle or booting) nodes."""
    want = view.config.headroom_nodes
    if not want or view.in_backoff or view.unavailable_reason or view.capacity.growth_blocked:
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
    view: GroupView,
    pods: list[PodOutcome],
    new_nodes: int,
    extra: int,
    decrements: int,
    desired: int,
    requests: tuple[str, ...] = (),
    gangs: Mapping[str, list[str]] | None = None,
) -> str:
    parts: list[str] = []
    if view.unavailable_reason:
        return view.unavailable_reason
    gangs = gangs or {}
    in_gangs = {key for members in gangs.values() for key in members}
    scale_up = [p for p in pods if p.outcome is Outcome.SCALE_UP and p.pod not in in_gangs]
    in_flight = [p for p in pods if p.outcome is Outcome.IN_FLIGHT]
    if new_nodes:
        gpus = sum(p.gpus for p in scale_up)
        alone = scale_up or not (requests or gangs)
        wanted = [f"{len(scale_up)} pending pod(s) ({gpus} GPUs)"] if alone else []
        wanted += [gang_summary(gang, members) for gang, members in sorted(gangs.items())]
        wanted += [f"provisioning request {name}" for name in requests]
        parts.append(f"+{new_nodes} node(s) for " + " and ".join(wanted))
    if extra:
        parts.append(f"+{extra} headroom node(s)")
    if in_flight:
        parts.append(f"{len(in_flight)} pod(s) wait for booting nodes")
    if decrements:
        parts.append(f"-{decrements} idle node(s) terminated")
    if view.capacity.launches_overdue:
        parts.append(f"capacity failure: {view.capacity.launches_overdue}")
    elif view.in_backoff and view.state.backoff_until:
        parts.append(f"capacity backoff until {view.state.backoff_until.isoformat()}")
    if view.in_backoff and view.asg and desired < view.current_desired:
        parts.append(f"desired set back to the {len(view.asg.live_instances)} instance(s) that run")
    parts.extend(_aws_notes(view))
    if desired >= view.max_size and scale_up:
        parts.append(f"at max size {view.max_size}")
    return "; ".join(parts) or "no change"


def _aws_notes(view: GroupView) -> list[str]:
    """What AWS-side facts limit the group, for its reason (suspended processes, reservations)."""
    capacity = view.capacity
    notes = [n for n in (capacity.growth_blocked, capacity.terminate_blocked) if n]
    if capacity.reservations_note:
        notes.append(capacity.reservations_note)
    if view.asg is not None and view.asg.warm_pool_size:
        notes.append(f"{view.asg.warm_pool_size} instance(s) in its warm pool")
    return notes


def _decide_group(
    ctx: Context,
    view: GroupView,
    up: ScaleUpResult,
    down: ScaleDownResult,
    pods: list[PodOutcome],
    requests: tuple[str, ...] = (),
) -> GroupDecision:
    current = view.current_desired
    if view.asg is None:
        return GroupDecision(
            view.name, view.config.asg_name, 0, 0, 0, 0, _group_reason(view, pods, 0, 0, 0, 0)
        )
    new_nodes = up.new_nodes.get(view.name, 0)
    extra = _headroom(ctx, view, up, new_nodes, max(0, view.max_size - current))
    leaving = [t for t in down.terminate if t.group == view.name]
    decrements = sum(1 for t in leaving if t.decrement)
    desired = current + new_nodes + extra - decrements
    if view.in_backoff:
        # Launches are failing: stop asking for capacity that will not come.
        desired = min(desired, len(view.asg.live_instances) - decrements)
    desired = max(view.min_size, min(desired, max(view.max_size, view.min_size)))
    # Report what the controller will set: never below the instances that run (safety.desired_to_set).
    after = view.asg.after_terminations(frozenset(t.instance_id for t in leaving), decrements)
    desired = desired_after(desired, after)
    reason = _group_reason(
        view, pods, new_nodes, extra, decrements, desired, requests, up.gangs_bought.get(view.name)
    )
    if desired > view.max_size:
        reason = with_kept(reason, (_above_max(ctx, view, up, after, leaving),))
    return GroupDecision(
        name=view.name,
        asg_name=view.config.asg_name,
        current_desired=current,
        desired=desired,
        min_size=view.min_size,
        max_size=view.max_size,
        reason=with_kept(reason, down.reasons.get(view.name, ())),
        new_nodes=new_nodes + extra,
        enter_backoff=view.name in down.backoff_groups or view.capacity.launches_overdue is not None,
        desired_units=after.units_for(desired) if after.units else None,
        current_desired_units=view.asg.units.desired if view.asg.units else None,
    )


def _above_max(
    ctx: Context, view: GroupView, up: ScaleUpResult, after: AsgState, leaving: list[Termination]
) -> str:
    """Why desired stays above the group's max size: it never drops below the instances that run."""
    gone = {t.node for t in leaving}
    busy = sum(
        1
        for node in view.nodes
        if node.name not in gone and (node.name in ctx.busy_nodes or node.name in up.busy_nodes)
    )
    reason = f"above max_size {view.max_size}: {busy} busy nodes kept"
    others = len(after.live_instances) - busy
    if others > 0:
        reason += f", {others} idle or booting instance(s) until scale-down removes them"
    return reason


def _launch_clocks(ctx: Context, groups: tuple[GroupDecision, ...]) -> dict[str, datetime]:
    """Since when each group has awaited launches (stored with the instances' first sightings)."""
    clocks: dict[str, datetime] = {}
    for view, decision in zip(ctx.groups, groups, strict=True):
        if view.asg is not None:
            clock = next_launch_clock(view.asg, view.capacity, decision.desired, ctx.now)
            if clock is not None:
                clocks[launch_clock_key(view.asg.name)] = clock
    return clocks


def plan(snapshot: Snapshot, config: ScalerConfig, now: datetime) -> Plan:
    """Decide desired sizes, cordons, uncordons, terminations, marks and migrations; a reason for every pod.

    Pure: reads only its arguments (`now` is passed in), returns absolute decisions, and gives the
    same plan for the same inputs in any order. Groups appear in config order; actions and pods
    are sorted by name.
    """
    assessment = assess(snapshot, config, now)
    marked = marked_nodes(snapshot)
    judged = hide_unhealthy(without_marks(snapshot, marked), assessment)
    ctx = build_context(with_replacement_pods(judged, config, now), config, now)
    up = plan_scale_up(ctx)
    answers, updates = answer_requests(ctx, prepare_requests(ctx), up.outcomes, up.counted_on)
    _drop_stand_ins(up)
    requests_by_group = _requests_by_group(answers)
    after_up = {
        view.name: view.current_desired + up.new_nodes.get(view.name, 0) if view.asg else 0
        for view in ctx.groups
    }
    down = plan_scale_down(ctx, up.busy_nodes, set(up.uncordon), after_up, up.saturated)
    repair, rotation = _lifecycle(ctx, assessment, down, up.saturated)

    pods_by_group = _pods_by_group(up)
    groups = tuple(
        _decide_group(
            ctx, view, up, down, pods_by_group.get(view.name, []), requests_by_group.get(view.name, ())
        )
        for view in ctx.groups
    )

    uncordon = {a.node: a for a in down.uncordon}
    for node, group in up.uncordon.items():
        uncordon[node] = NodeAction(node, group, "pending pods fit on it")
    leaving = _leaving(down) | frozenset(m.node for m in rotation.mark)
    attrition = plan_attrition(ctx, marked, up.counted_on, up.outcomes, leaving - repair.owned)
    migrate = _migration(ctx, marked, attrition, rotation, up, leaving)
    return Plan(
        groups=groups,
        cordon=tuple(sorted(down.cordon, key=lambda a: a.node)),
        uncordon=tuple(sorted(uncordon.values(), key=lambda a: a.node)),
        terminate=tuple(sorted(down.terminate, key=lambda t: (t.group, t.instance_id))),
        pods=tuple(sorted(up.outcomes.values(), key=lambda p: p.pod)),
        idle_since=dict(sorted(down.idle_since.items())),
        instances_first_seen=dict(
            sorted({**down.first_seen, **_launch_clocks(ctx, groups), **repair.clocks}.items())
        ),
        pod_memory=up.pod_memory(now),
        model_errors=tuple(sorted(up.recalled.errors, key=lambda e: (e.pod, e.node))),
        provisioning_requests=answers,
        provisioning_updates=updates,
        mark=tuple(sorted((*attrition.mark, *rotation.mark), key=lambda m: (m.node, m.key))),
        unmark=tuple(
            sorted((*attrition.unmark, *repair.unmark, *rotation.unmark), key=lambda m: (m.node, m.key))
        ),
        repair=tuple(repair.decisions),
        rotate=tuple(rotation.decisions),
        repair_paused=tuple(repair.paused),
        delete_nodes=_leftovers(snapshot, config),
        migrate=migrate,
    )


def _pods_by_group(up: ScaleUpResult) -> dict[str, list[PodOutcome]]:
    pods_by_group: dict[str, list[PodOutcome]] = {}
    for outcome in up.outcomes.values():
        if outcome.group:
            pods_by_group.setdefault(outcome.group, []).append(outcome)
    return pods_by_group


def _lifecycle(
    ctx: Context, assessment: Assessment, down: ScaleDownResult, saturated: set[str]
) -> tuple[RepairResult, RotationResult]:
    """Repair and rotation after scale-down: each owns its nodes, and `down` is edited to match."""
    decrements = Counter(t.group for t in down.terminate if t.decrement)
    repair = plan_repair(ctx, assessment, decrements, saturated)
    _merge_repair(down, repair)
    rotation = plan_rotation(ctx, ctx.nodes_by_name, repair.owned | _leaving(down))
    down.terminate += rotation.terminate
    down.cordon = [a for a in down.cordon if a.node not in rotation.owned]
    return repair, rotation


def _migration(
    ctx: Context,
    marked: frozenset[str],
    attrition: AttritionResult,
    rotation: RotationResult,
    up: ScaleUpResult,
    leaving: frozenset[str],
) -> tuple[Migration, ...]:
    """Nodes to empty by moving jobs that checkpoint; never onto nodes new pods are steered away from
    (attrition's and rotation's marks), nor off nodes already leaving, nor in groups whose pending
    pods wait for a node (booting, or bought by this plan)."""
    if not ctx.config.policy.migration.enabled:
        return ()  # off by default: then its module is never loaded (a cold start pays ~10 ms less)
    from shared.planner.migration import plan_migration

    lifted = frozenset(m.node for m in attrition.unmark)
    steered = (marked - lifted) | frozenset(m.node for m in (*attrition.mark, *rotation.mark))
    waiting = frozenset(
        o.group
        for o in up.outcomes.values()
        if o.group and o.outcome in (Outcome.IN_FLIGHT, Outcome.SCALE_UP)
    )
    return plan_migration(ctx, steered, up.counted_on, leaving, waiting)


def _leaving(down: ScaleDownResult) -> frozenset[str]:
    """Nodes scale-down (with repair merged in) cordons or terminates this run."""
    return frozenset(a.node for a in down.cordon) | frozenset(t.node for t in down.terminate if t.node)


def _merge_repair(down: ScaleDownResult, repair: RepairResult) -> None:
    """Repair decides about the nodes it owns: scale-down neither cordons nor uncordons them, and
    terminates one only where repair waits (a node NotReady past the provisioning deadline is a
    launch that failed, as before) and never in a group where repair is paused."""
    owned = repair.owned
    waiting = {d.node for d in repair.decisions if d.action is RepairAction.WAIT}
    paused = set(repair.paused)
    down.terminate = [
        t for t in down.terminate if t.node not in owned or (t.node in waiting and t.group not in paused)
    ] + repair.terminate
    down.cordon = [a for a in down.cordon if a.node not in owned]
    lifted = {a.node for a in repair.uncordon}
    down.uncordon = [
        a for a in down.uncordon if a.node not in owned and a.node not in lifted
    ] + repair.uncordon
    down.cordon = [a for a in down.cordon if a.node not in lifted]


def _leftovers(snapshot: Snapshot, config: ScalerConfig) -> tuple[NodeAction, ...]:
    """Nodes of instances that are gone; none unless every group's ASG was read."""
    asgs = [snapshot.asgs.get(g.asg_name) for g in config.node_groups]
    if any(a is None for a in asgs):
        return ()
    groups = {g.asg_name: g.name for g in config.node_groups}
    return leftover_nodes(snapshot.nodes, (a for a in asgs if a is not None), groups)


def _drop_stand_ins(up: ScaleUpResult) -> None:
    """Stand-ins (gang members not created yet, requests' pods) were placed but are no pods to report."""
    up.outcomes = {k: o for k, o in up.outcomes.items() if STAND_IN_SEPARATOR not in k.partition("/")[2]}
    up.pending = [p for p in up.pending if not is_stand_in(p)]


def _requests_by_group(answers: tuple[RequestAnswer, ...]) -> dict[str, tuple[str, ...]]:
    """Requests placed in each group this run (what its new nodes are for, besides pods)."""
    found: dict[str, list[str]] = {}
    for answer in answers:
        if answer.group and answer.outcome in (RequestOutcome.PROVISIONED, RequestOutcome.BOOKED):
            found.setdefault(answer.group, []).append(answer.request)
    return {group: tuple(names) for group, names in found.items()}
