"""The simulated kube-scheduler, checked against scores computed by hand from the plugins' formulas.

Nodes here have 10 cores and 100Gi (so a percentage is easy to read); pods ask for 1 core and 10Gi
unless a test says otherwise. Dims: (nvidia.com/gpu, cpu in millicores, memory in Gi units, pods).
"""

from __future__ import annotations

import pytest

from shared.domain.model import Scheduling, Taint, TaintEffect, Toleration
from shared.domain.resources import CPU, GPU, MEMORY, PODS
from shared.local.sim.scheduler import (
    MAX_NODE_SCORE,
    NodeClass,
    PodRequest,
    Scheduler,
    Scoring,
    Slot,
    fit_score,
    intolerable_prefer_no_schedule,
    resource_score,
    taint_scores,
)

DIMS = (GPU, CPU, MEMORY, PODS)
SHAPE = (8, 10_000, 100, 110)
GPU_TAINT = Taint("nvidia.com/gpu", "true", TaintEffect.NO_SCHEDULE)
MARK = Taint("backlog-scaler/attrition", "", TaintEffect.PREFER_NO_SCHEDULE)
TOLERATES_GPU = Scheduling(tolerations=(Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),))
PLAIN = NodeClass({"pool": "a"}, (GPU_TAINT,))
MARKED = NodeClass({"pool": "a"}, (GPU_TAINT, MARK))


def slot(
    name: str, created: int, used: tuple[int, int, int, int] = (0, 0, 0, 0), cls: NodeClass = PLAIN
) -> Slot:
    return Slot(name, (created, name), cls, SHAPE, [s - u for s, u in zip(SHAPE, used, strict=True)])


def request(gpus: int = 1, cpu: int = 1_000, memory: int = 10) -> PodRequest:
    return PodRequest(TOLERATES_GPU, (gpus, cpu, memory, 1))


def scheduler(scoring: Scoring, *slots: Slot) -> Scheduler:
    s = Scheduler(DIMS, scoring)
    for item in slots:
        s.add(item)
    return s


def test_resource_scores_are_the_plugins_integer_formulas() -> None:
    # leastRequestedScore: (capacity - requested) * 100 / capacity, integer division; 0 past capacity
    assert resource_score(Scoring.LEAST_ALLOCATED, 1, 3) == 66
    assert resource_score(Scoring.LEAST_ALLOCATED, 4, 3) == 0
    # mostRequestedScore: requested * 100 / capacity, requested capped at capacity
    assert resource_score(Scoring.MOST_ALLOCATED, 1, 3) == 33
    assert resource_score(Scoring.MOST_ALLOCATED, 4, 3) == MAX_NODE_SCORE
    assert resource_score(Scoring.MOST_ALLOCATED, 1, 0) == 0
    # the weighted mean of cpu and memory, integer division: (90 * 1 + 45 * 1) // 2
    assert fit_score(Scoring.LEAST_ALLOCATED, [1, 55], [10, 100], [1, 1]) == 67


def test_taint_toleration_counts_untolerated_prefer_no_schedule_and_normalises_in_reverse() -> None:
    # Only PreferNoSchedule taints count, and only tolerations with that effect (or none) tolerate them
    assert intolerable_prefer_no_schedule(TOLERATES_GPU, (GPU_TAINT, MARK)) == 1
    tolerant = Scheduling(tolerations=(Toleration("backlog-scaler/attrition", "Exists"),))
    assert intolerable_prefer_no_schedule(tolerant, (MARK,)) == 0
    no_schedule_only = Scheduling(
        tolerations=(Toleration("backlog-scaler/attrition", "Exists", "", "NoSchedule"),)
    )
    assert intolerable_prefer_no_schedule(no_schedule_only, (MARK,)) == 1
    # DefaultNormalizeScore(100, reverse): 100 - 100 * count / max; all 100 when no node has one
    assert taint_scores([0, 1, 2]) == [100, 50, 0]
    assert taint_scores([0, 0]) == [100, 100]


