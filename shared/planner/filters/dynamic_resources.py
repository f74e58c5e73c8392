"""DynamicResources (DRA, resource.k8s.io/v1): a pod's ResourceClaims need devices that a node's
ResourceSlices publish, allocated as kube-scheduler's plugin does with structured parameters
(kubernetes/kubernetes pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go and
staging/src/k8s.io/dynamic-resource-allocation/structured/allocator.go):

- PreFilter (`ClaimDemand`): the pod's claims, by name or generated from a template (the name in
  status.resourceClaimStatuses; a claim not generated yet is its template's spec). A missing
  claim, template or DeviceClass, or a selector that does not compile, fails the pod everywhere.
  An allocated claim pins its pods to its nodeSelector and takes no further device; a claim several
  pods share is allocated once, by the first of them the run places.
- Filter (`DeviceWorld.allocate`): per request the DeviceClass's selectors and the request's own
  (CEL, `dra_cel`), `exactly` with `count` or `allocationMode: All`, `firstAvailable` (the first
  alternative that fits), `constraints[].matchAttribute`, searched with backtracking as the
  allocator does (`dra_allocator`). Devices allocated to any claim, or taken by pods placed
  earlier in the run, are not free; `adminAccess` requests need a matching device but take none.

Not modelled: slices published for several nodes (nodeSelector / allNodes), partitionable devices
(sharedCounters), device taints, binding conditions, consumable capacity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from shared.domain.dra import (
    ClaimSpec,
    DeviceId,
    DraObjects,
    PodResourceClaim,
    ResourceSlice,
)
from shared.domain.keys import namespaced_key
from shared.domain.model import Pod
from shared.domain.volumes import NodeSelectorTerms
from shared.planner.filters.dra_allocator import (
    SEARCH_LIMIT,
    Allocator,
    NodeDevice,
    NodeDevices,
    PendingClaim,
    TooHardError,
)
from shared.planner.filters.dra_cel import CelError, Selector, device_input
from shared.planner.filters.framework import Reason, SimNode

CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"


@dataclass(frozen=True, slots=True)
class ClaimDemand:
    """PreFilter result for one pod: claims to allocate, allocated claims' node selectors, or why
    nothing can serve the pod. `key` is what makes two pods' answers equal on every node."""

    claims: tuple[PendingClaim, ...] = ()
    pinned: tuple[tuple[str, NodeSelectorTerms], ...] = ()  # (claim label, its allocation's selector)
    unresolvable: str | None = None
    key: tuple[object, ...] = ()


@dataclass(frozen=True, slots=True)
class Allocation:
    """A fit: the devices it takes (not admin ones) and the shared claims it allocates."""

    devices: tuple[DeviceId, ...]
    claims: tuple[str, ...]


def _template_slices(slices: tuple[ResourceSlice, ...], node: str) -> tuple[ResourceSlice, ...]:
    """A registered node's slices as a new node of its group would publish them: node name
    replaced in the pool (cluster-autoscaler's sanitizeNodeInfo does the same for DRA pools)."""
    return tuple(
        ResourceSlice(s.name, s.driver, s.pool.replace(node, "{node}"), s.devices, "", s.invalid)
        for s in slices
    )


def _by_node(slices: tuple[ResourceSlice, ...]) -> dict[str, list[ResourceSlice]]:
    """Node-local slices by node, of each pool's newest generation only: while a driver republishes
    a pool, the older generation's slices are stale (structured/pools.go GatherPools)."""
    newest: dict[tuple[str, str], int] = {}
    for item in slices:
        key = (item.driver, item.pool)
        newest[key] = max(newest.get(key, item.generation), item.generation)
    found: dict[str, list[ResourceSlice]] = {}
    for item in slices:
        if item.node_name and item.generation == newest[(item.driver, item.pool)]:
            found.setdefault(item.node_name, []).append(item)
    return found


def _holds(terms: NodeSelectorTerms, labels: Mapping[str, str]) -> bool:
    return any(all(req.holds(labels) for req in term) for term in terms)


