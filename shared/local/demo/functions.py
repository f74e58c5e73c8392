"""The real Lambda handlers, imported after the environment is set (their cold start) and invoked like Lambda.

Wiring: the demo builds each function's Controller with the functions' own
`functions.common.wiring.controller_from_environment`, passing the demo's clock (simulated time) and
a `DecisionTap` around the reporter (the timeline), and hands it to the handler through its
`set_dependencies`, the handlers' own seam for this.

The webhook builds its `Webhook` at import with the wall clock. The demo rebuilds it with the same
`build_webhook(load_settings(os.environ))` plus `clock=` (simulated time) and hands it over through the
same `set_dependencies`. On the wall clock its 5-second coalescing window would span minutes of
simulated time and swallow later bursts' wake-ups.

Each invocation's stdout (Powertools' EMF metric blobs) and the Powertools log lines go to the log
file, as they would go to CloudWatch Logs.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TextIO

from functions.webhook.auth import sign
from functions.webhook.service import build_webhook
from functions.webhook.settings import load_settings as load_webhook_settings
from shared import constants
from shared.controller import Controller
from shared.local.demo.lambda_events import LambdaContext, admission_review, webhook_event
from shared.local.demo.timeline import Decision, DecisionTap
from shared.ports import Clock
from shared.reporting import ActionRecord

RECONCILE = "functions.reconcile.handler"
AWS_EVENTS = "functions.aws_events.handler"
WEBHOOK = "functions.webhook.handler"
WIRING = "functions.common.wiring"


@dataclass
class Invocation:
    function: str
    trigger: str
    at: datetime
    wall_seconds: float
    error: str = ""


@dataclass
class Invocations:
    """Every handler call of the run."""

    calls: list[Invocation] = field(default_factory=list)

    @property
    def errors(self) -> list[Invocation]:
        return [c for c in self.calls if c.error]


class Functions:
    """The reconcile, aws_events and webhook handlers of one deployment, in this process."""

    def __init__(self, *, clock: Clock, log: TextIO, webhook_secret: str, function_prefix: str) -> None:
        self._clock = clock
        self._log = log
        self._secret = webhook_secret
        self._prefix = function_prefix
        self._source = ""
        self.decisions: list[Decision] = []
        self.invocations = Invocations()
        self._reconcile = importlib.import_module(RECONCILE)
        self._aws_events = importlib.import_module(AWS_EVENTS)
        self._webhook = importlib.import_module(WEBHOOK)
        self._log_streams = _route_logs(log)
        # One controller per function, as each Lambda function has its own process.
        self._reconcile.set_dependencies(self._controller())
        self._aws_events.set_dependencies(self._controller())
        self._wall_clock_webhook = self._webhook.dependencies.get()
        self._webhook.set_dependencies(
            build_webhook(load_webhook_settings(os.environ), clock=self._epoch_seconds)
        )

    def close(self) -> None:
        """Hand the handlers back their own wiring (the next use would build from the environment)."""
        self._reconcile.set_dependencies(None)
        self._aws_events.set_dependencies(None)
        self._webhook.set_dependencies(self._wall_clock_webhook)
        for handler, stream in self._log_streams:
            handler.setStream(stream)

    def _epoch_seconds(self) -> float:
        return self._clock.now().timestamp()

    def _controller(self) -> Controller:
        wiring = importlib.import_module(WIRING)
        return wiring.controller_from_environment(
            clock=self._clock, wrap_reporter=lambda reporter: DecisionTap(reporter, self._record)
        )

    def _record(self, action: ActionRecord) -> None:
        self.decisions.append(Decision(self._clock.now(), self._source, action))

    # ------------------------------------------------------------------ invocations

    def reconcile(self, event: dict[str, Any], trigger: str) -> dict[str, Any] | None:
        return self._invoke("reconcile", trigger, self._reconcile.handler, event)

    def aws_event(self, event: dict[str, Any], trigger: str) -> dict[str, Any] | None:
        return self._invoke("aws_events", trigger, self._aws_events.handler, event)

    def admit(self, pod: dict[str, Any]) -> bool:
        """POST the pod's AdmissionReview to the webhook, signed like a forwarder; True when allowed."""
        body = admission_review(pod)
        headers = sign(self._secret, int(self._epoch_seconds()), body)
        now = self._clock.now()
        response = self._invoke(
            "webhook", "admission", self._webhook.handler, webhook_event("/admission", body, headers, now)
        )
        if not response or response.get("statusCode") != 200:
            return False
        answer = json.loads(response.get("body") or "{}")
        return bool((answer.get("response") or {}).get("allowed"))

    def _invoke(
        self,
        function: str,
        trigger: str,
        handler: Callable[[dict[str, Any], Any], Any],
        event: dict[str, Any],
    ) -> dict[str, Any] | None:
        at = self._clock.now()
        self._source = f"{function}/{trigger}"
        context = LambdaContext(function_name=f"{self._prefix}-{function.replace('_', '-')}")
        started = time.perf_counter()
        error = ""
        response: dict[str, Any] | None = None
        try:
            with contextlib.redirect_stdout(self._log):
                response = handler(event, context)
        except Exception as exc:  # a Lambda invocation error: Lambda would log it and retry
            error = f"{type(exc).__name__}: {exc}"
            logging.getLogger(__name__).exception("%s (%s) failed", function, trigger)
        else:
            error = failure_of(response)
        self.invocations.calls.append(Invocation(function, trigger, at, time.perf_counter() - started, error))
        return response


def failure_of(response: object) -> str:
    """What went wrong according to a handler's answer ("" when nothing did).

    A reconcile result with errors (`"ok": false`: an action failed, or it stopped acting) and an SQS
    batch response handing records back to the queue both count: the demo must not call them success.
    """
    if not isinstance(response, dict):
        return ""
    if response.get("ok") is False:
        return "; ".join(str(e) for e in response.get("errors") or ()) or str(
            response.get("error") or "not ok"
        )
    failures = response.get("batchItemFailures") or ()
    return f"{len(failures)} SQS record(s) handed back to the queue" if failures else ""


def _route_logs(log: TextIO) -> list[tuple[logging.StreamHandler[Any], Any]]:
    """Send the Powertools loggers' output (JSON lines) to `log`; returns what to restore after."""
    previous = []
    for handler in logging.getLogger(constants.SERVICE_NAME).handlers:
        if isinstance(handler, logging.StreamHandler):
            previous.append((handler, handler.setStream(log)))
    return previous
