"""Zone-bound pods: a pod that must run in particular zones may only be placed on capacity that is
guaranteed to be there.

A pod is zone-bound by its nodeSelector or required node affinity on a zone label, by a hard
topology spread over zones, by required pod affinity or anti-affinity over a zone (its own terms,
or a placed pod's anti-affinity term that selects it), or by its volumes (a bound PV's zone labels
or node affinity on a zone key, an unbound WaitForFirstConsumer claim whose class allows only some
zones). An Auto Scaling group that spans several zones picks the zone of each launch itself (it
balances across them), so a node it launches may land in the wrong zone and idle while the pod
stays pending: only a group in exactly one zone can take a zone-bound pod. cluster-autoscaler gives
the same advice for zonal volumes and zone spread ("one ASG per zone", cloudprovider/aws/README.md,
"Common Notes and Gotchas"); its template labels a multi-zone ASG's nodes with the first of its
zones instead (aws_manager.go getAsgTemplate), which is the failure this avoids.

A pod's own nodeSelector and required node affinity are judged instead against a new node in every
zone the group may launch in (launch_labels): the group takes the pod when every zone admits it. The
zone id (`topology.k8s.aws/zone-id`) of each zone is read off registered nodes, which carry both
labels (zone_ids_of); where it is unknown, a pod that reads it is refused (unknown_zone_id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from shared.domain.constraints import ZONE
from shared.domain.model import Node, Pod, Scheduling
from shared.planner.filters.inter_pod_affinity import InterPodAffinityState
from shared.planner.filters.volume_binding import VolumeDemand

ZONE_ID = "topology.k8s.aws/zone-id"  # set by the AWS cloud provider: the zone's account-independent id
ZONE_KEYS = frozenset(
    {
        ZONE,
        "failure-domain.beta.kubernetes.io/zone",
        "topology.ebs.csi.aws.com/zone",
        ZONE_ID,
    }
)
ONE_GROUP_PER_ZONE = "use one group per zone"
# The zone keys a node carries by its zone's name (the zone id is another name: see zone_ids_of).
_NAMED_ZONE_KEYS = ZONE_KEYS - {ZONE_ID}
NO_ZONE_IDS: Mapping[str, str] = MappingProxyType({})


def in_zone(labels: Mapping[str, str], zone: str, zone_id: str | None = None) -> dict[str, str]:
    """`labels` of a node launched in `zone` (with its zone id, when known)."""
    placed = {**labels, **dict.fromkeys(_NAMED_ZONE_KEYS, zone)}
    if zone_id is not None:
        placed[ZONE_ID] = zone_id
    return placed


def launch_labels(
    zones: tuple[str, ...], labels: Mapping[str, str], zone_ids: Mapping[str, str] = NO_ZONE_IDS
) -> tuple[Mapping[str, str], ...]:
    """The labels a new node of a group may carry: one mapping per zone when the group spans several
    known zones (EC2 picks the zone of each launch), with the zone's id where `zone_ids` knows it,
    else the template's own. A pod's selector and node affinity must admit every one of them: a pod
    that requires zone In [a, b] may take a group in a and b, one with NotIn [a] (or DoesNotExist on
    the zone label, which every node has) may not.
    """
    if len(zones) > 1 and ZONE not in labels:
        return tuple(in_zone(labels, zone, zone_ids.get(zone)) for zone in zones)
    return (labels,)


def zone_ids_of(nodes: Iterable[Node]) -> dict[str, str]:
    """The id of each zone as registered nodes show it (both labels on one node). A zone's name maps
    to its id per AWS account; a zone seen with two ids is left out, as unknown."""
    found: dict[str, str] = {}
    conflicting: set[str] = set()
    for node in nodes:
        labels = node.labels
        zone, zone_id = labels.get(ZONE), labels.get(ZONE_ID)
        if zone and zone_id and found.setdefault(zone, zone_id) != zone_id:
            conflicting.add(zone)
    return {zone: zone_id for zone, zone_id in found.items() if zone not in conflicting}


def reads_zone_id(scheduling: Scheduling) -> bool:
    """Whether the pod's nodeSelector or required node affinity names the zone id label."""
    if any(key == ZONE_ID for key, _ in scheduling.node_selector):
        return True
    return any(req.key == ZONE_ID for term in scheduling.affinity_terms for req in term)


def unknown_zone_id(scheduling: Scheduling, labels: Mapping[str, str]) -> str | None:
    """Why a new node of a multi-zone group, launched with `labels` (one of launch_labels), cannot be
    judged for a pod that reads the zone id: no registered node shows the id of its zone. A node
    without the label would satisfy NotIn and DoesNotExist; the node that launches carries one."""
    if ZONE_ID in labels or not reads_zone_id(scheduling):
        return None
    zone = labels.get(ZONE)
    return f"the pod's node selector or affinity reads {ZONE_ID}, which no registered node in {zone} shows"


def zone_binding(
    pod: Pod, volumes: VolumeDemand | None, affinity: InterPodAffinityState | None = None
) -> str | None:
    """What binds the pod to particular zones, in words (None: any zone will do)."""
    scheduling = pod.scheduling
    for key, value in scheduling.node_selector:
        if key in ZONE_KEYS:
            return f"nodeSelector {key}={value}"
    terms = scheduling.affinity_terms
    if terms and all(any(req.key in ZONE_KEYS for req in term) for term in terms):
        return "required node affinity on its zone"
    return placement_zone_binding(pod, volumes, affinity)


def placement_zone_binding(
    pod: Pod, volumes: VolumeDemand | None, affinity: InterPodAffinityState | None = None
) -> str | None:
    """What binds the pod to zones beyond its own selector and node affinity (which admission judges
    against every zone a group launches in, launch_labels): a zone spread, pod (anti-)affinity over
    a zone, or its volumes.

    Pod affinity and anti-affinity over a zone (interpodaffinity/filtering.go) count the pods in the
    zone of the node: a new node of a multi-zone group has no zone until EC2 picks one, so the
    scheduler's answer there is unknown. A node landing beside a pod the anti-affinity keeps away
    (or away from the pods the affinity needs) would idle while the pod stays pending. `affinity`
    (the pod's InterPodAffinityState) adds the placed pods' anti-affinity terms that select it."""
    for constraint in pod.constraints.hard_spread:
        if constraint.topology_key in ZONE_KEYS:
            return f"a topology spread over {constraint.topology_key}"
    constraints = pod.constraints
    for kind, terms in (("affinity", constraints.affinity), ("anti-affinity", constraints.anti_affinity)):
        for term in terms:
            if term.topology_key in ZONE_KEYS:
                return f"required pod {kind} over {term.topology_key}"
    if affinity is not None:
        for key, _counts in affinity.existing_anti:
            if key in ZONE_KEYS:
                return f"a running pod's anti-affinity over {key}"
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