class DeviceWorld:
    """The run's DRA objects, indexed once: selectors compiled once per run, each selector's answer
    cached per device, each node's devices built once."""

    def __init__(
        self,
        objects: DraObjects,
        group_slices: Mapping[str, tuple[ResourceSlice, ...] | None],
        booting: Mapping[str, str],
    ) -> None:
        """`group_slices`: per group, what a new node publishes (pools naming "{node}"), None when
        unknown; `booting`: registered nodes not Ready yet (drivers not publishing) by group."""
        self._classes = {c.name: c for c in objects.classes}
        self._claims = {c.key: c for c in objects.claims}
        self._templates = {t.key: t for t in objects.templates}
        self._slices = _by_node(objects.slices)
        self.allocated = frozenset(d for c in objects.claims if c.allocated for d in c.devices)
        self._group_slices = group_slices
        self._booting = booting
        self._selectors: dict[str, Selector | CelError] = {}
        self._answers: dict[tuple[str, str, int], bool | CelError] = {}
        self._devices: dict[str, NodeDevices | None] = {}
        self._inputs: dict[tuple[str, int], Mapping[str, Any]] = {}

    # ------------------------------------------------------------------------------ PreFilter

    def demand(self, pod: Pod) -> ClaimDemand:
        """The pod's claims resolved: what to allocate, what is pinned, or why nothing serves it."""
        statuses = dict(pod.resource_claim_statuses)
        claims: list[PendingClaim] = []
        pinned: list[tuple[str, NodeSelectorTerms]] = []
        key: list[object] = []
        for source in pod.constraints.resource_claim_sources:
            if not source.claim_name and statuses.get(source.name) == "":
                # Listed without a claim: generating one was not needed, and the scheduler skips it
                # (k8s.io/dynamic-resource-allocation resourceclaim.Name returns nil, not an error).
                continue
            found = self._resolve(pod, source, statuses.get(source.name))
            if isinstance(found, str):
                return ClaimDemand(unresolvable=found)
            if isinstance(found, PendingClaim):
                claims.append(found)
                key.append(found.key if found.shared else found.spec)
            else:
                pinned.append(found)
                key.append(found)
        return ClaimDemand(tuple(claims), tuple(pinned), None, tuple(key))

    def _resolve(
        self, pod: Pod, source: PodResourceClaim, generated: str | None
    ) -> PendingClaim | tuple[str, NodeSelectorTerms] | str:
        namespace = pod.namespace
        name = source.claim_name or generated
        if not name:
            template = self._templates.get(namespaced_key(namespace, source.template_name))
            if template is None:
                return f'resourceclaimtemplate "{namespace}/{source.template_name}" not found'
            label = f'resourceclaimtemplate "{template.key}"'
            # Not generated yet: the claim controller will copy the template's spec.
            return self._problem(template.spec, label) or PendingClaim(
                f"{pod.key}/{source.name}", label, template.spec, False
            )
        claim = self._claims.get(namespaced_key(namespace, name))
        label = f'resourceclaim "{namespace}/{name}"'
        if claim is None:
            return f"{label} not found"
        if claim.allocated:
            return (label, claim.node_selector or ())
        return self._problem(claim.spec, label) or PendingClaim(
            claim.key, label, claim.spec, bool(source.claim_name)
        )

    def _problem(self, spec: ClaimSpec, label: str) -> str | None:
        """A missing DeviceClass or a selector that does not compile, named with its object."""
        for request in spec.requests:
            for sub, exact in request.alternatives:
                where = (
                    f'{label} request "{request.name}/{sub}"' if sub else f'{label} request "{request.name}"'
                )
                device_class = self._classes.get(exact.device_class)
                if device_class is None:
                    return f'{where}: deviceclass "{exact.device_class}" not found'
                owned = [(f'deviceclass "{device_class.name}"', e) for e in device_class.selectors]
                for owner, expression in owned + [("its", e) for e in exact.selectors]:
                    selector = self._selector(expression)
                    if isinstance(selector, CelError):
                        return f"{where}: {owner} selector {expression!r}: {selector}"
        return None

    def _selector(self, expression: str) -> Selector | CelError:
        found = self._selectors.get(expression)
        if found is None:
            try:
                found = Selector(expression)
            except CelError as exc:
                found = exc
            self._selectors[expression] = found
        return found

    # ------------------------------------------------------------------------------ devices

    def devices_of(self, node: SimNode) -> NodeDevices | None:
        """A node's devices: its own slices; a new or booting node's are its group's template."""
        if node.name in self._devices:
            return self._devices[node.name]
        slices: tuple[ResourceSlice, ...] | None = tuple(self._slices.get(node.name, ()))
        template = False
        if not slices:
            group = node.group or self._booting.get(node.name, "")
            slices = self._group_slices.get(group) if group else None
            template = True
        result = None if slices is None else self._build(node.name, slices, template)
        self._devices[node.name] = result
        return result

    def _build(self, node: str, slices: tuple[ResourceSlice, ...], template: bool) -> NodeDevices:
        devices: list[NodeDevice] = []
        invalid = ""
        seen: set[DeviceId] = set()
        for item in slices:
            pool = item.pool.replace("{node}", node) if template else item.pool
            if template and pool == item.pool:
                pool = f"{node}/{pool}"  # a pool of the config's slices: one per new node
            if item.invalid:
                invalid = invalid or item.invalid
                continue
            for device in item.devices:
                ident = (item.driver, pool, device.name)
                if ident in seen:  # the same name in two slices of one pool
                    invalid = invalid or f'duplicate device name "{device.name}" in pool "{pool}"'
                    continue
                seen.add(ident)
                devices.append(NodeDevice(ident, item.driver, device))
        return NodeDevices(tuple(devices), invalid)

    def _input(self, device: NodeDevice) -> Mapping[str, Any]:
        """One CEL input per device object (a template's devices are shared by its new nodes),
        built when a selector first reads it: devices already taken are never looked at."""
        key = (device.driver, id(device.device))
        found = self._inputs.get(key)
        if found is None:
            found = self._inputs[key] = device_input(device.driver, device.device)
        return found

    def _matches(self, expression: str, device: NodeDevice) -> bool:
        key = (expression, device.driver, id(device.device))
        found = self._answers.get(key)
        if found is None:
            selector = self._selector(expression)
            if isinstance(selector, CelError):
                found = selector
            else:
                try:
                    found = selector.matches(self._input(device))
                except CelError as exc:
                    found = exc
            self._answers[key] = found
        if isinstance(found, CelError):
            raise found
        return found

    # ------------------------------------------------------------------------------ Filter

    def static(self, demand: ClaimDemand, node: SimNode) -> Reason:
        """What never changes during the run: the claims resolve, pins hold, the node has devices."""
        if demand.unresolvable:
            return demand.unresolvable
        for _, terms in demand.pinned:
            if terms and not _holds(terms, node.labels):
                return NOT_AVAILABLE
        if demand.claims and self.devices_of(node) is None:
            return self._no_devices(node)
        return None

    def _no_devices(self, node: SimNode) -> str:
        group = node.group or self._booting.get(node.name, "")
        if group:
            return (
                f"{CANNOT_ALLOCATE}: node group {group} has no DRA devices to model: no registered"
                " node of it publishes ResourceSlices; set node_groups[].resource_slices to the"
                " slices its driver publishes for one node"
            )
        return f"{CANNOT_ALLOCATE}: the node publishes no ResourceSlices"

    def allocate(
        self, demand: ClaimDemand, node: SimNode, in_use: set[DeviceId], claim_nodes: Mapping[str, str]
    ) -> Allocation | str:
        """Devices for every claim not allocated yet, on this node; or the reason there are none."""
        claims: list[PendingClaim] = []
        for claim in demand.claims:
            where = claim_nodes.get(claim.key) if claim.shared else None
            if where is None:
                claims.append(claim)
            elif where != node.name:
                return NOT_AVAILABLE  # another pod placed this run took the shared claim elsewhere
        if not claims:
            return Allocation((), ())
        devices = self.devices_of(node)
        if devices is None:
            return self._no_devices(node)
        allocator = Allocator(self._classes, self._matches, devices, in_use)
        try:
            taken = allocator.allocate(claims)
        except CelError as exc:
            return f"{CANNOT_ALLOCATE}: {exc}"
        except TooHardError:
            return f"{CANNOT_ALLOCATE}: no allocation found within {SEARCH_LIMIT} device choices"
        if taken is not None:
            return Allocation(taken, tuple(c.key for c in claims if c.shared))
        why = allocator.why or "no free devices match"
        if devices.invalid:
            why = f"{why} (pool not used: {devices.invalid})"
        return f"{CANNOT_ALLOCATE}: {why}"


