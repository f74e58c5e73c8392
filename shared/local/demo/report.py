"""The demo's figures (`report.json`), the closing summary, and the plot.

Measured from the world (what AWS and the cluster saw), not from the scaler's own account: waits from
pod creation to the job's start, GPU-hours provisioned from each instance's launch to its termination,
GPU-hours used from each job's run, scale-ups from the groups' desired capacity as AWS reported it.
Cordons, terminations and backoffs are counted from the functions' action records. A decrease of
desired capacity by more than the instances that left with it counts as "set back" (cancelled
launches: the capacity backoff).

report.json (times in seconds, GPU-hours rounded to 0.01):

    passed, failures[]                 the exit status and why it is not 0
    jobs: {total, ran, lost, never_started}
    wait_seconds: {p50, p95, max}      nearest-rank percentiles over the jobs that started
    gpu_hours: {provisioned, used, utilisation}, cost
    scale: {scale_ups, nodes_requested, desired_set_back, cordons, uncordons, terminations,
            terminations_skipped, nodes_deleted, marks, unmarks}   marks: attrition taints put on / lifted
    capacity: {launch_failures, backoffs, backoffs_already_running}
    safety: {instances_terminated, busy_terminations[]}
    groups: {name: {nodes_launched, peak_instances, gpu_hours_provisioned, gpu_hours_used, cost, jobs}}
    provisioning_requests: {name: {state, expected, answer}}   admitted, rejected or pending, the state
                                                     the scenario expects, and the deciding condition
    gpu_faults: {injected, repaired, nodes[]}        the scenario's GPU fault and the scaler's repair of it
    invocations: {"<function>/<trigger>": count}, invocation_errors[], mean_invocation_ms
    simulated_seconds, wall_seconds, speed
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypedDict

from shared.config import ScalerConfig
from shared.local.demo.faults import GpuFaults
from shared.local.demo.functions import Invocations
from shared.local.demo.scenario import Scenario
from shared.local.demo.timeline import Decision
from shared.local.demo.world import Sample, World
from shared.local.sim.report import percentile
from shared.reporting import ActionKind, ActionStatus

HOUR = 3600.0


@dataclass
class GroupFigures:
    nodes_launched: int = 0
    peak_instances: int = 0
    gpu_hours_provisioned: float = 0.0
    gpu_hours_used: float = 0.0
    cost: float = 0.0
    jobs: int = 0


@dataclass
class DemoReport:
    scenario: str
    jobs: int
    jobs_ran: int
    jobs_lost: int
    jobs_never_started: int
    waits: list[int]
    gpu_hours_provisioned: float
    gpu_hours_used: float
    cost: float
    scale_ups: int
    nodes_requested: int
    desired_set_back: int
    cordons: int
    uncordons: int
    terminations: int
    terminations_skipped: int
    nodes_deleted: int
    launch_failures: int
    backoffs: int
    backoffs_already_running: int
    instances_terminated: int
    busy_terminations: list[str]
    groups: dict[str, GroupFigures]
    invocations: dict[str, int]
    invocation_errors: list[str]
    mean_invocation_ms: float
    simulated_seconds: float
    wall_seconds: float
    speed: float
    failures: list[str] = field(default_factory=list)
    # ProvisioningRequests of the queue: name -> (state, the condition that decided it)
    requests: dict[str, tuple[str, str]] = field(default_factory=dict)
    expected: dict[str, str] = field(default_factory=dict)  # name -> the state the scenario expects
    marks: int = 0  # consolidation by attrition: taints put on
    unmarks: int = 0  # and lifted
    faulted_nodes: list[str] = field(default_factory=list)  # nodes whose GPU failed (faults.py)
    repaired_nodes: list[str] = field(default_factory=list)  # those the functions terminated

    @property
    def passed(self) -> bool:
        return not self.failures

    def wait(self, p: float) -> int | None:
        return percentile(self.waits, p)

    def to_json(self) -> dict[str, Any]:
        utilisation = self.gpu_hours_used / self.gpu_hours_provisioned if self.gpu_hours_provisioned else None
        return {
            "scenario": self.scenario,
            "passed": self.passed,
            "failures": list(self.failures),
            "jobs": {
                "total": self.jobs,
                "ran": self.jobs_ran,
                "lost": self.jobs_lost,
                "never_started": self.jobs_never_started,
            },
            "wait_seconds": {
                "p50": self.wait(50),
                "p95": self.wait(95),
                "max": self.waits[-1] if self.waits else None,
            },
            "gpu_hours": {
                "provisioned": round(self.gpu_hours_provisioned, 2),
                "used": round(self.gpu_hours_used, 2),
                "utilisation": round(utilisation, 3) if utilisation is not None else None,
            },
            "cost": round(self.cost, 2),
            "scale": self._scale_json(),
            "capacity": {
                "launch_failures": self.launch_failures,
                "backoffs": self.backoffs,
                "backoffs_already_running": self.backoffs_already_running,
            },
            "safety": {
                "instances_terminated": self.instances_terminated,
                "busy_terminations": list(self.busy_terminations),
            },
            "groups": {name: _group_json(g) for name, g in self.groups.items()},
            "provisioning_requests": {
                name: {"state": state, "expected": self.expected.get(name), "answer": answer}
                for name, (state, answer) in self.requests.items()
            },
            "gpu_faults": {
                "injected": len(self.faulted_nodes),
                "repaired": len(self.repaired_nodes),
                "nodes": list(self.faulted_nodes),
            },
            "invocations": dict(self.invocations),
            "invocation_errors": list(self.invocation_errors),
            "mean_invocation_ms": round(self.mean_invocation_ms, 1),
            "simulated_seconds": round(self.simulated_seconds),
            "wall_seconds": round(self.wall_seconds, 1),
            "speed": self.speed,
        }

    def _scale_json(self) -> dict[str, int]:
        return {
            "scale_ups": self.scale_ups,
            "nodes_requested": self.nodes_requested,
            "desired_set_back": self.desired_set_back,
            "cordons": self.cordons,
            "uncordons": self.uncordons,
            "terminations": self.terminations,
            "terminations_skipped": self.terminations_skipped,
            "nodes_deleted": self.nodes_deleted,
            "marks": self.marks,
            "unmarks": self.unmarks,
        }


def _group_json(g: GroupFigures) -> dict[str, Any]:
    return {
        "nodes_launched": g.nodes_launched,
        "peak_instances": g.peak_instances,
        "gpu_hours_provisioned": round(g.gpu_hours_provisioned, 2),
        "gpu_hours_used": round(g.gpu_hours_used, 2),
        "cost": round(g.cost, 2),
        "jobs": g.jobs,
    }


def build_report(
    *,
    scenario: Scenario,
    config: ScalerConfig,
    start: datetime,
    end: datetime,
    world: World,
    decisions: Sequence[Decision],
    invocations: Invocations,
    wall_seconds: float,
    speed: float,
    requests: Mapping[str, tuple[str, str]] | None = None,
    faults: GpuFaults | None = None,
) -> DemoReport:
    """The run's figures and verdict (`requests`: the queue's ProvisioningRequests; admitted ones count,
    and each must end as the scenario expects)."""
    requests = dict(requests or {})
    admitted = sum(1 for state, _ in requests.values() if state == "admitted")
    groups = _fleet_figures(config, world, end)
    runs = list(world.jobs.values())
    waits = sorted(int(r.wait_seconds) for r in runs if r.wait_seconds is not None)
    used = _job_figures(world, groups, end)
    ups = [c.after - c.before for c in world.desired_changes if c.after > c.before]
    terminated = [i for i in world.instances.values() if i.terminated_at is not None]
    calls = invocations.calls
    report = DemoReport(
        scenario=scenario.name,
        jobs=len(scenario.jobs) + admitted,
        jobs_ran=sum(1 for r in runs if r.finished_at is not None and not r.lost),
        jobs_lost=sum(1 for r in runs if r.lost),
        jobs_never_started=len(scenario.jobs) + admitted - sum(1 for r in runs if r.started_at is not None),
        waits=waits,
        gpu_hours_provisioned=sum(g.gpu_hours_provisioned for g in groups.values()),
        gpu_hours_used=used,
        cost=sum(g.cost for g in groups.values()),
        scale_ups=len(ups),
        nodes_requested=sum(ups),
        desired_set_back=sum(1 for c in world.desired_changes if c.set_back),
        launch_failures=sum(world.launch_failures_emitted.values()),
        **_action_counts(decisions),
        instances_terminated=len(terminated),
        busy_terminations=_busy_terminations(world),
        groups=groups,
        invocations=dict(sorted(Counter(f"{c.function}/{c.trigger}" for c in calls).items())),
        invocation_errors=[
            f"{c.function}/{c.trigger} at {c.at.isoformat()}: {c.error}" for c in invocations.errors
        ],
        mean_invocation_ms=1000 * sum(c.wall_seconds for c in calls) / len(calls) if calls else 0.0,
        simulated_seconds=(end - start).total_seconds(),
        wall_seconds=wall_seconds,
        speed=speed,
    )
    report.requests = requests
    report.expected = {r.name: r.expected for r in scenario.requests}
    _note_repairs(report, faults, decisions)
    report.failures = failures_of(report)
    return report


def _busy_terminations(world: World) -> list[str]:
    """The terminated instances that still ran pods, with those pods."""
    return [
        f"{i.instance_id} ({i.node_name}): {', '.join(i.busy_at_termination)}"
        for i in world.instances.values()
        if i.terminated_at is not None and i.busy_at_termination
    ]


def _note_repairs(report: DemoReport, faults: GpuFaults | None, decisions: Sequence[Decision]) -> None:
    """The nodes whose GPU failed, and those of them the functions terminated (repair owns a broken
    node: no other rule terminates it)."""
    if faults is None:
        return
    terminated = {
        d.action.target
        for d in decisions
        if d.action.kind is ActionKind.TERMINATE and d.action.status is ActionStatus.DONE
    }
    faulted = [f.instance.node_name for f in faults.faulted]
    repaired = [
        f.instance.node_name
        for f in faults.faulted
        if f.repaired and {f.instance.node_name, f.instance.instance_id} & terminated
    ]
    report.faulted_nodes, report.repaired_nodes = faulted, repaired


def _fleet_figures(config: ScalerConfig, world: World, end: datetime) -> dict[str, GroupFigures]:
    """Per group: nodes launched, peak instances, GPU-hours provisioned and their on-demand cost."""
    prices = {g.name: g.price_per_hour or 0.0 for g in config.node_groups}
    groups = {name: GroupFigures() for name in world.group_names}
    for instance in world.instances.values():
        figures = groups[instance.group.name]
        figures.nodes_launched += 1
        hours = ((instance.terminated_at or end) - instance.launched_at).total_seconds() / HOUR
        figures.gpu_hours_provisioned += hours * instance.group.gpus
        figures.cost += hours * prices[instance.group.name]
    for name, peak in world.peak_instances.items():
        groups[name].peak_instances = peak
    return groups


def _job_figures(world: World, groups: dict[str, GroupFigures], end: datetime) -> float:
    """Adds each group's jobs and GPU-hours used; returns the GPU-hours all jobs used."""
    used = 0.0
    for run in world.jobs.values():
        if run.started_at is None:
            continue
        hours = ((run.finished_at or end) - run.started_at).total_seconds() / HOUR
        used += hours * run.job.total_gpus
        for group in run.groups:
            groups[group].jobs += 1
        for node, gpus in zip(run.nodes, run.node_gpus, strict=True):
            node_group = world.group_of_node_name(node)
            if node_group in groups:
                groups[node_group].gpu_hours_used += hours * gpus
    return used


