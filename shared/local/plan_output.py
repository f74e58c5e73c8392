"""A Plan as JSON (for tools) and as an aligned table (for people)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from shared.domain.plan import GroupDecision, NodeMark, Outcome, Plan, RepairDecision, Termination
from shared.local.explain import GroupSummary, PodExplanation


def plan_to_json(plan: Plan) -> dict[str, Any]:
    """The documented JSON form of `backlog-scaler plan --format json`."""
    return {
        "groups": [_group_json(g) for g in plan.groups],
        "cordon": [a.node for a in plan.cordon],
        "uncordon": [a.node for a in plan.uncordon],
        "terminate": [_termination_json(t) for t in plan.terminate],
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
        "mark": [_mark_json(m) for m in plan.mark],
        "unmark": [_mark_json(m) for m in plan.unmark],
        "repair": [_repair_json(r) for r in plan.repair],
        "repair_paused": list(plan.repair_paused),
        "rotate": [
            {"node": r.node, "group": r.group, "cause": str(r.cause), "action": r.action, "reason": r.reason}
            for r in plan.rotate
        ],
        "migrate": [
            {
                "node": m.node,
                "group": m.group,
                "pods": list(m.pods),
                "lost_gpu_seconds": m.lost_gpu_seconds,
                "saved_gpu_seconds": m.saved_gpu_seconds,
                "reason": m.reason,
            }
            for m in plan.migrate
        ],
        "provisioning_requests": [
            {
                "name": a.request,
                "class": a.class_name,
                "outcome": str(a.outcome),
                "group": a.group,
                "nodes": a.nodes,
                "reason": a.reason,
            }
            for a in plan.provisioning_requests
        ],
    }


def _group_json(g: GroupDecision) -> dict[str, Any]:
    return {
        "name": g.name,
        "asg_name": g.asg_name,
        "current_desired": g.current_desired,
        "desired": g.desired,
        "current_desired_units": g.current_desired_units,
        "desired_units": g.desired_units,
        "min_size": g.min_size,
        "max_size": g.max_size,
        "reason": g.reason,
    }


def _termination_json(t: Termination) -> dict[str, Any]:
    return {
        "node": t.node,
        "instance_id": t.instance_id,
        "group": t.group,
        "reason": t.reason,
        "decrement": t.decrement,
        "cause": t.cause or "scale-down",
    }


def _repair_json(r: RepairDecision) -> dict[str, Any]:
    return {
        "node": r.node,
        "group": r.group,
        "instance_id": r.instance_id,
        "condition": r.condition,
        "action": str(r.action),
        "reason": r.reason,
    }


def _mark_json(mark: NodeMark) -> dict[str, Any]:
    """An attrition mark (or its lift): the node, its group, the taint and why."""
    return {
        "node": mark.node,
        "group": mark.group,
        "taint": {"key": mark.key, "effect": str(mark.effect)},
        "reason": mark.reason,
    }


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def _price(summary: GroupSummary) -> str:
    per_gpu = summary.price_per_gpu
    if per_gpu is None:
        return "-" if summary.price_per_hour is None else f"${summary.price_per_hour:.2f}/node-h"
    return f"${per_gpu:.2f}"


def _group_facts(summary: GroupSummary) -> str:
    """Why a group is chosen or skipped, in the planner's order of reasons."""
    parts = [f"priority {summary.priority}"]
    per_gpu = summary.price_per_gpu
    if per_gpu is not None:
        parts.append(f"${per_gpu:.2f}/GPU-hour (${summary.price_per_hour:.2f}/h / {summary.gpus} GPUs)")
    else:
        parts.append("price per GPU unknown")
    parts.append(f"max size {summary.max_size}")
    if summary.backoff_until is not None:
        parts.append(f"backoff until {summary.backoff_until.isoformat()}")
    if summary.zones:
        parts.append(f"zones {', '.join(summary.zones)}")
    if summary.unavailable:
        parts.append(f"unavailable: {summary.unavailable}")
    return ", ".join(parts)


def _zones_line(summaries: Sequence[GroupSummary]) -> str | None:
    """Where each group launches: only a single-zone group takes zone-bound pods."""
    if not any(s.zones for s in summaries):
        return None
    return "Zones (zone-bound pods go only to single-zone groups): " + "; ".join(
        f"{s.name} {', '.join(s.zones) or 'unknown'}" for s in summaries
    )


