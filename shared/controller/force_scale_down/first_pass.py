"""The first pass of a forced scale-down, under the lease.

1. the drain intent is stored FIRST (conditional on the revision read): a drain that could not be
   stored is not started, so no node is ever cordoned for a drain nobody will finish or report;
2. each chosen node is cordoned, then its pods evicted through the Eviction API (PodDisruptionBudgets
   apply), or deleted with `force` once the grace is over; an empty node is terminated with decrement;
3. the intent is updated to what remains, and launches not yet made are cancelled for a target.

What remains is finished by the reconcile runs (`drain.continue_drains`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from shared.controller.applier import Applier
from shared.controller.deps import Deps
from shared.controller.force_scale_down.drain import (
    GIVE_UP_AFTER_GRACE,
    DrainProgress,
    evict,
    merge_intents,
    workload,
)
from shared.controller.force_scale_down.report import ForceScaleDownReport
from shared.controller.force_scale_down.request import (
    ForceScaleDownRequest,
    InvalidRequestError,
    parse_force_scale_down,
)
from shared.controller.gather import foreign_reason, ours
from shared.controller.report import RunInfo, notify
from shared.domain.errors import AuthError, LeaseHeldError, ScalerError
from shared.domain.model import AsgState, Node, Pod
from shared.domain.operations import DrainIntent
from shared.domain.safety import desired_to_set
from shared.planner.force_scale_down import Candidate, candidates_of, choose
from shared.reporting import ActionKind, ActionStatus


def force_scale_down(deps: Deps, payload: Mapping[str, Any] | ForceScaleDownRequest) -> ForceScaleDownReport:
    """Cordon, drain and terminate nodes of one group now; store the rest as a drain intent.

    Raises InvalidRequestError (naming the fields or nodes; nothing done), ReadError, AuthError (a
    read refused; nothing done), LeaseHeldError (a reconcile kept the lease through the wait).
    A write that fails on one node or pod is reported in the report's actions and errors.
    """
    if isinstance(payload, ForceScaleDownRequest):
        request = parse_force_scale_down(payload.model_dump(exclude_none=True), deps.config)
    else:
        request = parse_force_scale_down(payload, deps.config)
    dry_run = deps.dry_run or bool(request.dry_run)  # a request cannot turn a dry-run function live
    try:
        with deps.lease(wait=True, dry_run=dry_run) as guard:
            run = RunInfo(
                f"force-scale-down {request.group}",
                deps.clock.now(),
                time.perf_counter(),
                deps.applier(guard, dry_run=dry_run),
            )
            report = _first_pass(deps, run, request)
    finally:
        deps.reporter.flush()
    notify(deps.notifier, deps.reporter, deps.config.cluster_name, run.trigger, run.applier)
    return report


@dataclass(frozen=True)
class _Read:
    """What the first pass read before any write."""

    asg: AsgState
    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    existing: DrainIntent | None


def _read(deps: Deps, request: ForceScaleDownRequest) -> _Read:
    asg_name = deps.config.group(request.group).asg_name
    asg = deps.ports.fleet.describe_groups([asg_name]).get(asg_name)
    if asg is None:
        raise InvalidRequestError(f"request: group: Auto Scaling group {asg_name} not found", ("group",))
    if not ours({asg_name: asg}, deps.config.cluster_name)[0]:
        # Before any Kubernetes write: its nodes would be cordoned and drained, then IAM refuse to
        # terminate them.
        raise InvalidRequestError(
            f"request: group: {foreign_reason(asg_name, deps.config.cluster_name)}", ("group",)
        )
    nodes = deps.ports.cluster.list_nodes()
    pods = deps.ports.cluster.list_pods()
    existing = next((i for i in deps.ports.state.drain_intents() if i.group == request.group), None)
    return _Read(asg, nodes, pods, existing)


def _first_pass(deps: Deps, run: RunInfo, request: ForceScaleDownRequest) -> ForceScaleDownReport:
    read = _read(deps, request)
    draining = frozenset(read.existing.nodes) if read.existing else frozenset()
    # A node held for an interruption warning may be named: the operator's request drains it
    # (merge_intents gives it the request's terms). A target counts held nodes as leaving.
    held = frozenset(read.existing.held) if read.existing and request.nodes is not None else frozenset()
    cutoff = deps.config.policy.pod_priority_cutoff
    choice = choose(
        request,
        read.asg,
        candidates_of(read.asg, read.nodes, read.pods, cutoff, now=run.started_at, force=request.force),
        draining=draining - held,
    )
    progress = DrainProgress()
    applier, now = run.applier, run.started_at
    who = request.requested_by or "operator"
    intent, after = read.existing, read.asg.desired
    try:
        registered = tuple(sorted(c.node.name for c in choice.chosen if c.node is not None))
        stored = _store_ahead(applier, read.existing, request, registered, now, who) if registered else None
        if stored is not None or not registered:  # a drain that could not be stored does not start
            reason = f"forced scale-down of {request.group} by {who}"
            for candidate in choice.chosen:
                _drain_candidate(deps, run, candidate, request, reason, progress)
            if stored is not None:
                intent = _settle(applier, stored, draining, progress)
            after = _cancel_launches(deps, run, read.asg, request)
    except LeaseHeldError as exc:
        applier.lease_lost(exc)
        after = read.asg.desired - progress.decrements
    return ForceScaleDownReport(
        group=request.group,
        asg_name=read.asg.name,
        dry_run=applier.dry_run,
        request=request.model_dump(exclude_none=True),
        chosen=choice.chosen,
        refused=choice.refused,
        actions=tuple(applier.records),
        terminated=tuple(progress.terminated),
        draining=tuple(sorted(set(progress.remaining) | draining)),
        blocked=tuple(progress.blocked),
        intent_expires_at=intent.expires_at if intent is not None and intent.nodes else None,
        desired_before=read.asg.desired,
        desired_after=after,
        errors=tuple(applier.errors),
    )


def _store_ahead(
    applier: Applier,
    existing: DrainIntent | None,
    request: ForceScaleDownRequest,
    nodes: tuple[str, ...],
    now: datetime,
    who: str,
) -> DrainIntent | None:
    """Store the drain before its first cordon; None (nothing may start) when it could not be."""
    new = DrainIntent(
        group=request.group,
        nodes=nodes,
        requested_at=now,
        expires_at=now + timedelta(seconds=request.grace_seconds) + GIVE_UP_AFTER_GRACE,
        grace_seconds=request.grace_seconds,
        force=request.force,
        requested_by=who,
    )
    merged = merge_intents(existing, new)
    stored = applier.store_intent(
        merged, f"drain of {', '.join(merged.nodes)} until {merged.expires_at.isoformat()}"
    )
    if stored is None:
        applier.note(
            ActionKind.DRAIN,
            request.group,
            request.group,
            f"forced scale-down of {', '.join(nodes)}",
            ActionStatus.SKIPPED,
            "not started: the drain intent could not be stored, so no node is cordoned",
        )
    return stored


def _drain_candidate(
    deps: Deps,
    run: RunInfo,
    candidate: Candidate,
    request: ForceScaleDownRequest,
    reason: str,
    progress: DrainProgress,
) -> None:
    applier, group, region = (
        run.applier,
        request.group,
        deps.config.region_of(deps.config.group(request.group)),
    )
    instance_id = candidate.instance.instance_id
    node = candidate.node
    if node is None:
        if applier.terminate(
            instance_id, None, group, f"{reason}: not registered yet", decrement=True, region=region
        ):
            progress.terminated.append(instance_id)
            run.tally.remove(group, instance_id, decrement=True)
        return
    if not node.cordoned_by_scaler and not applier.cordon(
        node, group, reason, run.started_at, retry_conflict=True
    ):
        return  # not cordoned: the next reconcile drops it from the drain
    pods: Sequence[Pod] | None = candidate.workload
    if candidate.idle and not applier.dry_run:
        pods = workload(deps, applier, node.name, group)  # a pod bound just before the cordon stays
    if pods is None:
        progress.remaining.append(node.name)  # the reconcile runs finish it
        return
    if not pods:
        if applier.terminate(instance_id, node.name, group, f"{reason}: idle", decrement=True, region=region):
            progress.terminated.append(node.name)
            progress.terminated_instances.append(instance_id)
            run.tally.remove(group, instance_id, decrement=True)
            return
    else:
        evict(applier, pods, group, delete=request.force and request.grace_seconds == 0, progress=progress)
    progress.remaining.append(node.name)


def _settle(
    applier: Applier, intent: DrainIntent, draining: frozenset[str], progress: DrainProgress
) -> DrainIntent:
    """After the pass: the stored intent keeps exactly the nodes still draining (or is forgotten)."""
    keep = tuple(sorted(set(progress.remaining) | draining))
    if keep == intent.nodes:
        return intent
    if not keep:
        applier.forget_intent(intent, f"drain of {', '.join(intent.nodes)} finished in its first pass")
        return replace(intent, nodes=())
    # A failed update leaves the stored intent a superset: its extra nodes are gone or were never
    # cordoned, and the next pass drops them. What is reported draining is stored either way.
    updated = applier.store_intent(replace(intent, nodes=keep), f"drain of {', '.join(keep)} continues")
    return updated or intent


def _cancel_launches(deps: Deps, run: RunInfo, asg: AsgState, request: ForceScaleDownRequest) -> int:
    """For a target, also cancel launches that have not happened (never raising desired)."""
    group, applier = request.group, run.applier
    current = run.tally.after_removals(group, asg)
    if request.target is None:
        return current.desired
    if not applier.dry_run and run.tally.removed:
        try:
            current = deps.ports.fleet.describe_groups([asg.name]).get(asg.name, current)
        except ScalerError as exc:
            if isinstance(exc, AuthError):
                applier.forbid_destructive(exc)
            applier.note(ActionKind.SET_DESIRED, asg.name, group, "re-read", ActionStatus.FAILED, str(exc))
            return current.desired
    desired = desired_to_set(request.target, current)
    if desired is None or desired >= current.desired:
        return current.desired
    reason = f"{current.desired} -> {desired}: forced scale-down to {request.target} cancels launches"
    return desired if applier.set_desired(current, desired, group, reason) else current.desired
