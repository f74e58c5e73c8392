"""Forced scale-down, from the request to the report, on top of the applier.

An operator asks (`{"group": "a100", "target": 0}` or named nodes). The request is validated
(`parse_force_scale_down`), the nodes chosen (`choose`, pure: unregistered instances, idle nodes,
fewest pods, fewest GPUs, newest first; never below the group's min size), and the first pass runs
under the lease:

1. the drain intent is stored FIRST (conditional on the revision read): a drain that could not be
   stored is not started, so no node is ever cordoned for a drain nobody will finish or report;
2. each chosen node is cordoned, then its pods evicted through the Eviction API (PodDisruptionBudgets
   apply), or deleted with `force` once the grace is over; an empty node is terminated with decrement;
3. the intent is updated to what remains, and launches not yet made are cancelled for a target.

Every reconcile then continues the stored drains (`continue_drains`): it evicts what is left,
terminates nodes that only DaemonSet/mirror pods remain on, and gives up (nodes left cordoned,
reported) an hour after the grace. A spot interruption warning stores a hold-only intent
(INTERRUPTION_REQUESTER) through the same functions.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from shared.config import ScalerConfig
from shared.controller.applier import Applier
from shared.controller.deps import Deps
from shared.controller.gather import Gathered
from shared.controller.report import RunInfo, notify
from shared.controller.validation import MAX_ERRORS_SHOWN, describe_validation_error
from shared.domain.errors import AuthError, InputError, LeaseHeldError, ReadError, ScalerError, ThrottledError
from shared.domain.model import AsgInstance, AsgState, Node, Pod
from shared.domain.operations import (
    MAX_DRAIN_NODES,
    MAX_GROUP_NAME_LENGTH,
    MAX_NODE_NAME_LENGTH,
    MAX_REQUESTED_BY_LENGTH,
    DrainIntent,
)
from shared.domain.safety import busy_pods, desired_to_set, protection, scale_in_protection
from shared.reporting import ActionKind, ActionRecord, ActionStatus

DEFAULT_GRACE_SECONDS = 300
MAX_GRACE_SECONDS = 24 * 3600
MAX_TARGET = 100_000  # a sanity bound; the group's own max size is checked once its ASG is read
# A drain still blocked this long after its grace is given up: its nodes stay cordoned and it is reported.
GIVE_UP_AFTER_GRACE = timedelta(hours=1)
# Spot interruption warnings store a hold-only intent: the node stays cordoned until EC2 reclaims it.
INTERRUPTION_REQUESTER = "spot-interruption"
INTERRUPTION_HOLD = timedelta(minutes=10)


# ---------------------------------------------------------------------------------------------- request


class InvalidRequestError(InputError):
    """A forced scale-down payload is invalid; `fields` names the offending fields."""

    def __init__(self, message: str, fields: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.fields = tuple(fields)


NodeName = Annotated[
    StrictStr,
    Field(min_length=1, max_length=MAX_NODE_NAME_LENGTH, pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"),
]


def _at_most(limit: int) -> Callable[[object], object]:
    """A before-check of an array's length: pydantic counts only the items that validated against
    `max_length`, so a million bad items would cost a million errors before the bound applied."""

    def check(value: object) -> object:
        if isinstance(value, list | tuple) and len(value) > limit:
            raise ValueError(f"at most {limit} items, got {len(value)}")
        return value

    return check


class ForceScaleDownRequest(BaseModel):
    """`{"group": "a100", "target": 0}` or `{"group": "a100", "nodes": ["ip-..."]}`, plus options.

    Strict, as the JSON of a manual invoke gives it: booleans are `true`/`false`, numbers JSON integers
    (no `"false"`, `0` for false or `false` for 0), every string and array is bounded, unknown fields are
    refused. `target` is checked against the group's max size once the ASG is read (`check_against_group`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: Annotated[
        StrictStr,
        Field(min_length=1, max_length=MAX_GROUP_NAME_LENGTH, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$"),
    ]
    target: Annotated[StrictInt, Field(ge=0, le=MAX_TARGET)] | None = None
    nodes: Annotated[tuple[NodeName, ...], BeforeValidator(_at_most(MAX_DRAIN_NODES))] | None = Field(
        default=None, min_length=1, max_length=MAX_DRAIN_NODES, validate_default=True
    )
    dry_run: StrictBool | None = None  # None: the function's own dry-run setting
    grace_seconds: Annotated[StrictInt, Field(ge=0, le=MAX_GRACE_SECONDS)] = DEFAULT_GRACE_SECONDS
    # After the grace, delete pods that PodDisruptionBudgets still protect; and take instances the
    # operator protected from scale-in (safety.scale_in_protection), refused without it.
    force: StrictBool = False
    requested_by: Annotated[StrictStr, Field(max_length=MAX_REQUESTED_BY_LENGTH)] = ""

    @model_validator(mode="before")
    @classmethod
    def _few_unknown_fields(cls, data: object) -> object:
        # `extra="forbid"` reports every unknown key; a payload of a million keys names the first few.
        if isinstance(data, Mapping) and len(data) > len(cls.model_fields):
            unknown = [k for k in data if k not in cls.model_fields][:MAX_ERRORS_SHOWN]
            return {k: v for k, v in data.items() if k in cls.model_fields or k in unknown}
        return data

    @field_validator("nodes")
    @classmethod
    def _exactly_one_of_target_or_nodes(
        cls, nodes: tuple[str, ...] | None, info: ValidationInfo
    ) -> tuple[str, ...] | None:
        has_target = info.data.get("target") is not None
        # A target that failed its own validation is absent from `info.data`: it is reported once, there.
        if nodes is None and "target" in info.data and not has_target:
            raise ValueError("give exactly one of target (a node count) or nodes (node names)")
        if nodes is not None and has_target:
            raise ValueError("give either target or nodes, not both")
        if nodes is not None and len(set(nodes)) != len(nodes):
            raise ValueError("node names must be unique")
        return nodes


