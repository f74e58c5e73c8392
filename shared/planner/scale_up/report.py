"""The last step: a reason for every pod left over, and the groups that could take one but are at
their max (saturated)."""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.domain.plan import Outcome, PodOutcome
from shared.planner.backlog import Unit
from shared.planner.context import Context
from shared.planner.diagnosis import Diagnosis, NeverStarts, diagnose
from shared.planner.ground_truth import Recall
from shared.planner.scale_up.at_max import GangsAtMax
from shared.planner.scale_up.fill import Buckets
from shared.planner.simulation import Simulation


@dataclass
class Unplaced:
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)
    saturated: set[str] = field(default_factory=set)


def report_unplaced(ctx: Context, sim: Simulation, buckets: Buckets, recalled: Recall) -> Unplaced:
    """Why each unit left in the buckets found no place, one diagnosis per distinct kind of unit."""
    remaining = sorted((u for b in buckets.values() for u in b.units.values()), key=lambda u: u.order)
    cache: dict[tuple[object, ...], Diagnosis] = {}
    at_max = GangsAtMax(ctx, remaining)
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
            diagnosis = cache[key] = diagnose(ctx, sim, unit, refused, _never(at_max, unit))
        code, reason, saturated = diagnosis
        found.saturated.update(saturated)
        for member in unit.pods:
            found.outcomes[member.key] = PodOutcome(
                member.key, Outcome.UNHELPED, None, reason, code, member.requests.gpus
            )
    return found


def _never(at_max: GangsAtMax, unit: Unit) -> NeverStarts | None:
    """For a gang waiting whole (not the members an elastic gang runs without), whether it could
    ever start: idle nodes are kept only for a gang they will serve (answered once for the gang)."""
    if not unit.gang or unit.extra:
        return None
    return at_max.never_starts(unit)
