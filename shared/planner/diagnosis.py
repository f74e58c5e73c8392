"""Why a pod was not placed: one reason per group, in the scheduler's words where a filter said no."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shared.domain.constraints import ZONE
from shared.domain.model import Pod
from shared.domain.plan import ReasonCode
from shared.domain.resources import CPU, Resources, format_amount
from shared.planner.backlog import Unit
from shared.planner.context import Context, GroupView
from shared.planner.filters.taint_toleration import taint_toleration
from shared.planner.filters.volume_binding import volume_binding
from shared.planner.gangs import gang_shortfall, pending_subject
from shared.planner.placement import template_node
from shared.planner.simulation import Simulation, launch_reason, launch_reasons
from shared.planner.zones import (
    guarantees_zone,
    placement_zone_binding,
    refused_zone_reason,
    unguaranteed_reason,
    unknown_zone_id,
    zone_binding,
)


def _describe_size(resources: Resources) -> str:
    gpus = resources.gpus
    return f"{gpus} GPU{'s' if gpus != 1 else ''}" if gpus else str(resources)


def _amounts(names: tuple[str, ...], resources: Resources) -> str:
    """Amounts as a manifest would spell them ("515m cpu", "2.5Gi memory")."""
    parts = []
    for name in names:
        value = resources.get(name)
        text = f"{value}m" if name == CPU and value % 1000 else format_amount(name, value)
        parts.append(f"{text} {name}")
    return ", ".join(parts)


# The most actionable reason first: a group that could take the pod but cannot grow, then what the
# scheduler refused, then what is wrong with the pod for every group.
_CODE_ORDER = (
    ReasonCode.AT_MAX,
    ReasonCode.GANG_DOES_NOT_FIT,
    ReasonCode.BACKOFF,
    ReasonCode.SCHEDULER_REJECTED,
    ReasonCode.GROUP_UNAVAILABLE,
    ReasonCode.FILTERED,
    ReasonCode.DAEMONSET_OVERHEAD,
    ReasonCode.TOO_LARGE,
    ReasonCode.UNVERIFIABLE,
    ReasonCode.NO_MATCHING_GROUP,
)
# A group that could take the unit but cannot grow: saturated (its idle nodes kept for the unit),
# unless the unit is a gang that could never start, every group at its max size (scale_up.at_max).
_AT_MAX = (ReasonCode.AT_MAX, ReasonCode.GANG_DOES_NOT_FIT)

# Why a gang can never start, every group at its max size with its nodes empty, asked of each group
# at its max it could use; None when it could (shared.planner.scale_up.at_max: the run's own
# placement judges it, so it is handed in).
NeverStarts = Callable[[GroupView], str | None]
Diagnosis = tuple[ReasonCode, str, frozenset[str]]  # the code, the reason, the groups saturated


def _diagnose_group(
    ctx: Context,
    sim: Simulation,
    view: GroupView,
    unit: Unit,
    request: Resources,
    refused: bool,
    judged: bool,
) -> tuple[ReasonCode, str]:
    """Why this group did not take the unit, in the scheduler's words where a filter said no.
    `judged`: the at-max rule judges the unit (a gang, or a member of a gang of several shapes)."""
    pod = unit.pods[0]
    template = view.template
    labels = template.node_labels(0)
    state = sim.state(pod)
    static = _static_verdict(ctx, sim, view, unit, labels)
    if static is not None:
        return static
    if view.unavailable_reason:
        return ReasonCode.GROUP_UNAVAILABLE, view.unavailable_reason
    if state.unverifiable:
        return ReasonCode.UNVERIFIABLE, state.unverifiable
    if state.volumes is not None:
        volume = volume_binding(state.volumes, labels)
        if volume:
            code = ReasonCode.UNVERIFIABLE if state.volumes.unresolvable else ReasonCode.FILTERED
            return code, volume
    assert view.shape is not None and template.free is not None
    too_big = request.exceeding(view.shape)
    if too_big:
        shape = view.shape
        detail = ", ".join(
            f"{n} {format_amount(n, request.get(n))} > {format_amount(n, shape.get(n))}" for n in too_big
        )
        return ReasonCode.TOO_LARGE, f"larger than a node ({detail}; {template.source})"
    squeezed = request.exceeding(template.free)
    if squeezed:
        count = len(template.daemonsets)
        return (
            ReasonCode.DAEMONSET_OVERHEAD,
            f"{count} DaemonSet(s) need {_amounts(squeezed, template.overhead)} on every {view.name} node; "
            f"{_amounts(squeezed, template.free)} left for pods",
        )
    if refused:
        said = pod.scheduler_message or "no message"
        return ReasonCode.SCHEDULER_REJECTED, f"the scheduler refused capacity bought for it ({said})"
    if not pod.constraints.is_plain or state.affinity is not None:
        probe = template_node(view, 0, list(ctx.vector(template.free)))
        for member, member_request in zip(unit.pods, unit.requests, strict=True):
            reason = sim.dynamic(member, sim.state(member), probe, member_request, ctx.dims)
            if reason and not reason.startswith(("Insufficient", "Too many")):
                return ReasonCode.FILTERED, reason
    return _cannot_grow(ctx, view, unit, judged)


def _cannot_grow(ctx: Context, view: GroupView, unit: Unit, judged: bool) -> tuple[ReasonCode, str]:
    """Why a group that admits the unit and would fit it did not grow for it: at its max, growth
    blocked, in capacity backoff, or (a gang) too few nodes to add. `judged`: _diagnose_group."""
    gang = unit.gang and not unit.extra
    if (gang or judged) and view.current_desired >= view.max_size:
        # At its max a group needs no launch for the gang: whether it is saturated (its idle nodes
        # kept) is the at-max rule's, in backoff or not (report.py asks scale_up.at_max). A member
        # of a gang of several shapes is judged alone: the group is at its max for it.
        if not gang:
            return ReasonCode.AT_MAX, f"at max size {view.max_size}"
        return ReasonCode.GANG_DOES_NOT_FIT, gang_shortfall(ctx, view, unit.requests[: unit.needed])
    if view.capacity.growth_blocked:
        return ReasonCode.GROUP_UNAVAILABLE, view.capacity.growth_blocked
    if view.in_backoff:
        until = view.state.backoff_until
        if view.capacity.launches_overdue and (until is None or until <= ctx.now):
            return ReasonCode.BACKOFF, f"capacity failure: {view.capacity.launches_overdue}"
        return ReasonCode.BACKOFF, f"in capacity backoff until {until.isoformat() if until else '?'}"
    if gang:
        return ReasonCode.GANG_DOES_NOT_FIT, gang_shortfall(ctx, view, unit.requests[: unit.needed])
    if judged:  # a member of a gang of several shapes, its group below its max: the others took the room
        can_add = max(0, view.max_size - view.current_desired)
        return (
            ReasonCode.GANG_DOES_NOT_FIT,
            f"needs more {view.name} nodes for the gang's members than the group can add ({can_add},"
            f" max {view.max_size})",
        )
    return ReasonCode.AT_MAX, f"at max size {view.max_size}"


def _static_verdict(
    ctx: Context, sim: Simulation, view: GroupView, unit: Unit, labels: dict[str, str]
) -> tuple[ReasonCode, str] | None:
    """The zone (zone_refusal), or what the pod's selector, affinity and tolerations refuse on a new
    node of the group in every zone it may launch in; None when neither keeps the pod out."""
    found = zone_refusal(view, unit.pods, sim)
    if found is not None:
        reason, said = found
        said = said or _scheduler_words(ctx, sim, view, unit, labels)
        return ReasonCode.FILTERED, f"{reason} ({said})" if said else reason
    blocked = launch_reason(unit.pods[0].scheduling, view.launch_labels, view.template.taints)
    if blocked:
        return ReasonCode.NO_MATCHING_GROUP, blocked
    return None


def _scheduler_words(
    ctx: Context, sim: Simulation, view: GroupView, unit: Unit, labels: dict[str, str]
) -> str | None:
    """What the scheduler's filters say of the pod on a new node of the group, if anything."""
    pod = unit.pods[0]
    state = sim.state(pod)
    if state.volumes is not None and (volume := volume_binding(state.volumes, labels)):
        return volume
    if view.template.free is None:
        return None
    probe = template_node(view, 0, list(ctx.vector(view.template.free)))
    return sim.dynamic(pod, state, probe, unit.requests[0], ctx.dims)