class _ActionCounts(TypedDict):
    cordons: int
    uncordons: int
    terminations: int
    terminations_skipped: int
    nodes_deleted: int
    marks: int
    unmarks: int
    backoffs: int
    backoffs_already_running: int


def _action_counts(decisions: Sequence[Decision]) -> _ActionCounts:
    """The report's counts of the controller's actions, by kind and status."""
    done = Counter((d.action.kind, d.action.status) for d in decisions)
    return {
        "cordons": done[(ActionKind.CORDON, ActionStatus.DONE)],
        "uncordons": done[(ActionKind.UNCORDON, ActionStatus.DONE)],
        "terminations": done[(ActionKind.TERMINATE, ActionStatus.DONE)],
        "terminations_skipped": done[(ActionKind.TERMINATE, ActionStatus.SKIPPED)],
        "nodes_deleted": done[(ActionKind.DELETE_NODE, ActionStatus.DONE)],
        "marks": done[(ActionKind.MARK, ActionStatus.DONE)],
        "unmarks": done[(ActionKind.UNMARK, ActionStatus.DONE)],
        "backoffs": done[(ActionKind.BACKOFF, ActionStatus.DONE)],
        "backoffs_already_running": done[(ActionKind.BACKOFF, ActionStatus.SKIPPED)],
    }


