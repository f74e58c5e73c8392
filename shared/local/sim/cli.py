"""The `simulate` command, registered into `backlog-scaler` by `shared.local.cli` through `add_commands`."""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from shared.config import ScalerConfig, load_config
from shared.domain.durations import short_duration
from shared.domain.errors import InputError
from shared.domain.quantity import quantity
from shared.local import json_io
from shared.local.sim.compare_table import compare_table
from shared.local.sim.engine import SimOptions, SimResult, at, simulate
from shared.local.sim.report import build_report, compare_document, report_table
from shared.local.sim.scheduler import DEFAULT_SCORING, Scoring
from shared.local.sim.trace import FORMATS, Trace, load_trace, parse_trace_time
from shared.local.sim.workload import Sizing, default_sizing
from shared.local.sim.world import WarmPool

DESCRIPTION = """Replay a GPU job trace through the planner in simulated time and report waits, GPU-hours
and cost. Simulated ASGs (boot delay, optional capacity caps), a gang-aware scheduler that filters with
the planner's own filters and scores like kube-scheduler (--scheduler-scoring), pods that run for their
duration, and reconciles on the schedule and after arrivals, applied like the controller does (marks
for consolidation by attrition included). Always runs as fast as possible (--speed is accepted and
ignored)."""


def eta_seconds(elapsed: float, started: int, total: int) -> float | None:
    """Wall seconds left at the rate so far (jobs start in submit order, so started jobs measure how
    far the replay is); None until 1 % has started, when the rate says little yet."""
    if total <= 0 or started * 100 < total:
        return None
    return elapsed * (total - started) / started


