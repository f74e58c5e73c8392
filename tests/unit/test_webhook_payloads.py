"""Webhook bodies: what is relevant, what is malformed, and how the raw body is read."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from functions.webhook.errors import BadRequestError, PayloadTooLargeError
from functions.webhook.payloads import (
    admission_reason,
    admission_response,
    events_reason,
    parse_admission,
    parse_events,
    parse_poke,
)
from functions.webhook.request import is_known_route, read_body, route_path
from tests.builders import admission_review
from tests.builders_provisioning import provisioning_request


def review(
    containers: list[dict[str, Any]] | None = None,
    *,
    init_containers: list[dict[str, Any]] | None = None,
    **request: Any,
) -> bytes:
    pod = {
        "metadata": {"name": "train-0", "namespace": "research"},
        "spec": {"containers": containers or [{"name": "main"}], "initContainers": init_containers or []},
    }
    return json.dumps(admission_review(pod, **{"namespace": "research", **request})).encode()


def gpu_container(where: str = "requests", name: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"name": "main", "resources": {where: {name: 1, "cpu": "4"}}}


def event(reason: str = "FailedScheduling", name: str = "train-0") -> dict[str, Any]:
    return {"reason": reason, "involvedObject": {"kind": "Pod", "namespace": "research", "name": name}}


# Admission


@pytest.mark.parametrize(
    ("containers", "init_containers"),
    [
        ([gpu_container("requests")], None),
        ([gpu_container("limits")], None),
        ([{"name": "a"}, gpu_container("requests", "amd.com/gpu")], None),
        ([{"name": "main"}], [gpu_container("limits", "nvidia.com/gpu")]),
        ([gpu_container("limits", "nvidia.com/mig-1g.5gb")], None),
        ([gpu_container("limits", "aws.amazon.com/neuron")], None),
        ([gpu_container("requests", "aws.amazon.com/neuroncore")], None),
        ([gpu_container("limits", "habana.ai/gaudi")], None),
        ([gpu_container("limits", "gpu.intel.com/i915")], None),
    ],
    ids=["requests", "limits-only", "amd", "init-container", "mig", "neuron", "neuroncore", "gaudi", "intel"],
)
def test_accelerator_pod_creation_is_relevant(
    containers: list[dict[str, Any]], init_containers: list[dict[str, Any]] | None
) -> None:
    # Given the admission of a pod with an accelerator resource in some container (the planner scales
    # for any of them: shared.domain.resources.needs_accelerator)
    parsed = parse_admission(review(containers, init_containers=init_containers))

    # When its relevance is decided
    # Then it names the pod
    assert admission_reason(parsed) == "GPU pod created: research/train-0"


@pytest.mark.parametrize(
    ("containers", "request_fields"),
    [
        ([{"name": "main", "resources": {"requests": {"cpu": "1"}}}], {}),
        ([{"name": "main", "resources": None}], {}),
        ([{"name": "main", "resources": {"requests": None, "limits": None}}], {}),
        ([gpu_container("limits", "vpc.amazonaws.com/efa")], {}),
        # The scheduler matches names exactly and no device plugin registers this one
        ([gpu_container("limits", "NVIDIA.COM/GPU")], {}),
        ([gpu_container()], {"operation": "UPDATE"}),
        ([gpu_container()], {"dryRun": True}),
        ([gpu_container()], {"kind": {"group": "batch", "version": "v1", "kind": "Job"}}),
        ([gpu_container()], {"object": None}),
        ([gpu_container()], {"object": {"spec": {"containers": "not-a-list"}}}),
    ],
    ids=[
        "cpu-only",
        "null-resources",
        "null-maps",
        "efa-only",
        "differently-cased",
        "update",
        "dry-run",
        "not-a-pod",
        "no-object",
        "odd-pod",
    ],
)
def test_other_admissions_are_not_relevant(
    containers: list[dict[str, Any]], request_fields: dict[str, Any]
) -> None:
    # Given an admission that is not the real creation of a GPU pod (or one we cannot read)
    parsed = parse_admission(review(containers, **request_fields))

    # When its relevance is decided
    # Then it is not relevant (and it will still be allowed)
    assert admission_reason(parsed) is None


def test_a_pod_that_claims_devices_through_dra_is_relevant() -> None:
    # Given the admission of a pod whose container asks for no extended resource but which claims a
    # GPU through a ResourceClaimTemplate (DRA, resource.k8s.io)
    body = json.loads(review([{"name": "main", "resources": {"claims": [{"name": "gpu"}]}}]))
    body["request"]["object"]["spec"]["resourceClaims"] = [
        {"name": "gpu", "resourceClaimTemplateName": "single-gpu"}
    ]

    # When its relevance is decided
    # Then it wakes the scaler like a pod asking for nvidia.com/gpu
    assert admission_reason(parse_admission(json.dumps(body).encode())) == "GPU pod created: research/train-0"


def test_generated_name_is_reported_with_a_star() -> None:
    body = json.loads(review([gpu_container()], name=""))
    body["request"]["object"]["metadata"] = {"generateName": "train-"}
    assert admission_reason(parse_admission(json.dumps(body).encode())) == "GPU pod created: research/train-*"


def provisioning_request_review(**request: Any) -> bytes:
    """The AdmissionReview the API server sends when Kueue creates a ProvisioningRequest."""
    obj = provisioning_request("job-llm-prov-1", [("ppt-job-llm-main", 2)])
    document = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "uid-2",
            "kind": {"group": "autoscaling.x-k8s.io", "version": "v1", "kind": "ProvisioningRequest"},
            "resource": {
                "group": "autoscaling.x-k8s.io",
                "version": "v1",
                "resource": "provisioningrequests",
            },
            "operation": "CREATE",
            "namespace": "research",
            "name": "job-llm-prov-1",
            "object": obj,
            **request,
        },
    }
    return json.dumps(document).encode()


def test_provisioning_request_creation_is_relevant() -> None:
    parsed = parse_admission(provisioning_request_review())
    assert admission_reason(parsed) == "ProvisioningRequest created: research/job-llm-prov-1"


@pytest.mark.parametrize("fields", [{"operation": "UPDATE"}, {"dryRun": True}, {"object": None}])
def test_other_provisioning_request_admissions_are_not_relevant(fields: dict[str, Any]) -> None:
    assert admission_reason(parse_admission(provisioning_request_review(**fields))) is None


def test_admission_response_always_allows() -> None:
    assert admission_response("uid-9") == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "uid-9", "allowed": True},
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "admission: empty body"),
        (b"[1, 2]", "admission: (root): Input should be a valid dictionary"),
        (b"\xff\xfe{}", "admission: body is not valid JSON"),
        (b"[" * 1000, "admission: body is not valid JSON"),  # nested too deep, under the value limit
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            "admission: request: Field required",
        ),
        (review(uid=""), "admission: request.uid: String should have at least 1 character"),
    ],
    ids=["empty", "array", "not-utf8", "deep-nesting", "no-request", "empty-uid"],
)
def test_unanswerable_reviews_are_bad_requests(body: bytes, message: str) -> None:
    with pytest.raises(BadRequestError) as raised:
        parse_admission(body)
    assert raised.value.message.startswith(message)


def test_validation_errors_do_not_echo_values() -> None:
    # Given a review whose bad field holds something secret-looking
    body = json.dumps({"apiVersion": "v1", "kind": "AdmissionReview", "request": {"uid": "sekrit-value"}})

    # When it is refused
    with pytest.raises(BadRequestError) as raised:
        parse_admission(body.encode())

    # Then the message names fields, not values
    assert "sekrit" not in raised.value.message and "apiVersion" in raised.value.message


# Events


@pytest.mark.parametrize(
    "document",
    [
        event(),
        {"apiVersion": "v1", "kind": "Event", **event()},
        {"events": [event("Scheduled"), event(), event(name="train-1")]},
        {"apiVersion": "v1", "kind": "EventList", "metadata": {}, "items": [event(), event(name="train-1")]},
    ],
    ids=["bare-event", "typed-event", "batch", "event-list"],
)
def test_failed_scheduling_in_any_shape_is_relevant(document: dict[str, Any]) -> None:
    reason = events_reason(parse_events(json.dumps(document).encode()))
    assert reason is not None and reason.startswith("FailedScheduling: research/train-0")


def test_relevant_events_are_counted_in_the_reason() -> None:
    events = parse_events(
        json.dumps({"events": [event(), event(name="b"), event("NotTriggerScaleUp")]}).encode()
    )
    assert events_reason(events) == "FailedScheduling: research/train-0 (+2 more)"


@pytest.mark.parametrize(
    "document",
    [event("Scheduled"), event("Pulled"), {"events": []}, {"kind": "EventList", "items": [event("Killing")]}],
)
def test_other_events_are_not_relevant(document: dict[str, Any]) -> None:
    assert events_reason(parse_events(json.dumps(document).encode())) is None


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"reason": "FailedScheduling"}, "event: involvedObject: Field required"),
        ({"involvedObject": {}}, "event: reason: Field required"),
        ({**event(), "kind": "Pod"}, "event: kind: Input should be 'Event'"),
        ({**event(), "apiVersion": "events.k8s.io/v1"}, "event: apiVersion: Input should be 'v1'"),
        ({"events": {"not": "a list"}}, "events: events: Input should be a valid list"),
        ({"kind": "EventList"}, "events: items: Field required"),
        ("FailedScheduling", "event: (root): Input should be a valid dictionary"),
    ],
)
def test_malformed_events_are_bad_requests(document: object, message: str) -> None:
    with pytest.raises(BadRequestError) as raised:
        parse_events(json.dumps(document).encode())
    assert raised.value.message.startswith(message)


def test_many_errors_are_summarised() -> None:
    with pytest.raises(BadRequestError) as raised:
        parse_events(json.dumps({"events": [{} for _ in range(10)]}).encode())
    assert raised.value.message.endswith("(+15 more)")


# Poke


def test_poke_reason_is_trimmed() -> None:
    assert parse_poke(b'{"reason": "  nightly batch  ", "extra": 1}').reason == "nightly batch"


@pytest.mark.parametrize(
    "body", [b"{}", b'{"reason": ""}', b'{"reason": 5}', json.dumps({"reason": "x" * 257}).encode(), b"null"]
)
def test_poke_without_a_usable_reason_is_a_bad_request(body: bytes) -> None:
    with pytest.raises(BadRequestError):
        parse_poke(body)


# The raw body


def test_text_and_base64_bodies_give_the_same_bytes() -> None:
    data = '{"reason": "café"}'.encode()
    assert read_body({}, data.decode(), False) == data
    assert read_body({}, base64.b64encode(data).decode(), True) == data
    assert read_body({}, None, False) == b""


@pytest.mark.parametrize(
    ("headers", "body", "is_base64", "error"),
    [
        ({"Content-Length": "11"}, "x" * 11, False, PayloadTooLargeError),
        ({"content-length": "0" * 50 + "1"}, "x", False, None),
        ({"content-length": "9" * 5000}, "x", False, PayloadTooLargeError),
        ({}, "x" * 11, False, PayloadTooLargeError),
        ({}, "é" * 6, False, PayloadTooLargeError),  # 12 bytes
        ({}, base64.b64encode(b"x" * 11).decode(), True, PayloadTooLargeError),
        ({}, "A" * 1000, True, PayloadTooLargeError),
        ({"content-length": "ten"}, "x", False, BadRequestError),
        ({"content-length": "-1"}, "x", False, BadRequestError),
        ({}, "not base64!", True, BadRequestError),
        ({}, "é", True, BadRequestError),
    ],
    ids=[
        "declared",
        "leading-zeros",
        "huge-declared",
        "actual",
        "multibyte",
        "base64-decoded",
        "base64-encoded",
        "non-numeric-length",
        "negative-length",
        "bad-base64",
        "non-ascii-base64",
    ],
)
def test_body_limits_and_encodings(
    headers: dict[str, str], body: str, is_base64: bool, error: type[Exception] | None
) -> None:
    # Given a body limit of 10 bytes
    if error is None:
        assert read_body(headers, body, is_base64, limit=10) == body.encode()
        return
    with pytest.raises(error):
        read_body(headers, body, is_base64, limit=10)


@pytest.mark.parametrize(
    ("path", "routed", "known"),
    [
        ("/admission", "/admission", True),
        ("/webhook/events", "/events", True),
        ("/webhook", "/", False),
        ("/webhooks/poke", "/webhooks/poke", False),
        ("/poke/", "/poke/", False),
    ],
)
def test_route_paths(path: str, routed: str, known: bool) -> None:
    assert (route_path(path), is_known_route(path)) == (routed, known)
