"""Reconcile triggers: what the webhook puts on the SQS FIFO queue, and how bursts coalesce.

Message (one SQS message, JSON, at most a few hundred bytes):

    MessageGroupId          <cluster>            one group per cluster: its triggers are consumed one
                                                 at a time, in order
    MessageDeduplicationId  <cluster>-<window>   window = floor(now / QUEUE_DEDUP_WINDOW_SECONDS)
    MessageBody             {"source": "admission" | "events" | "poke", "cluster": "<cluster>",
                             "reason": "<why, at most 256 characters>",
                             "at": "<UTC ISO-8601 with milliseconds, e.g. 2026-12-02T12:00:00.123Z>"}

Coalescing: SQS FIFO accepts, but never delivers, a message whose deduplication id it has seen in the
last 5 minutes. One id per 5-second window therefore means at most one reconcile per cluster per
window however many pods are created: a burst of 1,000 GPU pods becomes one message per window it
spans. The reconcile is level-triggered (it rebuilds the whole backlog), so the dropped duplicates
lose nothing, and all sources share the id: an admission and a FailedScheduling event in the same
window are one reconcile. Each warm function instance also remembers the last id it sent and skips
the call for a repeat, so a burst costs one SQS request per instance per window.

Delay (an AdmissionReview arrives before the scheduler has tried the pod; its reconcile must run
once the pod can be marked Unschedulable): FIFO queues refuse a per-message DelaySeconds (the real
API answers InvalidParameterValue), so the delay is the queue's own `DelaySeconds` attribute, set by
the CDK app from `deployment.webhook_queue_delay_seconds` (default 10 s; the webhook itself never
needs the value). It must exceed the dedup window: a pod admitted at any moment of a
window is covered by that window's message, sent at most one window earlier and delivered `delay`
after it was sent, so the reconcile starts at least `delay - window` (10 - 5 = 5 s) after the pod's
admission, which is ample for the scheduler's first attempt. It delays every trigger of the queue
(schedule, events, pokes) by those seconds too, which costs nothing for a level-triggered reconcile
and needs no clock tricks, no second queue and nothing from the consumer. Alternatives rejected: a
per-message delay (refused by FIFO), a standard queue for admissions (no deduplication), sleeping in
the webhook (blocks pod creation) or in the consumer (burns Lambda time, breaks ordering).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal, Protocol

from shared.constants import QUEUE_DEDUP_WINDOW_SECONDS

Source = Literal["admission", "events", "poke"]
MAX_REASON_CHARS = 256


class QueueSender(Protocol):
    def send(self, body: str, *, group_id: str, deduplication_id: str) -> str:
        """Send one FIFO message; returns its id. Raises a ScalerError (ActionError, ThrottledError...)."""
        ...


def deduplication_id(cluster: str, now: float, window: int = QUEUE_DEDUP_WINDOW_SECONDS) -> str:
    """`<cluster>-<window index>`: identical for every trigger of `cluster` in one window."""
    return f"{cluster}-{math.floor(now / window)}"


def message_body(source: Source, cluster: str, reason: str, now: float) -> str:
    """The JSON body of a trigger (compact, keys in a fixed order)."""
    at = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    reason = reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."
    document = {"source": source, "cluster": cluster, "reason": reason, "at": at}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False)


class ReconcileTriggers:
    """Enqueues reconcile triggers of one cluster, at most one per dedup window per instance."""

    def __init__(self, sender: QueueSender, cluster: str, clock: Callable[[], float]) -> None:
        self._sender = sender
        self._cluster = cluster
        self._clock = clock
        self._last_sent_id: str | None = None

    def enqueue(self, source: Source, reason: str) -> bool:
        """Send a trigger; False when this instance already sent this window's. Raises ScalerError."""
        now = self._clock()
        dedup_id = deduplication_id(self._cluster, now)
        if dedup_id == self._last_sent_id:
            return False
        body = message_body(source, self._cluster, reason, now)
        self._sender.send(body, group_id=self._cluster, deduplication_id=dedup_id)
        self._last_sent_id = dedup_id
        return True
