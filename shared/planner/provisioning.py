"""ProvisioningRequests answered as cluster-autoscaler answers them, all or nothing.

cluster-autoscaler (provisioningrequest/: checkcapacity, besteffortatomic, conditions) turns each
request into the pods of its PodTemplates and asks its scale-up simulation about them; so does this
module, through the same placement as the backlog (a request is one all-or-nothing unit):

- `check-capacity.autoscaling.x-k8s.io`: the pods must fit the free room of registered nodes (minus
  what other requests booked). Provisioned=True/CapacityIsFound, else Provisioned=False/
  CapacityIsNotFound (Failed=True instead with the parameter noRetry="true"). Never buys a node.
- `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: the pods are placed whole on free room, booting
  nodes and new nodes of one group; Provisioned=True with CapacityIsFound (nothing bought) or
  CapacityIsProvisioned, else nothing is bought and Provisioned=False/CapacityIsNotFound with what
  is missing, and the next run tries again, even when no group could hold the request at its max
  size today (a max size can be raised): cluster-autoscaler's besteffortatomic/provisioning_class.go
  sets Provisioned=False/CapacityIsNotFound ("CA will try to find it later") whenever its atomic
  scale-up does not succeed, and never Failed; only the week's expiry below fails such a request.
- Accepted=True is set on every request of these classes once it is answered.
- A Provisioned request books its capacity: until `policy.provisioning_booking_seconds` after
  Provisioned, the pods that have not arrived yet are placed first on every run, so their room is
  kept from scale-down and from other pods. Pods consuming the request (annotation
  `autoscaling.x-k8s.io/consume-provisioning-request`, or cluster-autoscaler's older key) use that
  booking. Then BookingExpired=True/CapacityReservationTimeExpired, or BookingExpired=True/
  CapacityIsConsumed as soon as every pod has arrived (finished pods are not listed: without it, the
  room of a short job would be held again once it is done). Kueue ignores BookingExpired on a
  workload already admitted.
- A request never provisioned within a week of its creation gets Failed=True/Expired
  (cluster-autoscaler's checkcapacity/processor.go: defaultReservationTime 10 min for the booking,
  defaultExpirationTime 7 days; applied here to both classes).

Conditions carry the request's generation as observedGeneration and keep their lastTransitionTime
while their status holds; a request whose conditions would not change gets no update, so a repeated
run writes nothing. Requests of other classes are left to whoever serves them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.domain.model import Pod
from shared.domain.plan import Outcome, PodOutcome
from shared.domain.provisioning import (
    ACCEPTED,
    BOOKING_EXPIRED,
    CHECK_CAPACITY_CLASS,
    FAILED,
    PROVISIONED,
    REASON_ACCEPTED,
    REASON_BOOKING_EXPIRED,
    REASON_CAPACITY_CONSUMED,
    REASON_CAPACITY_FOUND,
    REASON_CAPACITY_NOT_FOUND,
    REASON_CAPACITY_PROVISIONED,
    REASON_EXPIRED,
    REASON_FAILED_TO_CREATE_PODS,
    SUPPORTED_CLASSES,
    Condition,
    ConditionUpdate,
    PodTemplate,
    ProvisioningRequest,
    RequestAnswer,
    RequestOutcome,
    consumed_request,
)
from shared.planner.context import Context
from shared.planner.gangs import POD_SET, largest_first, nodes_needed, stand_ins

EXPIRY_SECONDS = 7 * 24 * 3600  # cluster-autoscaler's default expiration of a request never provisioned
ACCEPTED_MESSAGE = "ProvisioningRequest is accepted by backlog-scaler"
# The only codes that can mean "never": no group admits the pods, or none can hold them all even at
# its max size. Every other one (backoff, a template shape still being learnt from nodes that have not
# advertised their GPUs yet, the scheduler's filters) can change: Provisioned=False, tried again.
_PLACED = frozenset({Outcome.EXISTING, Outcome.IN_FLIGHT, Outcome.SCALE_UP})


@dataclass
class RequestBatch:
    """The pods one request stands for this run: its pending consumers and stand-ins for the rest."""

    request: ProvisioningRequest
    pods: list[Pod]
    booked: bool  # Provisioned earlier: placed before anything else, so its room stays held

    @property
    def existing_only(self) -> bool:
        """check-capacity never buys: neither for its answer nor to keep its booking."""
        return self.request.class_name == CHECK_CAPACITY_CLASS

    @property
    def label(self) -> str:
        return f"provisioning request {self.request.key}"


@dataclass
class PreparedRequests:
    batches: list[RequestBatch] = field(default_factory=list)
    consumers: frozenset[str] = frozenset()  # pending pods folded into a batch
    settled: dict[str, tuple[RequestAnswer, tuple[Condition, ...]]] = field(default_factory=dict)


def _condition(
    request: ProvisioningRequest, type_: str, status: bool, reason: str, message: str, now: datetime
) -> Condition:
    text = "True" if status else "False"
    old = request.condition(type_)
    # lastTransitionTime moves only when the status does (metav1.Condition semantics).
    at = old.last_transition_time if old is not None and old.status == text else now
    return Condition(type_, text, reason, message, request.generation, at)


def merged_conditions(
    request: ProvisioningRequest, wanted: Iterable[Condition]
) -> tuple[Condition, ...] | None:
    """The request's conditions with `wanted` set (others kept, in order); None when nothing changes."""
    by_type = {c.type: c for c in wanted}
    changed = False
    merged: list[Condition] = []
    for old in request.conditions:
        new = by_type.pop(old.type, None)
        if new is None:
            merged.append(old)
            continue
        changed = changed or not new.same_as(old)
        merged.append(new if not new.same_as(old) else old)
    if by_type:
        changed = True
        merged.extend(by_type.values())
    return tuple(merged) if changed else None


