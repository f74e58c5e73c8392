"""The three request bodies (pydantic models), their relevance and the AdmissionReview answer.

- `/admission`: an AdmissionReview (admission.k8s.io/v1). Relevant when it is the CREATE (not a
  dry run) of a Pod that needs an accelerator (`shared.domain.resources.needs_accelerator`: a
  container or init container requests or limits nvidia.com/gpu, a MIG slice, aws.amazon.com/neuron
  or neuroncore, any "gpu" resource..., or the pod claims devices through DRA spec.resourceClaims),
  or of an autoscaling.x-k8s.io ProvisioningRequest.
  The envelope is validated strictly (we must echo its uid); the object inside it leniently: a pod
  we cannot read is admitted and simply not relevant.
- `/events`: Kubernetes core/v1 Events from an event forwarder: one Event, `{"events": [...]}` or an
  EventList. Relevant when one of them says the scheduler could not place a pod (FailedScheduling)
  or the cluster-autoscaler would not help it (NotTriggerScaleUp).
- `/poke`: `{"reason": "..."}`, always relevant.

Parse errors are BadRequestErrors naming the field (`request.uid: Field required`), never the value.

Bounded work: parsed JSON costs tens of bytes per value (an empty object `{}` takes 3 bytes of body
and ~70 of memory), so a 256 KiB body of tiny items would cost hundreds of MiB once validated. Before
anything is parsed, a body with more than MAX_JSON_VALUES values (counted on the raw bytes: commas and
opening brackets outside strings) is refused with a 413; a batch with more than MAX_EVENTS events is
refused the same way after parsing, before any model is built. So one request costs at most a few
times the body limit (tests/unit/test_webhook_bounds.py measures it).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeVar

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from functions.webhook.errors import BadRequestError, PayloadTooLargeError
from shared.constants import PROVISIONING_API_GROUP
from shared.domain.resources import needs_accelerator
from shared.formats.validation import format_validation_error

ADMISSION_API_VERSION = "admission.k8s.io/v1"
RELEVANT_EVENT_REASONS = frozenset({"FailedScheduling", "NotTriggerScaleUp"})
MAX_REASON_CHARS = 256
MAX_ERRORS_SHOWN = 5
MAX_JSON_VALUES = 4_000  # a large pod's AdmissionReview has ~1,000; parsed, they cost < 400 KiB
MAX_EVENTS = 100  # per request (`{"events": [...]}` or an EventList); forwarders send 1 to a few


class _Lenient(BaseModel):
    """Kubernetes objects carry far more than we read: ignore the rest."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)


# AdmissionReview


class GroupVersionKind(_Lenient):
    group: str = ""
    version: str = ""
    kind: str = ""


class AdmissionRequest(_Lenient):
    uid: str = Field(min_length=1)
    kind: GroupVersionKind | None = None
    operation: str
    name: str = ""
    namespace: str = ""
    dry_run: bool | None = Field(default=None, alias="dryRun")
    object: dict[str, Any] | None = None


class AdmissionReview(_Lenient):
    api_version: Literal["admission.k8s.io/v1"] = Field(alias="apiVersion")
    kind: Literal["AdmissionReview"]
    request: AdmissionRequest


class ResourceRequirements(_Lenient):
    requests: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None


class Container(_Lenient):
    resources: ResourceRequirements | None = None


class PodSpec(_Lenient):
    containers: list[Container] | None = None
    init_containers: list[Container] | None = Field(default=None, alias="initContainers")
    # DRA (resource.k8s.io): each entry names a ResourceClaim or a template; only their presence counts.
    resource_claims: list[Any] | None = Field(default=None, alias="resourceClaims")


class ObjectMeta(_Lenient):
    name: str | None = None
    generate_name: str | None = Field(default=None, alias="generateName")
    namespace: str | None = None


class Pod(_Lenient):
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None


# Events


class ObjectReference(_Lenient):
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None


class CoreEvent(_Lenient):
    api_version: Literal["v1"] | None = Field(default=None, alias="apiVersion")
    kind: Literal["Event"] | None = None
    reason: str
    involved_object: ObjectReference = Field(alias="involvedObject")
    message: str | None = None


class EventBatch(_Lenient):
    events: list[CoreEvent] = Field(max_length=MAX_EVENTS)


class EventList(_Lenient):
    api_version: Literal["v1"] | None = Field(default=None, alias="apiVersion")
    kind: Literal["EventList"]
    items: list[CoreEvent] = Field(max_length=MAX_EVENTS)


# Poke


class Poke(_Lenient):
    reason: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_REASON_CHARS)
    ]


ModelT = TypeVar("ModelT", bound=BaseModel)


def _validate(model: type[ModelT], document: object, source: str) -> ModelT:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        lines = format_validation_error(exc, source, model).splitlines()
        shown = "; ".join(lines[:MAX_ERRORS_SHOWN])
        more = f" (+{len(lines) - MAX_ERRORS_SHOWN} more)" if len(lines) > MAX_ERRORS_SHOWN else ""
        raise BadRequestError(shown + more) from exc


# A JSON string, escapes included; possessive so that a long string costs no backtracking state.
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
_VALUE_MARKS = (b",", b"[", b"{")


def _value_marks(body: bytes, start: int, end: int) -> int:
    return sum(body.count(mark, start, end) for mark in _VALUE_MARKS)


