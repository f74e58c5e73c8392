"""The `simulate --compare` table: one figure per row, baseline, candidate and the change, in 120 columns.

Waits and spans read as durations (`+1m30s`), GPU-hours and costs as numbers; every row is one figure,
so no cell holds several and the table stays narrow whatever the configs' names (they are named once,
above it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shared.domain.durations import short_duration
from shared.local.sim.report import _at_path, difference

WIDTH = 120

Figure = tuple[str, tuple[str, ...], str]  # label, path in the report, kind (how it is printed)

_FIGURES: tuple[Figure, ...] = (
    ("jobs started", ("jobs_started",), "count"),
    ("jobs not started", ("jobs_not_started", "total"), "count"),
    ("jobs", ("jobs",), "count"),
    ("wait mean", ("wait_seconds", "mean"), "duration"),
    ("wait p50", ("wait_seconds", "p50"), "duration"),
    ("wait p95", ("wait_seconds", "p95"), "duration"),
    ("wait p99", ("wait_seconds", "p99"), "duration"),
    ("wait max", ("wait_seconds", "max"), "duration"),
    ("GPU-h provisioned", ("gpu_hours", "provisioned"), "number"),
    ("GPU-h used", ("gpu_hours", "used"), "number"),
    ("GPU-h ideal", ("gpu_hours", "ideal"), "number"),
    ("idle GPU-h booting", ("gpu_hours", "idle_booting"), "number"),
    ("idle GPU-h empty nodes", ("gpu_hours", "idle_empty_nodes"), "number"),
    ("idle GPU-h fragmented", ("gpu_hours", "idle_fragmented"), "number"),
    ("idle GPU-h held by marks", ("gpu_hours", "idle_held_by_marks"), "number"),
    ("provisioned / ideal", ("provisioned_over_ideal",), "ratio"),
    ("node-hours", ("node_hours",), "number"),
    ("cost", ("cost",), "money"),
    ("scale-ups", ("scale_ups",), "count"),
    ("nodes launched", ("nodes_launched",), "count"),
    ("scale-downs (nodes)", ("scale_downs",), "count"),
    ("attrition marks", ("attrition", "marks"), "count"),
    ("attrition lifts", ("attrition", "unmarks"), "count"),
    ("busy terminations refused", ("safety", "busy_terminations_refused"), "count"),
    ("pods lost", ("safety", "pods_lost"), "count"),
)
_FAULTS: tuple[Figure, ...] = (
    ("idle GPU-h broken nodes", ("gpu_hours", "idle_broken_nodes"), "number"),
    ("GPU faults", ("faults", "faults"), "count"),
    ("nodes repaired", ("faults", "repaired"), "count"),
    ("jobs restarted", ("faults", "jobs_restarted"), "count"),
    ("GPU-h lost work", ("faults", "gpu_hours_lost_work"), "number"),
    ("GPU-h on broken nodes", ("faults", "gpu_hours_on_broken_nodes"), "number"),
    ("repair paused", ("faults", "repair_paused_seconds"), "duration"),
)
_CLOSING: tuple[Figure, ...] = (
    ("simulated span", ("span", "seconds"), "duration"),
    ("wall time", ("simulation", "wall_seconds"), "seconds"),
    ("planner runs", ("simulation", "planner_runs"), "count"),
    ("stalled", ("simulation", "stalled"), "flag"),
)


def _signed_duration(seconds: float) -> str:
    return ("-" if seconds < 0 else "+") + short_duration(abs(seconds))


_VALUE: dict[str, Callable[[float], str]] = {
    "count": lambda v: f"{v:,.0f}",
    "number": lambda v: f"{v:,.2f}",
    "ratio": lambda v: f"{v:.3f}",
    "money": lambda v: f"${v:,.2f}",
    "duration": short_duration,
    "seconds": lambda v: f"{v:.2f}s",
    "flag": lambda v: "yes" if v else "no",
}
_CHANGE: dict[str, Callable[[float], str]] = {
    "count": lambda v: f"{v:+,.0f}",
    "number": lambda v: f"{v:+,.2f}",
    "ratio": lambda v: f"{v:+.3f}",
    "money": lambda v: f"{'-' if v < 0 else '+'}${abs(v):,.2f}",
    "duration": _signed_duration,
    "seconds": lambda v: f"{v:+.2f}s",
}


def _group_figures(baseline: dict[str, Any], candidate: dict[str, Any]) -> list[Figure]:
    names = list(baseline["groups"]) + [g for g in candidate["groups"] if g not in baseline["groups"]]
    return [
        (f"{name} {label}", ("groups", name, key), kind)
        for name in names
        for label, key, kind in (("node-hours", "node_hours", "number"), ("cost", "cost", "money"),
                                 ("peak nodes", "peak_nodes", "count"))
    ]  # fmt: skip


def _row(figure: Figure, baseline: dict[str, Any], candidate: dict[str, Any]) -> list[str]:
    label, path, kind = figure
    base, cand = _at_path(baseline, path), _at_path(candidate, path)
    diff, percent = difference(base, cand)
    if kind == "flag":  # yes or no: no difference to print
        diff = percent = None
    change = "-" if diff is None else _CHANGE[kind](diff)
    if percent is not None:
        change += f" ({percent:+.1f}%)"
    shown = ["-" if v is None else _VALUE[kind](v) for v in (base, cand)]
    return [label[:30], *shown, change]


def compare_table(baseline: tuple[str, dict[str, Any]], candidate: tuple[str, dict[str, Any]]) -> str:
    """Baseline and candidate side by side, one figure a row, with the candidate's change."""
    (base_title, base), (cand_title, cand) = baseline, candidate
    faults = _FAULTS if "faults" in base or "faults" in cand else ()
    figures = [*_FIGURES, *faults, *_group_figures(base, cand), *_CLOSING]
    table = [["", "baseline", "candidate", "change"]]
    table += [_row(f, base, cand) for f in figures]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = [f"baseline: {base_title}"[:WIDTH], f"candidate: {cand_title}"[:WIDTH], ""]
    for index, row in enumerate(table):
        cells = [
            row[0].ljust(widths[0]),
            *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)),
        ]
        lines.append("  ".join(cells).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths))
    return "\n".join(lines)
