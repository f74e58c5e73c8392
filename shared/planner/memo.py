"""Values derived from one frozen object, remembered across runs by the object's identity.

The planner derives the same values from the same frozen objects run after run (a node without the
scaler's mark: the simulator and a warm Lambda hand it the very Node objects of the last run when
nothing changed). Remembering them is safe only where it cannot go stale: the memo holds the object
itself, so its id is not reused while the entry lives, and the object is frozen, so what was derived
from it still holds; the derivation must read nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from shared.domain.model import Taint

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """`derive(obj)` of frozen objects, remembered for up to `limit` objects (then it starts over)."""

    def __init__(self, derive: Callable[[K], V], limit: int = 4096) -> None:
        self._derive = derive
        self._limit = limit
        self._entries: dict[int, tuple[K, V]] = {}

    def __call__(self, obj: K) -> V:
        entry = self._entries.get(id(obj))
        if entry is not None and entry[0] is obj:
            return entry[1]
        value = self._derive(obj)
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[id(obj)] = (obj, value)
        return value


def _keys(taints: tuple[Taint, ...]) -> frozenset[str]:
    return frozenset(t.key for t in taints)


# The keys of a taint tuple: the marks the rules look for (attrition, rotation, repair) are tested on
# every node of every run, and a group's nodes share one tuple.
taint_keys: IdentityMemo[tuple[Taint, ...], frozenset[str]] = IdentityMemo(_keys)
