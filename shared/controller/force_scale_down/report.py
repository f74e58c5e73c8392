"""What a forced scale-down reports: the choice, the writes, what still drains, JSON-able."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from shared.planner.force_scale_down import Candidate, Refusal
from shared.reporting import ActionRecord, ActionStatus


@dataclass(frozen=True)
class ForceScaleDownReport:
    """What a forced scale-down did (or, in dry run, would do), JSON-able through `to_json`."""

    group: str
    asg_name: str
    dry_run: bool
    request: dict[str, Any]
    chosen: tuple[Candidate, ...]
    refused: tuple[Refusal, ...]
    actions: tuple[ActionRecord, ...]
    terminated: tuple[str, ...]
    draining: tuple[str, ...]  # nodes the stored intent keeps draining
    blocked: tuple[str, ...]  # pods PodDisruptionBudgets refused to evict for now
    intent_expires_at: datetime | None
    desired_before: int
    desired_after: int
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "group": self.group,
            "asg_name": self.asg_name,
            "dry_run": self.dry_run,
            "request": self.request,
            "chosen": [c.to_json() for c in self.chosen],
            "refused": [r.to_json() for r in self.refused],
            "terminated": list(self.terminated),
            "draining": list(self.draining),
            "blocked": list(self.blocked),
            "intent_expires_at": self.intent_expires_at.isoformat() if self.intent_expires_at else None,
            "desired_before": self.desired_before,
            "desired_after": self.desired_after,
            "actions": [a.to_json() for a in self.actions],
            "failed": [a.to_json() for a in self.actions if a.status is ActionStatus.FAILED],
            "errors": list(self.errors),
        }
