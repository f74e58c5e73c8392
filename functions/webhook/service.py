"""The webhook's work behind each route: authenticate, parse, decide relevance, enqueue.

The order of checks for every request, so that nothing reaches the queue without passing all of them:
size (413) -> authentication (401; 503 if the secret cannot be read) -> route (404/405) -> body (400;
413 over payloads.MAX_JSON_VALUES or MAX_EVENTS) -> enqueue (503 on /events and /poke when the queue
fails; /admission is always allowed).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from aws_lambda_powertools import Logger

from functions.webhook import payloads
from functions.webhook.auth import Authenticator, SecretCache
from functions.webhook.errors import ServiceUnavailableError
from functions.webhook.queue import QueueSender, ReconcileTriggers, Source
from functions.webhook.request import admission_token, read_body
from functions.webhook.settings import WebhookSettings
from shared.adapters.aws.queue import SqsFifoQueue, fast_sqs_client
from shared.adapters.aws.secrets import SecretsManagerSecrets
from shared.constants import SERVICE_NAME
from shared.domain.errors import ScalerError

logger = Logger(service=SERVICE_NAME, child=True)


class Webhook:
    """One cluster's webhook: the authenticator and the trigger queue, built once per cold start."""

    def __init__(self, authenticator: Authenticator, triggers: ReconcileTriggers) -> None:
        self.authenticator = authenticator
        self.triggers = triggers

    def authenticate(
        self, headers: Mapping[str, str], body: str | None, is_base64_encoded: bool, path: str = ""
    ) -> bytes:
        """The body bytes of an authenticated request of acceptable size; RequestRejectedError otherwise."""
        data = read_body(headers, body, is_base64_encoded)
        scheme = self.authenticator.authenticate(headers, data, admission_token(path))
        logger.debug("request authenticated", extra={"scheme": scheme})
        return data

    def admit(self, body: bytes) -> dict[str, Any]:
        """The AdmissionReview answer (always allowed); a GPU pod's creation enqueues a reconcile."""
        review = payloads.parse_admission(body)
        reason = payloads.admission_reason(review)
        if reason is not None:
            try:
                self._send("admission", reason)
            except Exception:  # best effort: a trigger must never block a pod; the schedule catches up
                logger.exception("admission trigger not enqueued", extra={"uid": review.request.uid})
        return payloads.admission_response(review.request.uid)

    def events(self, body: bytes) -> bool:
        """Enqueue a reconcile if an event says a pod cannot be placed; True when enqueued."""
        reason = payloads.events_reason(payloads.parse_events(body))
        return reason is not None and self._enqueue("events", reason)

    def poke(self, body: bytes) -> bool:
        """Enqueue a reconcile for a poke; True."""
        return self._enqueue("poke", payloads.parse_poke(body).reason)

    def _send(self, source: Source, reason: str) -> None:
        if self.triggers.enqueue(source, reason):  # False: this window's trigger was already sent
            logger.info("reconcile trigger enqueued", extra={"source": source, "reason": reason})

    def _enqueue(self, source: Source, reason: str) -> bool:
        try:
            self._send(source, reason)
        except ScalerError as exc:
            logger.warning("trigger not enqueued", extra={"source": source, "error": str(exc)})
            raise ServiceUnavailableError("the reconcile queue is unavailable; retry later") from exc
        return True


def build_webhook(
    settings: WebhookSettings,
    *,
    clock: Callable[[], float] = time.time,
    sender: QueueSender | None = None,
    read_secret: Callable[[], str] | None = None,
) -> Webhook:
    """The webhook wired to SQS and Secrets Manager (or to the given sender / secret reader)."""
    if sender is None:
        sender = SqsFifoQueue(settings.queue_url, fast_sqs_client())
    if read_secret is None:
        read_secret = functools.partial(SecretsManagerSecrets().secret_string, settings.secret_arn)
    authenticator = Authenticator(SecretCache(read_secret, clock), clock)
    return Webhook(authenticator, ReconcileTriggers(sender, settings.cluster_name, clock))