def failures_of(report: DemoReport) -> list[str]:
    """Why the run did not pass, one line each (none: it passed)."""
    out = []
    if report.jobs_ran < report.jobs:
        out.append(
            f"{report.jobs - report.jobs_ran} of {report.jobs} jobs did not run to completion "
            f"({report.jobs_never_started} never started, {report.jobs_lost} lost with their node)"
        )
    if report.busy_terminations:
        out.append(
            f"{len(report.busy_terminations)} busy node(s) terminated: {'; '.join(report.busy_terminations)}"
        )
    if report.invocation_errors:
        out.append(f"{len(report.invocation_errors)} function invocation(s) failed")
    unanswered = sorted(
        name
        for name, (state, _) in report.requests.items()
        if state not in ("admitted", "rejected", "pending")
    )
    if unanswered:
        out.append(f"{len(unanswered)} provisioning request(s) never answered: {', '.join(unanswered)}")
    unexpected = sorted(
        f"{name} ended {state}, expected {report.expected[name]}"
        for name, (state, _) in report.requests.items()
        if name in report.expected and name not in unanswered and state != report.expected[name]
    )
    if unexpected:
        out.append(f"{len(unexpected)} provisioning request(s) answered otherwise: {'; '.join(unexpected)}")
    unrepaired = sorted(set(report.faulted_nodes) - set(report.repaired_nodes))
    if unrepaired:
        out.append(f"{len(unrepaired)} node(s) with a GPU fault never repaired: {', '.join(unrepaired)}")
    return out


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def summary_lines(report: DemoReport) -> list[str]:
    """The closing summary, one figure per line."""
    rows = _run_rows(report) + _group_rows(report) + _closing_rows(report)
    width = max(len(label) for label, _ in rows)
    lines = ["", "summary"]
    lines += [f"  {label:<{width}}  {value}" for label, value in rows]
    lines.append("")
    if report.passed:
        lines.append("PASSED: every job ran, no busy node was terminated, no invocation failed")
    else:
        lines += [f"FAILED: {reason}" for reason in report.failures]
    return lines


