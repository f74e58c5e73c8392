"""Scale of one reconcile: time and peak memory from 1,000 to 50,000 pods, on the in-memory ports.

Usage: `python bench/scale_bench.py [--sizes 1000,5000,10000,25000,50000]`

Each size runs in a fresh interpreter (so its peak resident memory is its own): a cluster of
pods/10 nodes in 10 GPU groups (8 GPUs each), half the pods running (1 GPU each, 5 per node) and
half pending (70 % 1-GPU, 20 % 8-GPU, 10 % 2- or 4-GPU; a fifth with a node selector), built as
`kubectl get -o json` and `aws autoscaling describe-auto-scaling-groups` documents, behind the
in-memory fakes of the ports (tests/fakes/memory.py). Their cluster deep-copies every stored object
on every read (a test fake's guard against aliasing, 5x the cost of parsing); here reads come as the
wire gives them instead: the list body serialized once per change of the store (the API server's
work: done before the clock starts, and again only when a write of the reconcile changed the store)
and `json.loads` plus the real parsers on every read, as the Kubernetes adapter does. Not moto: moto
copies the whole DynamoDB table per transaction and cannot run this size.

Timed: one `Controller.reconcile()` (list, plan, re-validate, apply, report), nothing built before
it. Memory: the process's peak resident set (ru_maxrss) after it, imports and the stored JSON
included, against the reconcile function's 1,024 MB. Target at 50,000 pods (5,000 nodes, 25,000
pending): under 60 s and 1,024 MB.

The children run the package from its sources, as the function does (its package ships no compiled
code: `make native` builds the planner for the local tools only), even where `make native` has run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.native_guard import PURE_VARIABLE

ROOT = Path(__file__).resolve().parents[1]

GROUPS = 10
PODS_PER_NODE = 10  # nodes = pods / 10
RUNNING_PER_NODE = 5
MAX_SECONDS = 60.0
MAX_MB = 1024.0
SIZES = (1_000, 5_000, 10_000, 25_000, 50_000)


def wire_cluster(pods: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Any:
    """The in-memory cluster, read as the API server sends it (see the module docstring)."""
    from shared.formats.kubernetes import nodes_from_list, pods_from_list
    from tests.fakes.memory import FakeCluster

    class WireCluster(FakeCluster):
        def __init__(self) -> None:
            super().__init__(pods, nodes)
            self._bodies: dict[str, tuple[tuple[int, int], bytes]] = {}

        def _body(self, kind: str, store: dict[str, Any]) -> bytes:
            with self._lock:
                version = (self._version, len(store))
                cached = self._bodies.get(kind)
                if cached is None or cached[0] != version:
                    body = json.dumps({"kind": kind, "items": list(store.values())}).encode()
                    cached = self._bodies[kind] = (version, body)
            return cached[1]

        def list_pods(self) -> tuple[Any, ...]:
            return pods_from_list(json.loads(self._body("PodList", self.pods)))

        def list_nodes(self) -> tuple[Any, ...]:
            return nodes_from_list(json.loads(self._body("NodeList", self.nodes)))

        def list_pods_on_node(self, name: str) -> tuple[Any, ...]:
            # A field-selector read (spec.nodeName=name): the server sends only that node's pods.
            with self._lock:
                items = [p for p in self.pods.values() if p["spec"].get("nodeName") == name]
            return pods_from_list(json.loads(json.dumps({"kind": "PodList", "items": items})))

    return WireCluster()


def measure(total_pods: int, seed: int = 5) -> dict[str, Any]:
    """Build the world for `total_pods`, run one reconcile, return its figures."""
    from shared.config import parse_config
    from tests.builders import a100_group, asg, node, pod
    from tests.fakes.memory import FakeFleet, FakeWorld

    rng = random.Random(seed)
    nodes_n = total_pods // PODS_PER_NODE
    per_group = nodes_n // GROUPS
    groups, asgs, nodes, pods = [], [], [], []
    for g in range(GROUPS):
        name = f"g{g:02d}"
        labels = {"gpu": "a100", "pool": name}
        groups.append(
            a100_group(name=name, asg_name=f"research-{name}", labels=labels, max_size=per_group + 500)
        )
        ids = [f"i-{g:04x}{n:08x}" for n in range(per_group)]
        asgs.append(asg(f"research-{name}", desired=per_group, instances=ids, max_size=per_group + 500))
        for n, instance in enumerate(ids):
            node_name = f"ip-{g}-{n}.compute.internal"
            nodes.append(node(node_name, instance, labels=labels))
            pods.extend(pod(f"run-{g}-{n}-{j}", gpus=1, node=node_name) for j in range(RUNNING_PER_NODE))
    for i in range(total_pods - len(pods)):
        r = rng.random()
        gpus = 1 if r < 0.7 else 8 if r < 0.9 else rng.choice((2, 4))
        selector = {"pool": f"g{i % GROUPS:02d}"} if i % 5 == 0 else None
        pods.append(pod(f"pending-{i}", gpus=gpus, node_selector=selector))
    config = parse_config(
        {"cluster_name": "research", "region": "us-west-2", "node_groups": groups, "policy": {}}
    )
    world = FakeWorld(config=config, cluster=wire_cluster(pods, nodes), fleet=FakeFleet(asgs))
    pending = sum(1 for p in pods if not p["spec"].get("nodeName"))
    del pods, nodes, asgs
    world.cluster.list_pods()  # the server's list bodies, serialized before the clock starts
    world.cluster.list_nodes()
    controller = world.controller()
    started = time.perf_counter()
    result = controller.reconcile("schedule")
    seconds = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    desired = sum(world.fleet.desired(f"research-g{g:02d}") for g in range(GROUPS))
    return {
        "pods": total_pods,
        "pending": pending,
        "nodes": nodes_n,
        "seconds": round(seconds, 2),
        "peak_mb": round(peak_mb, 1),
        "status": str(result.status),
        "desired_before": nodes_n,
        "desired_after": desired,
    }


def _child(total_pods: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(total_pods)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, PURE_VARIABLE: "1"},
    )
    if out.returncode != 0:
        raise SystemExit(
            f"scale_bench: the run of {total_pods:,} pods failed ({out.returncode}):\n{out.stderr}"
        )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=",".join(str(s) for s in SIZES), help="total pods per run")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child: one size, JSON out
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    print("one reconcile on in-memory ports (fresh process per size; the sources, as the function runs)")
    print(f"{'pods':>7} {'pending':>8} {'nodes':>6} {'seconds':>8} {'peak MB':>8}  status / desired")
    rows = []
    for size in sizes:
        row = _child(size)
        rows.append(row)
        print(
            f"{row['pods']:>7,} {row['pending']:>8,} {row['nodes']:>6,} {row['seconds']:>8.2f} "
            f"{row['peak_mb']:>8.1f}  {row['status']} / {row['desired_before']:,} -> {row['desired_after']:,}"
        )
    largest = rows[-1]
    ok = largest["seconds"] < MAX_SECONDS and largest["peak_mb"] < MAX_MB
    print(
        f"largest: {largest['pods']:,} pods in {largest['seconds']:.2f} s (target < {MAX_SECONDS:.0f} s), "
        f"peak {largest['peak_mb']:.0f} MB (target < {MAX_MB:.0f} MB): {'met' if ok else 'MISSED'}"
    )
    if len(rows) > 1:
        first = rows[0]
        growth = (largest["seconds"] / first["seconds"]) / (largest["pods"] / first["pods"])
        print(f"time per pod at {largest['pods']:,} over at {first['pods']:,}: {growth:.2f}x")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
