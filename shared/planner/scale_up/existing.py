"""Step 1: the backlog on the free room of registered nodes (schedulable first, then the ones the
scaler cordoned): a pod that fits there needs no new node."""

from __future__ import annotations

from shared.domain.model import Pod
from shared.planner.backlog import Unit
from shared.planner.packing import Bins
from shared.planner.scale_up.fill import record_placement
from shared.planner.scale_up.registered import ExistingRoom
from shared.planner.scale_up.result import Placed
from shared.planner.scale_up.run import Run


def place_on_registered(run: Run, units: list[Unit], room: ExistingRoom) -> tuple[list[Unit], Placed]:
    """Where the units that fit registered nodes go, and the units left for booting and new nodes."""
    placed = Placed()
    remaining: list[Unit] = []
    if not room.classes:
        return list(units), placed
    place_existing = run.existing(room)
    for unit in units:
        if unit.plain and not unit.gang:
            placements = _first_fit(run, unit, room)
        else:
            placements = run.place_unit(unit, place_existing)
        if placements is None:
            remaining.append(unit)
            continue
        for pod, bins, index in placements:
            record_placement(unit=unit, pod=pod, bins=bins, index=index, gb=None, room=room, placed=placed)
    return remaining, placed


def _first_fit(run: Run, unit: Unit, room: ExistingRoom) -> list[tuple[Pod, Bins, int]] | None:
    pod, request = unit.pods[0], unit.requests[0]
    for bins in room.targets(pod):
        index = run.fast(pod, request, bins, None, room=room)
        if index is not None:
            return [(pod, bins, index)]
    return None
