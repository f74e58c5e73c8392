"""Property: a mark never leaves a pending pod waiting.

For any cluster of 8-GPU nodes (any GPUs in use, any of them marked, with either effect) and any
backlog, after one plan: no pod is counted on a node that stays marked, and no pod is sent to a new or
booting node while a node that stays marked has the room it needs.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.model import Pod
from shared.domain.plan import Outcome
from shared.planner import plan
from shared.planner.attrition import (
    ANNOTATION_EXPECTED_RUNTIME,
    ATTRITION_TAINT_KEY,
    expected_remaining_seconds,
)
from tests.builders import GPU_TAINT, NOW, asg, config, node, pod, snapshot

GPUS = 8

cluster_shapes = st.lists(
    st.tuples(st.integers(0, GPUS), st.booleans()),  # (GPUs in use, marked)
    min_size=1,
    max_size=8,
)
backlogs = st.lists(st.integers(1, GPUS), max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=cluster_shapes,
    backlog=backlogs,
    effect=st.sampled_from(["PreferNoSchedule", "NoSchedule"]),
    spare=st.integers(0, 16),
)
def test_no_pending_pod_waits_on_a_mark(
    shape: list[tuple[int, bool]], backlog: list[int], effect: str, spare: int
) -> None:
    nodes: list[Any] = []
    pods: list[Any] = []
    marked: set[str] = set()
    free: dict[str, int] = {}
    for index, (used, is_marked) in enumerate(shape):
        name = f"n{index}"
        taints = [GPU_TAINT, {"key": ATTRITION_TAINT_KEY, "effect": effect}] if is_marked else [GPU_TAINT]
        nodes.append(node(name, f"i-{index}", taints=taints, created=NOW - timedelta(hours=10 - index)))
        if used:
            pods.append(pod(f"run-{name}", gpus=used, node=name))
        if is_marked:
            marked.add(name)
        free[name] = GPUS - used
    pending = [pod(f"wait-{i}", gpus=gpus) for i, gpus in enumerate(backlog)]
    cfg = config(policy={"attrition": {"effect": effect, "spare_gpus": spare}})
    group = [asg("research-a100", desired=len(nodes), instances=[f"i-{i}" for i in range(len(nodes))])]

    result = plan(snapshot(pods + pending, nodes, group), cfg, NOW)

    still_marked = (marked - {m.node for m in result.unmark}) | {m.node for m in result.mark}
    outcomes = {o.pod: o for o in result.pods}
    for index, gpus in enumerate(backlog):
        outcome = outcomes[f"research/wait-{index}"]
        if outcome.outcome is Outcome.EXISTING:
            # counted on a node: that node is not (or no longer) marked
            assert not any(f"on {name}" in outcome.reason for name in still_marked), outcome
        elif outcome.outcome in (Outcome.SCALE_UP, Outcome.IN_FLIGHT):
            # sent elsewhere: no node that stays marked had the room (nothing is counted on those)
            assert all(free[name] < gpus for name in still_marked), (outcome, still_marked)


def _remaining_by_definition(now: datetime, pods: list[Pod]) -> float:
    """The latest expected end as the docstring defines it, pod by pod (what the fast reading must equal)."""
    ends = [0.0]
    for p in pods:
        elapsed = (now - p.created_at).total_seconds() if p.created_at is not None else 0.0
        raw = p.annotations.get(ANNOTATION_EXPECTED_RUNTIME)
        ends.append(int(raw) - elapsed if raw is not None and raw.isdigit() else 2 * elapsed - elapsed)
    return max(ends)


busy_pod_specs = st.lists(
    st.tuples(
        st.one_of(st.none(), st.integers(-3_600, 400_000)),  # created this many seconds ago (or unknown)
        st.integers(0, 999_999),  # microseconds of the creation time
        st.one_of(st.none(), st.sampled_from(["600", "86400", "0", "x1", "", "-5"])),  # estimate
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(specs=busy_pod_specs)
def test_the_expected_remaining_work_is_the_latest_end_pod_by_pod(
    specs: list[tuple[int | None, int, str | None]],
) -> None:
    # Any busy pods: with or without an estimate, old, new, created in the future or at no known time
    pods = [
        Pod(
            "research",
            f"p{i}",
            created_at=None if ago is None else NOW - timedelta(seconds=ago, microseconds=micros),
            annotations={ANNOTATION_EXPECTED_RUNTIME: raw} if raw is not None else {},
        )
        for i, (ago, micros, raw) in enumerate(specs)
    ]

    # Then the oldest unestimated pod stands for all of them: the latest end is the pod-by-pod one
    assert expected_remaining_seconds(NOW, pods) == _remaining_by_definition(NOW, pods)