def test_least_allocated_spreads_most_allocated_packs_first_fit_takes_the_oldest() -> None:
    # Given an empty node (newer) and one with 5 cores and 50Gi used (older)
    empty = slot("b-empty", created=2)
    half = slot("a-half", created=1, used=(4, 5_000, 50, 1))

    # LeastAllocated: empty (10-1)/10 -> 90 vs half (10-6)/10 -> 40, both +300 for no PreferNoSchedule taint
    assert scheduler(Scoring.LEAST_ALLOCATED, empty, half).choose(request()) is empty
    # MostAllocated: empty 10 vs half 60
    assert (
        scheduler(Scoring.MOST_ALLOCATED, slot("b-empty", 2), slot("a-half", 1, (4, 5_000, 50, 1)))
        .choose(request())
        .name
        == "a-half"
    )  # type: ignore[union-attr]
    # first-fit: the node created first, whatever its room
    assert (
        scheduler(Scoring.FIRST_FIT, slot("b-empty", 2), slot("a-half", 1, (4, 5_000, 50, 1)))
        .choose(request())
        .name
        == "a-half"
    )  # type: ignore[union-attr]


@pytest.mark.parametrize("scoring", list(Scoring))
def test_a_prefer_no_schedule_mark_outweighs_room_under_every_scoring(scoring: Scoring) -> None:
    # Given the empty node marked: TaintToleration 3 x 0 + fit <= 100, against 3 x 100 + fit for the other
    marked = slot("a-empty", created=1, cls=MARKED)
    other = slot("b-half", created=2, used=(4, 5_000, 50, 1))
    assert scheduler(scoring, marked, other).choose(request()) is other


@pytest.mark.parametrize("scoring", list(Scoring))
def test_a_marked_node_still_takes_a_pod_no_other_node_holds(scoring: Scoring) -> None:
    # Given the only node with 4 free GPUs is marked PreferNoSchedule: the mark only scores
    marked = slot("a-empty", created=1, cls=MARKED)
    full = slot("b-full", created=2, used=(6, 6_000, 60, 1))
    assert scheduler(scoring, marked, full).choose(request(gpus=4)) is marked


def test_filters_are_the_planners() -> None:
    # Given a cordoned node, a node with an untolerated NoSchedule taint and a node without room
    cordoned = slot("a", 1, cls=NodeClass({"pool": "a"}, (GPU_TAINT,), unschedulable=True))
    tainted = slot(
        "b", 2, cls=NodeClass({"pool": "a"}, (Taint("dedicated", "infra", TaintEffect.NO_SCHEDULE),))
    )
    small = slot("c", 3, used=(7, 0, 0, 1))
    s = scheduler(Scoring.LEAST_ALLOCATED, cordoned, tainted, small)

    # Then a 2-GPU pod fits none of them (NodeUnschedulable, TaintToleration, NodeResourcesFit)
    assert s.choose(request(gpus=2)) is None
    # And a 1-GPU pod fits only the one with room
    assert s.choose(request(gpus=1)) is small
    # And a nodeSelector the labels miss rejects it (NodeAffinity)
    picky = PodRequest(
        Scheduling(node_selector=(("pool", "b"),), tolerations=TOLERATES_GPU.tolerations), (1, 0, 0, 1)
    )
    assert s.choose(picky) is None


def test_a_gang_is_placed_whole_or_not_at_all() -> None:
    # Given two nodes with 4 free GPUs each
    a = slot("a", 1, used=(4, 0, 0, 1))
    b = slot("b", 2, used=(4, 0, 0, 1))
    s = scheduler(Scoring.LEAST_ALLOCATED, a, b)

    # When a gang of three 4-GPU pods asks: the third fits nowhere
    assert s.place([request(gpus=4)] * 3) is None
    # Then nothing was taken
    assert a.free[0] == b.free[0] == 4
    # And a gang of two takes both nodes, one pod each
    placed = s.place([request(gpus=4)] * 2)
    assert placed is not None and {p.name for p in placed} == {"a", "b"}
    assert a.free[0] == b.free[0] == 0


def test_nodes_in_one_bucket_are_judged_once_and_the_oldest_wins_a_tie() -> None:
    # Given three identical empty nodes created in the order c, a, b
    nodes = [slot("c", 1), slot("a", 2), slot("b", 3)]
    s = scheduler(Scoring.LEAST_ALLOCATED, *nodes)

    # Then they share one bucket and the oldest is chosen; taking room moves it to its own bucket
    assert len(list(s.feasible(request()))) == 1
    chosen = s.choose(request())
    assert chosen is nodes[0]
    s.take(chosen, request().vector)
    assert s.choose(request()) is nodes[1]  # least-allocated: the emptier, older of the rest
