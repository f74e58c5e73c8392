"""`PowertoolsReporter`: the Reporter port on Powertools (JSON logs, CloudWatch EMF metrics).

Metric dimensions are exactly the ones the dashboard and alarms use (shared.constants): cluster-level
metrics carry {Cluster}, per-group metrics {Cluster, Group}. Each dimension set is its own EMF blob
(a Powertools `EphemeralMetrics`, so nothing leaks between invocations or into other `Metrics`), and
the `service` dimension Powertools would add from POWERTOOLS_SERVICE_NAME is left out on purpose.
"""

from __future__ import annotations

import threading
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.metrics import EphemeralMetrics

from shared import constants
from shared.reporting import ActionRecord, ActionStatus, LogLevel, MetricUnit

_Point = tuple[str, MetricUnit, float]


class PowertoolsReporter:
    """Structured logs through a Powertools Logger; metrics buffered and flushed as EMF."""

    def __init__(self, *, logger: Logger, cluster: str, namespace: str = constants.METRICS_NAMESPACE) -> None:
        self._logger = logger
        self._cluster = cluster
        self._namespace = namespace
        self._lock = threading.Lock()
        self._points: dict[str | None, list[_Point]] = {}  # by group (None: cluster-level)

    def log(self, level: LogLevel, message: str, **fields: Any) -> None:
        try:
            getattr(self._logger, level)(message, extra=fields, stacklevel=3)
        except Exception:  # a field clashing with a LogRecord attribute must not break a run
            self._logger.exception("could not log %r", message)

    def log_action(self, action: ActionRecord) -> None:
        level: LogLevel = "warning" if action.status is ActionStatus.FAILED else "info"
        self.log(level, f"action {action.kind} {action.status}", action=action.to_json())

    def metric(
        self, name: str, value: float, *, unit: MetricUnit = "Count", group: str | None = None
    ) -> None:
        with self._lock:
            self._points.setdefault(group, []).append((name, unit, value))

    def flush(self) -> None:
        with self._lock:
            points, self._points = self._points, {}
        for group, batch in sorted(points.items(), key=lambda item: item[0] or ""):
            try:
                self._flush_one(group, batch)
            except Exception:  # never let reporting fail a run
                self._logger.exception("could not publish metrics", extra={"group": group})

    def _flush_one(self, group: str | None, batch: list[_Point]) -> None:
        metrics = EphemeralMetrics(namespace=self._namespace, service="")
        metrics.add_dimension(name=constants.METRIC_DIMENSION_CLUSTER, value=self._cluster)
        if group is not None:
            metrics.add_dimension(name=constants.METRIC_DIMENSION_GROUP, value=group)
        for name, unit, value in batch:
            metrics.add_metric(name=name, unit=unit, value=value)  # repeated names become value lists
        metrics.flush_metrics()
