"""A trace's jobs as the replay's pending pods: selectors, gang labels, sizes and scheduler requests."""

from __future__ import annotations

from types import MappingProxyType

from shared.domain.checkpoint import ANNOTATION_CHECKPOINT_INTERVAL
from shared.domain.errors import ConfigError
from shared.domain.model import Pod, Scheduling, Toleration
from shared.domain.resources import Resources
from shared.local.sim.entities import ARRIVE, INF, NAMESPACE, NO_STRINGS, SimGroup, SimJob, SimPod, at
from shared.local.sim.scheduler import PodRequest
from shared.local.sim.state import SimState
from shared.local.sim.trace import Job, Trace
from shared.local.sim.workload import PodSize, Sizing
from shared.planner.attrition import ANNOTATION_EXPECTED_RUNTIME

# The fractional part of index x the golden ratio's inverse spreads evenly over [0, 1) (a Weyl
# sequence): the first n jobs hold within one of n x fraction checkpointable ones, whatever the trace.
_GOLDEN = 0.6180339887498949

Selector = tuple[tuple[str, str], ...]


class JobLoader:
    """Turns trace jobs into SimJobs and queues their arrivals; one Scheduling object per selector."""

    def __init__(self, state: SimState, sizing: Sizing) -> None:
        self._state = state
        self._sizing = sizing
        # Batch pods tolerate the groups' own taints (the GPU taint), never the scaler's mark.
        self._tolerations = tuple(
            sorted(
                {Toleration(t.key, "Exists", "", str(t.effect)) for g in state.groups for t in g.taints},
                key=lambda t: (t.key, t.effect),
            )
        )
        self._schedulings: dict[Selector, Scheduling] = {}
        # One Resources per pod size: the planner's per-run indexes dedupe shapes by identity, so
        # pods sharing one object are one entry instead of one per pod.
        self._resources: dict[PodSize, Resources] = {}
        self._allowed: dict[Selector, tuple[bool, ...]] = {}

    def load(self, trace: Trace) -> list[SimJob]:
        jobs: list[SimJob] = []
        for index, job in enumerate(trace.jobs):
            sim_job = self._job(index, job, self._selector(trace, job))
            jobs.append(sim_job)
            self._state.events.push(job.submit, ARRIVE, sim_job)
        return jobs

    def _selector(self, trace: Trace, job: Job) -> Selector:
        """The job's node selector, with its group's labels when it names a group or is right-sized."""
        state = self._state
        selector = job.selector
        group: SimGroup | None = None
        if job.group is not None:
            group = state.group_by_name.get(job.group)
            if group is None:
                raise ConfigError(
                    f"{trace.source}: job {job.job_id}: unknown node group {job.group!r}; "
                    f"configured: {', '.join(state.group_by_name)}"
                )
        elif state.options.right_size and not selector:
            group = self._right_size(job.gpus)
        if group is not None:
            selector = tuple(sorted({**dict(selector), **group.labels}.items()))
        return selector

    def _scheduling(self, selector: Selector) -> tuple[Scheduling, tuple[bool, ...]]:
        scheduling = self._schedulings.get(selector)
        if scheduling is None:
            scheduling = self._schedulings[selector] = Scheduling(
                node_selector=selector, tolerations=self._tolerations
            )
            self._allowed[selector] = tuple(scheduling.selects(g.labels) for g in self._state.groups)
        return scheduling, self._allowed[selector]

    def _job(self, index: int, job: Job, selector: Selector) -> SimJob:
        """The job's pods: split to fit the largest node it may use, a gang when more than one."""
        groups = self._state.groups
        scheduling, allowed = self._scheduling(selector)
        sim_job = SimJob(index, job)
        sim_job.allowed = allowed
        per_node = max(
            (g.gpus_per_node for g in groups if allowed[g.index]),
            default=max(g.gpus_per_node for g in groups),
        )
        sizes = self._sizing.split(job, per_node)
        base = f"j{index:07d}"
        gang = base if len(sizes) > 1 else None
        gang_label = self._state.policy.gang_label
        labels = MappingProxyType({gang_label: gang}) if gang and gang_label else NO_STRINGS
        options = self._state.options
        found = {ANNOTATION_EXPECTED_RUNTIME: str(job.duration)} if options.runtime_estimates else {}
        if is_checkpointable(index, options.checkpointable):
            found[ANNOTATION_CHECKPOINT_INTERVAL] = str(options.checkpoint_interval_seconds)
            sim_job.checkpoints = True
        annotations = MappingProxyType(found) if found else NO_STRINGS
        for k, size in enumerate(sizes):
            name = f"{base}-{k}" if gang else base
            pod = Pod(
                namespace=NAMESPACE,
                name=name,
                requests=self._requests(size),
                phase="Pending",
                scheduling=scheduling,
                labels=labels,
                annotations=annotations,
                owner_kind="Job",
                owner_name=base,
                created_at=at(job.submit),
                unschedulable=True,
                uid=name,
            )
            sim_job.pods.append(SimPod(pod))
            self._state.job_of[pod.key] = sim_job
            vec = (size.gpus, size.cpu_millicores, size.memory_bytes, 1)
            sim_job.vecs.append(vec)
            sim_job.requests.append(PodRequest(scheduling, vec))
        return sim_job

    def _requests(self, size: PodSize) -> Resources:
        found = self._resources.get(size)
        if found is None:
            found = self._resources[size] = size.resources()
        return found

    def _right_size(self, gpus: int) -> SimGroup:
        """The group of the fewest GPUs per node that still holds `gpus` whole (then cheapest per GPU)."""
        groups = self._state.groups

        def price_per_gpu(group: SimGroup) -> float:
            price = group.config.price_per_hour
            return price / group.gpus_per_node if price is not None and group.gpus_per_node else INF

        fitting = [g for g in groups if g.gpus_per_node >= gpus]
        if fitting:
            return min(fitting, key=lambda g: (g.gpus_per_node, price_per_gpu(g), g.index))
        return min(groups, key=lambda g: (-g.gpus_per_node, price_per_gpu(g), g.index))


def is_checkpointable(index: int, fraction: float) -> bool:
    """Whether job `index` of the trace checkpoints, for `fraction` of all jobs (deterministic)."""
    return fraction >= 1.0 or (index * _GOLDEN) % 1.0 < fraction
