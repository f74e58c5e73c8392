"""A Plan as JSON (for tools) and as an aligned table (for people)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from shared.domain.plan import Outcome, Plan


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The documented JSON form of `backlog-scaler plan --format json`."""
    return {
        "groups": [
            {
                "name": g.name,
                "asg_name": g.asg_name,
                "current_desired": g.current_desired,
                "desired": g.desired,
                "min_size": g.min_size,
                "max_size": g.max_size,
                "reason": g.reason,
            }
            for g in plan.groups
        ],
        "cordon": [a.node for a in plan.cordon],
        "uncordon": [a.node for a in plan.uncordon],
        "terminate": [
            {
                "node": t.node,
                "instance_id": t.instance_id,
                "group": t.group,
                "reason": t.reason,
                "decrement": t.decrement,
            }
            for t in plan.terminate
        ],
        "pods": [
            {
                "pod": p.pod,
                "outcome": str(p.outcome),
                "group": p.group,
                "reason": p.reason,
                "code": str(p.code),
            }
            for p in plan.pods
        ],
        "model_errors": [
            {"pod": e.pod, "node": e.node, "since": e.since.isoformat(), "scheduler_message": e.message}
            for e in plan.model_errors
        ],
    }


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def plan_to_table(plan: Plan, *, max_reasons: int = 10) -> str:
    """Groups, actions, and pods summarised by outcome and reason."""
    lines = ["GROUPS"]
    rows = [["NAME", "ASG", "DESIRED", "MIN", "MAX", "REASON"]]
    for g in plan.groups:
        change = f"{g.current_desired} -> {g.desired}" if g.changed else str(g.desired)
        rows.append([g.name, g.asg_name, change, str(g.min_size), str(g.max_size), g.reason])
    lines += _table(rows)
    actions = [["ACTION", "NODE", "INSTANCE", "GROUP", "REASON"]]
    for a in plan.uncordon:
        actions.append(["uncordon", a.node, "-", a.group, a.reason])
    for a in plan.cordon:
        actions.append(["cordon", a.node, "-", a.group, a.reason])
    for t in plan.terminate:
        verb = "terminate" if t.decrement else "replace"
        actions.append([verb, t.node or "-", t.instance_id, t.group, t.reason])
    lines.append("")
    lines.append("ACTIONS")
    lines += _table(actions) if len(actions) > 1 else ["none"]
    lines.append("")
    counts = Counter(p.outcome for p in plan.pods)
    summary = ", ".join(f"{counts[o]} {o}" for o in Outcome if counts[o])
    lines.append(f"PENDING PODS ({len(plan.pods)}{': ' + summary if summary else ''})")
    by_reason: Counter[tuple[str, str, str]] = Counter(
        (str(p.outcome), p.group or "-", p.reason) for p in plan.pods
    )
    if by_reason:
        rows = [["PODS", "OUTCOME", "GROUP", "REASON"]]
        for (outcome, group, reason), count in sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))[
            :max_reasons
        ]:
            rows.append([str(count), outcome, group, reason])
        lines += _table(rows)
        if len(by_reason) > max_reasons:
            lines.append(f"... and {len(by_reason) - max_reasons} more reasons (use --format json)")
    if plan.model_errors:
        lines.append("")
        lines.append("MODEL ERRORS (fits the scheduler did not use: no longer counted)")
        rows = [["POD", "NODE", "COUNTED SINCE", "SCHEDULER SAID"]]
        for e in plan.model_errors:
            rows.append([e.pod, e.node, e.since.isoformat(), e.message or "-"])
        lines += _table(rows)
    return "\n".join(lines)
