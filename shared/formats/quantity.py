"""Kubernetes quantities ("500m", "16Gi", "8") to integer base units."""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

from kubernetes.utils.quantity import parse_quantity

from shared.domain.resources import CPU, Resources


@lru_cache(maxsize=4096)
def _base_units(name: str, raw: str) -> int:
    value = parse_quantity(raw)
    if name == CPU:
        value = value * 1000
    # Requests are rounded up: a fraction of a unit still needs the whole unit.
    return math.ceil(value)


def quantity(name: str, raw: object) -> int:
    """One quantity in base units (millicores for cpu); ValueError when unparsable or negative."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ValueError(f"{name}: quantity must be a string or number, got {type(raw).__name__}")
    try:
        amount = _base_units(name, str(raw).strip())
    except Exception as exc:  # parse_quantity raises ValueError or decimal errors
        raise ValueError(f"{name}: unparsable quantity {raw!r}") from exc
    if amount < 0:
        raise ValueError(f"{name}: negative quantity {raw!r}")
    return amount


def resources(raw: Mapping[str, object] | None) -> Resources:
    """A resource list (`{"cpu": "2", "nvidia.com/gpu": 1}`) as a Resources vector."""
    if not raw:
        return Resources()
    return Resources.of({str(name): quantity(str(name), value) for name, value in raw.items()})
