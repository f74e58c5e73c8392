"""Zone-bound pods: a pod that must run in particular zones may only be placed on capacity that is
guaranteed to be there.

A pod is zone-bound by its nodeSelector or required node affinity on a zone label, by a hard
topology spread over zones, or by its volumes (a bound PV's zone labels or node affinity on a zone
key, an unbound WaitForFirstConsumer claim whose class allows only some zones). An Auto Scaling
group that spans several zones picks the zone of each launch itself (it balances across them), so
a node it launches may land in the wrong zone and idle while the pod stays pending: only a group
in exactly one zone can take a zone-bound pod. cluster-autoscaler gives the same advice for
zonal volumes and zone spread ("one ASG per zone", cloudprovider/aws/README.md, "Common Notes and
Gotchas"); its template labels a multi-zone ASG's nodes with the first of its zones instead
(aws_manager.go getAsgTemplate), which is the failure this avoids.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from shared.domain.constraints import ZONE
from shared.domain.model import Pod
from shared.planner.filters.volume_binding import VolumeDemand

ZONE_KEYS = frozenset(
    {
        ZONE,
        "failure-domain.beta.kubernetes.io/zone",
        "topology.ebs.csi.aws.com/zone",
        "topology.k8s.aws/zone-id",
    }
)
ONE_GROUP_PER_ZONE = "use one group per zone"
# The zone keys a node carries by its zone's name (the zone id is another name: not derived here).
_NAMED_ZONE_KEYS = ZONE_KEYS - {"topology.k8s.aws/zone-id"}


def in_zone(labels: Mapping[str, str], zone: str) -> dict[str, str]:
    """`labels` of a node launched in `zone`."""
    return {**labels, **dict.fromkeys(_NAMED_ZONE_KEYS, zone)}


def launch_labels(zones: tuple[str, ...], labels: Mapping[str, str]) -> tuple[Mapping[str, str], ...]:
    """The labels a new node of a group may carry: one mapping per zone when the group spans several
    known zones (EC2 picks the zone of each launch), else the template's own. A pod's selector and
    node affinity must admit every one of them: a pod that requires zone In [a, b] may take a group
    in a and b, one with NotIn [a] (or DoesNotExist on the zone label, which every node has) may not.
    """
    if len(zones) > 1 and ZONE not in labels:
        return tuple(in_zone(labels, zone) for zone in zones)
    return (labels,)


def zone_binding(pod: Pod, volumes: VolumeDemand | None) -> str | None:
    """What binds the pod to particular zones, in words (None: any zone will do)."""
    scheduling = pod.scheduling
    for key, value in scheduling.node_selector:
        if key in ZONE_KEYS:
            return f"nodeSelector {key}={value}"
    terms = scheduling.affinity_terms
    if terms and all(any(req.key in ZONE_KEYS for req in term) for term in terms):
        return "required node affinity on its zone"
    return placement_zone_binding(pod, volumes)


def placement_zone_binding(pod: Pod, volumes: VolumeDemand | None) -> str | None:
    """What binds the pod to zones beyond its own selector and node affinity (which admission judges
    against every zone a group launches in, launch_labels): a zone spread, or its volumes."""
    for constraint in pod.constraints.hard_spread:
        if constraint.topology_key in ZONE_KEYS:
            return f"a topology spread over {constraint.topology_key}"
    if volumes is not None:
        for _key, allowed in volumes.zones:
            return f"a volume in {', '.join(sorted(allowed))}"
        for node_terms, _reason in volumes.terms:
            if node_terms and all(any(req.key in ZONE_KEYS for req in term) for term in node_terms):
                return "a volume bound to a zone"
    return None


def guarantees_zone(zones: tuple[str, ...], labels: Mapping[str, str]) -> bool:
    """Every node the group launches is in one known zone: the ASG has one zone, or (zones unknown)
    its template declares one (config labels, node-template tags)."""
    return len(zones) == 1 if zones else ZONE in labels


def zones_text(zones: Iterable[str]) -> str:
    names = sorted(zones)
    return ", ".join(names) if names else "zones unknown"


def unguaranteed_reason(zones: tuple[str, ...], binding: str) -> str:
    """Why a group that does not launch in exactly one zone does not take a zone-bound pod."""
    where = f"spans {zones_text(zones)}" if zones else "has no known zone"
    return (
        f"the group {where} and cannot guarantee the zone of a pod bound by {binding}: {ONE_GROUP_PER_ZONE}"
    )


def refused_zone_reason(zones: tuple[str, ...], zone: str) -> str:
    """Why a group does not take a pod that one of the zones it may launch in refuses (others admit it)."""
    return (
        f"the group spans {zones_text(zones)} and may launch into {zone}, where the pod cannot run:"
        f" {ONE_GROUP_PER_ZONE}"
    )
