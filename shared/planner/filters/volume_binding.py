"""VolumeBinding and VolumeZone: what a pod's PersistentVolumeClaims demand of a node.

Mirrors plugins/volumebinding (binder.go: bound claims need the PV's node affinity to hold;
unbound claims of a WaitForFirstConsumer class are provisioned where the class's
allowedTopologies allow; unbound claims of an Immediate class, missing claims, PVs and classes
make the pod unschedulable everywhere) and plugins/volumezone (volume_zone.go: a bound PV's
zone/region labels, values joined by "__", must match a node that carries zone labels).
Not modelled: binding an unbound claim to an existing static PV, and CSI storage capacity; the
planner then answers as for provisioning, and the ground-truth guard catches what is left.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from shared.domain.keys import namespaced_key
from shared.domain.volumes import NodeSelectorTerms, PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.planner.filters.framework import Reason

NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ZONE_CONFLICT = "node(s) had no available volume zone"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
_GA = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}


@dataclass(frozen=True)
class Volumes:
    """The cluster's storage objects, indexed once per run."""

    claims: Mapping[str, PersistentVolumeClaim]  # by namespace/name
    volumes: Mapping[str, PersistentVolume]
    classes: Mapping[str, StorageClass]
    default_class: StorageClass | None

    @classmethod
    def of(
        cls,
        pvcs: tuple[PersistentVolumeClaim, ...],
        pvs: tuple[PersistentVolume, ...],
        scs: tuple[StorageClass, ...],
    ) -> Volumes:
        defaults = sorted((c for c in scs if c.is_default), key=lambda c: c.name)
        return cls(
            {c.key: c for c in pvcs},
            {v.name: v for v in pvs},
            {c.name: c for c in scs},
            defaults[0] if defaults else None,
        )


@dataclass(frozen=True)
class VolumeDemand:
    """PreFilter result: node-selector terms that must each hold, zone labels, or why nothing can."""

    terms: tuple[tuple[NodeSelectorTerms, str], ...] = ()  # (ORed terms, reason when none holds)
    zones: tuple[tuple[str, frozenset[str]], ...] = ()  # (label key, allowed values)
    unresolvable: str | None = None


def _holds(terms: NodeSelectorTerms, labels: Mapping[str, str]) -> bool:
    return any(all(req.holds(labels) for req in term) for term in terms)


def volume_demand(namespace: str, claim_names: tuple[str, ...], volumes: Volumes) -> VolumeDemand:
    """PreFilter: resolve the pod's claims to what they demand of any node."""
    terms: list[tuple[NodeSelectorTerms, str]] = []
    zones: list[tuple[str, frozenset[str]]] = []
    for name in claim_names:
        claim = volumes.claims.get(namespaced_key(namespace, name))
        if claim is None:
            return VolumeDemand(unresolvable=f'persistentvolumeclaim "{name}" not found')
        if claim.volume_name:
            pv = volumes.volumes.get(claim.volume_name)
            if pv is None:
                return VolumeDemand(unresolvable=f'persistentvolume "{claim.volume_name}" not found')
            if pv.node_affinity:
                terms.append((pv.node_affinity, NODE_CONFLICT))
            for key in ZONE_LABELS:
                raw = pv.labels.get(key)
                if raw:
                    zones.append((key, frozenset(raw.split("__"))))
            continue
        storage_class = (
            volumes.classes.get(claim.storage_class) if claim.storage_class else volumes.default_class
        )
        if claim.storage_class == "" or storage_class is None:
            # No class: only a pre-bound static PV could serve it, which the planner cannot place.
            return VolumeDemand(unresolvable=UNBOUND_IMMEDIATE)
        if not storage_class.waits_for_consumer:
            return VolumeDemand(unresolvable=UNBOUND_IMMEDIATE)
        if storage_class.allowed_topologies:
            terms.append((storage_class.allowed_topologies, BIND_CONFLICT))
    return VolumeDemand(tuple(terms), tuple(zones))


def volume_binding(demand: VolumeDemand, labels: Mapping[str, str]) -> Reason:
    """None when the node can serve every claim of the pod."""
    if demand.unresolvable:
        return demand.unresolvable
    for terms, reason in demand.terms:
        if not _holds(terms, labels):
            return reason
    if demand.zones and any(key in labels for key in ZONE_LABELS):
        for key, allowed in demand.zones:
            value = labels.get(key)
            if value is None:
                value = labels.get(_GA.get(key, key))
            if value is None or value not in allowed:
                return ZONE_CONFLICT
    return None
