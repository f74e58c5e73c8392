"""The controller: the imperative shell over the ports, one module per job.

    lease.py             the cluster lease: one context manager for every entry point, and the fence
    applier.py           every write, the action log and the one error policy
    gather.py            every read of a reconcile
    orchestrator.py      reconcile: gather -> plan -> re-validate -> apply -> report
    force_scale_down/    forced scale-down: request, first pass, drain (the continuation), report
    aws_events.py        launch failures and spot interruptions
    report.py            results, metrics, pod Events, the notification

`Controller` binds the dependencies once per process (what the Lambda handlers hold) and hands
each call to its module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shared.config import ScalerConfig
from shared.controller import orchestrator
from shared.controller.applier import Ports
from shared.controller.deps import Deps, Planner
from shared.controller.lease import LEASE_TTL_SECONDS
from shared.controller.report import PodEvents, ReconcileResult, RunStatus
from shared.domain.operations import FailureKind
from shared.planner import plan
from shared.ports import Clock, Cluster, Fleet, Notifier, StateStore
from shared.reporting import Reporter

if TYPE_CHECKING:
    from shared.controller.aws_events import InterruptionKind
    from shared.controller.force_scale_down import (
        ForceScaleDownReport,
        ForceScaleDownRequest,
        InvalidRequestError,
    )

# Each function imports what it runs: a scheduled reconcile never loads the forced scale-down's
# request model and report, nor the AWS events' handling (cold start, issue 25). These names load
# their module on first use (PEP 562).
_LAZY = {
    "InterruptionKind": "shared.controller.aws_events",
    "ForceScaleDownReport": "shared.controller.force_scale_down.report",
    "ForceScaleDownRequest": "shared.controller.force_scale_down.request",
    "InvalidRequestError": "shared.controller.force_scale_down.request",
}


def __getattr__(name: str) -> Any:
    home = _LAZY.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


class Controller:
    """Reconciles one cluster's GPU node groups; also runs forced scale-downs and AWS events.

    `planner` is the pure planner (`shared.planner.plan`); a test passes one that records its input.
    """

    def __init__(
        self,
        *,
        config: ScalerConfig,
        cluster: Cluster,
        fleet: Fleet,
        state: StateStore,
        clock: Clock,
        notifier: Notifier,
        reporter: Reporter,
        owner: str,
        dry_run: bool = False,
        lease_ttl_seconds: int = LEASE_TTL_SECONDS,
        planner: Planner = plan,
    ) -> None:
        self._deps = Deps(
            config=config,
            ports=Ports(cluster=cluster, fleet=fleet, state=state),
            clock=clock,
            notifier=notifier,
            reporter=reporter,
            owner=owner,
            dry_run=dry_run or config.dry_run,  # either setting asks for a dry run
            lease_ttl_seconds=lease_ttl_seconds,
            planner=planner,
        )
        self._events = PodEvents()  # what pods were told, per warm process

    @property
    def deps(self) -> Deps:
        """What the controller runs on (the ports, the config, the settings)."""
        return self._deps

    @property
    def dry_run(self) -> bool:
        return self._deps.dry_run

    @property
    def config(self) -> ScalerConfig:
        return self._deps.config

    def reconcile(self, trigger: str = "manual") -> ReconcileResult:
        """One level-triggered pass (see shared.controller.orchestrator)."""
        return orchestrator.reconcile(self._deps, self._events, trigger)

    def force_scale_down(self, payload: Mapping[str, Any] | ForceScaleDownRequest) -> ForceScaleDownReport:
        """A forced scale-down (see shared.controller.force_scale_down)."""
        from shared.controller.force_scale_down.first_pass import force_scale_down

        return force_scale_down(self._deps, payload)

    def handle_capacity_event(
        self, asg_name: str, at: datetime, kind: FailureKind, message: str, region: str | None = None
    ) -> ReconcileResult:
        """An "EC2 Instance Launch Unsuccessful" event (see shared.controller.aws_events)."""
        from shared.controller import aws_events

        return aws_events.handle_capacity_event(self._deps, self._events, asg_name, at, kind, message, region)

    def handle_interruption(self, instance_id: str, at: datetime, kind: InterruptionKind) -> ReconcileResult:
        """A spot interruption warning or rebalance recommendation (see shared.controller.aws_events)."""
        from shared.controller import aws_events

        return aws_events.handle_interruption(self._deps, self._events, instance_id, at, kind)


__all__ = [
    "Controller",
    "ForceScaleDownReport",
    "ForceScaleDownRequest",
    "InterruptionKind",
    "InvalidRequestError",
    "ReconcileResult",
    "RunStatus",
]
