"""The replay's clock: a time-ordered queue of world events (arrivals, finishes, registrations, GPUs)."""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from typing import Any

from shared.local.sim.entities import ARRIVE, FINISH, INF


class EventQueue:
    """Events by time, then by the order they were pushed; counts the job events still to come."""

    __slots__ = ("_heap", "_seq", "job_events")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Any]] = []
        self._seq = 0
        self.job_events = 0  # arrivals and finishes still queued

    def __bool__(self) -> bool:
        return bool(self._heap)

    def push(self, when: int, kind: int, payload: Any) -> None:
        if kind in (ARRIVE, FINISH):
            self.job_events += 1
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, kind, payload))

    def next_time(self) -> float:
        """When the next event happens (INF: none is queued)."""
        return self._heap[0][0] if self._heap else INF

    def pop_due(self, now: int) -> Iterator[tuple[int, Any]]:
        """The events at `now`, in order, including those pushed for `now` while handling them."""
        heap = self._heap
        while heap and heap[0][0] == now:
            _, _, kind, payload = heapq.heappop(heap)
            if kind in (ARRIVE, FINISH):
                self.job_events -= 1
            yield kind, payload
