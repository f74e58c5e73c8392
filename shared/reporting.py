"""The reporting port: structured decision logs and metrics, kept out of the controller's imports.

`Reporter` is what the controller talks to; `shared.observability.PowertoolsReporter` implements it
with Powertools (JSON logs, CloudWatch EMF); the demo wraps it (`shared.local.demo.timeline.DecisionTap`).
Tests use `tests.fakes.memory.RecordingReporter`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, Protocol

MetricUnit = Literal["Count", "Seconds", "Milliseconds", "None"]
LogLevel = Literal["debug", "info", "warning", "error"]


class ActionKind(StrEnum):
    SET_DESIRED = "set-desired"
    TERMINATE = "terminate"
    DELETE_NODE = "delete-node"
    CORDON = "cordon"
    UNCORDON = "uncordon"
    EVICT = "evict"
    DELETE_POD = "delete-pod"
    BACKOFF = "backoff"
    DRAIN = "drain"  # a drain intent was stored, finished or given up
    ANSWER_REQUEST = "answer-provisioning-request"  # a ProvisioningRequest's conditions were written
    MARK = "mark"  # the attrition taint put on a node (consolidation by attrition)
    UNMARK = "unmark"  # the attrition taint lifted
    MIGRATE = "migrate"  # a node emptied by moving its jobs that checkpoint (or why not)


class ActionStatus(StrEnum):
    DONE = "done"
    DRY_RUN = "dry-run"  # what the run would have done
    SKIPPED = "skipped"  # re-validation or a limit said no; the reason says why
    BLOCKED = "blocked"  # refused for now (PodDisruptionBudget); a later run retries
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One action a run took, would take (dry run), skipped or failed, with its reason."""

    kind: ActionKind
    target: str  # node, instance id, pod key or group
    group: str
    reason: str
    status: ActionStatus = ActionStatus.DONE
    detail: str = ""  # the error or skip explanation

    def line(self) -> str:
        """One human line for notifications."""
        text = f"{self.kind} {self.target} ({self.group}): {self.reason}"
        return f"{text} [{self.status}: {self.detail}]" if self.detail else text

    def to_json(self) -> dict[str, str]:
        out = {
            "kind": str(self.kind),
            "target": self.target,
            "group": self.group,
            "reason": self.reason,
            "status": str(self.status),
        }
        if self.detail:
            out["detail"] = self.detail
        return out


class Reporter(Protocol):
    """Where a run's decisions and figures go. Implementations never raise."""

    def log(self, level: LogLevel, message: str, **fields: Any) -> None:
        """A structured log line."""
        ...

    def log_action(self, action: ActionRecord) -> None:
        """One structured line per decision (done, dry-run, skipped, blocked or failed)."""
        ...

    def metric(
        self, name: str, value: float, *, unit: MetricUnit = "Count", group: str | None = None
    ) -> None:
        """A metric with the Cluster dimension, plus Group when `group` is given."""
        ...

    def flush(self) -> None:
        """Publish buffered metrics; called once at the end of every controller call."""
        ...