def parse_force_scale_down(payload: object, config: ScalerConfig) -> ForceScaleDownRequest:
    """Validate a payload against the model and the config; InvalidRequestError naming the fields."""
    if not isinstance(payload, Mapping):
        raise InvalidRequestError(f"request: expected a JSON object, got {type(payload).__name__}")
    try:
        request = ForceScaleDownRequest.model_validate(payload)
    except ValidationError as exc:
        message, fields = describe_validation_error(exc, "request")
        raise InvalidRequestError(message, fields) from exc
    if request.group not in config.group_names:
        raise InvalidRequestError(
            f"request: group: unknown node group {request.group!r}; "
            f"configured: {', '.join(config.group_names)}",
            ("group",),
        )
    return request


def check_against_group(request: ForceScaleDownRequest, asg: AsgState, draining: frozenset[str]) -> None:
    """What only the group can tell (InvalidRequestError): a target above its max size, or more nodes
    than one drain holds with the one in progress. Called once the ASG is read, before any write."""
    if request.target is not None and request.target > asg.max_size:
        raise InvalidRequestError(
            f"request: target: {request.target} is above the max size {asg.max_size} of group "
            f"{request.group} (ASG {asg.name})",
            ("target",),
        )
    if request.nodes is not None:
        total = len(draining | set(request.nodes))
        if total > MAX_DRAIN_NODES:
            raise InvalidRequestError(
                f"request: nodes: with the {len(draining)} node(s) draining, {total} nodes would drain; "
                f"at most {MAX_DRAIN_NODES} at once",
                ("nodes",),
            )


# ---------------------------------------------------------------------------------------------- choice


@dataclass(frozen=True, slots=True)
class Candidate:
    """A live instance of the group, with its node (None while it has not registered) and workload."""

    instance: AsgInstance
    node: Node | None
    workload: tuple[Pod, ...] = ()  # pods that keep the node busy (safety.busy_pods)
    protection: str | None = None  # why an automatic choice must pass it over (safety.protection)

    @property
    def name(self) -> str:
        return self.node.name if self.node else self.instance.instance_id

    @property
    def idle(self) -> bool:
        return not self.workload

    @property
    def gpus(self) -> int:
        return sum(p.requests.gpus for p in self.workload)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node.name if self.node else None,
            "instance_id": self.instance.instance_id,
            "idle": self.idle,
            "pods": len(self.workload),
            "gpus": self.gpus,
        }


