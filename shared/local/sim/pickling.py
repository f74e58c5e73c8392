"""The replay's dataclasses cross process boundaries (`simulate --compare`, `bench/sim_bench.py
--jobs`) through their constructors.

Compiled by mypyc (shared/local/native.py), a frozen dataclass is unpickled by assigning its fields,
which it refuses (FrozenInstanceError). The engine registers them when it is imported, so whatever
runs a replay, in this process or in a worker, has them.
"""

from __future__ import annotations

import copyreg
import dataclasses
from collections.abc import Callable
from typing import Any

from shared.domain import resources as domain_resources
from shared.local.sim import entities, faults, workload
from shared.local.sim import trace as trace_module


def _rebuilt(cls: type, values: dict[str, Any]) -> Any:
    return cls(**values)


def _by_constructor(obj: Any) -> tuple[Callable[..., Any], tuple[type, dict[str, Any]]]:
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
    return _rebuilt, (type(obj), values)


def register() -> None:
    """Pickle every dataclass of the replay's modules (and the resource vectors) by its constructor."""
    for module in (entities, faults, trace_module, workload, domain_resources):
        for value in vars(module).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value):
                copyreg.pickle(value, _by_constructor)
