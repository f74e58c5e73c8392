"""What every entry point of the controller runs on: the config, the ports and the run's settings."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime

from shared.config import ScalerConfig
from shared.controller.applier import Applier, Ports
from shared.controller.lease import LeaseGuard, held_lease
from shared.domain.model import Snapshot
from shared.domain.plan import Plan
from shared.planner import plan
from shared.ports import Clock, Notifier
from shared.reporting import Reporter

# The pure planner's signature (`shared.planner.plan`); tests may pass one that records what it saw.
Planner = Callable[[Snapshot, ScalerConfig, datetime], Plan]


@dataclass(frozen=True)
class Deps:
    """The controller's dependencies, built once per process."""

    config: ScalerConfig
    ports: Ports
    clock: Clock
    notifier: Notifier
    reporter: Reporter
    owner: str  # who takes the lease (a per-run suffix is added)
    dry_run: bool
    lease_ttl_seconds: int
    planner: Planner = plan

    def lease(self, *, wait: bool, dry_run: bool | None = None) -> AbstractContextManager[LeaseGuard | None]:
        """The cluster lease of one run (`held_lease`: None in a dry run); `dry_run` overrides the setting."""
        return held_lease(
            self.ports.state,
            self.clock,
            self.owner,
            dry_run=self._dry_run(dry_run),
            wait=wait,
            ttl_seconds=self.lease_ttl_seconds,
        )

    def applier(self, guard: LeaseGuard | None, *, dry_run: bool | None = None) -> Applier:
        """The applier of one run under `guard` (None: a dry run)."""
        return Applier(self.ports, self.reporter, guard=guard, dry_run=self._dry_run(dry_run))

    def _dry_run(self, requested: bool | None) -> bool:
        return self.dry_run if requested is None else requested
