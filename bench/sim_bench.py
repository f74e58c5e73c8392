"""Benchmark of `simulate`: replay the Philly trace (all virtual clusters merged) through the planner.

The trace is not shipped (it is CC-BY-4.0 data, 3.4 MB): pass it with `--trace PATH`, a Philly CSV
as processed by the Pollux authors (petuum/adaptdl, `simulator/traces/philly.csv`).

Scenarios (boot 300 s, reconcile every 60 s plus 10 s after arrivals):
- `one-group`: one group of 8-GPU nodes (p3.16xlarge shape, $24.48/h, max 400: the trace needs
  1,243 GPUs at peak, 156 nodes if perfectly packed).
- `pools`: 1-, 4- and 8-GPU groups at the same price per GPU, jobs routed to the smallest nodes
  that hold them whole (`simulate --right-size`).
Prints, per scenario and idle_seconds (default 600 and 120): wall time, simulated jobs/s, planner
runs, provisioned / ideal GPU-hours, p95 wait / boot time, and where the idle GPU-hours went
(booting, empty nodes, free GPUs beside running pods), plus floor/ideal: the GPU-hours of whole
8-GPU nodes for the same busy curve with perfect repacking, which no scaler reaches without
migrating pods.
Targets: provisioned / ideal <= 1.10 with p95 wait <= 1.5 x boot; replay >= 1,000 jobs/s.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shared.config import ScalerConfig, parse_config
from shared.domain.errors import InputError
from shared.local.sim.engine import SimOptions, SimResult, Simulation
from shared.local.sim.report import build_report
from shared.local.sim.trace import load_trace

GPUS_PER_NODE = 8


def _group(gpus: int, cpu: str, memory: str, price: float, max_size: int) -> dict[str, object]:
    return {
        "name": f"v100x{gpus}",
        "asg_name": f"philly-v100x{gpus}",
        "allocatable": {"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"},
        "labels": {"pool": f"v100x{gpus}"},
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        "price_per_hour": price,
        "max_size": max_size,
    }


def scaler_config(scenario: str, idle_seconds: int, max_size: int, policy: dict[str, object]) -> ScalerConfig:
    """The scenario's groups (p3 shapes and on-demand prices) with the policy under test."""
    groups = [_group(8, "63", "480Gi", 24.48, max_size)]
    if scenario == "pools":
        groups = [
            _group(1, "7.5", "58Gi", 3.06, 8 * max_size),
            _group(4, "31.5", "236Gi", 12.24, 2 * max_size),
        ]
        groups.append(_group(8, "63", "480Gi", 24.48, max_size))
    document: dict[str, object] = {"cluster_name": "philly", "node_groups": groups}
    document["policy"] = {"idle_seconds": idle_seconds, **policy}
    return parse_config(document)


def whole_node_floor(result: SimResult) -> float:
    """GPU-hours of ceil(busy / 8) nodes over time: what a packer that migrates pods would need."""
    series = result.series
    if series is None or not series.times:
        return 0.0
    total = 0
    for index in range(len(series.times) - 1):
        busy = sum(series.busy[index])
        nodes = -(-busy // GPUS_PER_NODE)
        total += nodes * GPUS_PER_NODE * (series.times[index + 1] - series.times[index])
    return total / 3600


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trace", type=Path, required=True, help="Philly trace CSV (not shipped)")
    parser.add_argument("--limit", type=int, help="replay only the first N jobs")
    parser.add_argument("--idle", type=int, nargs="+", default=[600, 120], help="idle_seconds values")
    parser.add_argument("--boot-seconds", type=int, default=300)
    parser.add_argument("--max-size", type=int, default=400, help="of the 8-GPU group")
    parser.add_argument(
        "--scenario", choices=("one-group", "pools"), nargs="+", default=["one-group", "pools"]
    )
    parser.add_argument(
        "--fast-scale-in",
        action="store_true",
        help="also scale_down_delay_after_add_seconds 0 and max_scale_in_fraction 1.0",
    )
    args = parser.parse_args()
    path: Path = args.trace
    if not path.exists():
        print(f"sim_bench: trace {path} not found (the Philly trace is not shipped)")
        return 2

    started = time.perf_counter()
    try:
        trace = load_trace(path, "philly", limit=args.limit)
    except InputError as exc:
        print(f"sim_bench: {exc}")
        return 2
    load_seconds = time.perf_counter() - started
    print(
        f"trace: {path} ({len(trace.jobs):,} jobs, loaded in {load_seconds:.2f}s); 8-GPU nodes, max "
        f"{args.max_size}, boot {args.boot_seconds}s, tick 60s, webhook +10s"
    )
    policy: dict[str, object] = (
        {"scale_down_delay_after_add_seconds": 0, "max_scale_in_fraction": 1.0} if args.fast_scale_in else {}
    )
    if policy:
        print(f"policy overrides: {policy}")
    columns = (
        ("scenario", "<10"),
        ("idle_s", ">6"),
        ("wall_s", ">7.1f"),
        ("jobs/s", ">7,.0f"),
        ("plans", ">7,"),
        ("prov/ideal", ">10.3f"),
        ("p95/boot", ">8.2f"),
        ("p99_s", ">6"),
        ("max_s", ">7"),
        ("booting", ">8,.0f"),
        ("empty", ">8,.0f"),
        ("fragm", ">8,.0f"),
        ("floor/ideal", ">11.3f"),
    )
    print(
        " ".join(f"{name:{fmt[0]}{fmt[1:].split('.')[0].rstrip(',')}}" for name, fmt in columns), " targets"
    )
    for scenario in args.scenario:
        for idle in args.idle:
            config = scaler_config(scenario, idle, args.max_size, policy)
            options = SimOptions(boot_seconds=args.boot_seconds, right_size=scenario == "pools")
            result = Simulation(trace, config, options).run()
            report = build_report(result)
            gpu = report["gpu_hours"]
            wait = report["wait_seconds"]
            ratio = report["provisioned_over_ideal"] or 0.0
            p95_boot = (wait["p95"] or 0) / args.boot_seconds if args.boot_seconds else 0.0
            rate = result.jobs / result.wall_seconds
            floor = whole_node_floor(result) / gpu["ideal"] if gpu["ideal"] else 0.0
            values = (
                scenario,
                idle,
                result.wall_seconds,
                rate,
                result.plans,
                ratio,
                p95_boot,
                wait["p99"] or 0,
                wait["max"] or 0,
                gpu["idle_booting"],
                gpu["idle_empty_nodes"],
                gpu["idle_fragmented"],
                floor,
            )
            met = (
                f"prov/ideal<=1.10 {'yes' if ratio <= 1.10 else 'NO'}; "
                f"p95<=1.5xboot {'yes' if p95_boot <= 1.5 else 'NO'}; "
                f">=1000 jobs/s {'yes' if rate >= 1000 else 'NO'}"
            )
            print(" ".join(f"{v:{fmt}}" for v, (_, fmt) in zip(values, columns, strict=True)), "", met)
    print(
        "GPU-hours: ideal = every job's GPUs x duration; booting/empty/fragm = idle provisioned GPU-hours"
        " while booting, on nodes running nothing, and free beside running pods; floor/ideal = whole"
        " nodes for the busy curve with perfect repacking (no boot), the best any scaler could do"
        " without migrating pods is above it."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