def _order_line(summaries: Sequence[GroupSummary]) -> str:
    # plan_scale_up's order: priority tier (high first), then cost per GPU, then name.
    ranked = sorted(
        summaries,
        key=lambda s: (-s.priority, s.price_per_gpu is None, s.price_per_gpu or 0.0, s.name),
    )
    return "Groups are tried by priority tier (high first), then price per GPU: " + ", ".join(
        f"{s.name} (tier {s.priority}, {_price(s)})" for s in ranked
    )


def _fold(names: Sequence[str], limit: int | None) -> str:
    if limit is None or len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" ... and {len(names) - limit} more"


def plan_to_table(
    plan: Plan,
    groups: Sequence[GroupSummary] = (),
    *,
    show_all: bool = False,
    max_reasons: int = 10,
    max_pods: int = 5,
) -> str:
    """Groups (with the facts they were chosen or skipped on), actions, and every pending pod by
    name, grouped by outcome and reason. Long lists are folded unless `show_all`."""
    lines = _groups_section(plan, groups)
    lines += _actions_section(plan)
    lines += _lifecycle_section(plan)
    lines += _pods_section(plan, show_all=show_all, max_reasons=max_reasons, max_pods=max_pods)
    lines += _requests_section(plan)
    lines += _model_errors_section(plan)
    return "\n".join(lines)


def _groups_section(plan: Plan, groups: Sequence[GroupSummary]) -> list[str]:
    """GROUPS: each group's desired change and facts, then the order they are tried in, and zones."""
    summaries = {s.name: s for s in groups}
    lines = ["GROUPS"]
    rows = [["NAME", "ASG", "DESIRED", "MIN", "MAX", "PRIORITY", "$/GPU-H", "BACKOFF UNTIL", "REASON"]]
    for g in plan.groups:
        change = f"{g.current_desired} -> {g.desired}" if g.changed else str(g.desired)
        if g.desired_units is not None:
            # A weighted group: the units AWS shows (console, CLI) beside the nodes.
            units = (
                f"{g.current_desired_units} -> {g.desired_units}"
                if g.current_desired_units != g.desired_units
                else str(g.desired_units)
            )
            change += f" ({units} units)"
        summary = summaries.get(g.name)
        facts = (
            [
                str(summary.priority),
                _price(summary),
                summary.backoff_until.isoformat() if summary.backoff_until else "-",
            ]
            if summary
            else ["-", "-", "-"]
        )
        rows.append([g.name, g.asg_name, change, str(g.min_size), str(g.max_size), *facts, g.reason])
    lines += _table(rows)
    if summaries:
        ordered_summaries = [summaries[g.name] for g in plan.groups if g.name in summaries]
        lines.append(_order_line(ordered_summaries))
        zones = _zones_line(ordered_summaries)
        if zones:
            lines.append(zones)
    return lines


def _actions_section(plan: Plan) -> list[str]:
    """ACTIONS: uncordons, cordons, marks lifted and put on, migrations, terminations."""
    actions = [["ACTION", "NODE", "INSTANCE", "GROUP", "REASON"]]
    for a in plan.uncordon:
        actions.append(["uncordon", a.node, "-", a.group, a.reason])
    for a in plan.cordon:
        actions.append(["cordon", a.node, "-", a.group, a.reason])
    for m in plan.unmark:
        actions.append(["unmark", m.node, "-", m.group, m.reason])
    for m in plan.mark:
        actions.append([f"mark {m.effect}", m.node, "-", m.group, m.reason])
    for g in plan.migrate:
        actions.append(["migrate", g.node, "-", g.group, f"evict {', '.join(g.pods)}: {g.reason}"])
    for t in plan.terminate:
        verb = "terminate" if t.decrement else "replace"
        actions.append([verb, t.node or "-", t.instance_id, t.group, t.reason])
    return ["", "ACTIONS", *(_table(actions) if len(actions) > 1 else ["none"]), ""]


def _lifecycle_section(plan: Plan) -> list[str]:
    """REPAIR and ROTATE: what the plan does about unhealthy and outdated nodes (only when any)."""
    lines: list[str] = []
    if plan.repair:
        rows = [["NODE", "GROUP", "INSTANCE", "CONDITION", "ACTION", "REASON"]]
        for r in plan.repair:
            rows.append(
                [
                    r.node or "-",
                    r.group or "-",
                    r.instance_id or "-",
                    r.condition or "-",
                    str(r.action),
                    r.reason,
                ]
            )
        lines += ["REPAIR", *_table(rows)]
        if plan.repair_paused:
            lines.append(f"repair paused (alarm) in: {', '.join(plan.repair_paused)}")
        lines.append("")
    if plan.rotate:
        rows = [["NODE", "GROUP", "CAUSE", "ACTION", "REASON"]]
        rows += [[r.node, r.group, str(r.cause), r.action, r.reason] for r in plan.rotate]
        lines += ["ROTATE", *_table(rows), ""]
    return lines