def has_too_many_values(body: bytes, limit: int = MAX_JSON_VALUES) -> bool:
    """True when the JSON in `body` has more than `limit` values, judged without parsing it.

    Every value but the root follows a comma or opens its container's first slot, so 1 + the commas
    and opening brackets outside strings bound the number of values from above.
    """
    if 1 + _value_marks(body, 0, len(body)) <= limit:
        return False  # the usual case: under the limit even counting the marks inside strings
    count, position = 1, 0
    for string in _JSON_STRING.finditer(body):
        count += _value_marks(body, position, string.start())
        if count > limit:
            return True  # early: an attack body stops here after `limit` marks
        position = string.end()
    return count + _value_marks(body, position, len(body)) > limit


def _json(body: bytes, source: str) -> object:
    if not body.strip():
        raise BadRequestError(f"{source}: empty body, expected a JSON object")
    if has_too_many_values(body):
        raise PayloadTooLargeError(
            f"{source}: more than {MAX_JSON_VALUES} JSON values in the body; send fewer or smaller objects"
        )
    try:
        return pydantic_core.from_json(body)  # bounded nesting depth: deep input is an error, not a crash
    except ValueError as exc:
        raise BadRequestError(f"{source}: body is not valid JSON: {exc}") from exc


def parse_admission(body: bytes) -> AdmissionReview:
    """The AdmissionReview in `body`; BadRequestError when it cannot be answered."""
    return _validate(AdmissionReview, _json(body, "admission"), "admission")


def _resource_names(spec: PodSpec) -> list[str]:
    """Every resource name the pod's containers and init containers request or limit."""
    names: list[str] = []
    for container in [*(spec.containers or ()), *(spec.init_containers or ())]:
        if container.resources is not None:
            names += [*(container.resources.requests or {}), *(container.resources.limits or {})]
    return names


def _is_provisioning_request(kind: GroupVersionKind | None) -> bool:
    return kind is not None and (kind.group, kind.kind) == (PROVISIONING_API_GROUP, "ProvisioningRequest")


def admission_reason(review: AdmissionReview) -> str | None:
    """Why this review should trigger a reconcile (None: neither a pod that needs an accelerator nor
    a ProvisioningRequest being created)."""
    request = review.request
    if request.operation != "CREATE" or request.dry_run or request.object is None:
        return None
    if _is_provisioning_request(request.kind):
        # Kueue asks for capacity before it creates pods: the answer is due as fast as for a pod.
        meta = _metadata(request.object)
        namespace = request.namespace or meta.namespace or "default"
        return f"ProvisioningRequest created: {namespace}/{request.name or meta.name or '?'}"
    is_pod = request.kind is None or (request.kind.kind == "Pod" and request.kind.group == "")
    if not is_pod:
        return None
    try:
        pod = Pod.model_validate(request.object)
    except ValidationError:
        return None  # the API server validated the pod already; this is not one we can read
    spec = pod.spec or PodSpec()
    if not needs_accelerator(_resource_names(spec), claims_devices=bool(spec.resource_claims)):
        return None
    meta = pod.metadata or ObjectMeta()
    namespace = request.namespace or meta.namespace or "default"
    name = request.name or meta.name or f"{meta.generate_name or ''}*"
    return f"GPU pod created: {namespace}/{name}"


def _metadata(obj: dict[str, Any]) -> ObjectMeta:
    try:
        return ObjectMeta.model_validate(obj.get("metadata") or {})
    except ValidationError:
        return ObjectMeta()


def admission_response(uid: str) -> dict[str, Any]:
    """The answer that admits the pod (this webhook only observes; it never denies)."""
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": True},
    }


def parse_events(body: bytes) -> tuple[CoreEvent, ...]:
    """The Events in `body` (one Event, `{"events": [...]}` or an EventList); BadRequestError."""
    document = _json(body, "events")
    if isinstance(document, dict) and "events" in document:
        _check_event_count(document["events"], "events")
        return tuple(_validate(EventBatch, document, "events").events)
    if isinstance(document, dict) and document.get("kind") == "EventList":
        _check_event_count(document.get("items"), "items")
        return tuple(_validate(EventList, document, "events").items)
    return (_validate(CoreEvent, document, "event"),)


def _check_event_count(events: object, field: str) -> None:
    # Before validation: a model per event (and an error per bad one) is what costs the memory.
    if isinstance(events, list) and len(events) > MAX_EVENTS:
        raise PayloadTooLargeError(
            f"events: {field} has {len(events)} events, at most {MAX_EVENTS} per request;"
            " send smaller batches"
        )


def events_reason(events: tuple[CoreEvent, ...]) -> str | None:
    """Why these events should trigger a reconcile (None: none says a pod cannot be placed)."""
    relevant = [event for event in events if event.reason in RELEVANT_EVENT_REASONS]
    if not relevant:
        return None
    first = relevant[0].involved_object
    subject = f"{first.namespace or 'default'}/{first.name or '?'}"
    more = f" (+{len(relevant) - 1} more)" if len(relevant) > 1 else ""
    return f"{relevant[0].reason}: {subject}{more}"


def parse_poke(body: bytes) -> Poke:
    """The poke in `body`; BadRequestError when it has no usable reason."""
    return _validate(Poke, _json(body, "poke"), "poke")
