"""`plot.png`: pending, provisioned and busy GPUs over time (all groups, then one panel per group).

matplotlib is an optional dependency (`pip install 'backlog-scaler[plot]'`), imported only here and
only when a plot is asked for, so nothing the Lambda functions import pulls it in.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from shared.domain.errors import InputError
from shared.local.sim.engine import Series, at

MAX_POINTS = 4000  # per line: long traces are reduced to the peak of each time bucket


def _reduce(times: list[int], values: list[int], limit: int = MAX_POINTS) -> tuple[list[datetime], list[int]]:
    """At most about `limit` step points, keeping each bucket's maximum so peaks stay visible."""
    if len(times) <= limit:
        return [at(t) for t in times], list(values)
    span = max(1, times[-1] - times[0])
    width = span / limit
    out_t: list[datetime] = []
    out_v: list[int] = []
    bucket = -1
    for t, v in zip(times, values, strict=True):
        b = int((t - times[0]) / width)
        if b != bucket:
            bucket = b
            out_t.append(at(t))
            out_v.append(v)
        elif v > out_v[-1]:
            out_v[-1] = v
    return out_t, out_v


def write_plot(
    path: str | Path, series: Series | list[tuple[str, Series]], *, title: str = "backlog-scaler simulate"
) -> None:
    """Write a PNG; with several (label, series) the totals are overlaid for comparison."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InputError("plot: matplotlib is not installed (pip install 'backlog-scaler[plot]')") from exc

    runs = series if isinstance(series, list) else [("", series)]
    group_names = list(runs[0][1].groups) if len(runs[0][1].groups) > 1 else []
    panels = 1 + len(group_names)
    fig, axes = plt.subplots(panels, 1, figsize=(12, 3.2 * panels), sharex=True, squeeze=False)
    styles = ("-", "--", ":")
    for run_index, (label, run) in enumerate(runs):
        if not run.times:
            continue
        style = styles[run_index % len(styles)]
        suffix = f" ({label})" if label else ""
        provisioned = [sum(row) for row in run.provisioned]
        busy = [sum(row) for row in run.busy]
        ax = axes[0][0]
        for values, name, color in (
            (run.pending, "pending GPUs", "tab:red"),
            (provisioned, "provisioned GPUs", "tab:blue"),
            (busy, "busy GPUs", "tab:green"),
        ):
            xs, ys = _reduce(run.times, values)
            ax.step(xs, ys, where="post", linestyle=style, color=color, linewidth=0.8, label=name + suffix)
        for panel, group in enumerate(group_names, start=1):
            if group not in run.groups:
                continue
            index = run.groups.index(group)
            ax = axes[panel][0]
            for values, name, color in (
                ([row[index] for row in run.provisioned], "provisioned GPUs", "tab:blue"),
                ([row[index] for row in run.busy], "busy GPUs", "tab:green"),
            ):
                xs, ys = _reduce(run.times, values)
                ax.step(
                    xs, ys, where="post", linestyle=style, color=color, linewidth=0.8, label=name + suffix
                )
            ax.set_title(f"group {group}", fontsize=9)
    axes[0][0].set_title(f"{title}: all groups", fontsize=10)
    for row in axes:
        row[0].set_ylabel("GPUs")
        row[0].legend(loc="upper left", fontsize=7)
        row[0].grid(alpha=0.3)
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
