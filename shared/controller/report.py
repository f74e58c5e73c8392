"""Report: what a run did, as a result, metrics, pod Events and one operator notification."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from shared import constants
from shared.config import ScalerConfig
from shared.controller.applier import Applier
from shared.domain.model import AsgState, Pod
from shared.domain.operations import ClusterEvent, EventType, ObjectRef
from shared.domain.plan import Outcome, Plan, ReasonCode, RepairAction
from shared.ports import Notifier
from shared.reporting import ActionRecord, ActionStatus, Reporter

EVENT_REPEAT_SECONDS = 3600  # the same outcome is told to a pod again after this long
TRIGGERED_SCALE_UP = "TriggeredScaleUp"
# Outcomes that are not a verdict: the pod is left to the scheduler first.
QUIET_CODES = frozenset({ReasonCode.TOO_YOUNG, ReasonCode.PLACED})


class RunStatus(StrEnum):
    COMPLETED = "completed"
    LEASE_HELD = "lease-held"  # another run holds the lease and is doing the work
    IGNORED = "ignored"  # an AWS event about something that is not one of the cluster's groups


@dataclass(frozen=True, slots=True)
class GroupReport:
    name: str
    asg_name: str
    current_desired: int
    planned_desired: int
    desired: int  # after this run (what the group was left at)
    reason: str  # the plan's reason, incl. why the group did not shrink

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # every field is JSON as it stands


@dataclass(frozen=True)
class ReconcileResult:
    """What one controller call did; `to_json` is the functions' response body."""

    trigger: str
    status: RunStatus
    dry_run: bool
    started_at: datetime
    duration_seconds: float = 0.0
    actions: tuple[ActionRecord, ...] = ()
    groups: tuple[GroupReport, ...] = ()
    errors: tuple[str, ...] = ()
    pending_pods: int = 0
    detail: str = ""
    model_errors: int = 0  # fits the planner counted and the scheduler refuted (see Plan.model_errors)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def changed(self) -> bool:
        return any(a.status is ActionStatus.DONE for a in self.actions)

    @property
    def failed(self) -> tuple[ActionRecord, ...]:
        """The writes that failed on one object (isolated: the rest of the run went on)."""
        return tuple(a for a in self.actions if a.status is ActionStatus.FAILED)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "trigger": self.trigger,
            "status": str(self.status),
            "dry_run": self.dry_run,
            "started_at": self.started_at.isoformat(),
            "duration_seconds": round(self.duration_seconds, 3),
            "pending_pods": self.pending_pods,
            "model_errors": self.model_errors,
            "groups": [g.to_json() for g in self.groups],
            "actions": [a.to_json() for a in self.actions],
            "failed": [a.to_json() for a in self.failed],
            "errors": list(self.errors),
            "detail": self.detail,
        }


@dataclass
class Tally:
    """What a run changed, group by group: the report's figures and the state to remember."""

    decrements: Counter[str] = field(default_factory=Counter)  # instances removed with decrement
    removed: dict[str, set[str]] = field(default_factory=dict)  # instance ids terminated
    grown: Counter[str] = field(default_factory=Counter)  # nodes added
    backoffs: Counter[str] = field(default_factory=Counter)  # capacity failures recorded
    failed_groups: set[str] = field(default_factory=set)  # set-desired failed
    final: dict[str, AsgState] = field(default_factory=dict)  # the group after this run
    replaced: Counter[tuple[str, str]] = field(default_factory=Counter)  # (group, cause) -> repaired, rotated
    migrations: Counter[str] = field(default_factory=Counter)  # nodes emptied by migration
    migration_lost: Counter[str] = field(default_factory=Counter)  # GPU-seconds those moves cost

    def remove(self, group: str, instance_id: str, *, decrement: bool) -> None:
        self.removed.setdefault(group, set()).add(instance_id)
        if decrement:
            self.decrements[group] += 1

    def after_removals(self, group: str, asg: AsgState) -> AsgState:
        """The group as it stands after this run's terminations (as AWS will report it)."""
        return asg.after_terminations(frozenset(self.removed.get(group, ())), self.decrements[group])


def skipped(trigger: str, status: RunStatus, dry_run: bool, now: datetime, detail: str) -> ReconcileResult:
    """A run that did nothing: another holds the lease, or the event is not about this cluster."""
    return ReconcileResult(trigger, status, dry_run, now, detail=detail)


