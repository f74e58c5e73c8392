"""Property: migration moves only pods that opted in, and only from a node whose pods fit elsewhere.

For any cluster of 8-GPU nodes, each running a few jobs (any GPUs, any of the opt-in annotations or
the protections, in gangs or alone, any age), any of them marked for attrition, with any backlog,
after one plan with migration on and no limit on nodes per run:
- every pod a migration evicts is movable (`checkpoint.not_movable` is None), and so is every member
  of its gang; no moved node is protected;
- every busy pod of an emptied node is moved;
- the moved pods of the emptied nodes fit, by GPUs, on the free GPUs of the nodes that stay, are
  unmarked and receive no pending pod, once each pending pod counted on a node is taken off.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.domain.checkpoint import (
    ANNOTATION_CA_SAFE_TO_EVICT,
    ANNOTATION_CHECKPOINT_INTERVAL,
    ANNOTATION_LAST_CHECKPOINT,
    not_movable,
)
from shared.domain.plan import Outcome
from shared.planner import plan
from shared.planner.attrition import ATTRITION_TAINT_KEY
from tests.builders import GPU_TAINT, NOW, asg, config, iso, node, pod, snapshot

GPUS = 8
OPT_INS: list[dict[str, str]] = [
    {},
    {ANNOTATION_CHECKPOINT_INTERVAL: "600"},
    {ANNOTATION_LAST_CHECKPOINT: iso(NOW - timedelta(minutes=3))},
    {ANNOTATION_CHECKPOINT_INTERVAL: "600", "karpenter.sh/do-not-disrupt": "true"},
    {ANNOTATION_CHECKPOINT_INTERVAL: "600", ANNOTATION_CA_SAFE_TO_EVICT: "false"},
    {ANNOTATION_CHECKPOINT_INTERVAL: "soon"},
]

jobs = st.tuples(
    st.integers(1, 4),  # GPUs
    st.integers(0, len(OPT_INS) - 1),  # annotations
    st.integers(0, 2),  # gang (0: none)
    st.integers(1, 48),  # hours it has run
)
clusters = st.lists(st.tuples(st.lists(jobs, max_size=3), st.booleans()), min_size=1, max_size=6)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=clusters, backlog=st.lists(st.integers(1, GPUS), max_size=3))
def test_only_movable_pods_move_and_only_onto_free_room(
    shape: list[tuple[list[tuple[int, int, int, int]], bool]], backlog: list[int]
) -> None:
    nodes, pods, marked, used = _cluster(shape)
    pending = [
        pod(f"wait-{i}", gpus=gpus, created=NOW - timedelta(minutes=5)) for i, gpus in enumerate(backlog)
    ]
    cfg = config(
        policy={"attrition": {"spare_gpus": 0}, "migration": {"enabled": True, "max_nodes_per_run": 8}}
    )
    group = [asg("research-a100", desired=len(nodes), instances=[f"i-{i}" for i in range(len(nodes))])]
    snap = snapshot(pods + pending, nodes, group)

    result = plan(snap, cfg, NOW)

    by_key = {p.key: p for p in snap.pods}
    emptied = {m.node for m in result.migrate}
    for move in result.migrate:
        for key in move.pods:
            assert not_movable(by_key[key]) is None, (key, move)
        on_node = {p.key for p in snap.pods if p.node_name == move.node}
        assert on_node <= set(move.pods), move  # every busy pod of the node moves (no DaemonSets here)
    # The moved pods of emptied nodes fit on the free GPUs of the nodes that stay and are unmarked,
    # after the GPUs of the pending pods counted on them.
    steered = (marked - {m.node for m in result.unmark}) | {m.node for m in result.mark}
    counted = [o for o in result.pods if o.outcome is Outcome.EXISTING]
    room = sum(
        GPUS
        - used[name]
        - sum(o.gpus for o in counted if f"on {name}," in o.reason or f"on {name};" in o.reason)
        for name in used
        if name not in emptied | steered
    )
    leaving_pods = {k for m in result.migrate for k in m.pods if by_key[k].node_name in emptied}  # once each
    moving = sum(by_key[k].requests.gpus for k in leaving_pods)
    assert moving <= room, (result.migrate, room)


def _cluster(
    shape: list[tuple[list[tuple[int, int, int, int]], bool]],
) -> tuple[list[Any], list[Any], set[str], dict[str, int]]:
    nodes: list[Any] = []
    pods: list[Any] = []
    marked: set[str] = set()
    used: dict[str, int] = {}
    for index, (node_jobs, is_marked) in enumerate(shape):
        name = f"n{index}"
        taints = (
            [GPU_TAINT, {"key": ATTRITION_TAINT_KEY, "effect": "PreferNoSchedule"}]
            if is_marked
            else [GPU_TAINT]
        )
        nodes.append(node(name, f"i-{index}", taints=taints))
        if is_marked:
            marked.add(name)
        used[name] = 0
        for j, (gpus, opt_in, gang, hours) in enumerate(node_jobs):
            if used[name] + gpus > GPUS:
                break
            used[name] += gpus
            labels = {"scheduling.x-k8s.io/pod-group": f"g{gang}"} if gang else {}
            pods.append(
                pod(
                    f"job-{name}-{j}",
                    gpus=gpus,
                    node=name,
                    labels=labels,
                    annotations=OPT_INS[opt_in],
                    created=NOW - timedelta(hours=hours),
                )
            )
    return nodes, pods, marked, used