def _settle(
    prepared: PreparedRequests,
    request: ProvisioningRequest,
    outcome: RequestOutcome,
    reason: str,
    wanted: tuple[Condition, ...] = (),
) -> None:
    answer = RequestAnswer(request.key, request.class_name, outcome, None, 0, reason)
    prepared.settled[request.key] = (answer, wanted)


def _consumers(ctx: Context, keys: set[str]) -> tuple[dict[str, list[Pod]], dict[str, int]]:
    """Pending (unschedulable) consumers and the count of bound consumers, by request key."""
    pending: dict[str, list[Pod]] = {}
    bound: dict[str, int] = {}
    for pod in ctx.snapshot.pods:
        if pod.is_terminal or not pod.annotations:
            continue
        key = consumed_request(pod)
        if key is None or key not in keys:
            continue
        if pod.node_name:
            bound[key] = bound.get(key, 0) + 1
        elif pod.is_pending_unschedulable:
            pending.setdefault(key, []).append(pod)
    return pending, bound


def _stand_ins(
    request: ProvisioningRequest, templates: Mapping[str, PodTemplate], arrived: int
) -> list[Pod] | None:
    """Stand-ins for the request's pods that have not arrived (pod sets in order); None: a template
    is missing."""
    pods: list[Pod] = []
    for index, pod_set in enumerate(request.pod_sets):
        template = templates.get(f"{request.namespace}/{pod_set.template}")
        if template is None:
            return None
        count = min(pod_set.count, MAX_REQUEST_PODS)
        covered = min(arrived, count)
        arrived -= covered
        model = template.pod
        pods += stand_ins(model, request.name, f"{POD_SET}{index}-", count - covered, covered)
    return pods


MAX_REQUEST_PODS = 10_000  # per pod set: a bound on stand-ins (the API allows int32)


_Settled = tuple[RequestOutcome, str, tuple[Condition, ...]]


def _settled_by_conditions(ctx: Context, request: ProvisioningRequest) -> _Settled | None:
    """The answer of a request whose conditions decide it without placing anything (None: place it).

    Failed or BookingExpired are final; a booking past `provisioning_booking_seconds` expires; a
    request never provisioned within a week fails (cluster-autoscaler's expiration).
    """
    now = ctx.now
    failed = request.condition(FAILED)
    if failed is not None and failed.is_true:
        return RequestOutcome.FAILED, failed.message or failed.reason, ()
    if request.is_true(BOOKING_EXPIRED):
        return RequestOutcome.PROVISIONED, "booking expired: capacity is no longer held", ()
    provisioned = request.condition(PROVISIONED)
    if provisioned is not None and provisioned.is_true:
        booking = ctx.config.policy.provisioning_booking_seconds
        since = provisioned.last_transition_time
        if since is None or now - since >= timedelta(seconds=booking):
            message = f"capacity was held for {booking}s after Provisioned"
            expired = _condition(request, BOOKING_EXPIRED, True, REASON_BOOKING_EXPIRED, message, now)
            return RequestOutcome.PROVISIONED, f"booking expired: {message}", (expired,)
        return None
    if ctx.older_than(request.created_at, EXPIRY_SECONDS):
        message = "not provisioned within 7 days of its creation"
        return (
            RequestOutcome.FAILED,
            message,
            (_condition(request, FAILED, True, REASON_EXPIRED, message, now),),
        )
    return None