def zone_refusal(view: GroupView, pods: Sequence[Pod], sim: Simulation) -> tuple[str, str | None] | None:
    """Why a group that may launch in several zones does not take these pods (members of one unit:
    they share their scheduling spec), though a node of it in some zone would: the reason and, when
    a filter said it, the filter's words. None when the zone is not the problem: every zone admits
    them and nothing else binds them to one, or no zone does (the filters say why). The one rule
    diagnosis and `plan --explain` give the zone by."""
    launches = view.launch_labels
    refusals = launch_reasons(pods[0].scheduling, launches, view.template.taints)
    refused = [(labels, reason) for labels, reason in zip(launches, refusals, strict=True) if reason]
    if not refused:
        binding = _zone_not_guaranteed(view, pods, sim)
        return None if binding is None else (binding, None)
    if len(launches) == 1 or taint_toleration(pods[0].scheduling, view.template.taints):
        return None  # one zone, or a taint every zone's node has: the filters say why, not the zone
    # A zone whose id is unknown may admit the pod once a node there shows it: never "no group".
    unknown = [(labels, reason) for labels, reason in refused if unknown_zone_id(pods[0].scheduling, labels)]
    if len(refused) == len(launches) and not unknown:
        return None
    labels, said = (unknown or refused)[0]
    return refused_zone_reason(view.capacity.zones, labels[ZONE]), said


