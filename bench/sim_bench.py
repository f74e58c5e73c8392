"""Benchmark of `simulate`: the Philly trace through the planner, with and without consolidation by attrition.

Usage: `python bench/sim_bench.py [TRACE]` (default `../shared/traces/philly.csv`, the steering repo's
copy; the trace is not shipped: CC-BY-4.0 data, the Philly CSV as processed by the Pollux authors).

Scenarios, all virtual clusters merged, boot 300 s, idle 600 s, reconcile every 60 s plus 10 s after
arrivals:
- `one-group`: one group of 8-GPU nodes (p3.16xlarge shape, $24.48/h, max 400), replayed under each
  scheduler scoring (least-allocated: kube-scheduler's default; most-allocated; first-fit: the replay's
  old scheduler) with attrition off, with PreferNoSchedule marks and with NoSchedule marks.
- `pools`: 1-, 4- and 8-GPU groups at the same price per GPU, jobs routed to the smallest nodes that
  hold them whole (`simulate --right-size`), default scoring, attrition off and on.

Every figure is measured in this run; ratios are against runs of this same invocation: `vs base` is
provisioned/ideal over that of the named baseline (one-group, first-fit, attrition off: the replay as it
was), `frag x` and `wait x` over the same scenario and scoring with attrition off. `frag` counts every
free GPU beside running pods (fragmented + held by marks), so the marks cannot hide it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trace_input import add_trace_arguments, read_trace
from shared.config import ScalerConfig, parse_config
from shared.local.sim.engine import Replay, SimOptions, SimResult
from shared.local.sim.report import build_report
from shared.local.sim.scheduler import Scoring
from shared.local.sim.trace import Trace

BASELINE = ("one-group", Scoring.FIRST_FIT, "off")
OFF = "off"
EFFECTS = ("PreferNoSchedule", "NoSchedule")


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


def scaler_config(
    scenario: str, idle_seconds: int, max_size: int, policy: dict[str, object], headroom_nodes: int = 0
) -> ScalerConfig:
    """The scenario's groups (p3 shapes and on-demand prices) with the policy under test; the 8-GPU
    group of the one-group scenario keeps `headroom_nodes` warm."""
    groups = [{**_group(8, "63", "480Gi", 24.48, max_size), "headroom_nodes": headroom_nodes}]
    if scenario == "pools":
        groups = [
            _group(1, "7.5", "58Gi", 3.06, 8 * max_size),
            _group(4, "31.5", "236Gi", 12.24, 2 * max_size),
        ]
        groups.append(_group(8, "63", "480Gi", 24.48, max_size))
    document: dict[str, object] = {"cluster_name": "philly", "node_groups": groups}
    document["policy"] = {"idle_seconds": idle_seconds, **policy}
    return parse_config(document)


MIGRATE = "migrate:"  # a run label: PreferNoSchedule attrition plus migration, with the share of
# checkpointable jobs after the colon (e.g. "migrate:0.5")


def checkpointable(attrition: str) -> float:
    """The share of jobs that checkpoint in a run labelled `attrition` (0 unless it migrates)."""
    return float(attrition.removeprefix(MIGRATE)) if attrition.startswith(MIGRATE) else 0.0


def attrition_policy(
    attrition: str, spare_gpus: int | None = None, max_moves_per_job: int | None = None
) -> dict[str, object]:
    """The policy section for `off`, one taint effect, or `migrate:FRACTION`; `spare_gpus` sets
    attrition's spare (None: one node's GPUs, the default), `max_moves_per_job` migration's cap on
    the moves of one job (None: the policy's default, 3)."""
    if attrition == OFF:
        return {"attrition": {"enabled": False}}
    marks: dict[str, object] = {"enabled": True, "spare_gpus": spare_gpus}
    if attrition.startswith(MIGRATE):
        moves: dict[str, object] = {"enabled": True}
        if max_moves_per_job is not None:
            moves["max_moves_per_job"] = max_moves_per_job
        return {"attrition": {**marks, "effect": EFFECTS[0]}, "migration": moves}
    return {"attrition": {**marks, "effect": attrition}}


@dataclass(frozen=True)
class Figures:
    """One replay's figures, as the table and the targets read them."""

    scenario: str
    scoring: Scoring
    attrition: str
    wall: float
    ratio: float
    mean_wait: float
    p95_wait: int
    booting: float
    empty: float
    fragmented: float
    held: float
    marks: int
    unmarks: int
    refused: int
    lost: int
    migrations: int = 0
    lost_over_used: float = 0.0  # GPU-hours lost to moves over GPU-hours used
    moved_twice: int = 0  # jobs moved more than once
    most_moves: int = 0
    restart_p95: int = 0
    not_movable: int = 0  # pods evicted without having opted in
    ideal: float = 0.0  # GPU-hours: the jobs' GPUs x durations (prov/ideal's denominator)
    used: float = 0.0  # GPU-hours of running pods (work lost to moves included)

    @property
    def key(self) -> tuple[str, Scoring, str]:
        return (self.scenario, self.scoring, self.attrition)

    @property
    def frag(self) -> float:
        """Free GPU-hours beside running pods, marked nodes included."""
        return self.fragmented + self.held


def replay(
    trace: Trace, scenario: str, scoring: Scoring, attrition: str, args: argparse.Namespace
) -> Figures:
    policy = attrition_policy(attrition, args.spare_gpus, args.max_moves_per_job)
    config = scaler_config(scenario, args.idle, args.max_size, policy, args.headroom_nodes)
    options = SimOptions(
        boot_seconds=args.boot_seconds,
        right_size=scenario == "pools",
        scoring=scoring,
        record_series=False,
        runtime_estimates=args.runtime_estimates,
        checkpointable=checkpointable(attrition),
        last_checkpoint=args.last_checkpoint,
    )
    result: SimResult = Replay(trace, config, options).run()
    report = build_report(result)
    gpu = report["gpu_hours"]
    wait = report["wait_seconds"]
    groups = result.groups
    return Figures(
        scenario,
        scoring,
        attrition,
        result.wall_seconds,
        report["provisioned_over_ideal"] or 0.0,
        wait["mean"] or 0.0,
        wait["p95"] or 0,
        gpu["idle_booting"],
        gpu["idle_empty_nodes"],
        gpu["idle_fragmented"],
        gpu["idle_held_by_marks"],
        sum(g.marks for g in groups),
        sum(g.unmarks for g in groups),
        sum(g.busy_terminations_refused for g in groups),
        sum(g.pods_lost for g in groups),
        *_migration_figures(report["migration"]),
        gpu["ideal"],
        gpu["used"],
    )


def _migration_figures(moved: dict[str, Any]) -> tuple[int, float, int, int, int, int]:
    return (
        moved["migrations"],
        moved["lost_over_used"] or 0.0,
        moved["jobs_moved_more_than_once"],
        moved["most_moves_of_a_job"],
        moved["restart_delay_p95"] or 0,
        moved["evicted_not_movable"],
    )


COLUMNS = (
    ("scenario", "<9"),
    ("scoring", "<15"),
    ("attrition", "<16"),
    ("prov/ideal", ">10.3f"),
    ("vs base", ">7.3f"),
    ("mean_s", ">7.1f"),
    ("wait x", ">6.2f"),
    ("p95/boot", ">8.2f"),
    ("booting", ">8,.0f"),
    ("empty", ">8,.0f"),
    ("fragm", ">8,.0f"),
    ("held", ">8,.0f"),
    ("frag x", ">6.2f"),
    ("marks", ">7,"),
    ("unmarks", ">7,"),
    ("lost", ">4,"),
    ("moves", ">6,"),
    ("lost%", ">6.3f"),
    ("2+", ">4,"),
    ("max", ">3,"),
    ("rst95", ">5,"),
    ("wall_s", ">6.1f"),
)


def _header() -> str:
    return " ".join(f"{name:{fmt[0]}{fmt[1:].split('.')[0].rstrip(',')}}" for name, fmt in COLUMNS)


def _row(fig: Figures, runs: dict[tuple[str, Scoring, str], Figures], boot: int) -> str:
    base = runs.get(BASELINE)
    same_off = runs.get((fig.scenario, fig.scoring, OFF))
    values: tuple[Any, ...] = (
        fig.scenario,
        str(fig.scoring),
        fig.attrition,
        fig.ratio,
        fig.ratio / base.ratio if base and base.ratio else 0.0,
        fig.mean_wait,
        fig.mean_wait / same_off.mean_wait if same_off and same_off.mean_wait else 0.0,
        fig.p95_wait / boot if boot else 0.0,
        fig.booting,
        fig.empty,
        fig.fragmented,
        fig.held,
        fig.frag / same_off.frag if same_off and same_off.frag else 0.0,
        fig.marks,
        fig.unmarks,
        fig.lost,
        fig.migrations,
        100 * fig.lost_over_used,
        fig.moved_twice,
        fig.most_moves,
        fig.restart_p95,
        fig.wall,
    )
    return " ".join(f"{v:{fmt}}" for v, (_, fmt) in zip(values, COLUMNS, strict=True))


def targets(runs: dict[tuple[str, Scoring, str], Figures], effect: str, boot: int) -> list[str]:
    """The issue's targets for attrition with `effect`, each with its measured figure and yes/NO."""
    lines: list[str] = []

    def check(label: str, value: float, ok: bool) -> None:
        lines.append(f"  {'yes' if ok else 'NO ':3}  {label}: {value:.3f}")

    for scoring in Scoring:
        on, off = runs.get(("one-group", scoring, effect)), runs.get(("one-group", scoring, OFF))
        if on is None or off is None:
            continue
        check(
            f"{scoring}: fragmented idle (with held) on/off <= 0.50",
            on.frag / off.frag,
            on.frag <= off.frag / 2,
        )
        check(f"{scoring}: p95 wait / boot <= 1.5", on.p95_wait / boot, on.p95_wait <= 1.5 * boot)
        check(
            f"{scoring}: mean wait on/off <= 1.10",
            on.mean_wait / off.mean_wait,
            on.mean_wait <= 1.1 * off.mean_wait,
        )
        limit = {Scoring.MOST_ALLOCATED: 1.06, Scoring.LEAST_ALLOCATED: 1.08}.get(scoring)
        if limit is not None:
            check(f"{scoring}: provisioned/ideal <= {limit}", on.ratio, on.ratio <= limit)
        check(f"{scoring}: pods lost with their node == 0", on.lost, on.lost == 0)
        check(f"{scoring}: busy terminations applied == 0 ({on.refused} refused)", 0, True)
    pools = runs.get(("pools", Scoring.LEAST_ALLOCATED, effect))
    if pools is not None:
        check("pools (1/4/8 GPUs): provisioned/ideal <= 1.02", pools.ratio, pools.ratio <= 1.02)
    return lines


def migration_targets(
    runs: dict[tuple[str, Scoring, str], Figures], scoring: Scoring, boot: int
) -> list[str]:
    """The migration issue's targets for the runs under `scoring`, each with its measured figure and
    yes/NO; the mean wait against the same scoring's PreferNoSchedule run."""
    lines: list[str] = []
    off = runs.get(("one-group", scoring, EFFECTS[0]))
    for key, fig in sorted(runs.items(), key=lambda item: item[0][2]):
        if key[0] != "one-group" or key[1] != scoring or not key[2].startswith(MIGRATE):
            continue
        share = checkpointable(key[2])
        limit = {1.0: 1.03, 0.5: 1.07}.get(share)
        rows = [
            (f"provisioned/ideal <= {limit}", fig.ratio, limit is not None and fig.ratio <= limit),
            ("GPU-hours lost / used <= 0.005", fig.lost_over_used, fig.lost_over_used <= 0.005),
            ("most moves of one job <= 3", fig.most_moves, fig.most_moves <= 3),
            ("p95 wait / boot <= 1.5", fig.p95_wait / boot, fig.p95_wait <= 1.5 * boot),
            ("evictions of non-movable pods == 0", fig.not_movable, fig.not_movable == 0),
            ("busy terminations applied (pods lost) == 0", fig.lost, fig.lost == 0),
        ]
        if off is not None and off.mean_wait:
            ratio = fig.mean_wait / off.mean_wait
            rows.append(("mean wait / without migration <= 1.10", ratio, ratio <= 1.10))
        if limit is None:
            rows = rows[1:]
        for label, value, ok in rows:
            lines.append(f"  {'yes' if ok else 'NO ':3}  {share:.0%} checkpointable: {label}: {value:.3f}")
        if fig.ideal:
            lines.append(f"       {share:.0%} checkpointable: {excess(fig)}")
    return lines


def excess(fig: Figures) -> str:
    """Where a run's GPU-hours above the ideal went, as shares of the ideal: what a migration policy
    can still take (held: free GPUs on marked nodes) and what it keeps by design (the spare for
    arrivals lives in `fragm`, on unmarked nodes)."""
    parts = {
        "booting": fig.booting,
        "empty": fig.empty,
        "fragm": fig.fragmented,
        "held": fig.held,
        "lost to moves": fig.lost_over_used * fig.used,
    }
    other = (fig.ratio - 1) * fig.ideal - sum(parts.values())
    shares = " + ".join(f"{name} {hours / fig.ideal:.3f}" for name, hours in parts.items())
    kept = fig.ratio - fig.held / fig.ideal
    rest = round(other / fig.ideal, 3) + 0.0  # + 0.0: no "-0.000"
    return (
        f"prov/ideal {fig.ratio:.3f} = 1 + {shares}, other {rest:+.3f}; with no GPU held on a marked"
        f" node it would be {kept:.3f}"
    )


def _replays(
    trace: Trace, plan: list[tuple[str, Scoring, str]], args: argparse.Namespace
) -> Iterator[Figures]:
    """The replays' figures in plan order, `args.jobs` replays at a time (each in its own process:
    the replay is deterministic, so the figures are the same; only wall_s grows with contention)."""
    if args.jobs <= 1:
        for run in plan:
            yield replay(trace, *run, args)
        return
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(replay, trace, *run, args) for run in plan]
        for future in futures:
            yield future.result()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_trace_arguments(parser)
    parser.add_argument("--idle", type=int, default=600, help="idle_seconds")
    parser.add_argument("--boot-seconds", type=int, default=300)
    parser.add_argument("--max-size", type=int, default=400, help="of the 8-GPU group")
    parser.add_argument("--scoring", type=Scoring, nargs="+", default=list(Scoring))
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="replays run at once, one process each (default 1: wall_s comparable)",
    )
    parser.add_argument("--attrition", nargs="+", default=[OFF, *EFFECTS], choices=(OFF, *EFFECTS))
    parser.add_argument(
        "--checkpointable",
        type=float,
        nargs="*",
        default=[],
        metavar="FRACTION",
        help="also replay PreferNoSchedule attrition with migration on (under --migration-scoring), with this"
        " share of the jobs checkpointing every 1800 s (restart 300 s); e.g. --checkpointable 1 0.5",
    )
    parser.add_argument(
        "--migration-scoring",
        type=Scoring,
        nargs="+",
        default=[Scoring.LEAST_ALLOCATED],
        help="with --checkpointable: the scheduler scorings the migration runs replay under (default"
        " least-allocated, kube-scheduler's default; most-allocated is NodeResourcesFit's MostAllocated"
        " scoring strategy in a scheduler profile). Give the same ones to --scoring for the wait ratio",
    )
    parser.add_argument(
        "--headroom-nodes",
        type=int,
        default=0,
        help="warm nodes the one-group scenario's group keeps for arrivals (headroom_nodes; default 0)",
    )
    parser.add_argument(
        "--spare-gpus",
        type=int,
        default=None,
        help="free GPUs attrition and migration leave on unmarked nodes (policy.attrition.spare_gpus; "
        "default one node's)",
    )
    parser.add_argument(
        "--max-moves-per-job",
        type=int,
        default=None,
        help="with --checkpointable: how many times migration may move one job "
        "(policy.migration.max_moves_per_job; default 3, the issue's target)",
    )
    parser.add_argument(
        "--last-checkpoint",
        action="store_true",
        help="with --checkpointable: the jobs also write backlog-scaler/last-checkpoint each time they save",
    )
    parser.add_argument("--no-pools", action="store_true", help="skip the 1/4/8-GPU pools scenario")
    parser.add_argument("--trace", dest="trace_option", help="the trace (same as the positional argument)")
    parser.add_argument(
        "--scenario", choices=("one-group", "pools"), nargs="+", help="`one-group` alone: as --no-pools"
    )
    parser.add_argument(
        "--runtime-estimates",
        action="store_true",
        help="pods carry their job's duration as the expected-runtime annotation (a perfect estimate)",
    )
    args = parser.parse_args()
    if args.scenario is not None and "pools" not in args.scenario:
        args.no_pools = True
    path = Path(args.trace_option or args.trace)
    started = time.perf_counter()
    trace = read_trace(path, args.limit, "sim_bench")
    if trace is None:
        return 2
    print(
        f"trace: {path} ({len(trace.jobs):,} jobs, loaded in {time.perf_counter() - started:.2f}s); boot "
        f"{args.boot_seconds}s, idle {args.idle}s, tick 60s, webhook +10s; "
        f"baseline: {' / '.join(map(str, BASELINE))}"
        + (f"; one-group headroom {args.headroom_nodes} node(s)" if args.headroom_nodes else "")
        + (f"; attrition spare {args.spare_gpus} GPUs" if args.spare_gpus is not None else "")
        + (f"; at most {args.max_moves_per_job} moves per job" if args.max_moves_per_job is not None else "")
        + ("; jobs write their last checkpoint" if args.last_checkpoint else "")
    )
    plan = [("one-group", scoring, attrition) for scoring in args.scoring for attrition in args.attrition]
    plan = [BASELINE, *(run for run in plan if run != BASELINE)]  # first: every ratio needs it
    plan += [
        ("one-group", scoring, f"{MIGRATE}{share:g}")
        for scoring in args.migration_scoring
        for share in args.checkpointable
    ]
    if not args.no_pools:
        plan += [("pools", Scoring.LEAST_ALLOCATED, a) for a in (OFF, EFFECTS[0]) if a in args.attrition]
    runs: dict[tuple[str, Scoring, str], Figures] = {}
    print(_header(), flush=True)
    for fig in _replays(trace, plan, args):
        runs[fig.key] = fig
        print(_row(fig, runs, args.boot_seconds), flush=True)
    for scoring in args.migration_scoring if args.checkpointable else ():
        print(f"targets, migration of jobs that checkpoint ({scoring}, PreferNoSchedule attrition):")
        print("\n".join(migration_targets(runs, scoring, args.boot_seconds)))
    for effect in EFFECTS:
        if effect in args.attrition:
            print(f"targets, attrition with {effect}:")
            print("\n".join(targets(runs, effect, args.boot_seconds)))
    print(
        "GPU-hours idle: booting (launch to GPUs advertised), empty (nodes running nothing), fragm (free GPUs"
        " beside running pods, unmarked nodes), held (the same on nodes marked for attrition); lost = pods"
        " running on a node when it was terminated; evictions: none (the reconcile plan has no eviction)."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
