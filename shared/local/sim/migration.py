"""Migrations in the replay: the plan's `migrate[]` applied as the controller applies it.

Re-validated on the simulated world (the node still there and not cordoned, every pod of the move
still running, the node running nothing else), then the node is cordoned (idle scale-down takes it
once empty) and each job of the move is evicted whole (`Binder.evict`: the work since its last
simulated checkpoint is lost, its pods are re-created at once and need the restart delay on top of
what is left). A pod evicted without having opted in is counted (`evicted_not_movable`: the planner
must never ask for one).
"""

from __future__ import annotations

from shared.domain.checkpoint import MIGRATION_WINDOW, job_key, not_movable, remember_moves
from shared.domain.plan import Plan
from shared.local.sim.binding import Binder
from shared.local.sim.entities import SimJob, at
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
