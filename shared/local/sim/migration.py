"""Migrations in the replay: the plan's `migrate[]` applied as the controller applies it.

Re-validated on the simulated world (the node still there and not cordoned, every pod of the move
still running, the node running nothing else), then the node is cordoned (idle scale-down takes it
once empty) and each job of the move is evicted whole (`Binder.evict`: the work since its last
simulated checkpoint is lost, its pods are re-created at once and need the restart delay on top of
what is left). A pod evicted without having opted in is counted (`evicted_not_movable`: the planner
must never ask for one).

When the plan can decide anew with nothing else happening (`next_due`, for the replay's skipping of
reconciles that cannot change the plan): the migration rule (shared.planner.migration) reads the
clock through a group's delay after a scale-up, its per-hour budget, a pod's first checkpoint (it
may not move before it saved: `checkpoint.not_saved_yet`, its lost work grows until then) and the
saving of emptying a node, which grows with the age of its oldest pod without a runtime estimate
while the loss stays (`attrition.expected_remaining_seconds` against `lost_seconds` + restarts, by
`min_gain`). Each is an instant computed here from the replay's pods, which carry the checkpoint
interval; with `SimOptions.last_checkpoint` the jobs also write `backlog-scaler/last-checkpoint` each
time they save (`stamp`, before every plan), so a move's loss drops to the restart at each save and
grows until the next: the instant is then searched from save to save.
"""

from __future__ import annotations

import math
from dataclasses import replace

from shared.domain.checkpoint import (
    ANNOTATION_LAST_CHECKPOINT,
    MIGRATION_WINDOW,
    job_key,
    not_movable,
    remember_moves,
)
from shared.domain.plan import Plan
from shared.local.sim.binding import Binder
from shared.local.sim.entities import INF, SimJob, SimNode, at
from shared.local.sim.state import SimState

_WINDOW_SECONDS = int(MIGRATION_WINDOW.total_seconds())


