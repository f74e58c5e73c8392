"""The replay's values cross process boundaries (`simulate --compare`, `bench/sim_bench.py --jobs`)
through their constructors.

Compiled by mypyc (shared/local/native.py), a frozen dataclass is unpickled by assigning its fields,
which it refuses (FrozenInstanceError). The engine registers every dataclass of the modules of
`shared` loaded when it is imported (the domain's, the planner's, the replay's: whatever a trace, a
replay's options or its figures hold), so whatever runs a replay, in this process or in a worker,
has them.
"""

from __future__ import annotations

import copyreg
import dataclasses
import sys
from collections.abc import Callable
from typing import Any


def _rebuilt(cls: type, values: dict[str, Any]) -> Any:
    return cls(**values)


def _by_constructor(obj: Any) -> tuple[Callable[..., Any], tuple[type, dict[str, Any]]]:
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.init}
    return _rebuilt, (type(obj), values)


def register() -> None:
    """Pickle by its constructor every dataclass defined in a loaded module of `shared`."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "shared" or name.startswith("shared.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value):
                copyreg.pickle(value, _by_constructor)
