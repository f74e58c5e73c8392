"""Scale-up: place the backlog on free room, then booting nodes, then new nodes, group by group.

The steps, in the order `plan_scale_up` names them (cluster-autoscaler's scale-up reads the same:
pods that fit existing nodes first, then an estimate per node group, then the expander's choice):
- `registered` / `existing`: free room of registered nodes, any group or none;
- `groups`: each group as bins, its booting and launching nodes first;
- `fill`: per priority tier, plain pods into the cheapest group for them, then constrained pods;
- `members`: gangs no single group holds, member by member;
- `report`: a reason for every pod left, and the groups at their max with pods waiting for them
  (`at_max`: a gang saturates a group only if it could ever start, every group at its max size).
"""

from __future__ import annotations

from shared.domain.model import Node
from shared.planner.backlog import Unit, backlog_units
from shared.planner.context import Context
from shared.planner.scale_up.existing import place_on_registered
from shared.planner.scale_up.fill import buckets_of, fill_tiers
from shared.planner.scale_up.groups import all_group_bins, booting_nodes, inflight_slots
from shared.planner.scale_up.members import place_gang_members
from shared.planner.scale_up.registered import (
    ExistingRoom,
    existing_classes,
    least_request,
    parked_nodes,
    referenced_label_keys,
)
from shared.planner.scale_up.report import report_unplaced
from shared.planner.scale_up.result import ScaleUpResult
from shared.planner.scale_up.run import Run, recall_refusals, simulation

__all__ = ["ScaleUpResult", "plan_scale_up"]


def plan_scale_up(ctx: Context) -> ScaleUpResult:
    """Decide where every backlog pod goes: free room, uncordon, booting nodes, or new nodes.

    Every node is judged by kube-scheduler's filters (shared.planner.filters); pods placed earlier
    in the run count for later ones. Groups are chosen per priority tier (high first), then by the
    lowest estimated cost per GPU of the new nodes the pods at hand need, then less waste, then
    name. A group takes every pod it admits up to its max size; what is left spills to the next
    group. A gang is all-or-nothing as a whole (up to its minimum), its members placed each where
    the scheduler would put it. Fits the scheduler has refuted are not counted again
    (shared.planner.ground_truth).
    """
    units, skipped, pending = backlog_units(ctx)
    recalled = recall_refusals(ctx, pending)
    booting = booting_nodes(ctx)
    if not units:
        result = ScaleUpResult(outcomes=dict(skipped), pending=pending, recalled=recalled)
        return _without_backlog(ctx, result, booting)
    # A node the plan uncordons is, once schedulable, room for every pod like any other (the next run
    # sees it so, and kube-scheduler's default LeastAllocated scoring ranks an empty node first: more
    # unused capacity scores higher, pkg/scheduler/framework/plugins/noderesources/least_allocated.go):
    # the pods are placed again with it in its place by name until no other node joins, so that
    # planning again after the plan is applied changes nothing. Most runs uncordon nothing: one pass.
    uncordoning: frozenset[str] = frozenset()
    while True:
        result = ScaleUpResult(outcomes=dict(skipped), pending=pending, recalled=recalled)
        result = _place(ctx, result, units, booting, uncordoning)
        if uncordoning.issuperset(result.uncordon):
            return result
        uncordoning = uncordoning.union(result.uncordon)


def _place(
    ctx: Context,
    result: ScaleUpResult,
    units: list[Unit],
    booting: dict[str, list[Node]],
    uncordoning: frozenset[str],
) -> ScaleUpResult:
    run = Run(ctx, simulation(ctx), result.recalled)
    excluded = {node.name for nodes in booting.values() for node in nodes} | parked_nodes(ctx)
    label_keys = referenced_label_keys(units)
    least = least_request(units, ctx)
    classes = existing_classes(
        ctx, excluded=excluded, label_keys=label_keys, sim=run.sim, least=least, uncordoning=uncordoning
    )
    group_bins = all_group_bins(ctx, booting, run.sim)
    run.sim.prepare(result.pending)  # every node the run may count on is known: build the per-domain counts
    for unit in units:
        unit.plain = all(run.sim.is_plain(p) and p.key not in result.recalled.distrusted for p in unit.pods)
        unit.missing = None  # as placing finds it in this pass
    room = ExistingRoom(ctx, classes, run.sim)

    remaining, placed = place_on_registered(run, units, room)
    result.merge(placed)
    buckets = buckets_of(run, [u for u in remaining if not u.existing_only])  # check-capacity never buys
    ranked, placed = fill_tiers(run, list(group_bins.values()), buckets, room)
    result.merge(placed)
    result.merge(place_gang_members(run, ranked, buckets, room))

    for gb in group_bins.values():
        result.new_nodes[gb.view.name] = gb.bins.opened
        result.spare_bins[gb.view.name] = sum(1 for count in gb.bins.placed if count == 0)
    unplaced = report_unplaced(ctx, run.sim, buckets, result.recalled)
    result.outcomes.update(unplaced.outcomes)
    result.saturated = unplaced.saturated
    return result


def _without_backlog(ctx: Context, result: ScaleUpResult, booting: dict[str, list[Node]]) -> ScaleUpResult:
    """What `_place` decides when no pod waits (most runs of a busy cluster): no node bought, no
    group saturated, every booting node and launch spare; no bins or filters are built for it."""
    for view in ctx.groups:
        if view.shape is not None and view.asg is not None:  # the groups `all_group_bins` builds
            result.new_nodes[view.name] = 0
            result.spare_bins[view.name] = len(booting.get(view.name, ())) + inflight_slots(view)
    return result
