"""The replay's figures over time: the series the plot draws, and the accounting at the end."""

from __future__ import annotations

from collections.abc import Mapping

from shared.domain.plan import ReasonCode
from shared.local.sim.entities import Series, SimJob
from shared.local.sim.state import SimState


class SeriesRecorder:
    """Appends a change point when pending GPUs, provisioned or busy GPUs, or idle GPUs changed."""

    def __init__(self, state: SimState) -> None:
        self._state = state
        self.series = Series(tuple(g.name for g in state.groups))

    def record(self, now: int) -> None:
        state = self._state
        series = self.series
        provisioned = [g.alive * g.gpus_per_node for g in state.groups]
        busy = [g.busy_gpus for g in state.groups]
        booting, empty, fragmented, held, broken = state.idle
        idle = (booting, empty, fragmented, held, broken)
        pending = state.pending_gpus
        if (
            series.times
            and series.pending[-1] == pending
            and series.provisioned[-1] == provisioned
            and series.busy[-1] == busy
            and series.idle[-1] == idle
        ):
            return
        if series.times and series.times[-1] == now:
            series.pending[-1] = pending
            series.provisioned[-1] = provisioned
            series.busy[-1] = busy
            series.idle[-1] = idle
            return
        series.times.append(now)
        series.pending.append(pending)
        series.provisioned.append(provisioned)
        series.busy.append(busy)
        series.idle.append(idle)


def account_until(state: SimState, end: int) -> None:
    """Close the figures of every instance still alive at the end of the replay."""
    for group in state.groups:
        for instance in group.instances.values():
            group.result.node_seconds += end - instance.launched_at
            if instance.node is None:
                group.result.booting_gpu_seconds += (end - instance.launched_at) * group.gpus_per_node
            else:
                instance.node.account(end)


def not_started(pending: list[SimJob], outcomes: Mapping[str, ReasonCode]) -> dict[str, int]:
    """Jobs never started, by the reason the last plan gave for their first pod."""
    counts: dict[str, int] = {}
    for job in pending:
        code = outcomes.get(job.pods[0].key)
        reason = str(code) if code is not None else "NeverPlanned"
        counts[reason] = counts.get(reason, 0) + 1
    return counts
