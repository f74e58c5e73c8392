"""resource.k8s.io/v1 objects (`kubectl get resourceslices,deviceclasses,resourceclaims,
resourceclaimtemplates -o json`) to the domain's DRA objects. KeyError/TypeError/ValueError on
malformed input, as the other parsers of shared.formats."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shared.domain.dra import (
    ALLOCATION_ALL,
    ALLOCATION_EXACT,
    AttributeValue,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    ExactRequest,
    MatchAttribute,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    Semver,
)
from shared.domain.quantity import exact_quantity
from shared.domain.volumes import NodeSelectorTerms

_MODES = frozenset({ALLOCATION_EXACT, ALLOCATION_ALL})


def _qualified(name: str, driver: str) -> str:
    """types.go QualifiedName: "domain/id"; an id without domain is the driver's."""
    return name if "/" in name else f"{driver}/{name}"


def _attribute(raw: Mapping[str, Any], name: str) -> AttributeValue:
    """DeviceAttribute: exactly one of int, bool, string, version."""
    if "int" in raw:
        return int(raw["int"])
    if "bool" in raw:
        return bool(raw["bool"])
    if "string" in raw:
        return str(raw["string"])
    if "version" in raw:
        return Semver(str(raw["version"]))
    raise ValueError(f"attribute {name}: none of int, bool, string, version")


def device_from_json(raw: Mapping[str, Any], driver: str) -> Device:
    return Device(
        name=str(raw["name"]),
        attributes={
            _qualified(str(n), driver): _attribute(v, str(n))
            for n, v in (raw.get("attributes") or {}).items()
        },
        capacity={
            _qualified(str(n), driver): exact_quantity(v["value"])
            for n, v in (raw.get("capacity") or {}).items()
        },
    )


def slice_spec_from_json(spec: Mapping[str, Any], name: str) -> ResourceSlice:
    """A ResourceSlice spec; duplicate device names make the pool invalid (the allocator's
    GatherPools refuses such a pool rather than guessing which device is meant)."""
    driver = str(spec["driver"])
    devices = tuple(device_from_json(d, driver) for d in spec.get("devices") or ())
    seen: set[str] = set()
    invalid = ""
    for device in devices:
        if device.name in seen:
            invalid = f'duplicate device name "{device.name}" in ResourceSlice "{name}"'
            break
        seen.add(device.name)
    return ResourceSlice(
        name=name,
        driver=driver,
        pool=str(spec["pool"]["name"]),
        devices=devices,
        node_name=str(spec.get("nodeName") or ""),
        invalid=invalid,
        generation=int(spec["pool"].get("generation") or 0),
    )


def resource_slice_from_json(obj: Mapping[str, Any]) -> ResourceSlice:
    return slice_spec_from_json(obj["spec"], str(obj["metadata"]["name"]))


def device_class_from_json(obj: Mapping[str, Any]) -> DeviceClass:
    spec = obj.get("spec") or {}
    return DeviceClass(
        name=str(obj["metadata"]["name"]),
        selectors=tuple(str(s["cel"]["expression"]) for s in spec.get("selectors") or ()),
    )


def _exact(raw: Mapping[str, Any], where: str) -> ExactRequest:
    mode = str(raw.get("allocationMode") or ALLOCATION_EXACT)
    if mode not in _MODES:
        raise ValueError(f"{where}: allocationMode {mode!r} is not ExactCount or All")
    return ExactRequest(
        device_class=str(raw["deviceClassName"]),
        selectors=tuple(str(s["cel"]["expression"]) for s in raw.get("selectors") or ()),
        allocation_mode=mode,
        count=int(raw.get("count") or 1) if mode == ALLOCATION_EXACT else 0,
        admin_access=bool(raw.get("adminAccess")),
    )


def claim_spec_from_json(spec: Mapping[str, Any]) -> ClaimSpec:
    devices = spec.get("devices") or {}
    requests = []
    for raw in devices.get("requests") or ():
        name = str(raw["name"])
        alternatives: tuple[tuple[str, ExactRequest], ...]
        if raw.get("exactly") is not None:
            alternatives = (("", _exact(raw["exactly"], f"request {name}")),)
        else:
            alternatives = tuple(
                (str(sub["name"]), _exact(sub, f"request {name}/{sub['name']}"))
                for sub in raw.get("firstAvailable") or ()
            )
        if not alternatives:
            raise ValueError(f"request {name}: neither exactly nor firstAvailable")
        requests.append(DeviceRequest(name, alternatives))
    constraints = tuple(
        MatchAttribute(tuple(str(r) for r in c.get("requests") or ()), str(c["matchAttribute"]))
        for c in devices.get("constraints") or ()
        if c.get("matchAttribute")
    )
    return ClaimSpec(tuple(requests), constraints)


def _node_selector(raw: Mapping[str, Any]) -> NodeSelectorTerms:
    # One parser of node selectors; imported here because shared.formats.kubernetes imports this
    # module for its registry of kinds.
    from shared.formats.kubernetes import _node_selector_terms

    return _node_selector_terms(raw.get("nodeSelectorTerms"))


def resource_claim_from_json(obj: Mapping[str, Any]) -> ResourceClaim:
    meta = obj["metadata"]
    allocation = (obj.get("status") or {}).get("allocation")
    results = ((allocation or {}).get("devices") or {}).get("results") or ()
    selector = (allocation or {}).get("nodeSelector")
    return ResourceClaim(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        spec=claim_spec_from_json(obj.get("spec") or {}),
        allocated=allocation is not None,
        # An adminAccess result does not take its device (kube-scheduler's dynamicresources
        # foreachAllocatedDevice skips it: "is not considered as allocated"): a monitoring claim on
        # every GPU leaves them free for workloads.
        devices=tuple(
            (str(r["driver"]), str(r["pool"]), str(r["device"]))
            for r in results
            if r.get("adminAccess") is not True
        ),
        node_selector=_node_selector(selector) if selector else None,
    )


def resource_claim_template_from_json(obj: Mapping[str, Any]) -> ResourceClaimTemplate:
    meta = obj["metadata"]
    return ResourceClaimTemplate(
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta["name"]),
        spec=claim_spec_from_json((obj.get("spec") or {}).get("spec") or {}),
    )