def _missing_template(ctx: Context, request: ProvisioningRequest) -> _Settled:
    known = {t.key for t in ctx.snapshot.pod_templates}
    missing = sorted(s.template for s in request.pod_sets if f"{request.namespace}/{s.template}" not in known)
    message = f"PodTemplate {request.namespace}/{missing[0] if missing else '?'} not found"
    wanted = (
        _condition(request, ACCEPTED, True, REASON_ACCEPTED, ACCEPTED_MESSAGE, ctx.now),
        _condition(request, PROVISIONED, False, REASON_FAILED_TO_CREATE_PODS, message, ctx.now),
    )
    return RequestOutcome.NOT_PROVISIONED, message, wanted


def _consumed(ctx: Context, request: ProvisioningRequest) -> _Settled:
    """Every pod of the request runs. A booking ends there (BookingExpired: a finished pod is no
    longer listed, and its room must not be held again); a request never answered is answered."""
    if request.is_true(PROVISIONED):
        message = "every pod of the request has arrived: the booking is released"
        released = _condition(request, BOOKING_EXPIRED, True, REASON_CAPACITY_CONSUMED, message, ctx.now)
        return RequestOutcome.PROVISIONED, message, (released,)
    message = "every pod of the request runs already"
    wanted = (
        _condition(request, ACCEPTED, True, REASON_ACCEPTED, ACCEPTED_MESSAGE, ctx.now),
        _condition(request, PROVISIONED, True, REASON_CAPACITY_FOUND, message, ctx.now),
    )
    return RequestOutcome.PROVISIONED, message, wanted


def prepare_requests(ctx: Context) -> PreparedRequests:
    """What each ProvisioningRequest of a served class stands for this run, and those answered
    without placing anything (terminal, expired, missing PodTemplate)."""
    snapshot = ctx.snapshot
    served = [r for r in snapshot.provisioning_requests if r.class_name in SUPPORTED_CLASSES]
    if not served:
        return PreparedRequests()
    templates = {t.key: t for t in snapshot.pod_templates}
    pending, bound = _consumers(ctx, {r.key for r in served})
    prepared = PreparedRequests()
    consumers: set[str] = set()
    for request in sorted(served, key=lambda r: r.key):
        settled = _settled_by_conditions(ctx, request)
        if settled is not None:
            _settle(prepared, request, *settled)
            continue
        waiting = pending.get(request.key, [])
        made = _stand_ins(request, templates, bound.get(request.key, 0) + len(waiting))
        if made is None:
            _settle(prepared, request, *_missing_template(ctx, request))
            continue
        pods = largest_first(waiting) + made
        consumers.update(p.key for p in waiting)
        if not pods:  # every pod arrived and is bound: the booking is used up
            _settle(prepared, request, *_consumed(ctx, request))
            continue
        prepared.batches.append(RequestBatch(request, pods, request.is_true(PROVISIONED)))
    prepared.consumers = frozenset(consumers)
    return prepared


def _describe_placement(
    ctx: Context, batch: RequestBatch, outcomes: list[PodOutcome], counted_on: Mapping[str, str]
) -> tuple[str | None, int, str]:
    """(group, nodes, reason): where the batch's pods go, in words."""
    registered = sorted(
        {counted_on[o.pod] for o in outcomes if o.outcome is Outcome.EXISTING and o.pod in counted_on}
    )
    group = next((o.group for o in outcomes if o.group and o.outcome is not Outcome.EXISTING), None)
    if group is None and registered:
        view = ctx.group_of_node.get(registered[0])
        group = view.name if view else None
    # Pods of several shapes may land in several groups (each where the scheduler would put it).
    rest: dict[str, list[tuple[Pod, PodOutcome]]] = {}
    for pod, outcome in zip(batch.pods, outcomes, strict=True):
        if outcome.outcome is not Outcome.EXISTING and outcome.group:
            rest.setdefault(outcome.group, []).append((pod, outcome))
    new_nodes = 0
    parts = []
    if registered:
        parts.append(f"free room on {len(registered)} registered node(s)")
    for name, members in sorted(rest.items()):
        view = next(v for v in ctx.groups if v.name == name)
        count = nodes_needed(ctx, view, [ctx.request(p.requests) for p, _ in members]) or 0
        kind = "new" if any(o.outcome is Outcome.SCALE_UP for _, o in members) else "booting"
        parts.append(f"{count} {kind} {name} node(s)")
        new_nodes += count
    pods = len(batch.pods)
    return group, len(registered) + new_nodes, f"{pods} pod(s) on " + " and ".join(parts)