def _zone_not_guaranteed(view: GroupView, pods: Sequence[Pod], sim: Simulation) -> str | None:
    """The reason a group that may launch in several zones gives a pod every one of its zones admits
    but that its spread, pod (anti-)affinity or volumes bind to zones (zones.placement_zone_binding),
    when some zone would take it; with the group's zones unknown, its selector or affinity on a zone
    label binds it too."""
    zones = view.capacity.zones
    if guarantees_zone(zones, view.labels):
        return None
    for pod in pods:
        state = sim.state(pod)
        volumes = state.volumes
        binding = (
            placement_zone_binding(pod, volumes, state.affinity)
            if zones
            else zone_binding(pod, volumes, state.affinity)
        )
        if binding is None:
            continue
        if (
            not zones
            or volumes is None
            or any(volume_binding(volumes, v) is None for v in view.launch_labels)
        ):
            return unguaranteed_reason(zones, binding)
    return None


def diagnose(
    ctx: Context, sim: Simulation, unit: Unit, refused: frozenset[str], never: NeverStarts | None = None
) -> Diagnosis:
    """Why no group could take this unit: the overall code, one reason per group, and the groups that
    could take it but are at their max (saturated). `never`, for a gang: whether it could ever start
    in a group at all; a group it never starts in is not saturated, and the reason says why."""
    if unit.gang and unit.missing is not None and is_mixed(unit):
        return _diagnose_member(ctx, sim, unit, unit.missing, refused, never)
    request = Resources()
    for member in unit.pods:
        request = request.maximum(member.requests)
    by_group: dict[str, ReasonCode] = {}
    reasons: list[str] = []
    saturated: set[str] = set()
    for view in ctx.groups:
        code, reason = _diagnose_group(ctx, sim, view, unit, request, view.name in refused, never is not None)
        if code in _AT_MAX:
            cause = never(view) if never is not None else None
            if cause is None:
                if never is None or view.max_size > 0:  # a group retired to max size 0: gang_saturates
                    saturated.add(view.name)
            else:
                code, reason = ReasonCode.GANG_DOES_NOT_FIT, cause
        by_group[view.name] = code
        # A gang's shortfall names its group ("needs 4 a100 nodes, group can add 3 (max 16)"); why it
        # never starts is one reason for all its groups, given once.
        said = reason if code is ReasonCode.GANG_DOES_NOT_FIT else f"{view.name}: {reason}"
        if said not in reasons:
            reasons.append(said)
    if not reasons:
        return ReasonCode.NO_MATCHING_GROUP, "no node groups configured", frozenset()
    codes = set(by_group.values())
    code = next(c for c in _CODE_ORDER if c in codes)
    subject = _gang_subject(unit) if unit.gang else _describe_size(request)
    if unit.gang and never is not None:
        saturated |= gang_saturates(ctx, unit, never)
    return code, f"{subject}: " + "; ".join(reasons), frozenset(saturated)


