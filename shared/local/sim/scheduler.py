"""The simulated kube-scheduler both simulated worlds bind pods with (`simulate` and the demo).

Feasibility is the planner's own filters (shared.planner.filters, through `static_reason` and
`node_resources_fit`): the scheduler and the planner can only disagree where the real scheduler
and the planner would. Among feasible nodes a pod goes to the best-scored one, as kube-scheduler's
default profile scores them (pkg/scheduler/framework/plugins, Score and NormalizeScore):

- NodeResourcesFit (weight 1), `scoringStrategy` LeastAllocated (the default: spreads) or
  MostAllocated (packs), over the default scoring resources cpu and memory (weight 1 each); per
  resource `(capacity - requested) * 100 / capacity` or `requested * 100 / capacity` (integer
  division, requested including the incoming pod, capped at capacity), then the weighted mean.
- TaintToleration (weight 3): the number of PreferNoSchedule taints the pod does not tolerate (only
  tolerations with effect PreferNoSchedule or none count), normalised over the feasible nodes in
  reverse, `100 - 100 * count / max` (every node 100 when no node has one).
- `first-fit` is the replay's old scheduler: TaintToleration still scores, NodeResourcesFit does
  not; ties go to the node created first.

kube-scheduler breaks ties between equal scores at random; here they go to the oldest node (then
the name), so a replay is deterministic. Not modelled: NodeResourcesBalancedAllocation, ImageLocality
and the inter-pod scores (the replayed batch pods carry no such constraints).

Speed: nodes with the same class (labels, taints, cordon) and the same free room get the same
answer and score, so they share a bucket and are judged once; a bucket keeps its nodes by age.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from operator import attrgetter

from shared.domain.model import Scheduling, Taint, TaintEffect
from shared.domain.resources import CPU, MEMORY
from shared.planner.filters.node_resources_fit import node_resources_fit
from shared.planner.simulation import static_reason

MAX_NODE_SCORE = 100  # framework.MaxNodeScore
NODE_RESOURCES_FIT_WEIGHT = 1  # the default profile's plugin weights (apis/config/v1/default_plugins.go)
TAINT_TOLERATION_WEIGHT = 3
DEFAULT_SCORING_RESOURCES: tuple[tuple[str, int], ...] = ((CPU, 1), (MEMORY, 1))


class Scoring(StrEnum):
    """How the simulated scheduler ranks feasible nodes (`--scheduler-scoring`)."""

    LEAST_ALLOCATED = "least-allocated"
    MOST_ALLOCATED = "most-allocated"
    FIRST_FIT = "first-fit"


DEFAULT_SCORING = Scoring.LEAST_ALLOCATED


def resource_score(scoring: Scoring, requested: int, capacity: int) -> int:
    """One resource's NodeResourcesFit score, 0..100 (leastRequestedScore / mostRequestedScore)."""
    if capacity <= 0:
        return 0
    if scoring is Scoring.MOST_ALLOCATED:
        return min(requested, capacity) * MAX_NODE_SCORE // capacity
    if requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def fit_score(
    scoring: Scoring, requested: Sequence[int], capacity: Sequence[int], weights: Sequence[int]
) -> int:
    """The weighted mean of the resource scores (the plugin's score before its weight)."""
    total = weight_sum = 0
    for amount, cap, weight in zip(requested, capacity, weights, strict=True):
        total += resource_score(scoring, amount, cap) * weight
        weight_sum += weight
    return total // weight_sum if weight_sum else 0


def intolerable_prefer_no_schedule(scheduling: Scheduling, taints: tuple[Taint, ...]) -> int:
    """PreferNoSchedule taints the pod's PreferNoSchedule (or effect-less) tolerations miss."""
    tolerations = [t for t in scheduling.tolerations if t.effect in ("", TaintEffect.PREFER_NO_SCHEDULE)]
    return sum(
        1
        for taint in taints
        if taint.effect == TaintEffect.PREFER_NO_SCHEDULE and not any(t.tolerates(taint) for t in tolerations)
    )


