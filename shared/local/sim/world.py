"""The rules of the simulated world, one home for both drivers of it.

Two drivers run the same world: the replay (`shared.local.sim.engine`, in-process events, fast) and
the local run (`shared.local.demo.world`, through moto and the fake Kubernetes API server, so the real
functions read it over the wire). They differ only in their surfaces; what happens is decided here:

- the scheduler: `shared.local.sim.scheduler` (the planner's filters, kube-scheduler's scores,
  a gang's pods all or none, oldest job first);
- kubelets: `BootModel`, an instance registers its Node `boot_seconds` after launch and the device
  plugin advertises its GPUs `gpu_delay_seconds` later;
- EC2 capacity: `launchable`, a capped group gets no more instances than EC2 has;
- jobs: a job's pods run for its duration from the moment all of them are bound, then succeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True, slots=True)
class BootModel:
    """Launch -> Node registered (Ready, no GPUs yet) -> GPUs advertised."""

    boot_seconds: int
    gpu_delay_seconds: int = 0

    def registers_at(self, launched_at: int) -> int:
        return launched_at + self.boot_seconds

    def advertises_at(self, registered_at: int) -> int:
        return registered_at + self.gpu_delay_seconds

    def registered(self, launched_at: datetime, now: datetime) -> bool:
        """Whether an instance launched at `launched_at` has registered its Node by `now`."""
        return now - launched_at >= timedelta(seconds=self.boot_seconds)

    def advertised(self, registered_at: datetime, now: datetime) -> bool:
        """Whether a Node registered at `registered_at` advertises its GPUs by `now`."""
        return now - registered_at >= timedelta(seconds=self.gpu_delay_seconds)


def launchable(cap: int | None, running: int, wanted: int) -> int:
    """How many of `wanted` new instances EC2 launches for a group running `running` (no cap: all)."""
    return wanted if cap is None else max(0, min(wanted, cap - running))


def job_done(started_at: datetime, duration_seconds: int, now: datetime) -> bool:
    """Whether a job started at `started_at` has run its duration by `now`."""
    return now - started_at >= timedelta(seconds=duration_seconds)


# Warm pools (issue 12: AWS capacity as it really behaves). An Auto Scaling warm pool keeps
# pre-initialized instances (WarmPoolConfiguration MinSize); a scale-out takes them before launching
# new ones, so they register far sooner (their boot and bootstrap already ran), and the group warms a
# replacement into the pool, which takes a full boot before a scale-out can take it.


@dataclass(frozen=True, slots=True)
class WarmPool:
    """The warm pool of one group: how many instances it keeps and how fast a warm one registers."""

    size: int
    boot_seconds: int = 60  # taken from the pool -> Node registered


def take_warm(ready_at: list[int], now: int, rewarm_seconds: int) -> bool:
    """Take a warm instance ready by `now` (True), its replacement warm `rewarm_seconds` later;
    False when the pool has none ready (the launch boots in full)."""
    for index, ready in enumerate(ready_at):
        if ready <= now:
            ready_at[index] = now + rewarm_seconds
            return True
    return False
