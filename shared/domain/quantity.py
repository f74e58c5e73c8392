"""Kubernetes quantities ("500m", "16Gi", "8") to integer base units."""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Callable, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from shared.domain.resources import CPU, Resources


def _load_parse_quantity() -> Callable[[Any], Any]:
    """kubernetes' own `parse_quantity`, without running `kubernetes/__init__`.

    `import kubernetes.utils.quantity` first executes `kubernetes/__init__`, which imports the whole
    API client, config loaders, requests and urllib3 (~0.2 s, most of the `plan` command's start-up)
    for a module that needs only `decimal`. So when the client is not loaded yet, the one file is
    loaded from the installed package, found without importing it; whenever that does not work
    (a zipped or unusual install), the ordinary import is the fallback.
    """
    loaded = sys.modules.get("kubernetes.utils.quantity")
    if loaded is not None:
        return loaded.parse_quantity  # type: ignore[no-any-return]
    try:
        package = importlib.util.find_spec("kubernetes")  # a top-level spec: nothing is executed
        locations = list(package.submodule_search_locations or ()) if package else []
        path = Path(locations[0], "utils", "quantity.py")
        spec = importlib.util.spec_from_file_location("_backlog_scaler_kubernetes_quantity", path)
        if spec is None or spec.loader is None or not path.is_file():
            raise ImportError(f"no {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.parse_quantity  # type: ignore[no-any-return]
    except (ImportError, IndexError, OSError, SyntaxError, AttributeError):
        from kubernetes.utils.quantity import parse_quantity

        return parse_quantity  # type: ignore[no-any-return]


parse_quantity = _load_parse_quantity()


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
