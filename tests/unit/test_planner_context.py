"""The context's indexes are the run's own: what it builds on first use (the resource dimensions,
their index, the DRA device world) is never carried into a context made from it for another
snapshot."""

from __future__ import annotations

from dataclasses import replace

from shared.planner.context import build_context
from tests.builders import NOW, asg, config, node, pod, snapshot


def test_a_replaced_context_reads_the_dimensions_of_its_own_snapshot() -> None:
    # Given a context that has built its dimensions from a cluster without hugepages
    cfg = config()
    plain = snapshot(
        [pod("a")], [node("n1", "i-0a1")], [asg("research-a100", desired=1, instances=["i-0a1"])]
    )
    first = build_context(plain, cfg, NOW)
    assert "hugepages-2Mi" not in first.dims

    # When a context is made from it for a snapshot whose pod asks for hugepages
    wider = snapshot(
        [pod("b", pod_requests={"hugepages-2Mi": "1Gi"})],
        [node("n1", "i-0a1")],
        [asg("research-a100", desired=1, instances=["i-0a1"])],
    )
    second = replace(first, snapshot=wider, pods_on_node={}, unbound=list(wider.pods))

    # Then it reads them from that snapshot, and indexes them
    assert "hugepages-2Mi" in second.dims
    assert second.dim_index["hugepages-2Mi"] == second.dims.index("hugepages-2Mi")
    assert "hugepages-2Mi" not in first.dims