def _run_rows(report: DemoReport) -> list[tuple[str, str]]:
    """Jobs, waits, GPU-hours, cost, scaling, marks and capacity failures."""
    gpu = report.to_json()["gpu_hours"]
    utilisation = f" ({gpu['utilisation']:.0%} used)" if gpu["utilisation"] is not None else ""
    longest = report.waits[-1] if report.waits else None
    return [
        (
            "jobs",
            f"{report.jobs_ran}/{report.jobs} ran to completion "
            f"({report.jobs_never_started} never started, {report.jobs_lost} lost)",
        ),
        (
            "wait p50 / p95 / max",
            f"{_duration(report.wait(50))} / {_duration(report.wait(95))} / {_duration(longest)}",
        ),
        ("GPU-hours provisioned / used", f"{gpu['provisioned']:.2f} / {gpu['used']:.2f}{utilisation}"),
        ("cost (on-demand prices)", f"${report.cost:,.2f}"),
        (
            "scale-ups",
            f"{report.scale_ups} (+{report.nodes_requested} nodes asked for); "
            f"desired set back {report.desired_set_back}x",
        ),
        (
            "scale-downs",
            f"{report.cordons} cordoned, {report.uncordons} uncordoned, {report.terminations} terminated "
            f"({report.terminations_skipped} skipped on re-validation)",
        ),
        (
            "attrition marks",
            f"{report.marks} put on, {report.unmarks} lifted (new pods steered off the nodes cheapest to "
            "empty; nothing evicted)",
        ),
        (
            "GPU faults repaired",
            f"{len(report.repaired_nodes)} of {len(report.faulted_nodes)} "
            f"({', '.join(report.faulted_nodes) or 'none injected'}: AcceleratedHardwareReady=False, "
            "replaced by the scaler's node repair)",
        ),
        (
            "capacity failures handled",
            f"{report.launch_failures} launch failure event(s) -> {report.backoffs} backoff(s) "
            f"(+{report.backoffs_already_running} inside a running backoff)",
        ),
    ]