class Progress:
    """A single updating line on stderr: percent of jobs started, simulated date, wall time, ETA."""

    def __init__(
        self,
        stream: TextIO,
        label: str,
        interval: float = 0.2,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._stream = stream
        self._label = label
        self._interval = interval
        self._clock = clock
        self._started = clock()
        self._last = 0.0
        self._shown = False

    def __call__(self, now: int, started: int, total: int) -> None:
        wall = self._clock()
        if wall - self._last < self._interval and started < total:
            return
        self._last = wall
        share = started / total if total else 1.0
        bar = "#" * int(share * 30)
        elapsed = wall - self._started
        eta = eta_seconds(elapsed, started, total)
        left = "" if started >= total else f"  ETA {short_duration(eta)}" if eta is not None else "  ETA ..."
        line = (
            f"\r{self._label} [{bar:<30}] {share:4.0%}  {at(now):%Y-%m-%d %H:%M}  "
            f"{started:,}/{total:,} jobs started  {short_duration(elapsed)}{left}"
        )
        self._stream.write(line)
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self._stream.write("\n")
            self._stream.flush()


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {raw}")
    return value


def _fraction(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a fraction from 0 to 1, got {raw!r}")
    return value


def _non_negative_float(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {raw!r}")
    return value


def _non_negative_int(raw: str) -> int:
    value = int(raw)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {raw}")
    return value


OUTPUT_FORMATS = ("table", "json")


class _FormatAction(argparse.Action):
    """`--format` is the output format in every subcommand; simulate's old `--format TRACE_FORMAT`
    (before --trace-format) still works, with a note on stderr."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        value: Any,
        option: str | None = None,
    ) -> None:
        if value in OUTPUT_FORMATS:
            namespace.output = value
            return
        print(f"backlog-scaler: note: --format {value} is now --trace-format {value}", file=sys.stderr)
        namespace.trace_format = value


def add_commands(commands: Any) -> None:
    """Register `simulate` on the `backlog-scaler` sub-command parser."""
    p = commands.add_parser(
        "simulate",
        help="replay a job trace through the planner (simulated time)",
        description=DESCRIPTION,
    )
    _add_input_arguments(p)
    _add_timing_arguments(p)
    _add_world_arguments(p)
    _add_fault_arguments(p)
    _add_output_arguments(p)
    p.set_defaults(func=run_simulate)


def _add_input_arguments(p: Any) -> None:
    """The trace and its format, the output format, the configs."""
    p.add_argument("--trace", required=True, help="trace file (CSV)")
    p.add_argument(
        "--trace-format",
        dest="trace_format",
        choices=("auto", *FORMATS),
        default="auto",
        help="trace format (default: from the header)",
    )
    p.add_argument(
        "--format",
        action=_FormatAction,
        choices=(*OUTPUT_FORMATS, "auto", *FORMATS),
        metavar="{table,json}",
        help="output format, as for plan (default: table; a trace format here is the old spelling of "
        "--trace-format)",
    )
    p.add_argument("--config", required=True, help="scaler config (YAML or JSON)")
    p.add_argument("--compare", metavar="CONFIG2", help="also replay this config and show both side by side")


def _add_timing_arguments(p: Any) -> None:
    """Boot, device plugin, schedule and webhook delays."""
    p.add_argument("--boot-seconds", type=_non_negative_int, default=300, help="launch to node registered")
    p.add_argument(
        "--gpu-delay-seconds", type=_non_negative_int, default=0, help="node registered to GPUs advertised"
    )
    p.add_argument("--tick-seconds", type=_positive_int, default=60, help="the reconcile schedule")
    p.add_argument(
        "--webhook-delay-seconds",
        type=_non_negative_int,
        help="arrival to reconcile (default: the config's deployment.webhook_queue_delay_seconds)",
    )
    p.add_argument("--no-webhook", action="store_true", help="reconcile on the schedule only")


def _add_world_arguments(p: Any) -> None:
    """Which jobs are replayed, their sizes, EC2 capacity and warm pools, routing and the scheduler."""
    p.add_argument("--cluster", help="keep one virtual cluster (Philly `cluster`, generic CSV `cluster`)")
    p.add_argument("--start", help="keep jobs submitted at or after (ISO 8601, or seconds from the origin)")
    p.add_argument("--end", help="keep jobs submitted before (ISO 8601, or seconds from the origin)")
    p.add_argument(
        "--limit",
        type=_positive_int,
        help="keep the N earliest jobs by submit time, whatever the row order "
        "(after --cluster/--start/--end; "
        "default: all)",
    )
    p.add_argument("--cpu-per-gpu", help="cpu per GPU for traces without cpu (e.g. 10 or 10500m)")
    p.add_argument("--memory-per-gpu", help="memory per GPU for traces without memory (e.g. 120Gi)")
    p.add_argument(
        "--capacity",
        action="append",
        default=[],
        metavar="GROUP=N",
        help="EC2 runs at most N instances of GROUP; launches beyond fail (repeatable)",
    )
    p.add_argument(
        "--warm-pool",
        action="append",
        default=[],
        metavar="GROUP=N",
        help="GROUP's ASG keeps N warm instances: a launch that takes one registers in --warm-boot-seconds, "
        "and its replacement re-warms in a full boot (repeatable)",
    )
    p.add_argument(
        "--warm-boot-seconds", type=_non_negative_int, default=60, help="warm instance taken -> registered"
    )
    p.add_argument(
        "--right-size",
        action="store_true",
        help="send each job without group/selector to the group of the smallest nodes that hold it",
    )
    p.add_argument(
        "--scheduler-scoring",
        choices=[str(s) for s in Scoring],
        default=str(DEFAULT_SCORING),
        help="how the simulated scheduler ranks feasible nodes: kube-scheduler's NodeResourcesFit "
        "strategies (least-allocated, the default scheduler's; most-allocated) or first-fit in node "
        f"creation order; TaintToleration scores PreferNoSchedule taints in each (default {DEFAULT_SCORING})",
    )
    p.add_argument(
        "--runtime-estimates",
        action="store_true",
        help="pods carry their job's duration as the backlog-scaler/expected-runtime-seconds annotation",
    )
    _add_migration_arguments(p)


def _add_migration_arguments(p: Any) -> None:
    """Which jobs checkpoint, how often, and what a move costs them (shared.local.sim.migration)."""
    p.add_argument(
        "--checkpointable",
        type=_fraction,
        default=0.0,
        metavar="FRACTION",
        help="this share of the jobs (picked deterministically) checkpoint and opt in to migration "
        "(backlog-scaler/checkpoint-interval-seconds); the config's policy.migration.enabled moves them",
    )
    p.add_argument(
        "--checkpoint-interval-seconds",
        type=_positive_int,
        default=1800,
        help="how often a checkpointable job saves its work (default 1800)",
    )
    p.add_argument(
        "--restart-seconds",
        type=_non_negative_int,
        default=300,
        help="how long a moved job takes to run again on its new node (default 300)",
    )
    p.add_argument(
        "--last-checkpoint",
        action="store_true",
        help="checkpointable jobs also write backlog-scaler/last-checkpoint each time they save: the "
        "scaler then counts the work since that save instead of the whole interval",
    )


def _add_fault_arguments(p: Any) -> None:
    """GPU faults injected into the replay (shared.local.sim.faults)."""
    p.add_argument(
        "--gpu-failures-per-gpu-day",
        type=_non_negative_float,
        default=0.0,
        metavar="RATE",
        help="inject GPU faults at RATE per GPU per day: the node's jobs fail and are resubmitted, the "
        "node reports AcceleratedHardwareReady=False and drops the GPU from allocatable, and the "
        "planner's repair replaces it (default 0: off; the Llama 3 paper's rate is about 1/3600 = "
        "0.000278, one fault per 3,600 GPU-days)",
    )
    p.add_argument(
        "--fault-seed", type=int, default=0, help="seed of the fault draws (the same seed, the same faults)"
    )


def _add_output_arguments(p: Any) -> None:
    """Where the report and plot go, progress, and the options kept for other tools."""
    p.add_argument(
        "--out",
        metavar="DIR",
        help="write DIR/report.json and DIR/plot.png (DIR is created; checked before the replay starts)",
    )
    p.add_argument("--no-plot", action="store_true", help="with --out: skip plot.png (needs --out)")
    p.set_defaults(output="table")
    # The old spelling of the output format, kept working but unlisted.
    p.add_argument("--output", choices=OUTPUT_FORMATS, help=argparse.SUPPRESS)
    p.add_argument("--progress", action="store_true", help="progress line on stderr even when not a TTY")
    p.add_argument(
        "--speed", type=float, help="accepted for the demo; simulate always runs as fast as possible"
    )
    p.add_argument("--every-tick", action="store_true", help="run the planner at every tick (slow; checks)")


def _capacity(items: list[str], flag: str = "--capacity") -> dict[str, int]:
    caps: dict[str, int] = {}
    for item in items:
        group, sep, raw = item.partition("=")
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if not sep or not group or value < 0:
            raise InputError(f"{flag}: expected GROUP=N with N >= 0, got {item!r}")
        caps[group] = value
    return caps


def _sizing(args: argparse.Namespace, config: ScalerConfig) -> Sizing:
    """Per-GPU cpu/memory: the flags, else a share of the (baseline) config's node shape."""
    sizing = default_sizing(config)
    try:
        if args.cpu_per_gpu is not None:
            sizing = replace(sizing, cpu_per_gpu=quantity("cpu", args.cpu_per_gpu))
        if args.memory_per_gpu is not None:
            sizing = replace(sizing, memory_per_gpu=quantity("memory", args.memory_per_gpu))
    except ValueError as exc:
        raise InputError(f"--cpu-per-gpu/--memory-per-gpu: {exc}") from exc
    return sizing


def _options(args: argparse.Namespace, sizing: Sizing) -> SimOptions:
    return SimOptions(
        boot_seconds=args.boot_seconds,
        gpu_delay_seconds=args.gpu_delay_seconds,
        tick_seconds=args.tick_seconds,
        webhook_delay_seconds=args.webhook_delay_seconds,
        webhook=not args.no_webhook,
        capacity=_capacity(args.capacity),
        warm_pools={
            group: WarmPool(size, args.warm_boot_seconds)
            for group, size in _capacity(args.warm_pool, "--warm-pool").items()
        },
        sizing=sizing,
        every_tick=args.every_tick,
        right_size=args.right_size,
        record_series=bool(args.out) and not args.no_plot,
        scoring=Scoring(args.scheduler_scoring),
        runtime_estimates=args.runtime_estimates,
        checkpointable=args.checkpointable,
        checkpoint_interval_seconds=args.checkpoint_interval_seconds,
        restart_seconds=args.restart_seconds,
        last_checkpoint=args.last_checkpoint,
        gpu_failures_per_gpu_day=args.gpu_failures_per_gpu_day,
        fault_seed=args.fault_seed,
    )


def _run_one(
    args: argparse.Namespace,
    trace: Trace,
    path: str,
    config: ScalerConfig,
    sizing: Sizing,
    *,
    quiet: bool = False,
) -> SimResult:
    options = _options(args, sizing)
    show = not quiet and (args.progress or sys.stderr.isatty())
    progress = Progress(sys.stderr, f"simulate {Path(path).name}") if show else None
    try:
        return simulate(trace, config, options, config_name=path, progress=progress)
    finally:
        if progress is not None:
            progress.close()


def replay_all(
    args: argparse.Namespace,
    trace: Trace,
    runs: list[tuple[str, ScalerConfig]],
    sizing: Sizing,
    *,
    cpus: int | None = None,
) -> list[SimResult]:
    """The replay of each (config path, config), in order. With `--compare` on a machine of two or
    more CPUs the second runs in another process while this one replays the first (its progress
    shown): each replay is deterministic and shares nothing with the other, so the results are
    those of one after the other, in about half the time."""
    if len(runs) < 2 or (cpus if cpus is not None else _usable_cpus()) < 2:
        return [_run_one(args, trace, path, config, sizing) for path, config in runs]
    # A forkserver's child, not a fork of this process: this one runs threads (the progress line), and
    # a fork of a threaded process may deadlock in the child (Python 3.12 warns; 3.14 no longer forks).
    context = multiprocessing.get_context("forkserver")
    with ProcessPoolExecutor(max_workers=len(runs) - 1, mp_context=context) as pool:
        others = [
            pool.submit(_run_one, args, trace, path, config, sizing, quiet=True) for path, config in runs[1:]
        ]
        first = _run_one(args, trace, *runs[0], sizing)
        return [first, *(other.result() for other in others)]


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity: a container or `taskset` may allow fewer than
    the machine has)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


OUT_FILES = ("report.json", "plot.png")


def check_out_dir(raw: str, files: tuple[str, ...] = OUT_FILES) -> Path:
    """--out must be a writable directory or one that can be created, where `files` can be written:
    found before a long replay."""
    out = Path(raw)
    if out.exists():
        if not out.is_dir():
            raise InputError(f"--out {out}: not a directory")
        if not os.access(out, os.W_OK | os.X_OK):
            raise InputError(f"--out {out}: directory is not writable")
        for name in files:
            if (out / name).is_dir():
                raise InputError(f"--out {out}: {name} is a directory, not a file it can write")
        return out
    parent = out.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"--out {out}: cannot create it: {parent} is not a writable directory")
    return out


def run_simulate(args: argparse.Namespace) -> int:
    """`backlog-scaler simulate`: load, replay (once, or twice with --compare), report."""
    if args.no_plot and not args.out:
        raise InputError("--no-plot: only with --out (the plot is written to --out DIR)")
    if args.out:
        check_out_dir(args.out, OUT_FILES[:1] if args.no_plot else OUT_FILES)
    start = parse_trace_time(args.start, "--start") if args.start else None
    end = parse_trace_time(args.end, "--end") if args.end else None
    trace = load_trace(
        args.trace, args.trace_format, cluster=args.cluster, start=start, end=end, limit=args.limit
    )
    if not trace.jobs:
        raise InputError(f"{args.trace}: no jobs to replay (after --cluster/--start/--end/--limit)")
    config = load_config(args.config)
    candidate = load_config(args.compare) if args.compare else None
    # Pod sizes come from the baseline config for both runs, so both replay the same pods.
    sizing = _sizing(args, config)
    configs = [(args.config, config)] + ([(args.compare, candidate)] if candidate is not None else [])
    _note_checkpointable(args.checkpointable, configs)
    results = replay_all(args, trace, configs, sizing)
    reports = [build_report(result, trace) for result in results]
    if args.compare:
        titles = [Path(args.config).name, Path(args.compare).name]
        document: dict[str, Any] = compare_document(reports[0], reports[1])
    else:
        titles = [Path(args.config).name]
        document = reports[0]

    if args.output == "json":
        print(json_io.dumps_indented(document))
    else:
        for note in trace.notes:
            print(f"note: {note}")
        if len(reports) == 2:
            print(compare_table((titles[0], reports[0]), (titles[1], reports[1])))
        else:
            print(report_table([(titles[0], reports[0])]))
    if args.out:
        plotted = None if args.no_plot else list(zip(titles, results, strict=True))
        _write_out(Path(args.out), document, plotted)
    return 0


def _note_checkpointable(fraction: float, configs: list[tuple[str, ScalerConfig]]) -> None:
    """--checkpointable moves nothing unless a config switches migration on: say so before the replay."""
    if fraction > 0 and not any(config.policy.migration.enabled for _, config in configs):
        names = " and ".join(path for path, _ in configs)
        print(
            f"backlog-scaler: note: --checkpointable {fraction:g}: policy.migration.enabled is off in "
            f"{names}, so no job is moved (its jobs only carry the checkpoint annotation)",
            file=sys.stderr,
        )


def _write_out(out: Path, document: dict[str, Any], plotted: list[tuple[str, SimResult]] | None) -> None:
    """DIR/report.json, and DIR/plot.png unless `plotted` is None; a write that fails names its file."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.json").write_text(json_io.dumps_indented(document) + "\n", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write: {exc.strerror or exc}") from exc
    if plotted is None:
        return
    from shared.local.sim.plot import write_plot

    runs = [(title, result.series) for title, result in plotted if result.series is not None]
    try:
        write_plot(out / "plot.png", runs if len(runs) > 1 else runs[0][1])
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write plot.png: {exc.strerror or exc}") from exc