def taint_scores(counts: Sequence[int]) -> list[int]:
    """TaintToleration's NormalizeScore: DefaultNormalizeScore(MaxNodeScore, reverse=true)."""
    highest = max(counts, default=0)
    if highest == 0:
        return [MAX_NODE_SCORE] * len(counts)
    return [MAX_NODE_SCORE - MAX_NODE_SCORE * count // highest for count in counts]


@dataclass(frozen=True, eq=False)
class NodeClass:
    """What the static filters read of a node: labels, taints and cordon (shared by many nodes)."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    unschedulable: bool = False


@dataclass(eq=False, slots=True)
class Slot:
    """One node as the scheduler sees it: its class, allocatable and free room (dims order)."""

    name: str
    age: tuple[int, str]  # creation order: (created at, name)
    node_class: NodeClass
    allocatable: tuple[int, ...]
    free: list[int]
    key: tuple[int, ...] = field(default=())  # the free room it is bucketed under


@dataclass(frozen=True, slots=True)
class PodRequest:
    """One pod to bind: its scheduling constraints and request vector (dims order)."""

    scheduling: Scheduling
    vector: tuple[int, ...]


class Scheduler:
    """Binds pods to slots: the planner's filters for feasibility, kube-scheduler's scores to choose."""

    def __init__(
        self,
        dims: tuple[str, ...],
        scoring: Scoring = DEFAULT_SCORING,
        resources: tuple[tuple[str, int], ...] = DEFAULT_SCORING_RESOURCES,
    ) -> None:
        self.dims = dims
        self.scoring = scoring
        scored = [(dims.index(name), weight) for name, weight in resources if name in dims]
        self._scored_dims = tuple(d for d, _ in scored)
        self._weights = tuple(w for _, w in scored)
        self._buckets: dict[tuple[NodeClass, tuple[int, ...]], list[Slot]] = {}
        self._static: dict[tuple[int, NodeClass], tuple[Scheduling, bool, int]] = {}
        self._requests: dict[tuple[int, ...], tuple[tuple[int, int], ...]] = {}
        # NodeResourcesFit's score by (allocatable, free room, request): a pure function of the three
        # values, and the candidates of a bind repeat them (most nodes share a shape and a few loads).
        self._fits: dict[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], int] = {}
        self.slots: dict[str, Slot] = {}

    # ------------------------------------------------------------------ the node set

    def add(self, slot: Slot) -> None:
        """A node the scheduler may bind to (cordoned ones too: NodeUnschedulable rejects them)."""
        self.slots[slot.name] = slot
        self._file(slot)

    def remove(self, slot: Slot) -> None:
        self._unfile(slot)
        del self.slots[slot.name]

    def change(
        self,
        slot: Slot,
        *,
        node_class: NodeClass | None = None,
        allocatable: tuple[int, ...] | None = None,
    ) -> None:
        """The node's labels/taints/cordon or allocatable changed (free room follows allocatable)."""
        self._unfile(slot)
        if node_class is not None:
            slot.node_class = node_class
        if allocatable is not None:
            for dim, (old, new) in enumerate(zip(slot.allocatable, allocatable, strict=True)):
                slot.free[dim] += new - old
            slot.allocatable = allocatable
        self._file(slot)

    def take(self, slot: Slot, vector: Sequence[int]) -> None:
        """A pod bound to the node takes its request."""
        self._unfile(slot)
        free = slot.free
        for dim, amount in enumerate(vector):
            free[dim] -= amount
        self._file(slot)

    def give(self, slot: Slot, vector: Sequence[int]) -> None:
        """A pod left the node: its request is free again."""
        self._unfile(slot)
        free = slot.free
        for dim, amount in enumerate(vector):
            free[dim] += amount
        self._file(slot)

    def _file(self, slot: Slot) -> None:
        slot.key = tuple(slot.free)
        bucket = self._buckets.setdefault((slot.node_class, slot.key), [])
        insort(bucket, slot, key=_age)

    def _unfile(self, slot: Slot) -> None:
        bucket_key = (slot.node_class, slot.key)
        bucket = self._buckets[bucket_key]
        index = bisect_left(bucket, slot.age, key=_age)
        while bucket[index] is not slot:
            index += 1
        del bucket[index]
        if not bucket:
            del self._buckets[bucket_key]

    # ------------------------------------------------------------------ choosing

    def _request(self, vector: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        found = self._requests.get(vector)
        if found is None:
            found = self._requests[vector] = tuple((d, a) for d, a in enumerate(vector) if a)
        return found

    def _judge(self, scheduling: Scheduling, node_class: NodeClass) -> tuple[bool, int]:
        """(passes the static filters, intolerable PreferNoSchedule taints), cached per class."""
        key = (id(scheduling), node_class)
        found = self._static.get(key)
        if found is None or found[0] is not scheduling:
            ok = (
                static_reason(scheduling, node_class.labels, node_class.taints, node_class.unschedulable)
                is None
            )
            count = intolerable_prefer_no_schedule(scheduling, node_class.taints)
            found = self._static[key] = (scheduling, ok, count)
        return found[1], found[2]

    def feasible(self, pod: PodRequest) -> Iterator[tuple[Slot, int]]:
        """The oldest node of every bucket that passes the filters, with its taint count."""
        request = self._request(pod.vector)
        dims = self.dims
        for (node_class, free), slots in self._buckets.items():
            if node_resources_fit(request, free, dims) is not None:
                continue
            ok, taints = self._judge(pod.scheduling, node_class)
            if ok:
                yield slots[0], taints

    def choose(self, pod: PodRequest) -> Slot | None:
        """The node kube-scheduler would bind the pod to (None: Unschedulable)."""
        candidates = list(self.feasible(pod))
        if not candidates:
            return None
        taint = taint_scores([count for _, count in candidates])
        best: Slot | None = None
        best_rank: tuple[int, tuple[int, str]] | None = None
        for (slot, _), taint_score in zip(candidates, taint, strict=True):
            score = TAINT_TOLERATION_WEIGHT * taint_score
            if self.scoring is not Scoring.FIRST_FIT:
                score += NODE_RESOURCES_FIT_WEIGHT * self._fit(slot, pod.vector)
            rank = (-score, slot.age)
            if best_rank is None or rank < best_rank:
                best, best_rank = slot, rank
        return best

    def _fit(self, slot: Slot, vector: tuple[int, ...]) -> int:
        free = slot.key  # its free room, as it is filed now (every change of `free` refiles it)
        key = (slot.allocatable, free, vector)
        found = self._fits.get(key)
        if found is None:
            requested = [slot.allocatable[d] - free[d] + vector[d] for d in self._scored_dims]
            capacity = [slot.allocatable[d] for d in self._scored_dims]
            if len(self._fits) >= _FITS_MAX:
                self._fits.clear()
            found = self._fits[key] = fit_score(self.scoring, requested, capacity, self._weights)
        return found

    def place(self, pods: Sequence[PodRequest], *, keep: bool = True) -> list[Slot] | None:
        """Bind every pod or none (a gang): each pod in turn on the best node given the earlier ones.

        On success the pods' requests are taken from the chosen nodes (left free with `keep=False`,
        for a caller that takes them itself); on failure nothing changes.
        """
        chosen: list[Slot] = []
        for pod in pods:
            slot = self.choose(pod)
            if slot is None:
                break
            self.take(slot, pod.vector)
            chosen.append(slot)
        if len(chosen) == len(pods) and keep:
            return chosen
        for taken, earlier in zip(chosen, pods, strict=False):
            self.give(taken, earlier.vector)
        return chosen if len(chosen) == len(pods) else None


_age = attrgetter("age")
_FITS_MAX = 65536  # scores remembered; past it the memo starts over
