"""InterPodAffinity: required pod affinity and anti-affinity, and existing pods' anti-affinity
against the incoming pod (plugins/interpodaffinity/filtering.go).

Counts are per topology pair (key, value) and kept by the simulation as pods are placed, so a
Filter call is a few dictionary lookups, never a scan of pods:
- affinity: pods matching ALL of the incoming pod's terms, per pair of each term's key; the first
  pod of a series that matches its own terms may go anywhere the keys exist when no pod matches;
- anti-affinity: pods matching each term, per pair of that term's key;
- existing anti-affinity: terms of placed pods that match the incoming pod, per pair.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from shared.domain.constraints import PodAffinityTerm
from shared.planner.filters.framework import Reason

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

Pair = tuple[str, str]


@dataclass(frozen=True)
class InterPodAffinityState:
    """PreFilter result; the counters are live views the simulation updates on every placement."""

    affinity: tuple[PodAffinityTerm, ...]
    affinity_counts: Counter[Pair]
    matches_own_affinity: bool
    anti_affinity: tuple[tuple[str, Counter[Pair]], ...]  # (topology key, counts) per term
    existing_anti: tuple[tuple[str, Counter[Pair]], ...]  # existing terms that match this pod

    @property
    def empty(self) -> bool:
        return not (self.affinity or self.anti_affinity or self.existing_anti)


def inter_pod_affinity(state: InterPodAffinityState, labels: Mapping[str, str]) -> Reason:
    """None when the node satisfies every required (anti-)affinity rule in both directions."""
    for key, counts in state.existing_anti:
        value = labels.get(key)
        if value is not None and counts[(key, value)] > 0:
            return EXISTING_ANTI_AFFINITY
    for key, counts in state.anti_affinity:
        value = labels.get(key)
        if value is not None and counts[(key, value)] > 0:
            return ANTI_AFFINITY
    if state.affinity:
        pods_exist = True
        for term in state.affinity:
            value = labels.get(term.topology_key)
            if value is None:
                return AFFINITY  # every topology key must exist on the node
            if state.affinity_counts[(term.topology_key, value)] <= 0:
                pods_exist = False
        if not pods_exist:
            # The first pod of a series with affinity to itself: allowed when no pod anywhere
            # matches and the pod matches its own terms (filtering.go satisfyPodAffinity).
            nothing_matches = not any(v > 0 for v in state.affinity_counts.values())
            if not (nothing_matches and state.matches_own_affinity):
                return AFFINITY
    return None
