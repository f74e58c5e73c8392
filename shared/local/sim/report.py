"""The replay's figures as a JSON document (`report.json`) and as a table, alone or side by side.

Schema (all times in seconds, GPU-hours as floats rounded to 0.01):

    jobs, jobs_started, pods, fractional_gpu_jobs
    jobs_not_started: {total, by_reason: {ReasonCode or "NeverPlanned": n}}
    wait_seconds: {mean, p50, p95, p99, max}      wait = start - submit; nearest-rank percentiles
    gpu_hours: {provisioned, used, ideal, idle,    provisioned: launch to termination x GPUs/node
                idle_booting, idle_empty_nodes,     used: GPU time of pods that ran (runs a move or
                idle_fragmented, idle_held_by_marks, a fault cut short included); idle = provisioned
                idle_broken_nodes}                  - used, split into: booting, nodes running no pod,
                                                    free GPUs beside pods, free GPUs beside pods on
                                                    nodes marked for attrition, and GPUs of broken
                                                    nodes running nothing (with faults only)
    provisioned_over_ideal                          ideal: GPUs x duration of the jobs that
                                                    started; null when it is 0 or no job started
    node_hours, cost                                cost null unless every group has price_per_hour
    scale_ups, nodes_launched, scale_downs          scale_ups: reconciles that raised a desired
    attrition: {enabled, effect, marks, unmarks}    consolidation by attrition (policy.attrition)
    migration: {enabled, migrations, gpu_hours_lost, migration of jobs that checkpoint (policy.migration):
                lost_over_used, jobs_moved,         nodes emptied, GPU-hours lost to the moves (work
                jobs_moved_more_than_once,          since the last simulated checkpoint plus restarts),
                most_moves_of_a_job,                over GPU-hours used; restart delay: a move to the
                restart_delay_p95,                  job running again, restart included;
                evicted_not_movable}                evicted_not_movable: pods moved without opting in
    safety: {busy_terminations_refused, pods_lost}  planned terminations of busy nodes the re-validation
                                                    refused; pods running on a node terminated (0)
    groups: {name: {gpus_per_node, price_per_hour, node_hours, gpu_hours_provisioned, gpu_hours_used,
                    cost, nodes_launched, scale_ups, scale_downs, replaced, cordons, uncordons,
                    peak_nodes, launch_failures, backoffs}}
    span: {start, end, seconds}                     first submit to the last change (ISO 8601, UTC)
    simulation: {config, wall_seconds, jobs_per_second, planner_runs, reconciles_skipped, stalled,
                 boot_seconds, gpu_delay_seconds, tick_seconds, webhook_delay_seconds,
                 cpu_per_gpu_millicores, memory_per_gpu_mib, capacity, right_size,
                 scheduler_scoring,                 least-allocated | most-allocated | first-fit;
                 checkpointable,                    --checkpointable (0: none; moves need the
                 checkpoint_interval_seconds,       config's policy.migration.enabled)
                 restart_seconds, last_checkpoint}  last_checkpoint: jobs write their last save
    trace: {source, format, notes}                  when the trace is known
    faults: {rate_per_gpu_day, seed, faults,        only with --gpu-failures-per-gpu-day: GPU faults
             repaired, repair_cordons,              injected, broken nodes terminated, busy ones
             jobs_restarted, gpu_hours_lost_work,    cordoned for health, runs killed and redone,
             gpu_hours_on_broken_nodes,              their lost GPU time (in used), GPUs x time broken;
             repair_paused_seconds,                  repair's circuit breaker: how long groups had
             repair_paused_nodes,                    repair paused (policy.repair.max_unhealthy_fraction),
             repair_paused: {group: {seconds,        the broken nodes it kept, per group with the
                             reason}},               planner's reason, and the fraction configured
             max_unhealthy_fraction}

`--compare` writes `{"baseline": <report>, "candidate": <report>, "difference": {figure: {baseline,
candidate, difference, percent}}}`; percent is null when the baseline figure is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from shared.domain.durations import short_duration
from shared.local.sim.engine import GroupResult, SimResult, at
from shared.local.sim.faults import FaultFigures
from shared.local.sim.trace import Trace
from shared.local.sim.workload import MIB

HOUR = 3600.0


def percentile(sorted_values: Sequence[int], p: float) -> int | None:
    """Nearest-rank percentile of already sorted values (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def _hours(seconds: float) -> float:
    return round(seconds / HOUR, 2)


def build_report(result: SimResult, trace: Trace | None = None) -> dict[str, Any]:
    """The documented report document of one replay."""
    provisioned = result.provisioned_gpu_seconds
    priced = all(g.price_per_hour is not None for g in result.groups)
    groups = {g.name: _group_figures(g) for g in result.groups}
    total_cost = sum((_cost(g) or 0.0 for g in result.groups), 0.0)
    report: dict[str, Any] = {
        "jobs": result.jobs,
        "jobs_started": result.started,
        "jobs_not_started": {
            "total": result.jobs - result.started,
            "by_reason": dict(sorted(result.not_started.items())),
        },
        "pods": result.pods,
        "fractional_gpu_jobs": result.fractional_jobs,
        "wait_seconds": _wait_figures(result.waits),
        "gpu_hours": _gpu_hours(result),
        # No job started: the fleet did nothing for the jobs; a ratio of 0 would read as better than perfect.
        "provisioned_over_ideal": (
            round(provisioned / result.ideal_gpu_seconds, 4)
            if result.ideal_gpu_seconds and result.started
            else None
        ),
        "node_hours": _hours(sum(g.node_seconds for g in result.groups)),
        "cost": round(total_cost, 2) if priced else None,
        "scale_ups": sum(g.scale_ups for g in result.groups),
        "nodes_launched": sum(g.launched for g in result.groups),
        "scale_downs": sum(g.terminated for g in result.groups),
        "attrition": {
            "enabled": result.attrition.enabled,
            "effect": result.attrition.effect,
            "marks": sum(g.marks for g in result.groups),
            "unmarks": sum(g.unmarks for g in result.groups),
        },
        "migration": _migration_figures(result),
        "safety": {
            "busy_terminations_refused": sum(g.busy_terminations_refused for g in result.groups),
            "pods_lost": sum(g.pods_lost for g in result.groups),
        },
        "groups": groups,
        "span": {
            "start": at(result.start).isoformat().replace("+00:00", "Z"),
            "end": at(result.end).isoformat().replace("+00:00", "Z"),
            "seconds": result.end - result.start,
        },
        "simulation": _simulation_figures(result),
    }
    if trace is not None:
        report["trace"] = {"source": trace.source, "format": trace.format, "notes": list(trace.notes)}
    if result.faults is not None:
        report["faults"] = _fault_figures(result.faults)
    return report


def _migration_figures(result: SimResult) -> dict[str, Any]:
    lost = sum(g.migration_lost_gpu_seconds for g in result.groups)
    return {
        "enabled": result.migration_enabled,
        "migrations": sum(g.migrations for g in result.groups),
        "gpu_hours_lost": _hours(lost),
        "lost_over_used": round(lost / result.used_gpu_seconds, 5) if result.used_gpu_seconds else None,
        "jobs_moved": len(result.moves_per_job),
        "jobs_moved_more_than_once": sum(1 for m in result.moves_per_job if m > 1),
        "most_moves_of_a_job": max(result.moves_per_job, default=0),
        "restart_delay_p95": percentile(result.restart_delays, 95),
        "evicted_not_movable": sum(g.evicted_not_movable for g in result.groups),
    }


def _fault_figures(f: FaultFigures) -> dict[str, Any]:
    return {
        "rate_per_gpu_day": f.rate_per_gpu_day,
        "seed": f.seed,
        "faults": f.faults,
        "repaired": f.repaired,
        "repair_cordons": f.repair_cordons,
        "jobs_restarted": f.jobs_restarted,
        "gpu_hours_lost_work": _hours(f.lost_work_gpu_seconds),
        "gpu_hours_on_broken_nodes": _hours(f.broken_gpu_seconds),
        "repair_paused_seconds": sum(f.paused_seconds.values()),
        "repair_paused_nodes": len(f.paused_nodes),
        "repair_paused": {
            group: {"seconds": seconds, "reason": f.paused_reasons.get(group, "")}
            for group, seconds in sorted(f.paused_seconds.items())
        },
        "max_unhealthy_fraction": f.max_unhealthy_fraction,
    }


def _cost(g: GroupResult) -> float | None:
    return g.node_seconds / HOUR * g.price_per_hour if g.price_per_hour is not None else None


def _group_figures(g: GroupResult) -> dict[str, Any]:
    """One group's section of the report."""
    cost = _cost(g)
    return {
        "gpus_per_node": g.gpus_per_node,
        "price_per_hour": g.price_per_hour,
        "node_hours": _hours(g.node_seconds),
        "gpu_hours_provisioned": _hours(g.node_seconds * g.gpus_per_node),
        "gpu_hours_used": _hours(g.busy_gpu_seconds),
        "cost": round(cost, 2) if cost is not None else None,
        "nodes_launched": g.launched,
        "scale_ups": g.scale_ups,
        "scale_downs": g.terminated,
        "replaced": g.replaced,
        "cordons": g.cordons,
        "uncordons": g.uncordons,
        "peak_nodes": g.peak_nodes,
        "launch_failures": g.launch_failures,
        "backoffs": g.backoffs,
        "marks": g.marks,
        "unmarks": g.unmarks,
    }


def _wait_figures(waits: list[int]) -> dict[str, Any]:
    """Mean, percentiles and max of the sorted waits (None when no job started)."""
    return {
        "mean": round(sum(waits) / len(waits), 1) if waits else None,
        "p50": percentile(waits, 50),
        "p95": percentile(waits, 95),
        "p99": percentile(waits, 99),
        "max": waits[-1] if waits else None,
    }


def _gpu_hours(result: SimResult) -> dict[str, Any]:
    """Provisioned, used, ideal and idle GPU-hours, the idle by cause."""
    provisioned = result.provisioned_gpu_seconds
    figures: dict[str, Any] = {
        "provisioned": _hours(provisioned),
        "used": _hours(result.used_gpu_seconds),
        "ideal": _hours(result.ideal_gpu_seconds),
        "idle": _hours(provisioned - result.used_gpu_seconds),
        "idle_booting": _hours(sum(g.booting_gpu_seconds for g in result.groups)),
        "idle_empty_nodes": _hours(sum(g.empty_gpu_seconds for g in result.groups)),
        "idle_fragmented": _hours(sum(g.fragmented_gpu_seconds for g in result.groups)),
        "idle_held_by_marks": _hours(sum(g.held_gpu_seconds for g in result.groups)),
    }
    if result.faults is not None:  # as the faults section: only a replay with faults has broken nodes
        figures["idle_broken_nodes"] = _hours(sum(g.broken_idle_gpu_seconds for g in result.groups))
    return figures


def _simulation_figures(result: SimResult) -> dict[str, Any]:
    """How the replay ran: its speed, planner runs, and the world's options."""
    options = result.options
    return {
        "config": result.config_name,
        "wall_seconds": round(result.wall_seconds, 3),
        "jobs_per_second": round(result.jobs / result.wall_seconds) if result.wall_seconds > 0 else None,
        "planner_runs": result.plans,
        "reconciles_skipped": result.skipped,
        "stalled": result.stalled,
        "boot_seconds": options.boot_seconds,
        "gpu_delay_seconds": options.gpu_delay_seconds,
        "tick_seconds": options.tick_seconds,
        "webhook_delay_seconds": result.webhook_delay_seconds,
        "cpu_per_gpu_millicores": result.sizing.cpu_per_gpu,
        "memory_per_gpu_mib": result.sizing.memory_per_gpu // MIB,
        "capacity": dict(options.capacity),
        "right_size": options.right_size,
        "scheduler_scoring": str(options.scoring),
        "checkpointable": options.checkpointable,
        "checkpoint_interval_seconds": options.checkpoint_interval_seconds,
        "restart_seconds": options.restart_seconds,
        "last_checkpoint": options.last_checkpoint,
    }


# The figures `--compare` puts a difference and a percent on: (name, path in the report).
COMPARED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("jobs_started", ("jobs_started",)),
    ("jobs_not_started", ("jobs_not_started", "total")),
    ("wait_mean", ("wait_seconds", "mean")),
    ("wait_p50", ("wait_seconds", "p50")),
    ("wait_p95", ("wait_seconds", "p95")),
    ("wait_p99", ("wait_seconds", "p99")),
    ("wait_max", ("wait_seconds", "max")),
    ("gpu_hours_provisioned", ("gpu_hours", "provisioned")),
    ("gpu_hours_used", ("gpu_hours", "used")),
    ("gpu_hours_ideal", ("gpu_hours", "ideal")),
    ("idle_booting", ("gpu_hours", "idle_booting")),
    ("idle_empty_nodes", ("gpu_hours", "idle_empty_nodes")),
    ("idle_fragmented", ("gpu_hours", "idle_fragmented")),
    ("idle_held_by_marks", ("gpu_hours", "idle_held_by_marks")),
    ("provisioned_over_ideal", ("provisioned_over_ideal",)),
    ("node_hours", ("node_hours",)),
    ("cost", ("cost",)),
    ("scale_ups", ("scale_ups",)),
    ("nodes_launched", ("nodes_launched",)),
    ("scale_downs", ("scale_downs",)),
    ("attrition_marks", ("attrition", "marks")),
    ("attrition_unmarks", ("attrition", "unmarks")),
)