def _group_rows(report: DemoReport) -> list[tuple[str, str]]:
    """One row per group, then the ProvisioningRequests' states."""
    rows: list[tuple[str, str]] = []
    for name, g in report.groups.items():
        rows.append(
            (
                f"group {name}",
                f"{g.nodes_launched} nodes launched (peak {g.peak_instances}), {g.jobs} jobs, "
                f"{g.gpu_hours_provisioned:.2f} GPU-h provisioned / {g.gpu_hours_used:.2f} used, "
                f"${g.cost:,.2f}",
            )
        )
    if report.requests:
        states = Counter(state for state, _ in report.requests.values())
        rows.append(
            (
                "provisioning requests",
                ", ".join(f"{count} {state}" for state, count in sorted(states.items()))
                + " (Kueue-style: capacity first, then the pods)",
            )
        )
    return rows


def _closing_rows(report: DemoReport) -> list[tuple[str, str]]:
    """Safety, the function invocations, and the simulated and wall time."""
    busy = len(report.busy_terminations)
    return [
        ("busy nodes terminated", f"{busy} of {report.instances_terminated} terminated instances"),
        (
            "function invocations",
            ", ".join(f"{k}: {v}" for k, v in report.invocations.items())
            + f"; mean {report.mean_invocation_ms:.0f} ms; {len(report.invocation_errors)} failed",
        ),
        (
            "time",
            f"{_duration(report.simulated_seconds)} simulated in {report.wall_seconds:.1f}s wall",
        ),
    ]


def write_plot(path: Path, samples: Sequence[Sample], groups: Sequence[str], *, title: str) -> None:
    """Pending, provisioned and busy GPUs over time, all groups then one panel per group (sim.plot)."""
    from shared.local.sim.engine import Series
    from shared.local.sim.plot import write_plot as plot_series

    series = Series(tuple(groups))
    for sample in samples:
        series.times.append(int(sample.at.timestamp()))
        series.pending.append(sample.pending_gpus)
        series.provisioned.append([sample.provisioned[g] for g in groups])
        series.busy.append([sample.busy[g] for g in groups])
        series.idle.append(sample.idle)
    plot_series(path, series, title=title)
