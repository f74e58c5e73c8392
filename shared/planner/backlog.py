"""The backlog as the planner places it: units (one pod, or a whole gang) in First Fit Decreasing
order, and buckets of units sharing their scheduling specs (for the group cost estimates)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.domain.model import Pod, Scheduling
from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.domain.resources import CPU, MEMORY
from shared.planner.context import Context
from shared.planner.gangs import GangIndex, GangMark, bound_members, full_gang, minimum_pending
from shared.planner.packing import Request
from shared.planner.provisioning import prepare_requests


@dataclass
class Unit:
    """What is placed at once: one pod, or every pending pod of a gang (all-or-nothing)."""

    pods: list[Pod]
    requests: list[Request]
    gang: str | None = None
    order: int = 0  # position in First Fit Decreasing order
    gpus: int = 0
    millicores: int = 0
    plain: bool = True  # every member takes the class-based fast path
    label: str = ""  # how reasons name the unit ("gang ns/name" when empty)
    booked: bool = False  # a Provisioned request's pods: placed first, so their room stays held
    existing_only: bool = False  # a check-capacity request: free room of registered nodes only
    minimum: int | None = None  # members that must have a place (an elastic gang's); None: all
    extra: bool = False  # members of an elastic gang beyond its minimum, which runs without them
    missing: Pod | None = None  # the first member that found no place (why the gang waits)

    def __post_init__(self) -> None:
        pods = self.pods
        if len(pods) == 1:  # most units, built for every pending pod of every run: no generator
            self.gpus, self.millicores = pods[0].requests.gpus, pods[0].requests.get(CPU)
        else:
            self.gpus = sum(p.requests.gpus for p in pods)
            self.millicores = sum(p.requests.get(CPU) for p in pods)

    @property
    def needed(self) -> int:
        """How many members must have a place for any to be placed."""
        return len(self.pods) if self.minimum is None else self.minimum

    @property
    def key(self) -> str:
        return self.pods[0].key

    @property
    def signature(self) -> tuple[int, ...]:
        """Identity of the distinct scheduling specs of the members (what admission depends on)."""
        pods = self.pods
        if len(pods) == 1:  # most units, asked of twice a run each: no set, no sort
            return (id(pods[0].scheduling),)
        return tuple(sorted({id(p.scheduling) for p in pods}))


@dataclass
class Bucket:
    """Remaining units sharing one signature, with their summed requests (for cost estimates)."""

    schedulings: tuple[Scheduling, ...]
    units: dict[int, Unit] = field(default_factory=dict)  # by order
    totals: list[int] = field(default_factory=list)
    gpus: int = 0
    millicores: int = 0

    def add(self, unit: Unit, sign: int = 1) -> None:
        for request in unit.requests:
            for dim, amount in request:
                self.totals[dim] += sign * amount
        self.gpus += sign * unit.gpus
        self.millicores += sign * unit.millicores
        if sign > 0:
            self.units[unit.order] = unit
        else:
            del self.units[unit.order]


def _size_key(unit: Unit) -> tuple[int, ...]:
    pods = unit.pods
    largest = (
        pods[0]
        if len(pods) == 1
        else max(pods, key=lambda p: (p.requests.gpus, p.requests.get(CPU), p.requests.get(MEMORY)))
    )
    r = largest.requests
    return (-r.gpus, -r.get(CPU), -r.get(MEMORY), -len(unit.pods))


def _phase(unit: Unit) -> int:
    if unit.booked:
        return 0
    return 2 if unit.label else 1


def _skip(pod: Pod, reason: str, code: ReasonCode, outcome: Outcome = Outcome.UNHELPED) -> PodOutcome:
    return PodOutcome(pod.key, outcome, None, reason, code, pod.requests.gpus)


def _gang_units(
    ctx: Context,
    index: GangIndex,
    gangs: dict[str, list[Pod]],
    marks: dict[str, GangMark],
    nominated: list[Pod],
) -> list[Unit]:
    """One unit per gang: the whole gang (stand-ins for members not created yet), largest member
    first as First Fit Decreasing places single pods, so a replan after the plan was applied packs
    it the same way."""
    bound = bound_members(ctx, index, nominated) if gangs else {}
    units = []
    for gang_key, members in gangs.items():
        mark = marks[gang_key]
        whole = full_gang(members, mark.size, bound.get(gang_key, 0), gang_key)
        if len(whole) == 1 and not bound.get(gang_key):
            units.append(Unit(whole, [ctx.request(whole[0].requests)]))  # a gang of one is a pod
            continue
        needed = minimum_pending(mark, bound.get(gang_key, 0), len(whole))
        units.append(Unit(whole, [ctx.request(p.requests) for p in whole], gang=gang_key, minimum=needed))
    return units


def _nominated(ctx: Context, pod: Pod) -> str | None:
    """The node of a nomination that still holds room (it exists and is not being deleted). The scheduler
    keeps a nomination only while the node is in its snapshot (defaultpreemption
    PodEligibleToPreemptOthers looks the node up and preempts anew when it is gone), so a pod
    nominated to a vanished node is an ordinary pending pod."""
    node = ctx.nodes_by_name.get(pod.nominated_node) if pod.nominated_node else None
    return node.name if node is not None and not node.deleting else None


def _left_alone(ctx: Context, pod: Pod) -> PodOutcome | None:
    """The outcome of a pending pod the policy or the scheduler says not to plan for, else None."""
    policy = ctx.config.policy
    if policy.pod_priority_cutoff is not None and pod.priority < policy.pod_priority_cutoff:
        reason = f"priority {pod.priority} is below the cutoff {policy.pod_priority_cutoff}"
        return _skip(pod, reason, ReasonCode.BELOW_PRIORITY_CUTOFF)
    nominated = _nominated(ctx, pod)
    if nominated:
        # The scheduler preempts victims on that node for this pod; room is on its way.
        reason = f"nominated for {nominated} by preemption: the scheduler is freeing room there"
        group = ctx.group_of_node.get(nominated)
        name = group.name if group else None
        return PodOutcome(pod.key, Outcome.EXISTING, name, reason, ReasonCode.NOMINATED, pod.requests.gpus)
    if policy.new_pod_delay_seconds and not ctx.older_than(pod.created_at, policy.new_pod_delay_seconds):
        reason = f"younger than {policy.new_pod_delay_seconds}s: left to the scheduler first"
        return _skip(pod, reason, ReasonCode.TOO_YOUNG)
    return None


def backlog_units(ctx: Context) -> tuple[list[Unit], dict[str, PodOutcome], list[Pod]]:
    """Pending pods that may trigger a scale-up, as units in First Fit Decreasing order.

    Pods ignored by policy (below the priority cutoff, too young) and pods the scheduler is
    already preempting for (nominated to a node) get their outcome here. Also returns every pod
    of the backlog that is planned (the ones whose memory is kept).
    """
    policy = ctx.config.policy
    skipped: dict[str, PodOutcome] = {}
    gangs: dict[str, list[Pod]] = {}
    marks: dict[str, GangMark] = {}
    index = GangIndex(policy, ctx.snapshot.pod_groups)
    requests = prepare_requests(ctx)
    singles: list[Pod] = []
    nominated: list[Pod] = []  # left alone, room on its way: a gang member among them is present
    for pod in ctx.unbound:  # bound pods (most of them) are never pending: not read here at all
        if not pod.is_pending_unschedulable or pod.key in requests.consumers:
            continue
        outcome = _left_alone(ctx, pod)
        if outcome is not None:
            skipped[pod.key] = outcome
            if outcome.code is ReasonCode.NOMINATED:
                nominated.append(pod)  # a gang member with room on its way: no stand-in for it
            continue
        mark = index.mark(pod)
        if mark:
            gangs.setdefault(mark.key, []).append(pod)
            marks[mark.key] = mark
        else:
            singles.append(pod)
    units = [Unit([p], [ctx.request(p.requests)]) for p in singles]
    units += _gang_units(ctx, index, gangs, marks, nominated)
    units += [
        Unit(
            batch.pods,
            [ctx.request(p.requests) for p in batch.pods],
            gang=batch.request.key,
            label=batch.label,
            booked=batch.booked,
            existing_only=batch.existing_only,
        )
        for batch in requests.batches
    ]
    # Booked requests first (the room they hold is theirs before any pod is placed), requests not
    # answered yet last (capacity is found or bought for them beyond what the backlog needs).
    units.sort(key=lambda u: (_phase(u), *_size_key(u), u.key))
    for order, unit in enumerate(units):
        unit.order = order
    return units, skipped, [p for u in units for p in u.pods]
