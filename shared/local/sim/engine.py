"""The discrete-event replay: simulated ASGs, nodes, scheduler and state store around the real planner.

The collaborators, one job each, share one `SimState`: `EventQueue` (events.py, the clock), `JobLoader`
(loading.py, trace jobs as pods), `Binder` (binding.py, the scheduler binds, pods finish), `SimFleet`
(fleet.py, ASGs, EC2, boot), `SimController` + `SimStateStore` (control.py, store.py, plan and apply),
`SeriesRecorder` (metrics.py, the figures). This module runs the loop.

What is simulated, and how it mirrors production:
- ASGs: `desired` and instances. An instance launched at t registers as a Node at t + boot_seconds;
  its GPUs are advertised `gpu_delay_seconds` later (until then the planner sees a booting node).
  An optional capacity cap per group makes launches beyond it fail; the group then backs off
  exponentially as the state store does (policy.backoff_*), and the planner spills to other groups.
- Scheduler: shared.local.sim.scheduler, the one the demo uses too: the planner's filters decide
  where a pod fits, kube-scheduler's scores (`SimOptions.scoring`: least-allocated, most-allocated
  or first-fit, with TaintToleration's PreferNoSchedule score) where it goes; oldest job first, a
  job's pods all-or-nothing (gang scheduling). Unplaced pods are Pending with
  PodScheduled=False/Unschedulable, the backlog the planner reads. Pods tolerate the groups' taints,
  not the scaler's attrition mark.
- Pods run for their job's duration once placed, then succeed and leave the node.
- Reconcile: on the schedule (every tick_seconds, at multiples of it, like EventBridge) and after
  job arrivals (the webhook, after the queue delay). It calls `shared.planner.plan` on a Snapshot of
  the simulated world and applies the plan like the controller: terminations first (a terminated
  node disappears, desired drops by one when decrementing), then cordons/uncordons, then attrition
  marks are lifted and put on (re-validated: a node still there, not cordoned), then desired is
  raised to the plan's value, or lowered only to cancel instances not launched yet; the stored state
  (idle-since, instances first seen, last scale-up, backoff) is written back.

Speed: domain objects are built directly and cached per pod/node/ASG, so a Snapshot is a few tuple
copies. A reconcile whose plan cannot differ from the last one is skipped: the planner reads only
the snapshot and the clock, so when no planner-visible fact changed (the backlog, a node's idleness,
nodes, instances, cordons, marks; with attrition on, any pod bound or finished), the last plan
changed nothing, and no time threshold of the policy (idle, cordon settle, delay after scale-up,
provisioning deadline, pod delay, backoff end; with migration on, the migration rule's own:
`SimMigrator.next_due`) has been crossed, the plan would be the same no-op.
`every_tick=True` turns the skipping off (tests compare).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from shared.config import ScalerConfig
from shared.domain.errors import ConfigError
from shared.domain.model import Snapshot
from shared.domain.plan import Plan
from shared.local.sim.binding import Binder
from shared.local.sim.control import SimController
from shared.local.sim.entities import (
    ARRIVE,
    FINISH,
    INF,
    REGISTER,
    GroupResult,
    Series,
    SimGroup,
    SimOptions,
    SimResult,
    at,
    epoch_seconds,
)
from shared.local.sim.events import EventQueue
from shared.local.sim.faults import FaultInjector
from shared.local.sim.fleet import SimFleet
from shared.local.sim.loading import JobLoader
from shared.local.sim.metrics import SeriesRecorder, account_until, not_started
from shared.local.sim.migration import SimMigrator
from shared.local.sim.pickling import register as register_pickling
from shared.local.sim.state import SimState
from shared.local.sim.store import SimStateStore
from shared.local.sim.trace import Trace
from shared.local.sim.workload import default_sizing, missing_allocatable
from shared.planner.plan import plan as plan_fn

__all__ = [
    "GroupResult",
    "Replay",
    "Series",
    "SimOptions",
    "SimResult",
    "at",
    "epoch_seconds",
    "simulate",
]

# A replay's inputs and figures go to and from other processes (`simulate --compare`,
# bench/sim_bench.py --jobs): see shared/local/sim/pickling.py.
register_pickling()


class Replay:
    """One replay of a trace against one scaler config. `run()` once. (Not the planner's
    `shared.planner.simulation.Simulation`, the scheduler's view of one plan's placements.)"""

    def __init__(
        self,
        trace: Trace,
        config: ScalerConfig,
        options: SimOptions | None = None,
        *,
        config_name: str = "config",
        progress: Callable[[int, int, int], None] | None = None,
        planner: Callable[[Snapshot, ScalerConfig, datetime], Plan] = plan_fn,
    ) -> None:
        self.options = options = options or SimOptions()
        self.config = config
        self.config_name = config_name
        self.trace = trace
        self._progress = progress
        groups = _groups(config, options)
        self._events = EventQueue()
        self._state = state = SimState(options, config.policy, groups, self._events)
        self._sizing = options.sizing or default_sizing(config)
        self._webhook_delay = (
            options.webhook_delay_seconds
            if options.webhook_delay_seconds is not None
            else config.deployment.webhook_queue_delay_seconds
        )
        self._tick = options.tick_seconds
        store = SimStateStore()
        self._fleet = SimFleet(state, store)
        self._binder = Binder(state)
        self._control = SimController(state, store, self._fleet, config, planner)
        migrator = SimMigrator(state, self._binder)
        self._control.migrate = migrator.apply
        if config.policy.migration.enabled:
            self._control.migration_due = migrator.next_due
        if options.last_checkpoint and options.checkpointable:
            self._control.stamp = migrator.stamp
        self._recorder = SeriesRecorder(state) if options.record_series else None
        # Reconcile bookkeeping.
        self._now = 0
        self._last_tick = -1
        self._webhook_at: int | None = None
        self._skipped = 0
        self._jobs = JobLoader(state, self._sizing).load(trace)
        self._faults: FaultInjector | None = None
        if options.gpu_failures_per_gpu_day > 0:
            self._faults = FaultInjector(
                state,
                self._binder,
                self._jobs,
                options.gpu_failures_per_gpu_day,
                options.fault_seed,
                config.policy.repair,
            )
            self._control.faults = self._faults

    # The loop

    def run(self) -> SimResult:
        """Replay until every job finished and the fleet settled (or nothing can change any more)."""
        wall = time.perf_counter()
        events = self._events
        state = self._state
        start = int(events.next_time()) if events else 0
        self._now = state.last_progress = state.last_active = start
        iterations = 0
        stalled = False
        stall_limit = self._stall_limit()
        while True:
            next_tick = self._next_tick()
            next_hook = self._webhook_at if self._webhook_at is not None else INF
            now_f = min(events.next_time(), next_tick, next_hook)
            if self._faults is not None:
                now_f = min(now_f, self._faults.next_time())
            if now_f == INF:
                break
            now = int(now_f)
            if not events.job_events and now - state.last_progress > stall_limit:
                stalled = True
                break
            self._step(now, next_tick, next_hook)
            iterations += 1
            if self._progress is not None and iterations % 2000 == 0:
                self._progress(now, self._binder.started, len(self._jobs))
        end = state.last_active
        account_until(state, end)
        if self._progress is not None:
            self._progress(end, self._binder.started, len(self._jobs))
        return self._result(start, end, stalled, wall)

    def _next_tick(self) -> float:
        """The next scheduled reconcile that can matter: the next tick when the plan may differ (or
        always, with every_tick), else the tick at or after the next policy threshold."""
        state = self._state
        deadline = self._control.deadline
        may_differ = state.dirty or state.unseen != 0 or self._control.last_changed
        if may_differ or (self.options.every_tick and (self._events or deadline < INF)):
            return _align(max(self._now, self._last_tick + 1), self._tick)
        if deadline < INF:
            return _align(max(int(deadline), self._last_tick + 1), self._tick)
        return INF

    def _step(self, now: int, next_tick: float, next_hook: float) -> None:
        """One instant: its events, then the scheduler, then the reconcile if one is due and can matter."""
        state = self._state
        control = self._control
        self._now = now
        if self._faults is not None:
            self._faults.due(now)
        for kind, payload in self._events.pop_due(now):
            self._handle(kind, payload, now)
        if state.capacity_grew or state.arrived:
            self._binder.schedule(now)
        if now in (next_tick, next_hook):
            if now == next_tick:
                self._last_tick = now
            if now == next_hook:
                self._webhook_at = None
            if (
                self.options.every_tick
                or control.last_changed
                or state.dirty
                or state.unseen
                or now >= control.deadline
            ):
                control.reconcile(now)
                if state.capacity_grew:
                    self._binder.schedule(now)
            else:
                self._skipped += 1
        if self._recorder is not None:
            self._recorder.record(now)

    def _handle(self, kind: int, payload: Any, now: int) -> None:
        self._state.last_active = now
        if kind == ARRIVE:
            self._state.arrived.append(payload)
            # A job that arrives is live: the stall limit counts from here, however quiet the trace was.
            self._state.last_progress = now
            if self.options.webhook and (self._webhook_at is None or self._webhook_at < now):
                self._webhook_at = now + self._webhook_delay
        elif kind == FINISH:
            if self._faults is None or self._faults.live(payload, now):
                self._binder.finish(payload, now)
        elif kind == REGISTER:
            self._fleet.register(payload, now)
            if self._faults is not None:
                self._faults.arm(payload.node, now)
        else:
            self._fleet.advertise_gpus(payload, now)

    def _stall_limit(self) -> int:
        """How long without progress, once no job is running or to arrive, before giving up.

        Longer than any wait the policy itself imposes, so a slow scale-down is never cut short.
        """
        policy = self._state.policy
        slowest = (
            max(g.idle_seconds for g in self._state.groups)
            + policy.scale_down_delay_after_add_seconds
            + policy.cordon_settle_seconds
            + policy.scale_down_delay_after_delete_seconds
            + policy.max_node_provision_seconds
            + self._tick
        )
        return max(self.options.stall_seconds, 2 * slowest)

    def _result(self, start: int, end: int, stalled: bool, wall: float) -> SimResult:
        binder = self._binder
        jobs = self._jobs
        binder.waits.sort()
        return SimResult(
            config_name=self.config_name,
            options=self.options,
            jobs=len(jobs),
            pods=sum(len(j.pods) for j in jobs),
            started=binder.started,
            waits=binder.waits,
            # The jobs that started: one that never did needed no GPU-hour of the replay's (it is
            # counted apart, in jobs not started), and would make a config that refuses it look
            # efficient (a gang larger than the group gave provisioned/ideal 0.002).
            ideal_gpu_seconds=sum(j.job.gpu_seconds for j in jobs if j.wait is not None),
            used_gpu_seconds=binder.used_gpu_seconds,
            groups=[g.result for g in self._state.groups],
            start=start,
            end=end,
            wall_seconds=time.perf_counter() - wall,
            plans=self._control.plans,
            skipped=self._skipped,
            stalled=stalled,
            not_started=not_started(self._state.pending, self._control.outcomes),
            fractional_jobs=sum(1 for j in jobs if j.job.fractional),
            series=self._recorder.series if self._recorder is not None else None,
            sizing=self._sizing,
            webhook_delay_seconds=self._webhook_delay if self.options.webhook else None,
            attrition=self.config.policy.attrition,
            migration_enabled=self.config.policy.migration.enabled,
            moves_per_job=[j.moves for j in jobs if j.moves],
            restart_delays=sorted(binder.restart_delays),
            faults=self._faults.finish(end) if self._faults is not None else None,
        )


def _groups(config: ScalerConfig, options: SimOptions) -> list[SimGroup]:
    """The simulated groups of the config, with the options checked against them."""
    groups: list[SimGroup] = []
    for index, group_config in enumerate(config.node_groups):
        shape = group_config.shape
        if shape is None:
            raise missing_allocatable(group_config.name)
        groups.append(SimGroup(index, group_config, shape, options, config.policy))
    names = {g.name for g in groups}
    unknown = set(options.capacity) - names
    if unknown:
        raise ConfigError(f"simulate: --capacity names unknown group(s): {', '.join(sorted(unknown))}")
    if set(options.warm_pools) - names:
        unknown_pools = ", ".join(sorted(set(options.warm_pools) - names))
        raise ConfigError(f"simulate: warm pools of unknown group(s): {unknown_pools}")
    if options.tick_seconds <= 0 or options.boot_seconds < 0 or options.gpu_delay_seconds < 0:
        raise ConfigError("simulate: tick must be > 0 and boot/GPU delays >= 0")
    return groups


def _align(seconds: int, tick: int) -> int:
    """The first multiple of `tick` at or after `seconds`."""
    return -(-seconds // tick) * tick


def simulate(
    trace: Trace,
    config: ScalerConfig,
    options: SimOptions | None = None,
    *,
    config_name: str = "config",
    progress: Callable[[int, int, int], None] | None = None,
) -> SimResult:
    """Replay `trace` against `config`; see the module docstring for what is simulated."""
    return Replay(trace, config, options, config_name=config_name, progress=progress).run()
