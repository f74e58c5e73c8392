"""One request's work is bounded: the worst 256 KiB bodies cost at most a few times their size.

Each body below is as close to the 256 KiB limit as it gets and is made of the costliest items the
limits allow (tiny JSON values, the most events per batch). The peak is Python's (tracemalloc), from
the moment the Lambda hands over the body text to the answer, authentication and enqueueing included.
`pytest -s` prints the figures.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from functions.webhook.auth import sign
from functions.webhook.errors import PayloadTooLargeError, RequestRejectedError
from functions.webhook.payloads import MAX_EVENTS, MAX_JSON_VALUES, has_too_many_values
from functions.webhook.service import Webhook, build_webhook
from functions.webhook.settings import WebhookSettings
from shared.constants import WEBHOOK_MAX_BODY_BYTES

SECRET = "whsec-bounds-0123456789abcdef012345"
NOW = 1_796_212_800.0
MAX_PEAK_RATIO = 4.0
LIMIT = WEBHOOK_MAX_BODY_BYTES
GROUP = {"name": "p4d", "asg_name": "prod-p4d", "instance_type": "p4d.24xlarge"}


class RecordingSender:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, body: str, *, group_id: str, deduplication_id: str) -> str:
        self.sent.append(body)
        return str(len(self.sent))


def webhook(sender: RecordingSender) -> Webhook:
    settings = WebhookSettings(
        queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/triggers.fifo",
        secret_arn="arn:aws:secretsmanager:us-east-1:123456789012:secret:webhook",
        cluster_name=json.dumps({"cluster_name": "prod", "node_groups": [GROUP]}),
    )
    return build_webhook(settings, clock=lambda: NOW, sender=sender, read_secret=lambda: SECRET)


def fill(prefix: str, item: str, suffix: str, *, count: int | None = None) -> str:
    """`prefix item,item,... suffix`: `count` items, or as many as fit in the body limit."""
    if count is None:
        count = (LIMIT - len(prefix) - len(suffix) + 1) // (len(item) + 1)
    return prefix + ",".join([item] * count) + suffix


def pad(document: str, marker: str = "PAD") -> str:
    """`document` with its `"PAD"` string lengthened so that the body is exactly the limit."""
    return document.replace(marker, marker + "x" * (LIMIT - len(document.encode())))


def event(i: int, message: str = "") -> str:
    return json.dumps(
        {"reason": "FailedScheduling", "involvedObject": {"kind": "Pod", "name": f"p{i}"}, "message": message}
    )


def review(pod_extra: str) -> str:
    """A GPU pod's AdmissionReview with `pod_extra` spliced into its metadata (labels, annotations)."""
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",'
        '"kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"ml",'
        '"object":{"metadata":{"name":"train",' + pod_extra + '},"spec":{"containers":[{"name":"main",'
        '"resources":{"limits":{"nvidia.com/gpu":"1"}}}]}}}}'
    )


def events_at_the_limit() -> str:
    message = "0/12 nodes are available: 12 Insufficient nvidia.com/gpu. PAD"
    batch = '{"events":[' + ",".join(event(i, message if i == 0 else "") for i in range(MAX_EVENTS)) + "]}"
    return pad(batch)


def values_at_the_limit() -> str:
    # `{"i":0}` is the costliest value per body byte that the pod can hold (a dict, a key, an int).
    budget = MAX_JSON_VALUES - 40  # what the envelope and the pod around them take
    labels = fill('"labels":[', '{"i":0}', "]", count=budget // 2)
    body = pad(review(labels + ',"annotations":{"note":"PAD"}'))
    assert not has_too_many_values(body.encode())
    return body


@dataclass(frozen=True)
class Case:
    route: str
    body: Callable[[], str]
    enqueued: bool | None  # None: refused with a 413


CASES = {
    "empty objects (refused)": Case("/events", lambda: fill('{"events":[', "{}", "]}"), None),
    "zeros (refused)": Case("/events", lambda: fill('{"events":[', "0", "]}"), None),
    "tiny events (refused)": Case(
        "/events", lambda: fill('{"events":[', '{"reason":"x","involvedObject":{}}', "]}"), None
    ),
    "one event too many (refused)": Case(
        "/events",
        lambda: pad(
            '{"events":[' + ",".join(event(i, "PAD" * (i == 0)) for i in range(MAX_EVENTS + 1)) + "]}"
        ),
        None,
    ),
    "empty objects in a pod (refused)": Case(
        "/admission",
        lambda: review(fill('"l":[', "{}", "]", count=(LIMIT - len(review('"l":[]'))) // 3)),
        None,
    ),
    "most events allowed": Case("/events", events_at_the_limit, True),
    "most values allowed": Case("/admission", values_at_the_limit, True),
}


def handle(hook: Webhook, route: str, text: str) -> Any:
    headers = sign(SECRET, int(NOW), text.encode())
    data = hook.authenticate(headers, text, False, route)
    return hook.admit(data) if route == "/admission" else hook.events(data)


@pytest.mark.parametrize("name", CASES)
def test_the_worst_bodies_cost_at_most_a_few_times_their_size(name: str) -> None:
    # Given the costliest 256 KiB body of its kind, authenticated
    case = CASES[name]
    text = case.body()
    size = len(text.encode())
    assert LIMIT - 64 <= size <= LIMIT
    sender = RecordingSender()
    hook = webhook(sender)
    warm_up = '{"reason": "Scheduled", "involvedObject": {"kind": "Pod"}}'  # relevant to nothing
    assert handle(hook, "/events", warm_up) is False  # lazily built state (the secret) is not the body's

    # When it is handled, memory traced from the body text to the answer
    tracemalloc.start()
    try:
        outcome: Any = handle(hook, case.route, text)
    except RequestRejectedError as exc:
        outcome = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()

    # Then the peak stays within a few times the body, and a refused body never reaches the queue
    figure = f"{name}: body {size / 1024:.0f} KiB, peak {peak / 1024:.0f} KiB ({peak / size:.2f}x)"
    print(figure)
    assert peak <= MAX_PEAK_RATIO * size, figure
    if case.enqueued is None:
        assert isinstance(outcome, PayloadTooLargeError), figure
        assert outcome.status_code == 413
        assert sender.sent == []
    else:
        assert not isinstance(outcome, Exception), f"{figure}: {outcome}"
        assert len(sender.sent) == 1


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[" + ",".join(["0"] * MAX_JSON_VALUES) + "]", True),  # the list itself is a value
        ("[" + ",".join(["0"] * (MAX_JSON_VALUES - 1)) + "]", False),
        ('["' + "," * 3 * MAX_JSON_VALUES + '"]', False),  # marks inside strings do not count
        ('["\\"' + ",{[" * MAX_JSON_VALUES + '"]', False),  # nor after an escaped quote
        ('["' + "," * 2 * MAX_JSON_VALUES, True),  # an unterminated string: counted, refused
    ],
)
def test_values_are_counted_on_the_raw_body(body: str, expected: bool) -> None:
    # Given a body near the value limit / When its values are counted / Then only JSON structure counts
    assert has_too_many_values(body.encode()) is expected


def test_a_batch_over_the_event_limit_is_refused_with_a_clear_message() -> None:
    # Given one event more than a batch may hold
    body = '{"kind":"EventList","items":[' + ",".join(event(i) for i in range(MAX_EVENTS + 1)) + "]}"
    sender = RecordingSender()

    # When it is posted / Then it is a 413 naming the limit, and nothing is enqueued
    with pytest.raises(PayloadTooLargeError, match=f"at most {MAX_EVENTS} per request"):
        handle(webhook(sender), "/events", body)
    assert sender.sent == []
