"""Benchmark of the planner on a large synthetic cluster.

20,000 pending pods (70 % 1 GPU, 20 % 8 GPUs, 10 % 2 or 4 GPUs; cpu/memory proportional), 4,000
nodes in 20 groups. Prints pods/s of `plan` and the ratio of its time to `json.loads` of the same
pods+nodes JSON, both measured in this run (best of N). Targets: >= 20,000 pods/s, ratio <= 1.0.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.config import parse_config
from shared.domain.model import Snapshot
from shared.formats.aws import asgs_from_describe
from shared.formats.kubernetes import nodes_from_list, pods_from_list
from shared.planner import plan
from tests.builders import NOW, asg, node, pod

GROUPS = 20
NODES = 4000
PENDING = 20000


def build(seed: int = 7) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Pods, nodes, ASGs and config documents in their real formats."""
    rng = random.Random(seed)
    groups = []
    asgs = []
    nodes = []
    pods = []
    per_group = NODES // GROUPS
    for g in range(GROUPS):
        name = f"g{g:02d}"
        gpu_label = ("a100", "h100", "v100", "l40s")[g % 4]
        groups.append(
            {
                "name": name,
                "asg_name": f"research-{name}",
                "allocatable": {"cpu": "95", "memory": "1100Gi", "nvidia.com/gpu": "8", "pods": "110"},
                "labels": {"gpu": gpu_label, "pool": name},
                "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                "priority": g % 3,
                "price_per_hour": round(20 + g * 1.5, 2),
                "max_size": per_group + 150,
            }
        )
        ids = [f"i-{g:04x}{n:08x}" for n in range(per_group)]
        asgs.append(asg(f"research-{name}", desired=per_group, instances=ids, max_size=per_group + 200))
        for n, instance in enumerate(ids):
            node_name = f"ip-{g}-{n}.compute.internal"
            nodes.append(node(node_name, instance, labels={"gpu": gpu_label, "pool": name}))
            # Most nodes are busy: a mix of jobs fills 6-8 of the 8 GPUs.
            used = rng.choice((8, 8, 7, 6))
            for j in range(used):
                pods.append(pod(f"run-{g}-{n}-{j}", gpus=1, node=node_name))
    for i in range(PENDING):
        r = rng.random()
        gpus = 1 if r < 0.7 else 8 if r < 0.9 else rng.choice((2, 4))
        selector = {"gpu": ("a100", "h100", "v100", "l40s")[i % 4]} if i % 5 == 0 else None
        pods.append(pod(f"pending-{i}", gpus=gpus, node_selector=selector))
    config = {"cluster_name": "bench", "node_groups": groups}
    return (
        {"kind": "PodList", "items": pods},
        {"kind": "NodeList", "items": nodes},
        {"AutoScalingGroups": asgs},
        config,
    )


def best_of(runs: int, fn: Any) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    pods_doc, nodes_doc, asgs_doc, config_doc = build()
    raw = json.dumps(pods_doc).encode() + json.dumps(nodes_doc).encode()
    pods_bytes, nodes_bytes = json.dumps(pods_doc).encode(), json.dumps(nodes_doc).encode()
    config = parse_config(config_doc)
    snapshot = Snapshot(
        pods=pods_from_list(pods_doc), nodes=nodes_from_list(nodes_doc), asgs=asgs_from_describe(asgs_doc)
    )
    pending = sum(1 for p in snapshot.pods if p.is_pending_unschedulable)

    loads_time, _ = best_of(args.runs, lambda: (json.loads(pods_bytes), json.loads(nodes_bytes)))
    plan_time, result = best_of(args.runs, lambda: plan(snapshot, config, NOW))

    outcomes: dict[str, int] = {}
    for outcome in result.pods:
        outcomes[str(outcome.outcome)] = outcomes.get(str(outcome.outcome), 0) + 1
    grown = sum(g.desired - g.current_desired for g in result.groups)
    print(
        f"cluster: {pending:,} pending pods, {len(snapshot.pods) - pending:,} running, "
        f"{len(snapshot.nodes):,} nodes, {len(config.node_groups)} groups; JSON {len(raw) / 2**20:.0f} MiB"
    )
    print(f"plan outcome: {outcomes}; +{grown} nodes")
    print(f"plan:        {plan_time * 1000:8.1f} ms  -> {pending / plan_time:,.0f} pods/s (target >= 20,000)")
    print(f"json.loads:  {loads_time * 1000:8.1f} ms  (baseline: same pods+nodes JSON, same run)")
    print(f"ratio plan / json.loads: {plan_time / loads_time:.2f} (target <= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