def device_world(
    objects: DraObjects, groups: Mapping[str, tuple[tuple[tuple[str, bool], ...], tuple[ResourceSlice, ...]]]
) -> DeviceWorld:
    """The run's DeviceWorld. `groups`: per group its registered nodes (name, Ready) sorted by
    name, and the config's resource_slices. A new node of a group publishes what its first
    registered node with slices publishes, else the config's slices (at zero), else nothing known."""
    by_node = _by_node(objects.slices)
    group_slices: dict[str, tuple[ResourceSlice, ...] | None] = {}
    booting: dict[str, str] = {}
    for group, (nodes, configured) in groups.items():
        published = next((name for name, _ in nodes if name in by_node), None)
        if published is not None:
            group_slices[group] = _template_slices(tuple(by_node[published]), published)
        else:
            group_slices[group] = tuple(configured) or None
        booting.update((name, group) for name, ready in nodes if not ready)
    return DeviceWorld(objects, group_slices, booting)


def dynamic_resources(world: DeviceWorld | None, pod: Pod) -> ClaimDemand | None:
    """PreFilter: None for pods without DRA claims; else their demand (unresolvable without a
    world: the planner then cannot verify devices and never counts the pod on any room)."""
    if not pod.constraints.resource_claims:
        return None
    if world is None or not pod.constraints.resource_claim_sources:
        names = ", ".join(pod.constraints.resource_claims)
        why = f"uses DRA resource claims ({names}): the planner cannot verify devices, left to the scheduler"
        return ClaimDemand(unresolvable=why)
    return world.demand(pod)