def _answer_batch(
    ctx: Context, batch: RequestBatch, outcomes: Mapping[str, PodOutcome], counted_on: Mapping[str, str]
) -> tuple[RequestAnswer, tuple[Condition, ...]]:
    request, now = batch.request, ctx.now
    accepted = _condition(request, ACCEPTED, True, REASON_ACCEPTED, ACCEPTED_MESSAGE, now)
    mine = [outcomes.get(p.key) for p in batch.pods]
    placed = [o for o in mine if o is not None and o.outcome in _PLACED]
    if len(placed) == len(batch.pods):
        group, nodes, where = _describe_placement(ctx, batch, placed, counted_on)
        if batch.booked:
            return RequestAnswer(
                request.key, request.class_name, RequestOutcome.BOOKED, group, nodes, f"held: {where}"
            ), ()
        # Capacity booting or bought for it is provisioned; room that was free already is found.
        on_existing = all(o.outcome is Outcome.EXISTING for o in placed)
        reason = REASON_CAPACITY_FOUND if on_existing else REASON_CAPACITY_PROVISIONED
        wanted = (accepted, _condition(request, PROVISIONED, True, reason, where, now))
        return RequestAnswer(
            request.key, request.class_name, RequestOutcome.PROVISIONED, group, nodes, where
        ), wanted
    unplaced = next((o for o in mine if o is not None and o.outcome not in _PLACED), None)
    total_gpus = sum(p.requests.gpus for p in batch.pods)
    if batch.existing_only or unplaced is None:
        why = f"no free room on registered nodes for all {len(batch.pods)} pod(s) ({total_gpus} GPUs) at once"
    else:
        why = unplaced.reason
    if batch.booked:
        answer = RequestAnswer(
            request.key, request.class_name, RequestOutcome.BOOKED, None, 0, f"booked capacity lost: {why}"
        )
        return answer, ()
    if batch.existing_only and request.parameters.get("noRetry", "").lower() == "true":
        wanted = (accepted, _condition(request, FAILED, True, REASON_CAPACITY_NOT_FOUND, why, now))
        return RequestAnswer(request.key, request.class_name, RequestOutcome.FAILED, None, 0, why), wanted
    wanted = (accepted, _condition(request, PROVISIONED, False, REASON_CAPACITY_NOT_FOUND, why, now))
    return RequestAnswer(
        request.key, request.class_name, RequestOutcome.NOT_PROVISIONED, None, 0, why
    ), wanted


def answer_requests(
    ctx: Context,
    prepared: PreparedRequests,
    outcomes: Mapping[str, PodOutcome],
    counted_on: Mapping[str, str],
) -> tuple[tuple[RequestAnswer, ...], tuple[ConditionUpdate, ...]]:
    """One answer per request (sorted by name) and the status writes that change something."""
    answers: dict[str, RequestAnswer] = {}
    updates: list[ConditionUpdate] = []
    wanted_by: dict[str, tuple[ProvisioningRequest, tuple[Condition, ...]]] = {}
    for batch in prepared.batches:
        answer, wanted = _answer_batch(ctx, batch, outcomes, counted_on)
        answers[batch.request.key] = answer
        wanted_by[batch.request.key] = (batch.request, wanted)
    requests = {r.key: r for r in ctx.snapshot.provisioning_requests}
    for key, (answer, wanted) in prepared.settled.items():
        answers[key] = answer
        wanted_by[key] = (requests[key], wanted)
    for key in sorted(wanted_by):
        request, wanted = wanted_by[key]
        merged = merged_conditions(request, wanted) if wanted else None
        if merged is not None:
            summary = ", ".join(f"{c.type}={c.status} ({c.reason})" for c in wanted)
            updates.append(
                ConditionUpdate(
                    request.namespace, request.name, request.uid, merged, summary, request.version
                )
            )
    return tuple(answers[k] for k in sorted(answers)), tuple(updates)
