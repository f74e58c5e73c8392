"""Forced scale-down: the request, the choice of nodes (pure), and the drain steps over the ports.

A forced scale-down cordons the chosen nodes, evicts their pods through the Eviction API (so
PodDisruptionBudgets apply), terminates nodes once only DaemonSet/mirror pods are left (decrementing
the group's desired), and stores a `DrainIntent` that every reconcile run continues until its nodes
are gone or it expires. `Drainer` holds the steps; `shared.controller.Controller` runs them under the
cluster lease.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
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
from shared.domain.errors import (
    ActionError,
    ConflictError,
    EvictionBlockedError,
    InputError,
    NotFoundError,
    ReadError,
    ThrottledError,
)
from shared.domain.model import AsgInstance, AsgState, Node, Pod
from shared.domain.operations import (
    MAX_DRAIN_NODES,
    MAX_GROUP_NAME_LENGTH,
    MAX_NODE_NAME_LENGTH,
    MAX_REQUESTED_BY_LENGTH,
    DrainIntent,
)
from shared.ports import Cluster, Fleet, StateStore
from shared.reporting import ActionKind, ActionRecord, ActionStatus, Reporter

DEFAULT_GRACE_SECONDS = 300
MAX_GRACE_SECONDS = 24 * 3600
MAX_TARGET = 100_000  # a sanity bound; the group's own max size is checked once its ASG is read
# Errors echo this much of a bad value and name this many problems: a 1 MB value is never repeated.
PREVIEW_CHARS = 200
MAX_ERRORS_SHOWN = 5
_PREVIEW = reprlib.Repr()
_PREVIEW.maxlevel, _PREVIEW.maxdict, _PREVIEW.maxlist, _PREVIEW.maxtuple = 2, 4, 4, 4
_PREVIEW.maxstring = _PREVIEW.maxother = PREVIEW_CHARS
# A drain still blocked this long after its grace is given up: its nodes stay cordoned and it is reported.
GIVE_UP_AFTER_GRACE = timedelta(hours=1)
# Spot interruption warnings store a hold-only intent: the node stays cordoned until EC2 reclaims it.
INTERRUPTION_REQUESTER = "spot-interruption"
INTERRUPTION_HOLD = timedelta(minutes=10)


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
    force: StrictBool = False  # after the grace, delete pods that PodDisruptionBudgets still protect
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


def preview(value: object, limit: int = PREVIEW_CHARS) -> str:
    """At most about `limit` characters of a value for an error or a log line, never all of a big one."""
    try:
        text = _PREVIEW.repr(value)
    except ValueError:  # an integer past the digits str() converts
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = text[:limit] + "..."
    if isinstance(value, str) and len(value) > limit:
        text += f" ({len(value)} characters)"
    elif isinstance(value, list | tuple | dict) and len(value) > _PREVIEW.maxlist:
        text += f" ({len(value)} items)"
    return text


def describe_validation_error(exc: ValidationError, source: str) -> tuple[str, tuple[str, ...]]:
    """`source: field: message (got <preview>)` for the first few problems, and the fields named."""
    errors = exc.errors()
    located = {err["loc"][:1] for err in errors if len(err["loc"]) > 1}
    lines: list[str] = []
    fields: dict[str, None] = {}
    for err in errors:
        if err["type"] == "too_short" and err["loc"][:1] in located:
            continue  # pydantic also reports the list as empty once its items failed
        loc = [p if isinstance(p, int) else preview(p, 64).strip("'") for p in err["loc"]]
        if loc:
            fields[str(loc[0])] = None
        if len(lines) == MAX_ERRORS_SHOWN:
            continue
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        message = err["msg"].removeprefix("Value error, ")
        got = "" if err["type"] in ("missing", "too_long") else f" (got {preview(err['input'])})"
        lines.append(f"{source}: {path or '(root)'}: {message}{got}")
    if len(errors) > len(lines):
        lines.append(f"{source}: ... {len(errors)} problems in all")
    return "\n".join(lines), tuple(fields)


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
    workload: tuple[Pod, ...] = ()  # pods that keep the node busy (Pod.keeps_node_busy)

    @property
    def name(self) -> str:
        return self.node.name if self.node else self.instance.instance_id

    @property
    def idle(self) -> bool:
        return not self.workload

    @property
    def gpus(self) -> int:
        return sum(p.requests.gpus for p in self.workload)

    @property
    def protection(self) -> str | None:
        """Why an automatic choice must pass this node over (None: it may be chosen)."""
        if self.node and self.node.scale_down_disabled:
            return "scale-down disabled by annotation"
        if any(p.do_not_disrupt for p in self.workload):
            return "runs a pod annotated karpenter.sh/do-not-disrupt"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node.name if self.node else None,
            "instance_id": self.instance.instance_id,
            "idle": self.idle,
            "pods": len(self.workload),
            "gpus": self.gpus,
        }


def candidates_of(
    asg: AsgState, nodes: Iterable[Node], pods: Iterable[Pod], priority_cutoff: int | None
) -> list[Candidate]:
    """Every live instance of the group joined with its node and the pods keeping that node busy.

    `priority_cutoff` is the policy's pod_priority_cutoff: pods below it do not keep a node busy.
    """
    by_instance = {n.instance_id: n for n in nodes if n.instance_id}
    workload: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.node_name and pod.keeps_node_busy(priority_cutoff):
            workload.setdefault(pod.node_name, []).append(pod)
    out = []
    for instance in asg.live_instances:
        node = by_instance.get(instance.instance_id)
        busy = tuple(sorted(workload.get(node.name, ()), key=lambda p: p.key)) if node else ()
        out.append(Candidate(instance, node, busy))
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
        wanted = rank(by_name[n] for n in request.nodes if n not in draining)
    else:
        assert request.target is not None
        wanted = []
        for candidate in rank(pool):
            protection = candidate.protection
            if protection:
                refused.append(Refusal(candidate.name, protection))
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


# ---------------------------------------------------------------------------------------------- acting


class ActionLog:
    """The actions of one controller call: performs each (or records it in dry run), maps its errors.

    `guard` runs before every write (the controller checks and renews its lease there); AuthError and
    LeaseHeldError are not caught: they end the call.
    """

    def __init__(
        self, reporter: Reporter, *, dry_run: bool, guard: Callable[[], None] = lambda: None
    ) -> None:
        self.reporter = reporter
        self.dry_run = dry_run
        self.guard = guard
        self.records: list[ActionRecord] = []
        self.errors: list[str] = []

    def note(
        self,
        kind: ActionKind,
        target: str,
        group: str,
        reason: str,
        status: ActionStatus = ActionStatus.DONE,
        detail: str = "",
    ) -> ActionRecord:
        record = ActionRecord(kind, target, group, reason, status, detail)
        self.records.append(record)
        if status is ActionStatus.FAILED:
            self.errors.append(f"{kind} {target}: {detail}")
        self.reporter.log_action(record)
        return record

    def perform(
        self, kind: ActionKind, target: str, group: str, reason: str, write: Callable[[], object]
    ) -> bool:
        """Run one write; True when done (or, in dry run, when it would have been attempted)."""
        if self.dry_run:
            self.note(kind, target, group, reason, ActionStatus.DRY_RUN)
            return True
        self.guard()
        try:
            write()
        except EvictionBlockedError as exc:
            self.note(kind, target, group, reason, ActionStatus.BLOCKED, str(exc))
            return False
        except (ConflictError, NotFoundError) as exc:
            self.note(kind, target, group, reason, ActionStatus.SKIPPED, str(exc))
            return False
        except (ActionError, ReadError, ThrottledError) as exc:
            self.note(kind, target, group, reason, ActionStatus.FAILED, str(exc))
            return False
        self.note(kind, target, group, reason)
        return True

    @property
    def changed(self) -> bool:
        return any(r.status is ActionStatus.DONE for r in self.records)


@dataclass
class DrainProgress:
    """What one pass over a drain intent did."""

    remaining: list[str] = field(default_factory=list)
    terminated: list[str] = field(default_factory=list)
    evicting: list[str] = field(default_factory=list)  # pods asked to leave (or deleted) this pass
    blocked: list[str] = field(default_factory=list)  # pods a PodDisruptionBudget kept
    terminated_instances: list[str] = field(default_factory=list)

    @property
    def decrements(self) -> int:
        return len(self.terminated_instances)


class Drainer:
    """Cordon, evict and terminate-when-empty over the ports; every write goes through an ActionLog."""

    def __init__(
        self, *, cluster: Cluster, fleet: Fleet, state: StateStore, priority_cutoff: int | None
    ) -> None:
        self._cluster = cluster
        self._fleet = fleet
        self._state = state
        self._priority_cutoff = priority_cutoff  # the policy's pod_priority_cutoff

    def cordon(self, node: Node, group: str, reason: str, at: datetime, log: ActionLog) -> bool:
        """Cordon unless already cordoned; a conflicting change is re-read and retried once."""
        if node.cordoned_by_scaler:
            return True
        done = log.perform(
            ActionKind.CORDON,
            node.name,
            group,
            reason,
            lambda: self._cordon_fresh(node, at),
        )
        return done

    def _cordon_fresh(self, node: Node, at: datetime) -> None:
        try:
            self._cluster.cordon(node.name, at, resource_version=node.resource_version or None)
        except ConflictError:
            fresh = self._cluster.get_node(node.name)
            if fresh is None:
                raise NotFoundError(f"node {node.name} is gone") from None
            self._cluster.cordon(node.name, at, resource_version=fresh.resource_version or None)

    def evict(
        self, pods: Sequence[Pod], group: str, *, delete: bool, log: ActionLog, progress: DrainProgress
    ) -> None:
        """Evict (through PDBs) or, with `delete`, delete each pod."""
        for pod in pods:
            if delete:
                ok = log.perform(
                    ActionKind.DELETE_POD,
                    pod.key,
                    group,
                    f"forced drain of {pod.node_name}: grace over",
                    partial(self._cluster.delete_pod, pod.namespace, pod.name),
                )
            else:
                ok = log.perform(
                    ActionKind.EVICT,
                    pod.key,
                    group,
                    f"drain of {pod.node_name}",
                    partial(self._cluster.evict, pod.namespace, pod.name),
                )
            (progress.evicting if ok else progress.blocked).append(pod.key)

    def terminate(
        self, instance_id: str, node: str | None, group: str, reason: str, region: str, log: ActionLog
    ) -> bool:
        """Terminate with decrement, then delete the Node object (best effort)."""
        done = log.perform(
            ActionKind.TERMINATE,
            node or instance_id,
            group,
            reason,
            lambda: self._fleet.terminate_instance(instance_id, decrement=True, region=region),
        )
        if done and node:
            log.perform(
                ActionKind.DELETE_NODE, node, group, "its instance was terminated", lambda: self._delete(node)
            )
        return done

    def _delete(self, node: str) -> None:
        self._cluster.delete_node(node)

    def workload(self, node: str) -> tuple[Pod, ...]:
        """A fresh read of the pods that keep `node` busy."""
        cutoff = self._priority_cutoff
        return tuple(p for p in self._cluster.list_pods_on_node(node) if p.keeps_node_busy(cutoff))

    def step(self, intent: DrainIntent, asg: AsgState | None, now: datetime, log: ActionLog) -> DrainProgress:
        """One pass over a stored drain: evict what is left, terminate empty nodes, store what remains.

        Expired intents are deleted and their nodes left cordoned. A node uncordoned by someone else
        leaves the drain. Read failures keep the node for the next pass; nothing is guessed.
        """
        progress = DrainProgress()
        group = intent.group
        if now >= intent.expires_at:
            log.note(
                ActionKind.DRAIN,
                group,
                group,
                f"gave up draining {', '.join(intent.nodes)}: expired at {intent.expires_at.isoformat()}; "
                "nodes left cordoned",
                ActionStatus.FAILED if intent.requested_by != INTERRUPTION_REQUESTER else ActionStatus.DONE,
                "drain expired",
            )
            self._forget(intent, log)
            return progress
        if asg is None:
            # Without the group's instances nothing can be told apart: keep everything for later.
            log.note(
                ActionKind.DRAIN,
                group,
                group,
                "drain paused",
                ActionStatus.SKIPPED,
                "Auto Scaling group not found",
            )
            progress.remaining.extend(intent.nodes)
            return progress
        live = {i.instance_id for i in asg.live_instances}
        hold_only = intent.requested_by == INTERRUPTION_REQUESTER
        grace_over = now - intent.requested_at >= timedelta(seconds=intent.grace_seconds)
        for name in intent.nodes:
            try:
                node = self._cluster.get_node(name)
                pods = self.workload(name) if node is not None and not hold_only else ()
            except (ReadError, ThrottledError) as exc:
                log.note(
                    ActionKind.DRAIN, name, group, "could not re-read the node", ActionStatus.FAILED, str(exc)
                )
                progress.remaining.append(name)
                continue
            if node is None:
                continue  # gone: done
            if not node.instance_id or node.instance_id not in live:
                # Terminating or gone (e.g. reclaimed spot): done; the cloud controller removes the Node.
                log.note(ActionKind.DRAIN, name, group, "its instance left the group", ActionStatus.DONE)
                continue
            if not node.unschedulable:
                log.note(
                    ActionKind.DRAIN,
                    name,
                    group,
                    "uncordoned by someone else: no longer drained",
                    ActionStatus.SKIPPED,
                )
                continue
            progress.remaining.append(name)
            if hold_only:
                continue
            if pods:
                self.evict(pods, group, delete=intent.force and grace_over, log=log, progress=progress)
                continue
            if asg.desired - progress.decrements - 1 < asg.min_size:
                log.note(
                    ActionKind.TERMINATE,
                    name,
                    group,
                    "drained",
                    ActionStatus.SKIPPED,
                    f"group at min size {asg.min_size}",
                )
                continue
            if self.terminate(
                node.instance_id, name, group, "drained: only DaemonSet pods left", asg.region, log
            ):
                progress.remaining.remove(name)
                progress.terminated.append(name)
                progress.terminated_instances.append(node.instance_id)
        if not progress.remaining:
            log.note(ActionKind.DRAIN, group, group, f"drain of {', '.join(intent.nodes)} finished")
            self._forget(intent, log)
        elif tuple(progress.remaining) != intent.nodes:
            updated = DrainIntent(
                group=intent.group,
                nodes=tuple(progress.remaining),
                requested_at=intent.requested_at,
                expires_at=intent.expires_at,
                grace_seconds=intent.grace_seconds,
                force=intent.force,
                requested_by=intent.requested_by,
            )
            self.store(updated, log)
        return progress

    def store(self, intent: DrainIntent, log: ActionLog) -> bool:
        return log.perform(
            ActionKind.DRAIN,
            intent.group,
            intent.group,
            f"drain of {', '.join(intent.nodes)} continues until {intent.expires_at.isoformat()}",
            lambda: self._state.put_drain_intent(intent),
        )

    def _forget(self, intent: DrainIntent, log: ActionLog) -> None:
        if not log.dry_run:
            log.guard()
            try:
                self._state.delete_drain_intent(intent.group)
            except ActionError as exc:
                log.note(
                    ActionKind.DRAIN,
                    intent.group,
                    intent.group,
                    "forget the drain",
                    ActionStatus.FAILED,
                    str(exc),
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
            "errors": list(self.errors),
        }