FAULTS_COMPARED: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("idle_broken_nodes", ("gpu_hours", "idle_broken_nodes")),
    ("gpu_faults", ("faults", "faults")),
    ("nodes_repaired", ("faults", "repaired")),
    ("jobs_restarted", ("faults", "jobs_restarted")),
    ("gpu_hours_lost_work", ("faults", "gpu_hours_lost_work")),
    ("gpu_hours_on_broken_nodes", ("faults", "gpu_hours_on_broken_nodes")),
    ("repair_paused_seconds", ("faults", "repair_paused_seconds")),
)


def _at_path(report: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = report
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int | float) else None


def difference(baseline: float | None, candidate: float | None) -> tuple[float | None, float | None]:
    """(candidate - baseline, percent of the baseline); None where a side is unknown or the base 0."""
    if baseline is None or candidate is None:
        return None, None
    diff = candidate - baseline
    return diff, (100.0 * diff / baseline if baseline else None)


def compare_document(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """The `--compare` form of report.json: both reports and the difference of each figure."""
    differences: dict[str, Any] = {}
    faults = FAULTS_COMPARED if "faults" in baseline or "faults" in candidate else ()
    for name, path in (*COMPARED, *faults):
        base, cand = _at_path(baseline, path), _at_path(candidate, path)
        diff, percent = difference(base, cand)
        differences[name] = {
            "baseline": base,
            "candidate": cand,
            "difference": round(diff, 4) if diff is not None else None,
            "percent": round(percent, 1) if percent is not None else None,
        }
    return {"baseline": baseline, "candidate": candidate, "difference": differences}


def _duration(seconds: float | None) -> str:
    return "-" if seconds is None else short_duration(seconds)


def _number(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    wait = report["wait_seconds"]
    gpu = report["gpu_hours"]
    sim = report["simulation"]
    not_started = report["jobs_not_started"]
    ratio = report["provisioned_over_ideal"]
    rows = [
        ("jobs (started / total)", f"{report['jobs_started']:,} / {report['jobs']:,}"),
        (
            "jobs not started",
            ", ".join(f"{k}: {v}" for k, v in not_started["by_reason"].items()) or "0",
        ),
        ("wait mean", _duration(wait["mean"])),
        ("wait p50 / p95", f"{_duration(wait['p50'])} / {_duration(wait['p95'])}"),
        ("wait p99 / max", f"{_duration(wait['p99'])} / {_duration(wait['max'])}"),
        ("GPU-hours provisioned", _number(gpu["provisioned"])),
        ("GPU-hours used", _number(gpu["used"])),
        ("GPU-hours ideal", _number(gpu["ideal"])),
        (
            "idle: booting / empty / fragm. / held",
            f"{_number(gpu['idle_booting'])} / {_number(gpu['idle_empty_nodes'])} / "
            f"{_number(gpu['idle_fragmented'])} / {_number(gpu['idle_held_by_marks'])}",
        ),
        ("provisioned / ideal", f"{ratio:.3f}" if ratio is not None else "-"),
        ("node-hours", _number(report["node_hours"])),
        ("cost", f"${report['cost']:,.2f}" if report["cost"] is not None else "- (no price_per_hour)"),
        ("scale-ups / nodes launched", f"{report['scale_ups']:,} / {report['nodes_launched']:,}"),
        ("scale-downs (nodes)", f"{report['scale_downs']:,}"),
        ("attrition", _attrition(report)),
        ("migration", _migration(report)),
        ("scheduler scoring", sim["scheduler_scoring"]),
        (
            "busy terminations refused / pods lost",
            f"{report['safety']['busy_terminations_refused']:,} / {report['safety']['pods_lost']:,}",
        ),
    ]
    for name, g in report["groups"].items():
        cost = f", ${g['cost']:,.2f}" if g["cost"] is not None else ""
        rows.append(
            (
                f"group {name}",
                f"{_number(g['node_hours'])} node-h{cost}, peak {g['peak_nodes']} nodes, "
                f"+{g['nodes_launched']} -{g['scale_downs']}",
            )
        )
    rows += [
        ("simulated span", f"{_duration(report['span']['seconds'])} from {report['span']['start']}"),
        ("wall time", f"{sim['wall_seconds']:.2f}s ({_number(sim['jobs_per_second'])} jobs/s)"),
        ("planner runs / skipped", f"{sim['planner_runs']:,} / {sim['reconciles_skipped']:,}"),
        ("stalled", _stalled(sim["stalled"])),
    ]
    if "faults" in report:
        rows += _fault_rows(report["faults"], gpu)
    return rows


def _stalled(stalled: bool) -> str:
    if not stalled:
        return "no"
    return "yes: gave up, no job running or to arrive and no progress for the stall limit"


def _fault_rows(faults: dict[str, Any], gpu: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("idle: on broken nodes", _number(gpu["idle_broken_nodes"])),
        ("GPU faults / nodes repaired", f"{faults['faults']:,} / {faults['repaired']:,}"),
        ("jobs restarted", f"{faults['jobs_restarted']:,}"),
        ("GPU-hours lost work (in used)", _number(faults["gpu_hours_lost_work"])),
        ("GPU-hours on broken nodes", _number(faults["gpu_hours_on_broken_nodes"])),
        ("repair paused", _repair_paused(faults)),
    ]


def _repair_paused(faults: dict[str, Any]) -> str:
    """How long repair's circuit breaker held broken nodes, and why (it is not a replay's fault)."""
    if not faults["repair_paused"]:
        return "never"
    groups = ", ".join(f"{name} {_duration(p['seconds'])}" for name, p in faults["repair_paused"].items())
    return (
        f"{groups}, {faults['repair_paused_nodes']:,} broken node(s) kept: more than "
        f"{faults['max_unhealthy_fraction']:.0%} of the group's nodes unhealthy at once "
        "(policy.repair.max_unhealthy_fraction)"
    )


def _attrition(report: dict[str, Any]) -> str:
    attrition = report["attrition"]
    if not attrition["enabled"]:
        return "off"
    return f"{attrition['effect']}: {attrition['marks']:,} marks, {attrition['unmarks']:,} lifted"


def _migration(report: dict[str, Any]) -> str:
    moved = report["migration"]
    if not moved["enabled"]:
        return "off"
    return (
        f"{moved['migrations']:,} nodes emptied, {_number(moved['gpu_hours_lost'])} GPU-h lost, "
        f"{moved['jobs_moved']:,} jobs moved ({moved['jobs_moved_more_than_once']:,} more than once, "
        f"at most {moved['most_moves_of_a_job']}), restart delay p95 {_duration(moved['restart_delay_p95'])}"
    )


def report_table(reports: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """One column per report (`--compare` prints `compare_table` instead: one figure a row)."""
    columns = [dict(_rows(report)) for _, report in reports]
    groups: list[str] = []
    for column in columns:
        groups += [label for label in column if label.startswith("group ") and label not in groups]
    first = [label for label in columns[0] if not label.startswith("group ")]
    split = first.index("simulated span")
    labels = first[:split] + groups + first[split:]
    header = ["", *(title for title, _ in reports)]
    table = [header] + [[label, *(col.get(label, "-") for col in columns)] for label in labels]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = []
    for index, row in enumerate(table):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)