class PodEvents:
    """Tells pods why they wait: a Warning for pods nothing can help, a Normal when one grew a group.

    Deduplicated in memory (one instance per warm process): a pod hears the same reason again only
    after EVENT_REPEAT_SECONDS, or when its outcome changes. A cold start may repeat an event once;
    that is the price of not storing every pod's history.
    """

    def __init__(self) -> None:
        self._told: dict[str, tuple[str, datetime]] = {}  # pod uid -> (event reason, when told)

    def record(
        self, applier: Applier, plan: Plan, pods: tuple[Pod, ...], tally: Tally, now: datetime
    ) -> None:
        if applier.dry_run:
            return
        by_key = {p.key: p for p in pods}
        repeat = timedelta(seconds=EVENT_REPEAT_SECONDS)
        told: dict[str, tuple[str, datetime]] = {}
        events: list[ClusterEvent] = []
        for outcome in plan.pods:
            pod = by_key.get(outcome.pod)
            if pod is None:
                continue
            ref = ObjectRef("Pod", pod.name, pod.namespace, pod.uid)
            if outcome.outcome is Outcome.UNHELPED and outcome.code not in QUIET_CODES:
                event = ClusterEvent(ref, str(outcome.code), outcome.reason, EventType.WARNING)
            elif outcome.outcome is Outcome.SCALE_UP and outcome.group not in tally.failed_groups:
                message = f"triggered scale-up of node group {outcome.group}: {outcome.reason}"
                event = ClusterEvent(ref, TRIGGERED_SCALE_UP, message, EventType.NORMAL)
            else:
                continue
            key = pod.uid or pod.key
            last = self._told.get(key)
            if last is not None and last[0] == event.reason and now - last[1] < repeat:
                told[key] = last
                continue
            told[key] = (event.reason, now)
            events.append(event)
        self._told = told  # pods no longer waiting are forgotten
        applier.record_events(events)


def log_plan(reporter: Reporter, plan: Plan) -> None:
    """The plan's decisions, one line per group, the pods' outcomes, and every model error."""
    for error in plan.model_errors:  # where the planner's model of the scheduler is wrong
        reporter.log(
            "warning",
            "model error",
            pod=error.pod,
            node=error.node,
            since=error.since.isoformat(),
            scheduler_message=error.message,  # `message` is the log line's own
        )
    for decision in plan.groups:
        reporter.log(
            "info",
            "group decision",
            group=decision.name,
            asg=decision.asg_name,
            current_desired=decision.current_desired,
            desired=decision.desired,
            new_nodes=decision.new_nodes,
            reason=decision.reason,
        )
    outcomes = Counter(f"{p.outcome}:{p.code}" for p in plan.pods)
    if outcomes:
        reporter.log("info", "pending pods", outcomes=dict(sorted(outcomes.items())))


def notify(notifier: Notifier, reporter: Reporter, cluster: str, trigger: str, applier: Applier) -> None:
    """One message per run that changed something or failed on an object; never for a dry run."""
    if applier.dry_run or not (applier.changed or applier.failures):
        return
    records = applier.records
    # Failures first: a long message is truncated at the end (SNS 256 KB, Slack 40,000 characters).
    failed = [r.line() for r in records if r.status is ActionStatus.FAILED]
    lines = failed + [
        r.line() for r in records if r.status not in (ActionStatus.SKIPPED, ActionStatus.FAILED)
    ]
    kinds = Counter(str(r.kind) for r in records if r.status is ActionStatus.DONE)
    summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
    if applier.failures:
        summary = ", ".join(s for s in (summary, f"{applier.failures} FAILED") if s)
    subject = f"backlog-scaler {cluster}: {summary} ({trigger})"
    if not notifier.notify(subject, lines):
        reporter.log("warning", "notification failed", subject=subject)


