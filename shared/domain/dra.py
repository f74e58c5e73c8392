"""Dynamic Resource Allocation objects (resource.k8s.io/v1, GA in Kubernetes 1.34) as the
DynamicResources filter reads them: ResourceSlices (devices a driver publishes for a node),
DeviceClasses, ResourceClaims and ResourceClaimTemplates, and a pod's references to claims.

Field names follow the API (k8s.io/api/resource/v1 types.go); the allocation rules live in
`shared.planner.filters.dynamic_resources`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from shared.domain.keys import namespaced_key
from shared.domain.volumes import NodeSelectorTerms

ALLOCATION_EXACT = "ExactCount"
ALLOCATION_ALL = "All"


@dataclass(frozen=True, slots=True)
class Semver:
    """A `version` attribute: semantic version 2.0.0 (types.go DeviceAttribute.VersionValue)."""

    text: str


AttributeValue = bool | int | str | Semver


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice. Attribute and capacity names are fully qualified ("domain/id"):
    the API lets a driver leave its own domain out, the parser puts it in."""

    name: str
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Fraction]  # quantities, exactly (cel quantity compares them so)


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    """spec of one ResourceSlice; `invalid` says why its pool cannot be used (duplicate names)."""

    name: str
    driver: str
    pool: str
    devices: tuple[Device, ...]
    node_name: str = ""  # "" with all_nodes or a node selector: not one node's (not modelled)
    invalid: str = ""
    generation: int = 0  # pool.generation: only a pool's newest generation counts


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, all must hold


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """DeviceRequest.exactly, or one of its firstAvailable subrequests."""

    device_class: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = ALLOCATION_EXACT
    count: int = 1
    admin_access: bool = False


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim: `exactly`, or prioritized alternatives (`firstAvailable`)."""

    name: str
    alternatives: tuple[tuple[str, ExactRequest], ...]  # (subrequest name, request); "" for exactly

    @property
    def first_available(self) -> bool:
        return bool(self.alternatives) and self.alternatives[0][0] != ""


@dataclass(frozen=True, slots=True)
class MatchAttribute:
    """spec.devices.constraints[]: all devices of the named requests (all when empty) share the
    value of one attribute."""

    requests: tuple[str, ...]
    attribute: str


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchAttribute, ...] = ()


DeviceId = tuple[str, str, str]  # (driver, pool, device): unique in the cluster


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    spec: ClaimSpec
    allocated: bool = False  # status.allocation is set
    devices: tuple[DeviceId, ...] = ()  # status.allocation.devices.results, but adminAccess ones
    node_selector: NodeSelectorTerms | None = None  # status.allocation.nodeSelector

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec

    @property
    def key(self) -> str:
        return namespaced_key(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class PodResourceClaim:
    """spec.resourceClaims[]: a claim by name, or one generated per pod from a template."""

    name: str
    claim_name: str = ""
    template_name: str = ""


@dataclass(frozen=True, slots=True)
class DraObjects:
    """The cluster's resource.k8s.io/v1 objects of one run (all empty: no DRA API or no use)."""

    slices: tuple[ResourceSlice, ...] = ()
    classes: tuple[DeviceClass, ...] = ()
    claims: tuple[ResourceClaim, ...] = ()
    templates: tuple[ResourceClaimTemplate, ...] = ()


NO_DRA = DraObjects()
