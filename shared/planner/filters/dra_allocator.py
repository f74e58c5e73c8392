"""The structured allocator for one node: devices for a pod's claims, as
staging/src/k8s.io/dynamic-resource-allocation/structured/allocator.go searches them (requests in
order, the first `firstAvailable` alternative that fits, devices in slice order, backtracking when a
`matchAttribute` constraint fails later). `dynamic_resources` resolves the claims and the node's
devices; this module only searches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared.domain.dra import (
    ALLOCATION_ALL,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceId,
    ExactRequest,
    MatchAttribute,
)
from shared.planner.filters.dra_cel import CelError

SEARCH_LIMIT = 10_000  # device picks tried per node before giving up (a pathological constraint)


class TooHardError(Exception):
    """The search tried more than SEARCH_LIMIT picks on one node."""


@dataclass(frozen=True, slots=True)
class PendingClaim:
    """A claim the run must allocate: `key` is the ResourceClaim's (or, before the claim is
    generated, the pod's own), `shared` when other pods may use the same claim."""

    key: str
    label: str  # how reasons name it: 'resourceclaim "ns/name"'
    spec: ClaimSpec
    shared: bool


@dataclass(frozen=True, slots=True)
class NodeDevice:
    id: DeviceId
    driver: str
    device: Device


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """What one node publishes; `invalid` names a pool the allocator refuses."""

    devices: tuple[NodeDevice, ...]
    invalid: str = ""


def _applies(constraint: MatchAttribute, request: str) -> bool:
    """A constraint names requests, or subrequests as "request/sub"; none named: all requests."""
    if not constraint.requests:
        return True
    return request in constraint.requests or request.split("/", 1)[0] in constraint.requests


class Allocator:
    """One allocation attempt on one node: the picks so far, and what was learnt on failure."""

    def __init__(
        self,
        classes: Mapping[str, DeviceClass],
        matches: Callable[[str, NodeDevice], bool],
        devices: NodeDevices,
        taken: set[DeviceId],
    ) -> None:
        """`matches(expression, device)`: a selector's answer (CelError at run time); `taken`:
        devices allocated to claims or to pods placed earlier in the run."""
        self._classes = classes
        self._matches = matches
        self.free = list(devices.devices)
        self.taken = taken
        self.picks: list[tuple[int, str, NodeDevice, bool]] = []  # claim, request, device, admin
        self.steps = 0
        self.why = ""  # the first shortfall met, for the reason

    def allocate(self, claims: list[PendingClaim]) -> tuple[DeviceId, ...] | None:
        """The devices the claims take (admin ones aside), or None. Raises CelError, TooHardError."""
        items = [
            (index, claim, request) for index, claim in enumerate(claims) for request in claim.spec.requests
        ]
        if not self._solve(items, 0):
            return None
        return tuple(d.id for _, _, d, admin in self.picks if not admin)

    def _solve(self, items: list[tuple[int, PendingClaim, Any]], position: int) -> bool:
        """Allocate items[position:], backtracking over alternatives and devices (allocator.go
        allocateOne: first alternative of firstAvailable that fits, devices in slice order)."""
        if position == len(items):
            return True
        index, claim, request = items[position]
        for sub, exact in request.alternatives:
            name = f"{request.name}/{sub}" if sub else request.name
            candidates = self._candidates(claim, name, exact)
            if candidates is None:
                continue
            need = len(candidates) if exact.allocation_mode == ALLOCATION_ALL else exact.count
            if len(candidates) < need:
                self.why = self.why or self._shortfall(claim, name, exact, len(candidates), need)
                continue
            if self._pick(items, position, (index, claim, name, exact.admin_access), candidates, need, 0):
                return True
        return False

    def _pick(
        self,
        items: list[tuple[int, PendingClaim, Any]],
        position: int,
        slot: tuple[int, PendingClaim, str, bool],
        candidates: list[NodeDevice],
        need: int,
        start: int,
    ) -> bool:
        """Choose `need` more devices from candidates[start:] (combinations, never permutations)."""
        if need == 0:
            return self._solve(items, position + 1)
        index, claim, name, admin = slot
        picked = {d.id for _, _, d, a in self.picks if not a}
        for at in range(start, len(candidates)):
            device = candidates[at]
            if (not admin and device.id in picked) or not self._agrees(index, claim, name, device):
                continue
            self.steps += 1
            if self.steps > SEARCH_LIMIT:
                raise TooHardError
            self.picks.append((index, name, device, admin))
            if self._pick(items, position, slot, candidates, need - 1, at + 1):
                return True
            self.picks.pop()
        return False

    def _shortfall(self, claim: PendingClaim, name: str, exact: ExactRequest, found: int, need: int) -> str:
        """Why a request has too few devices: the first selector no free device passes, if any."""
        where = f'{claim.label} request "{name}"'
        free = [d for d in self.free if d.id not in self.taken]
        owned = [
            (f'deviceclass "{exact.device_class}"', e) for e in self._classes[exact.device_class].selectors
        ]
        try:
            for owner, expression in owned + [("its", e) for e in exact.selectors]:
                if free and not any(self._matches(expression, d) for d in free):
                    return f"{where}: no free device passes {owner} selector {expression!r}"
        except CelError:
            pass  # a selector failing on a device the search never asked: the count says enough
        return f"{where}: {found} free device(s) match, {need} needed"

    def _candidates(self, claim: PendingClaim, name: str, exact: ExactRequest) -> list[NodeDevice] | None:
        """Devices matching the class's and the request's selectors, free (or any, for adminAccess).
        None for `All` when a matching device is taken: the request wants every one of them."""
        device_class = self._classes[exact.device_class]
        expressions = device_class.selectors + exact.selectors
        found: list[NodeDevice] = []
        every = exact.allocation_mode == ALLOCATION_ALL
        for device in self.free:
            if not (every or exact.admin_access) and device.id in self.taken:
                continue  # taken either way: no need to ask its selectors
            for expression in expressions:
                try:
                    if not self._matches(expression, device):
                        break
                except CelError as exc:
                    raise CelError(
                        f'{claim.label} request "{name}": selector {expression!r} on device'
                        f' "{"/".join(device.id)}": {exc}'
                    ) from exc
            else:
                if exact.admin_access or device.id not in self.taken:
                    found.append(device)
                elif exact.allocation_mode == ALLOCATION_ALL:
                    self.why = (
                        self.why or f'{claim.label} request "{name}": allocationMode All, a device is taken'
                    )
                    return None
        if exact.allocation_mode == ALLOCATION_ALL and not found:
            return None
        return found

    def _agrees(self, index: int, claim: PendingClaim, name: str, device: NodeDevice) -> bool:
        """constraints[].matchAttribute: the device has the attribute, equal to earlier picks'."""
        for constraint in claim.spec.constraints:
            if not _applies(constraint, name):
                continue
            value = device.device.attributes.get(constraint.attribute)
            if value is None:
                self.why = self.why or f'{claim.label}: no device with attribute "{constraint.attribute}"'
                return False
            if any(
                other_claim == index
                and _applies(constraint, other_name)
                and other.device.attributes.get(constraint.attribute) != value
                for other_claim, other_name, other, _ in self.picks
            ):
                self.why = self.why or (
                    f'{claim.label}: constraint matchAttribute "{constraint.attribute}" cannot be met'
                )
                return False
        return True