def gang_saturates(ctx: Context, unit: Unit, never: NeverStarts) -> set[str]:
    """The groups a gang that could start saturates: every group at its max size that admits any of
    its members and whose new node would hold it beside its DaemonSets (template.free, the room
    diagnosis gives a pod), not only those of the member that found no place (an MPIJob waiting for a
    GPU node also needs its launcher's CPU node: giving that back buys it again).
    None when the gang never starts (`never`, one answer for the gang). A group retired to max size 0
    is never one: the gang's world holds none of its nodes, so they would be kept for nothing."""
    at_max = [
        view
        for view in ctx.groups
        if view.template.free is not None
        and view.max_size > 0
        and view.current_desired >= view.max_size
        and any(view.admits(p.scheduling) and not p.requests.exceeding(view.template.free) for p in unit.pods)
    ]
    if not at_max or never(at_max[0]) is not None:
        return set()
    return {view.name for view in at_max}


def is_mixed(unit: Unit) -> bool:
    """Members differ in shape or in where they may run (an MPIJob's CPU launcher and GPU workers)."""
    first = unit.pods[0]
    return any(
        p.scheduling is not first.scheduling or r != unit.requests[0]
        for p, r in zip(unit.pods, unit.requests, strict=True)
    )


def _gang_subject(unit: Unit) -> str:
    subject = unit.label or f"gang {unit.gang}"
    if unit.extra:
        return f"{subject} runs with its minimum; no place for this member beyond it"
    if unit.needed < len(unit.pods):
        return f"{subject} (minimum {unit.needed} of {len(unit.pods)} pending members)"
    return subject


def _diagnose_member(
    ctx: Context, sim: Simulation, unit: Unit, member: Pod, refused: frozenset[str], never: NeverStarts | None
) -> Diagnosis:
    """A gang whose members differ, refused because one of them has no place: that member's
    reason, in the gang's name; nothing is bought for the others. A group at its max size is
    saturated only if the whole gang could start (`never`, asked of the whole gang), in capacity
    backoff or not, as for a gang of one shape (the member is judged by the at-max rule)."""
    index = unit.pods.index(member)
    alone = Unit([member], [unit.requests[index]])
    code, reason, saturated = diagnose(ctx, sim, alone, refused, never)
    if never is not None:
        saturated |= gang_saturates(ctx, unit, never)
    if code is ReasonCode.AT_MAX:
        code = ReasonCode.GANG_DOES_NOT_FIT  # a group could take the member but cannot grow
    size = _describe_size(member.requests)
    what = f"{_gang_subject(unit)}: nothing bought, {pending_subject(member.key)} ({size}) has no place"
    return code, f"{what}: {reason.partition(': ')[2]}", saturated