def finish(
    config: ScalerConfig,
    reporter: Reporter,
    run: RunInfo,
    plan: Plan | None,
    pods: tuple[Pod, ...],
    asgs: Mapping[str, AsgState],
) -> ReconcileResult:
    """The run's metrics, its result and its closing log line."""
    now, applier, tally = run.started_at, run.applier, run.tally
    backlog = [p for p in pods if p.is_pending_unschedulable]
    duration = time.perf_counter() - run.t0
    _cluster_metrics(reporter, plan, backlog, now, duration)
    groups: list[GroupReport] = []
    for group in config.node_groups:
        asg = tally.final.get(group.name) or asgs.get(group.asg_name)
        if asg is None:
            continue
        in_service = sum(1 for i in asg.instances if i.lifecycle_state == "InService")
        _group_metrics(reporter, tally, group.name, asg.desired, in_service)
        _lifecycle_metrics(reporter, plan, tally, group.name)
        if plan is not None:
            decision = plan.group(group.name)
            current = asgs[group.asg_name].desired
            groups.append(
                GroupReport(
                    group.name, group.asg_name, current, decision.desired, asg.desired, decision.reason
                )
            )
    result = ReconcileResult(
        trigger=run.trigger,
        status=RunStatus.COMPLETED,
        dry_run=applier.dry_run,
        started_at=now,
        duration_seconds=duration,
        actions=tuple(applier.records),
        groups=tuple(groups),
        errors=tuple(applier.errors),
        pending_pods=len(backlog),
        model_errors=len(plan.model_errors) if plan is not None else 0,
    )
    reporter.log(
        "info" if result.ok else "error",
        "reconcile finished",
        trigger=run.trigger,
        dry_run=result.dry_run,
        changed=result.changed,
        actions=len(result.actions),
        failed=len(result.failed),
        errors=list(result.errors),
        pending_pods=result.pending_pods,
        model_errors=result.model_errors,
        duration_ms=round(duration * 1000, 1),
    )
    return result


def _group_metrics(reporter: Reporter, tally: Tally, group: str, desired: int, in_service: int) -> None:
    """Each group's sizes and what the run did to it."""
    metric = reporter.metric
    metric(constants.METRIC_DESIRED, desired, group=group)
    metric(constants.METRIC_IN_SERVICE, in_service, group=group)
    metric(constants.METRIC_SCALE_UPS, tally.grown[group], group=group)
    metric(constants.METRIC_SCALE_DOWNS, tally.decrements[group], group=group)
    metric(constants.METRIC_CAPACITY_FAILURES, tally.backoffs[group], group=group)
    metric(constants.METRIC_MIGRATIONS, tally.migrations[group], group=group)
    metric(constants.METRIC_MIGRATION_LOST_GPU_SECONDS, tally.migration_lost[group], group=group)


def _lifecycle_metrics(reporter: Reporter, plan: Plan | None, tally: Tally, group: str) -> None:
    """Unhealthy nodes (their room not counted), nodes replaced for health or rotated, paused repair."""
    not_acted = (RepairAction.IGNORED, RepairAction.UNCORDON)
    repair = plan.repair if plan is not None else ()
    unhealthy = sum(1 for d in repair if d.group == group and d.action not in not_acted)
    reporter.metric(constants.METRIC_UNHEALTHY_NODES, unhealthy, group=group)
    reporter.metric(constants.METRIC_NODES_REPAIRED, tally.replaced[(group, "repair")], group=group)
    reporter.metric(constants.METRIC_NODES_ROTATED, tally.replaced[(group, "rotation")], group=group)
    paused = plan is not None and group in plan.repair_paused
    reporter.metric(constants.METRIC_REPAIR_PAUSED, int(paused), group=group)


def _cluster_metrics(
    reporter: Reporter, plan: Plan | None, backlog: list[Pod], now: datetime, duration: float
) -> None:
    ages = [(now - p.created_at).total_seconds() for p in backlog if p.created_at]
    unhelped = sum(
        1 for p in (plan.pods if plan else ()) if p.outcome is Outcome.UNHELPED and p.code not in QUIET_CODES
    )
    metric = reporter.metric
    metric(constants.METRIC_PENDING_PODS, len(backlog))
    metric(constants.METRIC_PENDING_GPUS, sum(p.requests.gpus for p in backlog))
    metric(constants.METRIC_OLDEST_PENDING_AGE, max(ages, default=0.0), unit="Seconds")
    metric(constants.METRIC_UNHELPED_PODS, unhelped)
    metric(constants.METRIC_MODEL_ERRORS, len(plan.model_errors) if plan else 0)
    metric(constants.METRIC_RECONCILE_DURATION, duration * 1000, unit="Milliseconds")
    # Always emitted (0 on a clean run) so the alarm's metric exists and a quiet cluster reads OK.
    metric(constants.METRIC_ACTION_FAILURES, 0)


@dataclass
class RunInfo:
    """One run: its trigger, start, applier (the action log) and tally."""

    trigger: str
    started_at: datetime
    t0: float
    applier: Applier
    tally: Tally = field(default_factory=Tally)