class SimMigrator:
    """Applies the plan's migrations to the simulated world."""

    def __init__(self, state: SimState, binder: Binder) -> None:
        self._state = state
        self._binder = binder

    def apply(self, result: Plan, now: int) -> bool:
        """Carry out the plan's migrations; True when the world changed."""
        changed = False
        for move in result.migrate:
            jobs = self._revalidated(move.node, move.pods)
            if jobs is None:
                continue
            node = self._state.nodes[move.node]
            group = node.group
            moved = [job_key(self._state.live_pods[k]) for k in move.pods]
            for key in move.pods:
                if not_movable(self._state.live_pods[key]):
                    group.result.evicted_not_movable += 1
            node.cordoned_at = now
            self._state.restyle(node)
            lost = sum(self._binder.evict(job, now) for job in jobs)
            group.result.migrations += 1
            group.result.migration_lost_gpu_seconds += lost
            group.migrated_at = [t for t in group.migrated_at if now - t < _WINDOW_SECONDS] + [now]
            present = {job_key(pod) for pod in self._state.live_pods.values()}
            group.moved_jobs = remember_moves(group.moved_jobs, moved, at(now), present)
            self._state.dirty = True
            changed = True
        return changed

    def stamp(self, now: int) -> None:
        """The running pods of jobs that checkpoint as they are at `now`: each carries its job's last
        save as `backlog-scaler/last-checkpoint` (RFC 3339), as a job that writes it would."""
        state = self._state
        options = state.options
        for key, pod in state.live_pods.items():
            if pod.node_name is None:
                continue
            job = state.job_of[key]
            if not job.checkpoints:
                continue
            saved = job.last_save(now, options.checkpoint_interval_seconds, options.restart_seconds)
            if saved is None:
                continue
            written = at(saved).isoformat().replace("+00:00", "Z")
            if pod.annotations.get(ANNOTATION_LAST_CHECKPOINT) != written:
                annotations = {**pod.annotations, ANNOTATION_LAST_CHECKPOINT: written}
                state.live_pods[key] = replace(pod, annotations=annotations)

    def next_due(self, now: int) -> float:
        """The first instant after `now` when the migration rule may decide otherwise than it did at
        `now` though nothing else changed (INF: never); see the module docstring."""
        return min(self._windows(now), self._nodes_due(now))

    def _windows(self, now: int) -> float:
        """When a group's delay after its last scale-up ends (no node is emptied while the group grows,
        busy nodes or not), or a migration leaves its per-hour budget."""
        delay = self._state.policy.scale_down_delay_after_add_seconds
        soonest: float = INF
        for group in self._state.groups:
            if group.last_scale_up is not None and group.last_scale_up + delay > now:
                soonest = min(soonest, group.last_scale_up + delay)
            for moved in group.migrated_at:
                if moved + _WINDOW_SECONDS > now:
                    soonest = min(soonest, moved + _WINDOW_SECONDS)
        return soonest

    def _nodes_due(self, now: int) -> float:
        """When a node whose busy pods all may move becomes worth emptying: once every job of it has
        saved, when the saving passes `min_gain` x the loss."""
        state = self._state
        max_moves = state.policy.migration.max_moves_per_job
        gangs = bool(state.policy.gang_label)  # a job of several pods moves whole (its gang)
        jobs_on: dict[str, dict[int, SimJob]] = {}
        moved_on: dict[str, dict[int, int]] = {}  # node -> job -> the GPUs a move of it loses work on
        unmovable: set[str] = set()
        for key, pod in state.live_pods.items():
            name = pod.node_name
            if name is None or name in unmovable:
                continue
            job = state.job_of[key]
            if not job.checkpoints or job.moves >= max_moves:
                unmovable.add(name)
                continue
            jobs_on.setdefault(name, {})[job.index] = job
            moved = moved_on.setdefault(name, {})
            moved[job.index] = job.gpus if gangs else moved.get(job.index, 0) + pod.requests.gpus
        soonest: float = INF
        for name, jobs in jobs_on.items():
            node = state.nodes[name]
            if name not in unmovable and node.schedulable and not node.broken:
                found = list(jobs.values())
                due = self._worth_from(node, found, sum(moved_on[name].values()))
                if state.options.last_checkpoint:
                    due = self._worth_with_saves(node, found, moved_on[name], now, due)
                if due > now:
                    soonest = min(soonest, due)
        return soonest

    def _worth_from(self, node: SimNode, jobs: list[SimJob], moved_gpus: int) -> float:
        """When emptying `node` of `jobs` (`moved_gpus`: their gangs whole) becomes worth it by the
        passing of time alone.

        Every job has saved at its creation + interval, and from then on a move loses the interval plus
        the restart, per GPU. The saving is the node's GPUs x the age of its oldest pod without a
        runtime estimate (pods with one only expect less as time passes: no such node gets worth it).
        """
        state = self._state
        policy = state.policy.migration
        interval = state.options.checkpoint_interval_seconds
        saved_from = max(job.created for job in jobs) + interval
        gpus = node.group.gpus_per_node
        if state.options.runtime_estimates or gpus <= 0:
            return saved_from
        need = float(moved_gpus * (interval + policy.restart_seconds)) * policy.min_gain
        # The first whole second of age at which gpus x age > need, as the planner compares them.
        age = max(0, math.floor(need / gpus))
        while age > 0 and gpus * float(age - 1) > need:
            age -= 1
        while not gpus * float(age) > need:
            age += 1
        return max(saved_from, min(job.created for job in jobs) + age)

    def _worth_with_saves(
        self, node: SimNode, jobs: list[SimJob], moved: dict[int, int], now: int, bound: float
    ) -> float:
        """`_worth_from` for jobs that write their last checkpoint: the first instant after `now` at
        which emptying `node` becomes worth it, no later than `bound` (by then it is worth it
        whatever the saves: a move never loses more than the interval). A job's loss is the time
        since its last save (the interval before its first), so the test can pass at a save or
        between two; from save to save both sides of it are straight lines in time."""
        state = self._state
        interval, restart = state.options.checkpoint_interval_seconds, state.options.restart_seconds
        if state.options.runtime_estimates:
            # The saving shrinks as time passes: only the jobs' first checkpoints (`bound`) and their
            # saves can make a move worth it.
            saves = [self._next_save(job, now, interval, restart) for job in jobs]
            return min([t for t in (bound, *saves) if t > now], default=INF)
        start = max(now + 1, max(job.created for job in jobs) + interval)
        while start < bound:
            end = int(min([bound, *(self._next_save(job, start, interval, restart) for job in jobs)]))
            if self._worth_at(node, jobs, moved, start):
                return start
            if self._worth_at(node, jobs, moved, end - 1):  # the test is monotone between two saves
                low, high = start, end - 1
                while high - low > 1:
                    mid = (low + high) // 2
                    low, high = (low, mid) if self._worth_at(node, jobs, moved, mid) else (mid, high)
                return high
            start = end
        return bound

    @staticmethod
    def _next_save(job: SimJob, after: int, interval: int, restart: int) -> float:
        """The job's first save later than `after` (INF: not running)."""
        begins = job.work_begins(restart)
        if begins is None:
            return INF
        last = job.last_save(after, interval, restart)
        return (last if last is not None else begins) + interval

    def _worth_at(self, node: SimNode, jobs: list[SimJob], moved: dict[int, int], t: int) -> bool:
        """The migration rule's test at `t`, as the planner computes it from the pods' annotations:
        the node's GPUs x the age of its oldest pod > `min_gain` x the moved GPUs x (each job's work
        since its last save, or the interval before its first, plus `restart_seconds`)."""
        state = self._state
        policy = state.policy.migration
        interval, restart = state.options.checkpoint_interval_seconds, state.options.restart_seconds
        lost = 0.0
        for job in jobs:
            saved = job.last_save(t, interval, restart)
            since = min(t - saved if saved is not None else interval, t - job.created)
            lost += moved[job.index] * float(since + policy.restart_seconds)
        age = t - min(job.created for job in jobs)
        return node.group.gpus_per_node * float(age) > lost * policy.min_gain

    def _revalidated(self, name: str, keys: tuple[str, ...]) -> list[SimJob] | None:
        """The jobs of the move, or None when the world no longer matches it."""
        state = self._state
        node = state.nodes.get(name)
        if node is None or node.cordoned_at is not None:
            return None
        jobs: dict[int, SimJob] = {}
        on_node = 0
        for key in keys:
            job = state.job_of.get(key)
            pod = state.live_pods.get(key)
            if job is None or pod is None or pod.node_name is None:
                return None
            jobs[job.index] = job
            on_node += pod.node_name == name
        if on_node != node.pods:
            return None
        whole = all(state.live_pods.get(p.key) is not None for job in jobs.values() for p in job.pods)
        return [jobs[i] for i in sorted(jobs)] if whole else None