def _pods_section(plan: Plan, *, show_all: bool, max_reasons: int, max_pods: int) -> list[str]:
    """PENDING PODS by outcome and reason, most pods first; folded unless `show_all`."""
    counts = Counter(p.outcome for p in plan.pods)
    summary_text = ", ".join(f"{counts[o]} {o}" for o in Outcome if counts[o])
    lines = [f"PENDING PODS ({len(plan.pods)}{': ' + summary_text if summary_text else ''})"]
    by_reason: dict[tuple[str, str, str], list[str]] = {}
    for p in plan.pods:
        by_reason.setdefault((str(p.outcome), p.group or "-", p.reason), []).append(p.pod)
    rank = {str(o): i for i, o in enumerate(Outcome)}
    ordered = sorted(by_reason.items(), key=lambda kv: (rank[kv[0][0]], -len(kv[1]), kv[0]))
    shown = ordered if show_all else ordered[:max_reasons]
    for (outcome, group, reason), pods in shown:
        lines.append(f"{len(pods)} {outcome}  group {group}: {reason}")
        lines.append(f"    {_fold(sorted(pods), None if show_all else max_pods)}")
    if len(shown) < len(ordered):
        rest = ordered[len(shown) :]
        folded = sum(len(p) for _, p in rest)
        lines.append(f"... and {len(rest)} more reasons ({folded} pods; use --all or --format json)")
    return lines


def _requests_section(plan: Plan) -> list[str]:
    """PROVISIONING REQUESTS and their answers (nothing when there are none)."""
    if not plan.provisioning_requests:
        return []
    rows = [["NAME", "CLASS", "OUTCOME", "GROUP", "NODES", "REASON"]]
    for answer in plan.provisioning_requests:
        rows.append(
            [
                answer.request,
                answer.class_name,
                str(answer.outcome),
                answer.group or "-",
                str(answer.nodes),
                answer.reason,
            ]
        )
    return ["", f"PROVISIONING REQUESTS ({len(plan.provisioning_requests)})", *_table(rows)]


def _model_errors_section(plan: Plan) -> list[str]:
    """MODEL ERRORS: fits the scheduler did not use (nothing when there are none)."""
    if not plan.model_errors:
        return []
    rows = [["POD", "NODE", "COUNTED SINCE", "SCHEDULER SAID"]]
    for e in plan.model_errors:
        rows.append([e.pod, e.node, e.since.isoformat(), e.message or "-"])
    return ["", "MODEL ERRORS (fits the scheduler did not use: no longer counted)", *_table(rows)]


def explanation_to_text(explanation: PodExplanation) -> str:
    """`plan --explain`: the pod's outcome, then each filter's verdict on every group's template node."""
    outcome = explanation.outcome
    if outcome is not None:
        where = f" in {outcome.group}" if outcome.group else ""
        lines = [f"POD {explanation.pod}: {outcome.outcome}{where} ({outcome.code}): {outcome.reason}"]
    elif explanation.node_name:
        lines = [f"POD {explanation.pod}: not pending (bound to {explanation.node_name})"]
    else:
        lines = [f"POD {explanation.pod}: not pending"]
    for group in explanation.groups:
        lines.append("")
        verdict = "fits" if group.fits else "refused"
        node = group.node or "no template node"
        lines.append(f"GROUP {group.summary.name} ({node}; {_group_facts(group.summary)}): {verdict}")
        if group.node is None:
            lines.append(f"    {group.summary.unavailable or 'node shape unknown'}")
        rows = [["FILTER", "VERDICT"]] + [[v.filter, v.reason or "pass"] for v in group.verdicts]
        if group.verdicts:
            lines += ["    " + line for line in _table(rows)]
    return "\n".join(lines)


def explanation_to_json(explanation: PodExplanation) -> dict[str, Any]:
    """`plan --explain --format json`: the pod's outcome and every filter's verdict, as the text says."""
    outcome = explanation.outcome
    return {
        "pod": explanation.pod,
        "pending": outcome is not None,
        "node_name": explanation.node_name,
        "outcome": None
        if outcome is None
        else {
            "outcome": str(outcome.outcome),
            "group": outcome.group,
            "code": str(outcome.code),
            "reason": outcome.reason,
        },
        "groups": [
            {
                "name": g.summary.name,
                "template_node": g.node,
                "fits": g.fits,
                "unavailable": g.summary.unavailable,
                "verdicts": [{"filter": v.filter, "reason": v.reason} for v in g.verdicts],
            }
            for g in explanation.groups
        ],
    }
