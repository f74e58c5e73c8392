"""Binding pods as the simulated kube-scheduler decides, and the pods' run to completion."""

from __future__ import annotations

from dataclasses import replace

from shared.local.sim.entities import FINISH, SimJob, SimNode, at, running
from shared.local.sim.state import SimState

_Failed = list[tuple[tuple[bool, ...], tuple[int, int, int, int]]]


class Binder:
    """Oldest job first, all pods of a job or none; counts starts, waits and the GPU time used."""

    def __init__(self, state: SimState) -> None:
        self._state = state
        self.started = 0
        self.waits: list[int] = []  # seconds, one per started job
        self.used_gpu_seconds = 0
        self.restart_delays: list[int] = []  # seconds from a move to the job running again, restart included

    def schedule(self, now: int) -> None:
        """Bind what fits: every pending job after capacity grew, else only the new arrivals."""
        state = self._state
        if state.capacity_grew:
            queue = state.pending + state.arrived if state.arrived else state.pending
            state.pending = []
        else:
            queue = state.arrived
        state.arrived = []
        state.capacity_grew = False
        # Single pods that did not fit: any later pod at least as large (same groups) fails too.
        failed: _Failed = []
        still: list[SimJob] = []
        for job in queue:
            placed = None
            first = job.vecs[0]
            if not _dominated(job.allowed, first, failed):
                placed = self._place(job)
                if placed is None and len(job.vecs) == 1:
                    failed.append((job.allowed, first))
            if placed is None:
                if not self._is_known_pending(job):
                    self._mark_pending(job)
                still.append(job)
            else:
                self._bind(job, placed, now)
        state.pending.extend(still)

    def _place(self, job: SimJob) -> list[SimNode] | None:
        """The nodes the scheduler binds the job's pods to, all or nothing (not yet bound)."""
        slots = self._state.scheduler.place(job.requests, keep=False)
        if slots is None:
            return None
        nodes = self._state.nodes
        return [nodes[slot.name] for slot in slots]

    def _is_known_pending(self, job: SimJob) -> bool:
        return job.pods[0].key in self._state.live_pods

    def _mark_pending(self, job: SimJob) -> None:
        state = self._state
        for pod in job.pods:
            state.live_pods[pod.key] = pod.pending
        state.pending_gpus += job.gpus
        state.unseen += 1  # the backlog grew

    def _bind(self, job: SimJob, nodes: list[SimNode], now: int) -> None:
        state = self._state
        if self._is_known_pending(job):
            state.pending_gpus -= job.gpus
            # The backlog shrank; if no plan saw this job pending, it cancels its own arrival.
            state.unseen += 1 if job.seen == state.epoch else -1
        for pod, node, vec in zip(job.pods, nodes, job.vecs, strict=True):
            state.untally(node, now)
            state.scheduler.take(node.slot, vec)
            if node.pods == 0 and node.seen_idle is not None:
                state.unseen += 1 if node.seen_idle else -1  # an idle node became busy
            node.pods += 1
            state.tally(node)
            state.dirty = state.dirty or state.steers
            node.group.busy_gpus += vec[0]
            pod.node = node
            state.live_pods[pod.key] = running(pod.pending, node.name)
        job.start = now
        job.finish = now + job.runtime
        if job.evicted_at is None:
            self.started += 1
            job.wait = now - job.job.submit
            self.waits.append(job.wait)
        else:  # a moved job runs again: it restarts from its last checkpoint
            self.restart_delays.append(now - job.evicted_at + self._state.options.restart_seconds)
            job.evicted_at = None
        state.last_progress = now
        state.events.push(job.finish, FINISH, job)

    def finish(self, job: SimJob, now: int) -> None:
        """The job's pods succeeded: they leave their nodes (a finish planned before a move is void)."""
        if job.finish != now or job.start is None or job.pods[0].node is None:
            return
        self._release(job, now, now - job.start)

    def evict(self, job: SimJob, now: int) -> int:
        """A migration evicts the job's pods: the work since its last checkpoint is lost, and the Job
        controller re-creates its pods at once; they need the restart delay on top of what is left.
        Returns the GPU-seconds lost (restart included)."""
        options = self._state.options
        begins = job.work_begins(options.restart_seconds)
        assert job.start is not None and begins is not None
        ran = now - job.start
        productive = max(0, now - begins)  # a moved job's run begins with its restart
        saved = job.saved_seconds(now, options.checkpoint_interval_seconds, options.restart_seconds)
        lost_run = productive - saved
        self._release(job, now, ran)
        job.done += saved
        job.runtime = options.restart_seconds + max(0, job.job.duration - job.done)
        job.moves += 1
        job.evicted_at = now
        job.finish = None
        job.start = None
        job.created = now
        for pod in job.pods:
            pod.pending = replace(pod.pending, created_at=at(now), uid=f"{pod.pending.name}-{job.moves}")
        self._state.arrived.append(job)
        self._state.capacity_grew = True
        return job.gpus * (lost_run + options.restart_seconds)

    def _release(self, job: SimJob, now: int, duration: int) -> None:
        """The job's pods leave their nodes after running `duration` seconds."""
        state = self._state
        for pod, vec in zip(job.pods, job.vecs, strict=True):
            node = pod.node
            assert node is not None
            state.untally(node, now)
            del state.live_pods[pod.key]
            pod.node = None
            state.scheduler.give(node.slot, vec)
            node.pods -= 1
            state.tally(node)
            state.dirty = state.dirty or state.steers
            g = vec[0]
            node.group.busy_gpus -= g
            node.group.result.busy_gpu_seconds += g * duration
            self.used_gpu_seconds += g * duration
            if node.pods == 0 and node.seen_idle is not None:
                state.unseen += -1 if node.seen_idle else 1  # the node became idle
            if node.schedulable:
                state.capacity_grew = True
        state.last_progress = now


def _dominated(allowed: tuple[bool, ...], vec: tuple[int, int, int, int], failed: _Failed) -> bool:
    for other_allowed, f in failed:
        if (
            other_allowed is allowed
            and vec[0] >= f[0]
            and vec[1] >= f[1]
            and vec[2] >= f[2]
            and vec[3] >= f[3]
        ):
            return True
    return False
