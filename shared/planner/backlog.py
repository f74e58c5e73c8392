"""The backlog as the planner places it: units (one pod, or a whole gang) in First Fit Decreasing
order, and buckets of units sharing their scheduling specs (for the group cost estimates)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.domain.model import Pod, Scheduling
from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.domain.resources import CPU, MEMORY
from shared.planner.context import Context
from shared.planner.packing import Request


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

    def __post_init__(self) -> None:
        self.gpus = sum(p.requests.gpus for p in self.pods)
        self.millicores = sum(p.requests.get(CPU) for p in self.pods)

    @property
    def key(self) -> str:
        return self.pods[0].key

    @property
    def signature(self) -> tuple[int, ...]:
        """Identity of the distinct scheduling specs of the members (what admission depends on)."""
        return tuple(sorted({id(p.scheduling) for p in self.pods}))


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
    largest = max(unit.pods, key=lambda p: (p.requests.gpus, p.requests.get(CPU), p.requests.get(MEMORY)))
    r = largest.requests
    return (-r.gpus, -r.get(CPU), -r.get(MEMORY), -len(unit.pods))


def _skip(pod: Pod, reason: str, code: ReasonCode, outcome: Outcome = Outcome.UNHELPED) -> PodOutcome:
    return PodOutcome(pod.key, outcome, None, reason, code, pod.requests.gpus)


def backlog_units(ctx: Context) -> tuple[list[Unit], dict[str, PodOutcome], list[Pod]]:
    """Pending pods that may trigger a scale-up, as units in First Fit Decreasing order.

    Pods ignored by policy (below the priority cutoff, too young) and pods the scheduler is
    already preempting for (nominated to a node) get their outcome here. Also returns every pod
    of the backlog that is planned (the ones whose memory is kept).
    """
    policy = ctx.config.policy
    skipped: dict[str, PodOutcome] = {}
    gangs: dict[str, list[Pod]] = {}
    singles: list[Pod] = []
    for pod in ctx.snapshot.pods:
        if not pod.is_pending_unschedulable:
            continue
        if policy.pod_priority_cutoff is not None and pod.priority < policy.pod_priority_cutoff:
            reason = f"priority {pod.priority} is below the cutoff {policy.pod_priority_cutoff}"
            skipped[pod.key] = _skip(pod, reason, ReasonCode.BELOW_PRIORITY_CUTOFF)
            continue
        if pod.nominated_node:
            # The scheduler preempts victims on that node for this pod; room is on its way.
            reason = f"nominated for {pod.nominated_node} by preemption: the scheduler is freeing room there"
            group = ctx.group_of_node.get(pod.nominated_node)
            skipped[pod.key] = PodOutcome(
                pod.key,
                Outcome.EXISTING,
                group.name if group else None,
                reason,
                ReasonCode.NOMINATED,
                pod.requests.gpus,
            )
            continue
        if policy.new_pod_delay_seconds and not ctx.older_than(pod.created_at, policy.new_pod_delay_seconds):
            reason = f"younger than {policy.new_pod_delay_seconds}s: left to the scheduler first"
            skipped[pod.key] = _skip(pod, reason, ReasonCode.TOO_YOUNG)
            continue
        gang = pod.labels.get(policy.gang_label) if policy.gang_label else None
        if gang:
            gangs.setdefault(f"{pod.namespace}/{gang}", []).append(pod)
        else:
            singles.append(pod)
    units = [Unit([p], [ctx.request(p.requests)]) for p in singles]
    for gang_key, members in gangs.items():
        # Largest member first, as First Fit Decreasing places single pods: a replan after the
        # plan was applied must pack the gang the same way.
        members.sort(key=lambda p: (-p.requests.gpus, -p.requests.get(CPU), -p.requests.get(MEMORY), p.key))
        units.append(Unit(members, [ctx.request(p.requests) for p in members], gang=gang_key))
    units.sort(key=lambda u: (*_size_key(u), u.key))
    for order, unit in enumerate(units):
        unit.order = order
    return units, skipped, [p for u in units for p in u.pods]