def candidates_of(
    asg: AsgState,
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    priority_cutoff: int | None,
    *,
    now: datetime,
    force: bool = False,
) -> list[Candidate]:
    """Every live instance of the group joined with its node and the pods keeping that node busy.

    `priority_cutoff` is the policy's pod_priority_cutoff: pods below it do not keep a node busy.
    `force`: the request's; it waives the scale-in protection the operator set (safety.protection).
    """
    by_instance = {n.instance_id: n for n in nodes if n.instance_id}
    on_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.node_name and not pod.is_terminal:
            on_node.setdefault(pod.node_name, []).append(pod)
    out = []
    for instance in asg.live_instances:
        node = by_instance.get(instance.instance_id)
        if node is None:
            out.append(
                Candidate(
                    instance, None, protection=scale_in_protection(instance.instance_id, asg, force=force)
                )
            )
            continue
        here = on_node.get(node.name, ())
        busy = tuple(busy_pods(here, priority_cutoff, now))
        out.append(Candidate(instance, node, busy, protection(node, here, asg, force=force)))
    return out


def _rank_key(candidate: Candidate) -> tuple[object, ...]:
    created = candidate.node.created_at if candidate.node else None
    newest_first = -created.timestamp() if created else 0.0
    return (
        candidate.node is not None,  # instances still booting have nothing to drain
        not candidate.idle,
        len(candidate.workload),
        candidate.gpus,
        newest_first,
        candidate.name,
    )


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Preferred first: unregistered instances, idle nodes, fewest pods, fewest GPUs, newest, by name."""
    return sorted(candidates, key=_rank_key)


@dataclass(frozen=True, slots=True)
class Refusal:
    target: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"target": self.target, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Choice:
    chosen: tuple[Candidate, ...]
    refused: tuple[Refusal, ...]


def choose(
    request: ForceScaleDownRequest,
    asg: AsgState,
    candidates: Sequence[Candidate],
    *,
    draining: frozenset[str] = frozenset(),
) -> Choice:
    """Which instances to remove, never taking the group below its min size.

    Nodes already `draining` (a drain in progress) count as leaving and are not chosen again; with
    them, at most MAX_DRAIN_NODES drain at once. Raises InvalidRequestError naming nodes that are not
    in the group, or a target or node list the group refuses (`check_against_group`); nothing is
    chosen then.
    """
    check_against_group(request, asg, draining)
    pool = [c for c in candidates if c.name not in draining]
    staying = len(pool)
    removable = max(0, staying - asg.min_size)
    refused: list[Refusal] = []
    if request.nodes is not None:
        by_name = {c.node.name: c for c in candidates if c.node}
        unknown = [n for n in request.nodes if n not in by_name]
        if unknown:
            named = ", ".join(unknown[:MAX_ERRORS_SHOWN])
            more = f" and {len(unknown) - MAX_ERRORS_SHOWN} more" if len(unknown) > MAX_ERRORS_SHOWN else ""
            raise InvalidRequestError(
                f"request: nodes: not nodes of group {request.group} (ASG {asg.name}): {named}{more}",
                ("nodes",),
            )
        wanted = []
        for candidate in rank(by_name[n] for n in request.nodes if n not in draining):
            protected = scale_in_protection(candidate.instance.instance_id, asg, force=request.force)
            if protected:
                refused.append(Refusal(candidate.name, f"{protected}: say force to remove it"))
            else:
                wanted.append(candidate)
    else:
        assert request.target is not None
        wanted = []
        for candidate in rank(pool):
            if candidate.protection:
                refused.append(Refusal(candidate.name, candidate.protection))
            else:
                wanted.append(candidate)
        count = max(0, staying - request.target)
        if count > len(wanted):
            refused.append(
                Refusal(request.group, f"only {len(wanted)} of {count} node(s) may be chosen automatically")
            )
        room = max(0, MAX_DRAIN_NODES - len(draining))
        if min(count, len(wanted)) > room:
            refused.append(
                Refusal(request.group, f"at most {MAX_DRAIN_NODES} nodes drain at once; {len(draining)} are")
            )
        wanted = wanted[: min(count, room)]
        if request.target < asg.min_size:
            refused.append(
                Refusal(
                    request.group, f"target {request.target} is below the group's min size {asg.min_size}"
                )
            )
    chosen = wanted[:removable]
    for candidate in wanted[removable:]:
        refused.append(Refusal(candidate.name, f"would take the group below its min size {asg.min_size}"))
    return Choice(tuple(chosen), tuple(refused))


# ---------------------------------------------------------------------------------------------- first pass


@dataclass
class DrainProgress:
    """What one pass over a drain did."""

    remaining: list[str] = field(default_factory=list)  # nodes still draining (cordoned, in the intent)
    terminated: list[str] = field(default_factory=list)  # nodes (or instance ids) terminated
    blocked: list[str] = field(default_factory=list)  # pods a PodDisruptionBudget kept (or a write failed)
    terminated_instances: list[str] = field(default_factory=list)

    @property
    def decrements(self) -> int:
        return len(self.terminated_instances)


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
    nodes = deps.ports.cluster.list_nodes()
    pods = deps.ports.cluster.list_pods()
    existing = next((i for i in deps.ports.state.drain_intents() if i.group == request.group), None)
    return _Read(asg, nodes, pods, existing)


def _first_pass(deps: Deps, run: RunInfo, request: ForceScaleDownRequest) -> ForceScaleDownReport:
    read = _read(deps, request)
    draining = frozenset(read.existing.nodes) if read.existing else frozenset()
    cutoff = deps.config.policy.pod_priority_cutoff
    choice = choose(
        request,
        read.asg,
        candidates_of(read.asg, read.nodes, read.pods, cutoff, now=run.started_at, force=request.force),
        draining=draining,
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
    workload: Sequence[Pod] | None = candidate.workload
    if candidate.idle and not applier.dry_run:
        workload = _workload(deps, applier, node.name, group)  # a pod bound just before the cordon stays
    if workload is None:
        progress.remaining.append(node.name)  # the reconcile runs finish it
        return
    if not workload:
        if applier.terminate(instance_id, node.name, group, f"{reason}: idle", decrement=True, region=region):
            progress.terminated.append(node.name)
            progress.terminated_instances.append(instance_id)
            run.tally.remove(group, instance_id, decrement=True)
            return
    else:
        _evict(
            applier, workload, group, delete=request.force and request.grace_seconds == 0, progress=progress
        )
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


# ------------------------------------------------------------------------------------ the continuation


def continue_drains(deps: Deps, run: RunInfo, gathered: Gathered) -> None:
    """One pass over every stored drain (each reconcile runs it after its terminations)."""
    for intent in gathered.intents:
        if intent.group not in deps.config.group_names:
            run.applier.note(
                ActionKind.DRAIN,
                intent.group,
                intent.group,
                "drain of an unknown group",
                ActionStatus.SKIPPED,
            )
            continue
        asg = gathered.asgs.get(deps.config.group(intent.group).asg_name)
        if asg is not None:
            asg = replace(asg, desired=asg.desired - run.tally.decrements[intent.group])
        progress = step(deps, run.applier, intent, asg, run.started_at)
        for instance_id in progress.terminated_instances:
            run.tally.remove(intent.group, instance_id, decrement=True)


def step(
    deps: Deps, applier: Applier, intent: DrainIntent, asg: AsgState | None, now: datetime
) -> DrainProgress:
    """One pass over a stored drain: evict what is left, terminate empty nodes, store what remains.

    Expired intents are deleted and their nodes left cordoned. A node uncordoned by someone else
    leaves the drain. Read failures keep the node for the next pass; nothing is guessed.
    """
    progress = DrainProgress()
    group = intent.group
    if now >= intent.expires_at:
        applier.note(
            ActionKind.DRAIN,
            group,
            group,
            f"gave up draining {', '.join(intent.nodes)}: expired at {intent.expires_at.isoformat()}; "
            "nodes left cordoned",
            ActionStatus.FAILED if intent.requested_by != INTERRUPTION_REQUESTER else ActionStatus.DONE,
            "drain expired",
        )
        applier.forget_intent(intent, "forget the expired drain")
        return progress
    if asg is None:
        # Without the group's instances nothing can be told apart: keep everything for later.
        applier.note(
            ActionKind.DRAIN,
            group,
            group,
            "drain paused",
            ActionStatus.SKIPPED,
            "Auto Scaling group not found",
        )
        progress.remaining.extend(intent.nodes)
        return progress
    for name in intent.nodes:
        _step_node(deps, applier, intent, asg, name, now, progress)
    if not progress.remaining:
        applier.note(ActionKind.DRAIN, group, group, f"drain of {', '.join(intent.nodes)} finished")
        applier.forget_intent(intent, "forget the finished drain")
    elif tuple(progress.remaining) != intent.nodes:
        applier.store_intent(
            replace(intent, nodes=tuple(progress.remaining)),
            f"drain of {', '.join(progress.remaining)} continues until {intent.expires_at.isoformat()}",
        )
    return progress


def _step_node(
    deps: Deps,
    applier: Applier,
    intent: DrainIntent,
    asg: AsgState,
    name: str,
    now: datetime,
    progress: DrainProgress,
) -> None:
    group = intent.group
    hold_only = intent.requested_by == INTERRUPTION_REQUESTER
    try:
        node = deps.ports.cluster.get_node(name)
    except (AuthError, ReadError, ThrottledError) as exc:
        _read_failed(applier, exc, name, group, progress)
        return
    if node is None:
        return  # gone: done
    if not node.instance_id or node.instance_id not in {i.instance_id for i in asg.live_instances}:
        # Terminating or gone (e.g. reclaimed spot): done; the cloud controller removes the Node.
        applier.note(ActionKind.DRAIN, name, group, "its instance left the group")
        return
    if not node.unschedulable:
        applier.note(
            ActionKind.DRAIN,
            name,
            group,
            "uncordoned by someone else: no longer drained",
            ActionStatus.SKIPPED,
        )
        return
    progress.remaining.append(name)
    if hold_only:
        return
    pods = _workload(deps, applier, name, group)
    if pods is None:
        return
    if pods:
        grace_over = now - intent.requested_at >= timedelta(seconds=intent.grace_seconds)
        _evict(applier, pods, group, delete=intent.force and grace_over, progress=progress)
        return
    if asg.desired - progress.decrements - 1 < asg.min_size:
        applier.note(
            ActionKind.TERMINATE,
            name,
            group,
            "drained",
            ActionStatus.SKIPPED,
            f"group at min size {asg.min_size}",
        )
        return
    region = deps.config.region_of(deps.config.group(group))
    if applier.terminate(
        node.instance_id, name, group, "drained: only DaemonSet pods left", decrement=True, region=region
    ):
        progress.remaining.remove(name)
        progress.terminated.append(name)
        progress.terminated_instances.append(node.instance_id)


def _workload(deps: Deps, applier: Applier, node: str, group: str) -> list[Pod] | None:
    """A fresh read of the pods keeping `node` busy; None when the read failed (recorded)."""
    try:
        pods = deps.ports.cluster.list_pods_on_node(node)
        return busy_pods(pods, deps.config.policy.pod_priority_cutoff, deps.clock.now())
    except (AuthError, ReadError, ThrottledError) as exc:
        _read_failed(applier, exc, node, group, DrainProgress())
        return None


def _read_failed(applier: Applier, exc: ScalerError, node: str, group: str, progress: DrainProgress) -> None:
    if isinstance(exc, AuthError):
        applier.forbid_destructive(exc)
    applier.note(ActionKind.DRAIN, node, group, "could not re-read the node", ActionStatus.FAILED, str(exc))
    progress.remaining.append(node)


def _evict(
    applier: Applier, pods: Sequence[Pod], group: str, *, delete: bool, progress: DrainProgress
) -> None:
    """Evict (through PDBs) or, with `delete`, delete each pod; one that stays is `blocked`."""
    for pod in pods:
        if delete:
            done = applier.delete_pod(pod, group, f"forced drain of {pod.node_name}: grace over")
        else:
            done = applier.evict(pod, group, f"drain of {pod.node_name}")
        if not done:
            progress.blocked.append(pod.key)


def hold_interrupted(
    applier: Applier, deps: Deps, node: Node, group: str, at: datetime, now: datetime
) -> None:
    """A spot interruption warning: store a hold-only intent, then cordon the node (in that order)."""
    existing = next((i for i in deps.ports.state.drain_intents() if i.group == group), None)
    hold = DrainIntent(
        group=group,
        nodes=(node.name,),
        requested_at=now,
        expires_at=now + INTERRUPTION_HOLD,
        grace_seconds=0,
        requested_by=INTERRUPTION_REQUESTER,
    )
    merged = merge_intents(existing, hold)
    stored = applier.store_intent(merged, f"hold {node.name} cordoned until {merged.expires_at.isoformat()}")
    if stored is None:
        applier.note(
            ActionKind.CORDON,
            node.name,
            group,
            "spot interruption warning",
            ActionStatus.SKIPPED,
            "the hold could not be stored: not cordoned",
        )
        return
    if not node.cordoned_by_scaler:
        applier.cordon(
            node, group, f"spot interruption warning at {at.isoformat()}", now, retry_conflict=True
        )


def merge_intents(existing: DrainIntent | None, new: DrainIntent) -> DrainIntent:
    """One intent per group: a new request adds its nodes to a drain in progress, never drops any."""
    if existing is None:
        return new
    nodes = tuple(sorted(set(existing.nodes) | set(new.nodes)))
    return DrainIntent(
        group=new.group,
        nodes=nodes,
        requested_at=new.requested_at,
        expires_at=max(existing.expires_at, new.expires_at),
        grace_seconds=new.grace_seconds,
        force=new.force or existing.force,
        # A spot-interruption hold only cordons (see INTERRUPTION_REQUESTER): merged into an
        # operator's drain, the drain must go on, so the operator stays the requester.
        requested_by=next(
            (r for r in (new.requested_by, existing.requested_by) if r and r != INTERRUPTION_REQUESTER),
            new.requested_by or existing.requested_by,
        ),
        revision=existing.revision,  # the write replaces exactly the intent read
    )


# ---------------------------------------------------------------------------------------------- report


@dataclass(frozen=True)
class ForceScaleDownReport:
    """What a forced scale-down did (or, in dry run, would do), JSON-able through `to_json`."""

    group: str
    asg_name: str
    dry_run: bool
    request: dict[str, Any]
    chosen: tuple[Candidate, ...]
    refused: tuple[Refusal, ...]
    actions: tuple[ActionRecord, ...]
    terminated: tuple[str, ...]
    draining: tuple[str, ...]  # nodes the stored intent keeps draining
    blocked: tuple[str, ...]  # pods PodDisruptionBudgets refused to evict for now
    intent_expires_at: datetime | None
    desired_before: int
    desired_after: int
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "group": self.group,
            "asg_name": self.asg_name,
            "dry_run": self.dry_run,
            "request": self.request,
            "chosen": [c.to_json() for c in self.chosen],
            "refused": [r.to_json() for r in self.refused],
            "terminated": list(self.terminated),
            "draining": list(self.draining),
            "blocked": list(self.blocked),
            "intent_expires_at": self.intent_expires_at.isoformat() if self.intent_expires_at else None,
            "desired_before": self.desired_before,
            "desired_after": self.desired_after,
            "actions": [a.to_json() for a in self.actions],
            "failed": [a.to_json() for a in self.actions if a.status is ActionStatus.FAILED],
            "errors": list(self.errors),
        }
