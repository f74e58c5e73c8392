"""What serving some units from a group would cost: the rank that picks the next group to fill
(cluster-autoscaler's expander ranks options the same way, after its estimator sized each one)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from shared.domain.resources import CPU, GPU
from shared.planner.backlog import Bucket
from shared.planner.context import Context
from shared.planner.scale_up.groups import GroupBins


@dataclass
class Estimate:
    group_bins: GroupBins
    buckets: list[Bucket]
    new_nodes: int
    cost_per_unit: float
    in_flight_used: int  # demand the group's booting nodes would cover
    waste: float

    @property
    def rank(self) -> tuple[float, int, float, str]:
        """Cheapest per GPU first; on a tie, the group whose booting nodes cover more of the demand."""
        return (self.cost_per_unit, -self.in_flight_used, self.waste, self.group_bins.view.name)


def estimate(ctx: Context, gb: GroupBins, buckets: list[Bucket]) -> Estimate:
    """Rough cost of serving the buckets' units from this group: a lower bound on nodes from the
    summed requests, less the booting nodes it already has, times its price, per GPU demanded."""
    view = gb.view
    shape = gb.bins.new_shape
    assert shape is not None
    totals = [0] * len(shape)
    gpus = millicores = 0
    for bucket in buckets:
        for dim, amount in enumerate(bucket.totals):
            totals[dim] += amount
        gpus += bucket.gpus
        millicores += bucket.millicores
    nodes = max((math.ceil(t / s) for t, s in zip(totals, shape, strict=True) if s > 0 and t), default=1)
    nodes = min(nodes, gb.inflight + gb.bins.max_new)
    new_nodes = max(0, nodes - gb.inflight)
    demand = gpus if gpus else millicores / 1000
    price = view.config.price_per_hour
    paid = new_nodes - min(new_nodes, gb.reserved_left)  # reserved capacity is already paid for
    if paid == 0:
        cost_per_unit = 0.0
    elif price is None:
        cost_per_unit = math.inf  # unpriced groups come after priced ones in the same tier
    else:
        cost_per_unit = price * paid / demand if demand else 0.0
    dominant = ctx.dim_index[GPU] if gpus and GPU in ctx.dim_index else ctx.dim_index.get(CPU, 0)
    capacity = max(shape[dominant], 0) * max(nodes, 1)
    waste = 1 - min(totals[dominant], capacity) / capacity if capacity else 1.0
    covered = min(totals[dominant], max(shape[dominant], 0) * gb.inflight)
    return Estimate(gb, buckets, new_nodes, cost_per_unit, covered, waste)
