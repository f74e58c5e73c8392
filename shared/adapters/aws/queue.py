"""`SqsFifoQueue`: sends messages to an SQS FIFO queue (the reconcile triggers).

Every message names its message group (one per cluster: the queue hands a group's messages to one
consumer at a time, in order) and its deduplication id (SQS drops a message whose id was already
accepted in the last 5 minutes, and still answers success).

FIFO queues reject a per-message `DelaySeconds` (InvalidParameterValue): a delay can only be the
queue's own `DelaySeconds` attribute, so this adapter never sends one.

Errors (`clients.scaler_error`): throttling -> ThrottledError, denied credentials -> AuthError,
anything else (unknown queue, timeout, connection failure) -> ActionError.
"""

from __future__ import annotations

import threading

import boto3

from shared.adapters.aws import clients
from shared.adapters.aws.clients import BOTO_ERRORS, AwsClient, scaler_error
from shared.domain.errors import ActionError

# A sender that must answer quickly (the admission webhook has 2 s before the API server gives up)
# cannot use the shared clients' 5 attempts and 10 s reads: one attempt, bounded by about 1 s, and
# the caller decides (the webhook admits anyway, or answers 503 so that the sender retries).
FAST_MAX_ATTEMPTS = 1
FAST_CONNECT_TIMEOUT_SECONDS = 0.5
FAST_READ_TIMEOUT_SECONDS = 0.5

_lock = threading.Lock()
_fast_clients: dict[str | None, AwsClient] = {}


def fast_sqs_client(region: str | None = None) -> AwsClient:
    """The process-wide SQS client for latency-bound callers: one attempt, sub-second timeouts."""
    with _lock:
        cached = _fast_clients.get(region)
        if cached is None:
            config = clients.client_config(
                max_attempts=FAST_MAX_ATTEMPTS,
                connect_timeout=FAST_CONNECT_TIMEOUT_SECONDS,
                read_timeout=FAST_READ_TIMEOUT_SECONDS,
            )
            cached = boto3.session.Session().client("sqs", region_name=region, config=config)
            _fast_clients[region] = cached
        return cached


def clear_fast_clients() -> None:
    """Forget the cached fast clients (tests that change the environment between cases)."""
    with _lock:
        _fast_clients.clear()


class SqsFifoQueue:
    """One SQS FIFO queue, addressed by its URL."""

    def __init__(self, queue_url: str, client: AwsClient | None = None) -> None:
        self._queue_url = queue_url
        self._client = client

    @property
    def url(self) -> str:
        return self._queue_url

    def send(self, body: str, *, group_id: str, deduplication_id: str) -> str:
        """Send one message; returns its SQS message id. Raises ActionError, ThrottledError, AuthError."""
        try:
            client = self._client if self._client is not None else clients.client("sqs")
            response = client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=body,
                MessageGroupId=group_id,
                MessageDeduplicationId=deduplication_id,
            )
        except BOTO_ERRORS as exc:
            raise scaler_error(exc, ActionError, f"send to queue {self._queue_url}") from exc
        return str(response.get("MessageId", ""))
