"""The controller: gather -> plan -> re-validate -> apply -> report, over the ports only.

One `reconcile` rebuilds the whole picture (pods, nodes, groups, failed launches, stored state), plans
with the pure planner, re-reads every node right before a destructive step, applies, and reports.
Safety rules, in the order a run meets them:

- One writer per cluster: the run takes the DynamoDB lease; a held lease means another run is doing
  the work, so this one returns `lease-held` without touching anything. Dry runs write nothing, the
  lease included.
- Never act on partial data: if any read fails, the run changes nothing and raises (the trigger retries).
- Capacity failures are recorded (backoff) before planning, so the same run spills to other groups.
- Every cordon and termination is re-validated against a fresh read of its node (still idle, not
  protected, still cordoned by us); a cordon carries the node's resourceVersion (conflict-safe).
- Terminations come first (with decrement), then desired capacity is set against a fresh describe:
  raised freely, lowered only to cancel launches that have not happened, never below the live
  instances (SetDesiredCapacity would let the ASG terminate a random, possibly busy, instance).
- Drain intents (forced scale-downs) are continued every run; their nodes are hidden from the planner
  (seen as cordoned by someone else) so it neither uncordons nor terminates them behind the drain.

Everything is idempotent: absolute desired counts, re-validation, conditional writes.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from functools import partial
from typing import Any

from shared import constants
from shared.config import ScalerConfig
from shared.domain.errors import AuthError, InputError, LeaseHeldError, ReadError, ScalerError, ThrottledError
from shared.domain.model import (
    ANNOTATION_CORDONED_AT,
    AsgState,
    DaemonSet,
    GroupState,
    InstanceType,
    Node,
    Pod,
    PodMemory,
    ScalerState,
    Snapshot,
)
from shared.domain.operations import (
    ClusterEvent,
    DrainIntent,
    EventType,
    FailureKind,
    Lease,
    ObjectRef,
    ScalingFailure,
)
from shared.domain.plan import Outcome, Plan, ReasonCode, Termination
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.drain import (
    GIVE_UP_AFTER_GRACE,
    INTERRUPTION_HOLD,
    INTERRUPTION_REQUESTER,
    ActionLog,
    Drainer,
    DrainProgress,
    ForceScaleDownReport,
    ForceScaleDownRequest,
    InvalidRequestError,
    candidates_of,
    choose,
    merge_intents,
    parse_force_scale_down,
)
from shared.planner import plan as make_plan
from shared.ports import Clock, Cluster, Fleet, Notifier, StateStore
from shared.reporting import ActionKind, ActionRecord, ActionStatus, Reporter

LEASE_TTL_SECONDS = 120
GATHER_THREADS = 16  # reads of one run in flight at once (10 listings and loads, plus one per group)
LEASE_RENEW_MARGIN_SECONDS = 30  # renew a lease this close to its end before the next write
LEASE_WAIT_ATTEMPTS = 5  # manual and AWS-event calls wait this often for a reconcile to finish
LEASE_WAIT_SECONDS = 2.0
EVENT_REPEAT_SECONDS = 3600  # the same outcome is told to a pod again after this long
TRIGGERED_SCALE_UP = "TriggeredScaleUp"
# Outcomes that are not a verdict: the pod is left to the scheduler first.
_QUIET_CODES = frozenset({ReasonCode.TOO_YOUNG, ReasonCode.PLACED})


class RunStatus(StrEnum):
    COMPLETED = "completed"
    LEASE_HELD = "lease-held"  # another run holds the lease and is doing the work
    IGNORED = "ignored"  # an AWS event about something that is not one of the cluster's groups


class InterruptionKind(StrEnum):
    SPOT_INTERRUPTION = "spot-interruption"
    REBALANCE_RECOMMENDATION = "rebalance-recommendation"


@dataclass(frozen=True, slots=True)
class GroupReport:
    name: str
    asg_name: str
    current_desired: int
    planned_desired: int
    desired: int  # after this run (what the group was left at)
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "asg_name": self.asg_name,
            "current_desired": self.current_desired,
            "planned_desired": self.planned_desired,
            "desired": self.desired,
            "reason": self.reason,
        }


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
            "errors": list(self.errors),
            "detail": self.detail,
        }


def desired_to_set(target: int, asg: AsgState) -> int | None:
    """The desired capacity to set for `target` on the group as it is now, or None to leave it.

    Raised freely (within min/max); lowered only to cancel launches that have not happened, and
    never below the live instances.
    """
    target = max(asg.min_size, min(target, asg.max_size))
    if target > asg.desired:
        return target
    live = len(asg.live_instances)
    if target < asg.desired and asg.desired > live:
        lowered = max(target, live, asg.min_size)
        return lowered if lowered < asg.desired else None
    return None


def termination_blocker(
    termination: Termination, priority_cutoff: int | None, node: Node | None, pods: Sequence[Pod]
) -> str | None:
    """Why a planned termination must not happen now (None: go ahead), from fresh reads.

    `priority_cutoff` is the policy's pod_priority_cutoff: pods below it do not keep a node busy.
    """
    if node is None:
        return "the node is gone"
    if node.instance_id != termination.instance_id:
        return f"the node now belongs to instance {node.instance_id}"
    busy = [p for p in pods if p.keeps_node_busy(priority_cutoff)]
    if busy:
        return f"it now runs {busy[0].key}"
    protection = _protection(node, pods)
    if protection:
        return protection
    if termination.decrement and not node.cordoned_by_scaler:
        return "it is no longer cordoned by the scaler"
    if not termination.decrement and node.ready:
        return "it became Ready"
    return None


def cordon_blocker(priority_cutoff: int | None, node: Node | None, pods: Sequence[Pod]) -> str | None:
    """Why a planned cordon must not happen now (None: go ahead), from fresh reads.

    `priority_cutoff` is the policy's pod_priority_cutoff: pods below it do not keep a node busy.
    """
    if node is None:
        return "the node is gone"
    if node.unschedulable:
        return "it is already cordoned"
    busy = [p for p in pods if p.keeps_node_busy(priority_cutoff)]
    if busy:
        return f"it now runs {busy[0].key}"
    return _protection(node, pods)


def _protection(node: Node, pods: Sequence[Pod]) -> str | None:
    if node.scale_down_disabled:
        return "scale-down disabled by annotation"
    if any(p.do_not_disrupt for p in pods):
        return "it runs a pod annotated karpenter.sh/do-not-disrupt"
    return None


def _worth_remembering(memory: PodMemory) -> bool:
    """A record that tells the planner something; a uid alone does not, so it is not stored."""
    return bool(
        memory.counted_on or memory.counted_since or memory.distrusted or memory.bought or memory.refused
    )


def _at_lease(write: Callable[[Lease, str, datetime], None], group: str, at: datetime, lease: Lease) -> None:
    write(lease, group, at)


def _as_foreign_cordon(node: Node) -> Node:
    """How the planner must see a node under a drain: cordoned, but not by the scaler (hands off)."""
    annotations = {k: v for k, v in node.annotations.items() if k != ANNOTATION_CORDONED_AT}
    return replace(node, unschedulable=True, annotations=annotations)


@dataclass(frozen=True)
class _Gathered:
    pods: tuple[Pod, ...]
    nodes: tuple[Node, ...]
    asgs: Mapping[str, AsgState]  # by ASG name
    state: ScalerState
    intents: tuple[DrainIntent, ...]
    failures: Mapping[str, tuple[ScalingFailure, ...]]  # by group name
    instance_types: Mapping[str, InstanceType]  # by name, for groups without config allocatable
    daemonsets: tuple[DaemonSet, ...]
    pvcs: tuple[PersistentVolumeClaim, ...]
    pvs: tuple[PersistentVolume, ...]
    storage_classes: tuple[StorageClass, ...]
    namespaces: Mapping[str, Mapping[str, str]]  # name -> labels

    @property
    def draining(self) -> frozenset[str]:
        return frozenset(n for intent in self.intents for n in intent.nodes)


@dataclass
class _Run:
    trigger: str
    started_at: datetime
    t0: float
    lease: Lease | None
    log: ActionLog
    decrements: Counter[str] = field(default_factory=Counter)  # by group: instances removed with decrement
    removed: dict[str, set[str]] = field(default_factory=dict)  # by group: instance ids terminated
    grown: Counter[str] = field(default_factory=Counter)  # by group: nodes added
    backoffs: Counter[str] = field(default_factory=Counter)  # by group: capacity failures recorded
    failed_groups: set[str] = field(default_factory=set)  # set-desired failed
    final: dict[str, AsgState] = field(default_factory=dict)  # by group: the group after this run

    def remove(self, group: str, instance_id: str, *, decrement: bool) -> None:
        self.removed.setdefault(group, set()).add(instance_id)
        if decrement:
            self.decrements[group] += 1


class Controller:
    """Reconciles one cluster's GPU node groups; also runs forced scale-downs and AWS events."""

    def __init__(
        self,
        *,
        config: ScalerConfig,
        cluster: Cluster,
        fleet: Fleet,
        state: StateStore,
        clock: Clock,
        notifier: Notifier,
        reporter: Reporter,
        owner: str,
        dry_run: bool = False,
        lease_ttl_seconds: int = LEASE_TTL_SECONDS,
    ) -> None:
        self._config = config
        self._cluster = cluster
        self._fleet = fleet
        self._state = state
        self._clock = clock
        self._notifier = notifier
        self._reporter = reporter
        self._owner = owner
        self._dry_run = dry_run or config.dry_run  # either setting asks for a dry run
        self._lease_ttl = lease_ttl_seconds
        self._drainer = Drainer(
            cluster=cluster, fleet=fleet, state=state, priority_cutoff=config.policy.pod_priority_cutoff
        )
        self._group_by_asg = {g.asg_name: g.name for g in config.node_groups}
        # Pod uid -> (event reason, when told): one event per outcome per warm process (see _record_events).
        self._told: dict[str, tuple[str, datetime]] = {}

    @property
    def dry_run(self) -> bool:
        return self._dry_run

    @property
    def config(self) -> ScalerConfig:
        return self._config

    # ------------------------------------------------------------------------------------ reconcile

    def reconcile(self, trigger: str = "manual") -> ReconcileResult:
        """One level-triggered pass. A failed read raises its ScalerError (ReadError, AuthError,
        ThrottledError) and nothing is changed; failed actions are reported in the result instead.
        """
        started, t0 = self._clock.now(), time.perf_counter()
        try:
            lease = None if self._dry_run else self._acquire(started)
        except LeaseHeldError as exc:
            self._reporter.log(
                "info", "reconcile skipped: another run holds the lease", trigger=trigger, detail=str(exc)
            )
            self._reporter.flush()
            return ReconcileResult(trigger, RunStatus.LEASE_HELD, self._dry_run, started, detail=str(exc))
        run = _Run(trigger, started, t0, lease, ActionLog(self._reporter, dry_run=self._dry_run))
        run.log.guard = lambda: self._keep_lease(run)
        try:
            return self._reconcile(run)
        finally:
            if run.lease is not None:
                self._state.release_lease(run.lease)
            self._reporter.flush()

    def _reconcile(self, run: _Run) -> ReconcileResult:
        try:
            gathered = self._gather(run.started_at)
        except ScalerError as exc:
            self._reporter.log(
                "error",
                "gathering failed: nothing is changed this run",
                trigger=run.trigger,
                error=str(exc),
                error_type=type(exc).__name__,
            )
            raise
        plan: Plan | None = None
        try:
            state = self._record_capacity_failures(run, gathered)
            plan = self._plan(gathered, state, run.started_at)
            self._terminate(run, plan, gathered)
            self._continue_drains(run, gathered)
            self._set_desired(run, plan, gathered)
            self._cordon(run, plan, gathered.draining)
            self._uncordon(run, plan, gathered.draining)
            self._save_state(run, plan, gathered)
        except (AuthError, LeaseHeldError) as exc:
            # Credentials rejected or the lease lost: every further write would fail or race.
            run.log.errors.append(f"stopped acting: {type(exc).__name__}: {exc}")
            self._reporter.log("error", "stopped acting", error=str(exc), error_type=type(exc).__name__)
        if plan is not None:
            self._record_events(run, plan, gathered)
        self._notify(run)
        return self._finish(run, plan, gathered)

    # ------------------------------------------------------------------------------------ gather

    def _gather(self, now: datetime) -> _Gathered:
        """Every read of a run, concurrently (each is a network round trip); any failure raises."""
        # Backoffs end at most backoff_max after their failure: older failures cannot matter any more.
        since = now - timedelta(seconds=self._config.policy.backoff_max_seconds)
        with ThreadPoolExecutor(max_workers=GATHER_THREADS, thread_name_prefix="gather") as pool:
            pods = pool.submit(self._cluster.list_pods)
            nodes = pool.submit(self._cluster.list_nodes)
            daemonsets = pool.submit(self._cluster.list_daemonsets)
            pvcs = pool.submit(self._cluster.list_persistent_volume_claims)
            pvs = pool.submit(self._cluster.list_persistent_volumes)
            storage_classes = pool.submit(self._cluster.list_storage_classes)
            namespaces = pool.submit(self._cluster.list_namespaces)
            state = pool.submit(self._state.load)
            intents = pool.submit(self._state.drain_intents)
            instance_types = pool.submit(self._instance_types)
            asgs = self._fleet.describe_groups([g.asg_name for g in self._config.node_groups])
            failures = {
                g.name: pool.submit(self._fleet.failed_activities, asgs[g.asg_name], since)
                for g in self._config.node_groups
                if g.asg_name in asgs
            }
            return _Gathered(
                pods=pods.result(),
                nodes=nodes.result(),
                asgs=asgs,
                state=state.result(),
                intents=intents.result(),
                failures={name: future.result() for name, future in failures.items()},
                instance_types=instance_types.result(),
                daemonsets=daemonsets.result(),
                pvcs=pvcs.result(),
                pvs=pvs.result(),
                storage_classes=storage_classes.result(),
                namespaces=namespaces.result(),
            )

    def _instance_types(self) -> dict[str, InstanceType]:
        """EC2's data on the instance types of groups whose allocatable the config does not give."""
        by_region: dict[str, set[str]] = {}
        for group in self._config.node_groups:
            if group.shape is None and group.instance_type:
                by_region.setdefault(self._config.region_of(group), set()).add(group.instance_type)
        found: dict[str, InstanceType] = {}
        for region, types in sorted(by_region.items()):
            found.update(self._fleet.instance_types(sorted(types), region))
        return found

    # ------------------------------------------------------------------------------------ decide

    def _record_capacity_failures(self, run: _Run, gathered: _Gathered) -> ScalerState:
        """Back off groups with new capacity failures; returns the state the planner must see.

        Failures that started before the group's current backoff ends belong to the episode already
        counted (the ASG keeps retrying until desired is set back), so each episode doubles once.
        """
        groups = dict(gathered.state.groups)
        for name, failures in sorted(gathered.failures.items()):
            current = groups.get(name, GroupState())
            fresh = [
                f
                for f in failures
                if f.is_capacity and (current.backoff_until is None or f.at >= current.backoff_until)
            ]
            if not fresh:
                continue
            newest = max(fresh, key=lambda f: (f.at, f.activity_id))
            until = self._back_off(run, name, newest.at, f"{newest.kind}: {newest.message}".strip(": "))
            if until is not None:
                groups[name] = replace(current, backoff_until=until)
        return replace(gathered.state, groups=groups)

    def _back_off(self, run: _Run, group: str, at: datetime, reason: str) -> datetime | None:
        if run.log.dry_run:
            until = at + timedelta(seconds=self._config.policy.backoff_initial_seconds)
            run.log.note(
                ActionKind.BACKOFF, group, group, reason, ActionStatus.DRY_RUN, f"until {until.isoformat()}"
            )
            return until
        run.log.guard()
        try:
            until = self._state.record_capacity_failure(run.lease, group, at)
        except LeaseHeldError:
            raise
        except ScalerError as exc:
            run.log.note(ActionKind.BACKOFF, group, group, reason, ActionStatus.FAILED, str(exc))
            return None
        run.backoffs[group] += 1
        run.log.note(
            ActionKind.BACKOFF, group, group, reason, ActionStatus.DONE, f"until {until.isoformat()}"
        )
        return until

    def _plan(self, gathered: _Gathered, state: ScalerState, now: datetime) -> Plan:
        draining = gathered.draining
        nodes = tuple(_as_foreign_cordon(n) if n.name in draining else n for n in gathered.nodes)
        snapshot = Snapshot(
            gathered.pods,
            nodes,
            gathered.asgs,
            state,
            instance_types=gathered.instance_types,
            daemonsets=gathered.daemonsets,
            pvcs=gathered.pvcs,
            pvs=gathered.pvs,
            storage_classes=gathered.storage_classes,
            namespaces=gathered.namespaces,
        )
        plan = make_plan(snapshot, self._config, now)
        self._report_model_errors(plan)
        for decision in plan.groups:
            self._reporter.log(
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
            self._reporter.log("info", "pending pods", outcomes=dict(sorted(outcomes.items())))
        return plan

    def _report_model_errors(self, plan: Plan) -> None:
        """Log each fit the scheduler refuted: where the planner's model of the scheduler is wrong."""
        for error in plan.model_errors:
            self._reporter.log(
                "warning",
                "model error",
                pod=error.pod,
                node=error.node,
                since=error.since.isoformat(),
                scheduler_message=error.message,  # `message` is the log line's own
            )

    # ------------------------------------------------------------------------------------ apply

    def _terminate(self, run: _Run, plan: Plan, gathered: _Gathered) -> None:
        for termination in plan.terminate:
            if termination.node in gathered.draining:
                continue
            group = termination.group
            asg = gathered.asgs[self._config.group(group).asg_name]
            if termination.node is not None:
                check = partial(termination_blocker, termination, self._config.policy.pod_priority_cutoff)
                blocker = self._fresh_blocker(termination.node, check)
                if blocker:
                    run.log.note(
                        ActionKind.TERMINATE,
                        termination.node,
                        group,
                        termination.reason,
                        ActionStatus.SKIPPED,
                        blocker,
                    )
                    continue
            done = run.log.perform(
                ActionKind.TERMINATE,
                termination.node or termination.instance_id,
                group,
                termination.reason,
                partial(
                    self._fleet.terminate_instance,
                    termination.instance_id,
                    decrement=termination.decrement,
                    region=asg.region,
                ),
            )
            if not done:
                continue
            run.remove(group, termination.instance_id, decrement=termination.decrement)
            if termination.node is not None:
                run.log.perform(
                    ActionKind.DELETE_NODE,
                    termination.node,
                    group,
                    "its instance was terminated",
                    partial(self._cluster.delete_node, termination.node),
                )

    def _fresh_blocker(
        self, name: str, check: Callable[[Node | None, Sequence[Pod]], str | None]
    ) -> str | None:
        try:
            node = self._cluster.get_node(name)
            pods = self._cluster.list_pods_on_node(name) if node is not None else ()
        except (ReadError, ThrottledError) as exc:
            return f"could not re-read the node: {exc}"
        return check(node, pods)

    def _continue_drains(self, run: _Run, gathered: _Gathered) -> None:
        for intent in gathered.intents:
            if intent.group not in self._config.group_names:
                run.log.note(
                    ActionKind.DRAIN,
                    intent.group,
                    intent.group,
                    "drain of an unknown group",
                    ActionStatus.SKIPPED,
                )
                continue
            asg = gathered.asgs.get(self._config.group(intent.group).asg_name)
            if asg is not None:
                asg = replace(asg, desired=asg.desired - run.decrements[intent.group])
            progress = self._drainer.step(intent, asg, run.started_at, run.log)
            self._count_drain(run, intent.group, progress)

    @staticmethod
    def _count_drain(run: _Run, group: str, progress: DrainProgress) -> None:
        for instance_id in progress.terminated_instances:
            run.remove(group, instance_id, decrement=True)

    def _set_desired(self, run: _Run, plan: Plan, gathered: _Gathered) -> None:
        planned_decrements = Counter(
            t.group for t in plan.terminate if t.decrement and t.node not in gathered.draining
        )
        targets: dict[str, int] = {}
        for decision in plan.groups:
            asg = gathered.asgs.get(decision.asg_name)
            if asg is None:
                continue
            # The plan's desired counts its own decrements; what was really removed is what counts now.
            target = decision.desired + planned_decrements[decision.name] - run.decrements[decision.name]
            targets[decision.name] = target
            run.final[decision.name] = self._after_removals(run, decision.name, asg)
        changing = [g for g, t in targets.items() if desired_to_set(t, run.final[g]) is not None]
        if not changing:
            return
        if not run.log.dry_run:
            names = [self._config.group(g).asg_name for g in changing]
            try:
                fresh = self._fleet.describe_groups(names)
            except AuthError:
                raise
            except ScalerError as exc:
                for group in changing:
                    run.failed_groups.add(group)
                    run.log.note(
                        ActionKind.SET_DESIRED,
                        group,
                        group,
                        "re-read before setting desired",
                        ActionStatus.FAILED,
                        str(exc),
                    )
                return
            for group, name in zip(changing, names, strict=True):
                if name in fresh:
                    run.final[group] = fresh[name]
        for group in changing:
            asg = run.final[group]
            desired = desired_to_set(targets[group], asg)
            if desired is None:
                continue
            reason = f"{asg.desired} -> {desired}: {plan.group(group).reason}"
            if run.log.perform(
                ActionKind.SET_DESIRED,
                asg.name,
                group,
                reason,
                partial(self._fleet.set_desired_capacity, asg, desired),
            ):
                if desired > asg.desired:
                    run.grown[group] += desired - asg.desired
                run.final[group] = replace(asg, desired=desired)
            else:
                run.failed_groups.add(group)

    @staticmethod
    def _after_removals(run: _Run, group: str, asg: AsgState) -> AsgState:
        """The group as it stands after this run's terminations (as AWS will report it)."""
        removed = run.removed.get(group, set())
        instances = tuple(i for i in asg.instances if i.instance_id not in removed)
        return replace(asg, desired=asg.desired - run.decrements[group], instances=instances)

    def _cordon(self, run: _Run, plan: Plan, draining: frozenset[str]) -> None:
        for action in plan.cordon:
            if action.node in draining:
                continue
            try:
                node = self._cluster.get_node(action.node)
                pods = self._cluster.list_pods_on_node(action.node) if node is not None else ()
            except (ReadError, ThrottledError) as exc:
                run.log.note(
                    ActionKind.CORDON,
                    action.node,
                    action.group,
                    action.reason,
                    ActionStatus.SKIPPED,
                    str(exc),
                )
                continue
            blocker = cordon_blocker(self._config.policy.pod_priority_cutoff, node, pods)
            if blocker or node is None:
                run.log.note(
                    ActionKind.CORDON,
                    action.node,
                    action.group,
                    action.reason,
                    ActionStatus.SKIPPED,
                    blocker or "",
                )
                continue
            run.log.perform(
                ActionKind.CORDON,
                action.node,
                action.group,
                action.reason,
                partial(
                    self._cluster.cordon,
                    node.name,
                    run.started_at,
                    resource_version=node.resource_version or None,
                ),
            )

    def _uncordon(self, run: _Run, plan: Plan, draining: frozenset[str]) -> None:
        for action in plan.uncordon:
            if action.node in draining:
                continue
            run.log.perform(
                ActionKind.UNCORDON,
                action.node,
                action.group,
                action.reason,
                partial(self._cluster.uncordon, action.node),
            )

    def _save_state(self, run: _Run, plan: Plan, gathered: _Gathered) -> None:
        if run.log.dry_run or run.lease is None:
            return
        state, now = self._state, run.started_at
        stored_idle = {k: v.idle_since for k, v in gathered.state.nodes.items() if v.idle_since}
        # Each write takes the lease at the moment it runs: the guard may have renewed it.
        writes: list[tuple[str, Callable[[Lease], object]]] = []
        if dict(plan.idle_since) != stored_idle:
            writes.append(
                ("idle-since", lambda lease: state.save_node_idle_since(lease, plan.idle_since, now))
            )
        if dict(plan.instances_first_seen) != dict(gathered.state.instances_first_seen):
            writes.append(
                (
                    "first-seen",
                    lambda lease: state.save_instances_first_seen(lease, plan.instances_first_seen),
                )
            )
        memory = {key: m for key, m in plan.pod_memory.items() if _worth_remembering(m)}
        if memory != dict(gathered.state.pods):
            writes.append(("pod memory", lambda lease: state.save_pod_memory(lease, memory)))
        for group in sorted(g for g, removed in run.removed.items() if removed):
            writes.append((f"scale-down {group}", partial(_at_lease, state.record_scale_down, group, now)))
        for group in sorted(run.grown):
            writes.append((f"scale-up {group}", partial(_at_lease, state.record_scale_up, group, now)))
        for what, write in writes:
            run.log.guard()
            try:
                write(self._lease(run))
            except LeaseHeldError:
                raise
            except ScalerError as exc:
                run.log.errors.append(f"save {what}: {exc}")
                self._reporter.log("error", "saving state failed", what=what, error=str(exc))
        for decision in plan.groups:
            stored = gathered.state.groups.get(decision.name, GroupState())
            in_backoff = stored.backoff_until is not None and stored.backoff_until > now
            if decision.enter_backoff and not in_backoff and not run.backoffs[decision.name]:
                self._back_off(run, decision.name, now, "instances did not become usable in time")

    @staticmethod
    def _lease(run: _Run) -> Lease:
        assert run.lease is not None
        return run.lease

    # ------------------------------------------------------------------------------------ report

    def _record_events(self, run: _Run, plan: Plan, gathered: _Gathered) -> None:
        """Tell pods why they wait: a Warning for pods nothing can help, a Normal when one grew a group.

        Deduplicated in memory: a pod hears the same reason again only after EVENT_REPEAT_SECONDS, or
        when its outcome changes. A cold start may repeat an event once; that is the price of not
        storing every pod's history.
        """
        if run.log.dry_run:
            return
        pods = {p.key: p for p in gathered.pods}
        repeat = timedelta(seconds=EVENT_REPEAT_SECONDS)
        told: dict[str, tuple[str, datetime]] = {}
        events: list[ClusterEvent] = []
        for outcome in plan.pods:
            pod = pods.get(outcome.pod)
            if pod is None:
                continue
            ref = ObjectRef("Pod", pod.name, pod.namespace, pod.uid)
            if outcome.outcome is Outcome.UNHELPED and outcome.code not in _QUIET_CODES:
                event = ClusterEvent(ref, str(outcome.code), outcome.reason, EventType.WARNING)
            elif outcome.outcome is Outcome.SCALE_UP and outcome.group not in run.failed_groups:
                message = f"triggered scale-up of node group {outcome.group}: {outcome.reason}"
                event = ClusterEvent(ref, TRIGGERED_SCALE_UP, message, EventType.NORMAL)
            else:
                continue
            key = pod.uid or pod.key
            last = self._told.get(key)
            if last is not None and last[0] == event.reason and run.started_at - last[1] < repeat:
                told[key] = last
                continue
            told[key] = (event.reason, run.started_at)
            events.append(event)
        self._told = told  # pods no longer waiting are forgotten
        if events:
            written = self._cluster.record_events(events)
            self._reporter.log("info", "recorded pod events", events=len(events), written=written)

    def _notify(self, run: _Run) -> None:
        if run.log.dry_run or not run.log.changed:
            return
        lines = [r.line() for r in run.log.records if r.status is not ActionStatus.SKIPPED]
        kinds = Counter(str(r.kind) for r in run.log.records if r.status is ActionStatus.DONE)
        summary = ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
        subject = f"backlog-scaler {self._config.cluster_name}: {summary} ({run.trigger})"
        if not self._notifier.notify(subject, lines):
            self._reporter.log("warning", "notification failed", subject=subject)

    def _finish(self, run: _Run, plan: Plan | None, gathered: _Gathered) -> ReconcileResult:
        now = run.started_at
        backlog = [p for p in gathered.pods if p.is_pending_unschedulable]
        ages = [(now - p.created_at).total_seconds() for p in backlog if p.created_at]
        unhelped = sum(
            1
            for p in (plan.pods if plan else ())
            if p.outcome is Outcome.UNHELPED and p.code not in _QUIET_CODES
        )
        duration = time.perf_counter() - run.t0
        metric = self._reporter.metric
        metric(constants.METRIC_PENDING_PODS, len(backlog))
        metric(constants.METRIC_PENDING_GPUS, sum(p.requests.gpus for p in backlog))
        metric(constants.METRIC_OLDEST_PENDING_AGE, max(ages, default=0.0), unit="Seconds")
        metric(constants.METRIC_UNHELPED_PODS, unhelped)
        metric(constants.METRIC_MODEL_ERRORS, len(plan.model_errors) if plan else 0)
        metric(constants.METRIC_RECONCILE_DURATION, duration * 1000, unit="Milliseconds")
        groups: list[GroupReport] = []
        for group in self._config.node_groups:
            asg = run.final.get(group.name) or gathered.asgs.get(group.asg_name)
            if asg is None:
                continue
            in_service = sum(1 for i in asg.instances if i.lifecycle_state == "InService")
            metric(constants.METRIC_DESIRED, asg.desired, group=group.name)
            metric(constants.METRIC_IN_SERVICE, in_service, group=group.name)
            metric(constants.METRIC_SCALE_UPS, run.grown[group.name], group=group.name)
            metric(constants.METRIC_SCALE_DOWNS, run.decrements[group.name], group=group.name)
            metric(constants.METRIC_CAPACITY_FAILURES, run.backoffs[group.name], group=group.name)
            if plan is not None:
                decision = plan.group(group.name)
                current = gathered.asgs[group.asg_name].desired
                groups.append(
                    GroupReport(
                        group.name, group.asg_name, current, decision.desired, asg.desired, decision.reason
                    )
                )
        result = ReconcileResult(
            trigger=run.trigger,
            status=RunStatus.COMPLETED,
            dry_run=run.log.dry_run,
            started_at=run.started_at,
            duration_seconds=duration,
            actions=tuple(run.log.records),
            groups=tuple(groups),
            errors=tuple(run.log.errors),
            pending_pods=len(backlog),
            model_errors=len(plan.model_errors) if plan is not None else 0,
        )
        self._reporter.log(
            "info" if result.ok else "error",
            "reconcile finished",
            trigger=run.trigger,
            dry_run=result.dry_run,
            changed=result.changed,
            actions=len(result.actions),
            errors=list(result.errors),
            pending_pods=result.pending_pods,
            model_errors=result.model_errors,
            duration_ms=round(duration * 1000, 1),
        )
        return result

    # ------------------------------------------------------------------------------------ lease

    def _acquire(self, now: datetime) -> Lease:
        return self._state.acquire_lease(f"{self._owner}/{uuid.uuid4().hex[:12]}", now, self._lease_ttl)

    def _acquire_waiting(self) -> Lease:
        """The lease for a manual or AWS-event call: waits a little for a running reconcile to finish."""
        for attempt in range(LEASE_WAIT_ATTEMPTS):
            try:
                return self._acquire(self._clock.now())
            except LeaseHeldError:
                if attempt == LEASE_WAIT_ATTEMPTS - 1:
                    raise
                self._clock.sleep(LEASE_WAIT_SECONDS)
        raise AssertionError("unreachable")

    def _keep_lease(self, run: _Run) -> None:
        """Before a write: renew the lease when it is about to end (LeaseHeldError if it was lost)."""
        lease = run.lease
        if lease is None:
            return
        now = self._clock.now()
        if lease.expires_at - now > timedelta(seconds=LEASE_RENEW_MARGIN_SECONDS):
            return
        run.lease = self._state.acquire_lease(lease.owner, now, self._lease_ttl)

    # ------------------------------------------------------------------------------------ forced scale-down

    def force_scale_down(self, payload: Mapping[str, Any] | ForceScaleDownRequest) -> ForceScaleDownReport:
        """Cordon, drain and terminate nodes of one group now; store the rest as a drain intent.

        Raises InvalidRequestError (naming the fields or nodes; nothing done), ReadError, AuthError,
        LeaseHeldError (a reconcile kept the lease through the wait).
        """
        if isinstance(payload, ForceScaleDownRequest):
            request = payload
            parse_force_scale_down(request.model_dump(exclude_none=True), self._config)
        else:
            request = parse_force_scale_down(payload, self._config)
        dry_run = self._dry_run or bool(request.dry_run)  # a request cannot turn a dry-run function live
        group = self._config.group(request.group)
        lease = None if dry_run else self._acquire_waiting()
        run = _Run(
            f"force-scale-down {group.name}",
            self._clock.now(),
            time.perf_counter(),
            lease,
            ActionLog(self._reporter, dry_run=dry_run),
        )
        run.log.guard = lambda: self._keep_lease(run)
        try:
            report = self._force_scale_down(run, request)
        finally:
            if run.lease is not None:
                self._state.release_lease(run.lease)
            self._reporter.flush()
        self._notify(run)
        return report

    def _force_scale_down(self, run: _Run, request: ForceScaleDownRequest) -> ForceScaleDownReport:
        group = self._config.group(request.group)
        asg = self._fleet.describe_groups([group.asg_name]).get(group.asg_name)
        if asg is None:
            raise InvalidRequestError(
                f"request: group: Auto Scaling group {group.asg_name} not found", ("group",)
            )
        nodes = self._cluster.list_nodes()
        pods = self._cluster.list_pods()
        existing = next((i for i in self._state.drain_intents() if i.group == group.name), None)
        draining = frozenset(existing.nodes) if existing else frozenset()
        candidates = candidates_of(asg, nodes, pods, self._config.policy.pod_priority_cutoff)
        choice = choose(request, asg, candidates, draining=draining)
        now, log = run.started_at, run.log
        who = request.requested_by or "operator"
        progress = DrainProgress()
        for candidate in choice.chosen:
            reason = f"forced scale-down of {group.name} by {who}"
            if candidate.node is None:
                if self._drainer.terminate(
                    candidate.instance.instance_id,
                    None,
                    group.name,
                    f"{reason}: not registered yet",
                    asg.region,
                    log,
                ):
                    progress.terminated.append(candidate.instance.instance_id)
                    run.remove(group.name, candidate.instance.instance_id, decrement=True)
                continue
            node = candidate.node
            if not self._drainer.cordon(node, group.name, reason, now, log):
                continue
            workload = candidate.workload
            if candidate.idle and not log.dry_run:
                try:  # a pod bound just before the cordon must not go down with the node
                    workload = self._drainer.workload(node.name)
                except (ReadError, ThrottledError) as exc:
                    log.note(
                        ActionKind.DRAIN,
                        node.name,
                        group.name,
                        "re-read after the cordon",
                        ActionStatus.FAILED,
                        str(exc),
                    )
                    progress.remaining.append(node.name)  # the reconcile runs finish it
                    continue
            if not workload:
                if self._drainer.terminate(
                    candidate.instance.instance_id, node.name, group.name, f"{reason}: idle", asg.region, log
                ):
                    progress.terminated.append(node.name)
                    run.remove(group.name, candidate.instance.instance_id, decrement=True)
                    continue
            else:
                delete = request.force and request.grace_seconds == 0
                self._drainer.evict(workload, group.name, delete=delete, log=log, progress=progress)
            progress.remaining.append(node.name)
        expires_at = None
        if progress.remaining:
            expires_at = now + timedelta(seconds=request.grace_seconds) + GIVE_UP_AFTER_GRACE
            intent = DrainIntent(
                group=group.name,
                nodes=tuple(sorted(progress.remaining)),
                requested_at=now,
                expires_at=expires_at,
                grace_seconds=request.grace_seconds,
                force=request.force,
                requested_by=who,
            )
            merged = merge_intents(existing, intent)
            expires_at = merged.expires_at
            self._drainer.store(merged, log)
        after = self._cancel_launches(run, group.name, asg, request)
        return ForceScaleDownReport(
            group=group.name,
            asg_name=asg.name,
            dry_run=log.dry_run,
            request=request.model_dump(exclude_none=True),
            chosen=choice.chosen,
            refused=choice.refused,
            actions=tuple(log.records),
            terminated=tuple(progress.terminated),
            draining=tuple(sorted(set(progress.remaining) | draining)),
            blocked=tuple(progress.blocked),
            intent_expires_at=expires_at,
            desired_before=asg.desired,
            desired_after=after,
            errors=tuple(log.errors),
        )

    def _cancel_launches(self, run: _Run, group: str, asg: AsgState, request: ForceScaleDownRequest) -> int:
        """For a target, also cancel launches that have not happened (never raising desired)."""
        current = self._after_removals(run, group, asg)
        if request.target is None:
            return current.desired
        if not run.log.dry_run and run.removed:
            try:
                current = self._fleet.describe_groups([asg.name]).get(asg.name, current)
            except AuthError:
                raise
            except ScalerError as exc:
                run.log.note(
                    ActionKind.SET_DESIRED, asg.name, group, "re-read", ActionStatus.FAILED, str(exc)
                )
                return current.desired
        desired = desired_to_set(request.target, current)
        if desired is None or desired >= current.desired:
            return current.desired
        reason = f"{current.desired} -> {desired}: forced scale-down to {request.target} cancels launches"
        if run.log.perform(
            ActionKind.SET_DESIRED,
            asg.name,
            group,
            reason,
            lambda: self._fleet.set_desired_capacity(current, desired),
        ):
            return desired
        return current.desired

    # ------------------------------------------------------------------------------------ AWS events

    def handle_capacity_event(
        self, asg_name: str, at: datetime, kind: FailureKind, message: str
    ) -> ReconcileResult:
        """An "EC2 Instance Launch Unsuccessful" event: back the group off now, then reconcile.

        Any failed launch backs off (the event is a launch failure by definition; `kind` is reported).
        A failure inside the group's current backoff belongs to the episode already counted.
        """
        group = self._group_by_asg.get(asg_name)
        now = self._clock.now()
        if group is None:
            return self._ignored(f"launch failure of {asg_name}, not a group of this cluster", now)
        log = ActionLog(self._reporter, dry_run=self._dry_run)
        current = self._state.load().groups.get(group, GroupState())
        if current.backoff_until is not None and at < current.backoff_until:
            log.note(
                ActionKind.BACKOFF,
                group,
                group,
                f"{kind}: {message}",
                ActionStatus.SKIPPED,
                f"already backing off until {current.backoff_until.isoformat()}",
            )
        elif log.dry_run:
            log.note(ActionKind.BACKOFF, group, group, f"{kind}: {message}", ActionStatus.DRY_RUN)
        else:
            # The backoff is a single conditional write: no lease needed, and it must not wait for one.
            until = self._state.record_capacity_failure(None, group, at)
            log.note(
                ActionKind.BACKOFF,
                group,
                group,
                f"{kind}: {message}",
                ActionStatus.DONE,
                f"until {until.isoformat()}",
            )
            self._reporter.metric(constants.METRIC_CAPACITY_FAILURES, 1, group=group)
        result = self.reconcile(f"launch-unsuccessful {asg_name}")
        return replace(result, actions=tuple(log.records) + result.actions)

    def handle_interruption(self, instance_id: str, at: datetime, kind: InterruptionKind) -> ReconcileResult:
        """A spot interruption warning cordons the instance's node and holds it; both kinds reconcile.

        The hold is a drain intent that evicts nothing: the planner must not uncordon the node, and
        EC2 reclaims the instance within two minutes anyway.
        """
        now = self._clock.now()
        trigger = f"{kind} {instance_id}"
        if kind is InterruptionKind.REBALANCE_RECOMMENDATION:
            return self.reconcile(trigger)
        asgs = self._fleet.describe_groups([g.asg_name for g in self._config.node_groups])
        group = next(
            (
                self._group_by_asg[a.name]
                for a in asgs.values()
                if any(i.instance_id == instance_id for i in a.live_instances)
            ),
            None,
        )
        if group is None:
            return self._ignored(f"{kind} for {instance_id}, not an instance of this cluster's groups", now)
        node = next((n for n in self._cluster.list_nodes() if n.instance_id == instance_id), None)
        log = ActionLog(self._reporter, dry_run=self._dry_run)
        if node is not None:
            self._hold_interrupted(node, group, at, now, log)
        result = self.reconcile(trigger)
        return replace(result, actions=tuple(log.records) + result.actions)

    def _hold_interrupted(self, node: Node, group: str, at: datetime, now: datetime, log: ActionLog) -> None:
        lease = None if log.dry_run else self._acquire_waiting()
        run = _Run("interruption", now, time.perf_counter(), lease, log)
        log.guard = lambda: self._keep_lease(run)
        try:
            reason = f"spot interruption warning at {at.isoformat()}"
            self._drainer.cordon(node, group, reason, now, log)
            existing = next((i for i in self._state.drain_intents() if i.group == group), None)
            hold = DrainIntent(
                group=group,
                nodes=(node.name,),
                requested_at=now,
                expires_at=now + INTERRUPTION_HOLD,
                grace_seconds=0,
                requested_by=INTERRUPTION_REQUESTER,
            )
            self._drainer.store(merge_intents(existing, hold), log)
        finally:
            if run.lease is not None:
                self._state.release_lease(run.lease)

    def _ignored(self, detail: str, now: datetime) -> ReconcileResult:
        self._reporter.log("info", "event ignored", detail=detail)
        self._reporter.flush()
        return ReconcileResult("aws-event", RunStatus.IGNORED, self._dry_run, now, detail=detail)


__all__ = [
    "Controller",
    "ForceScaleDownReport",
    "ForceScaleDownRequest",
    "InputError",
    "InterruptionKind",
    "InvalidRequestError",
    "ReconcileResult",
    "RunStatus",
    "cordon_blocker",
    "desired_to_set",
    "termination_blocker",
]
