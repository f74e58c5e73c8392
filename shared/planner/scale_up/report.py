"""The last step: a reason for every pod left over, and the groups that could take one but are at
their max (saturated)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.domain.plan import Outcome, PodOutcome, ReasonCode
from shared.planner.backlog import Unit
from shared.planner.context import Context
from shared.planner.diagnosis import diagnose
from shared.planner.gangs import fits_at_max
from shared.planner.ground_truth import Recall
from shared.planner.scale_up.fill import Buckets
from shared.planner.simulation import Simulation


@dataclass
class Unplaced:
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    saturated: set[str] = field(default_factory=set)


def report_unplaced(ctx: Context, sim: Simulation, buckets: Buckets, recalled: Recall) -> Unplaced:
    """Why each unit left in the buckets found no place, one diagnosis per distinct kind of unit."""
    remaining = sorted((u for b in buckets.values() for u in b.units.values()), key=lambda u: u.order)
    cache: dict[tuple[object, ...], tuple[ReasonCode, str, dict[str, ReasonCode]]] = {}
    found = Unplaced()
    for unit in remaining:
        pod = unit.pods[0]
        refused = recalled.refused.get(pod.key, frozenset())
        key = (
            pod.namespace,
            id(pod.scheduling),
            id(pod.constraints),
            frozenset(pod.labels.items()),
            tuple(unit.requests),
            unit.gang,
            refused,
        )
        diagnosis = cache.get(key)
        if diagnosis is None:
            diagnosis = cache[key] = diagnose(ctx, sim, unit, refused)
        code, reason, by_group = diagnosis
        for name, group_code in by_group.items():
            if group_code is ReasonCode.AT_MAX or (
                group_code is ReasonCode.GANG_DOES_NOT_FIT and _could_start(ctx, name, unit)
            ):
                found.saturated.add(name)
        for member in unit.pods:
            found.outcomes[member.key] = PodOutcome(
                member.key, Outcome.UNHELPED, None, reason, code, member.requests.gpus
            )
    return found


def _could_start(ctx: Context, group: str, unit: Unit) -> bool:
    """A gang that fits the group at its max size once nodes free up: idle nodes kept for it will
    serve it (one larger than the group ever is would keep them idle forever)."""
    view = next(v for v in ctx.groups if v.name == group)
    return fits_at_max(ctx, view, unit.requests[: unit.needed])
