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


IDLE_CAUSES = (
    ("booting", "tab:orange"),
    ("empty nodes", "tab:gray"),
    ("fragmented (beside pods)", "tab:purple"),
    ("held by attrition marks", "tab:olive"),
    ("broken nodes (GPU fault)", "tab:red"),
)


def _group_names(runs: list[tuple[str, Series]]) -> list[str]:
    """Every group of every run, in first-seen order (a compared config may have other groups)."""
    names: list[str] = []
    for _, run in runs:
        names += [g for g in run.groups if g not in names]
    return names if len(names) > 1 or len(runs) > 1 else []


def _idle_panel(ax: object, label: str, run: Series) -> None:
    """Idle GPUs by cause as a stacked area (steps)."""
    if not run.idle:
        return
    columns = list(zip(*run.idle, strict=True))
    reduced = [_reduce(run.times, list(values)) for values in columns]
    xs = reduced[0][0]
    stacks = [values for _, values in reduced]
    # Each cause reduced on its own keeps its peaks; the bucket times are the same for all.
    length = min(len(xs), *(len(v) for v in stacks))
    ax.stackplot(  # type: ignore[attr-defined]
        xs[:length],
        *(v[:length] for v in stacks),
        labels=[name for name, _ in IDLE_CAUSES],
        colors=[color for _, color in IDLE_CAUSES],
        step="post",
        alpha=0.8,
    )
    suffix = f" ({label})" if label else ""
    ax.set_title(f"idle GPUs by cause{suffix}", fontsize=9)  # type: ignore[attr-defined]


# One palette per compared run (pending, provisioned, busy): a compared config differs from the first
# in colour as well as in line style, so the two read apart in print and for colour-blind readers.
RUN_PALETTES = (
    ("tab:red", "tab:blue", "tab:green"),
    ("tab:orange", "tab:purple", "tab:olive"),
    ("tab:pink", "tab:cyan", "tab:brown"),
)
RUN_STYLES = ("-", "--", ":")


def run_look(run_index: int) -> tuple[str, tuple[str, str, str]]:
    """The line style and the (pending, provisioned, busy) colours of the `run_index`-th run."""
    return RUN_STYLES[run_index % len(RUN_STYLES)], RUN_PALETTES[run_index % len(RUN_PALETTES)]


def write_plot(
    path: str | Path, series: Series | list[tuple[str, Series]], *, title: str = "backlog-scaler simulate"
) -> None:
    """Write a PNG: totals, idle GPUs by cause (one panel per run), then one panel per group.

    With several (label, series) the totals and the groups of every run are overlaid for comparison.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InputError("plot: matplotlib is not installed (pip install 'backlog-scaler[plot]')") from exc

    runs = series if isinstance(series, list) else [("", series)]
    group_names = _group_names(runs)
    panels = 1 + len(runs) + len(group_names)
    fig, axes = plt.subplots(panels, 1, figsize=(12, 3.2 * panels), sharex=True, squeeze=False)
    for run_index, (label, run) in enumerate(runs):
        if not run.times:
            continue
        style, (pending_color, provisioned_color, busy_color) = run_look(run_index)
        suffix = f" ({label})" if label else ""
        provisioned = [sum(row) for row in run.provisioned]
        busy = [sum(row) for row in run.busy]
        ax = axes[0][0]
        for values, name, color in (
            (run.pending, "pending GPUs", pending_color),
            (provisioned, "provisioned GPUs", provisioned_color),
            (busy, "busy GPUs", busy_color),
        ):
            xs, ys = _reduce(run.times, values)
            ax.step(xs, ys, where="post", linestyle=style, color=color, linewidth=0.8, label=name + suffix)
        _idle_panel(axes[1 + run_index][0], label, run)
        for panel, group in enumerate(group_names, start=1 + len(runs)):
            if group not in run.groups:
                continue
            index = run.groups.index(group)
            ax = axes[panel][0]
            for values, name, color in (
                ([row[index] for row in run.provisioned], "provisioned GPUs", provisioned_color),
                ([row[index] for row in run.busy], "busy GPUs", busy_color),
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
