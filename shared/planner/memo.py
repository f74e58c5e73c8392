"""Values derived from one frozen object, remembered across runs by the object's identity.

The planner derives the same values from the same frozen objects run after run (a node without the
scaler's mark: the simulator and a warm Lambda hand it the very objects of the last run when nothing
changed). Remembering them is safe only where it cannot go stale: the memo
holds the object itself, so its id is not reused while the entry lives, and the object is frozen, so
what was derived from it still holds; the derivation must read nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def identity_memo(derive: Callable[[K], V], limit: int = 4096) -> Callable[[K], V]:
    """`derive(obj)` of frozen objects, remembered for up to `limit` objects (then it starts over).
    A closure rather than a class with __call__: it is called for every node of every run."""
    entries: dict[int, tuple[K, V]] = {}

    def remembered(obj: K) -> V:
        entry = entries.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        value = derive(obj)
        if len(entries) >= limit:
            entries.clear()
        entries[id(obj)] = (obj, value)
        return value

    return remembered
