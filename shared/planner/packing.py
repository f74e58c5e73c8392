"""First-fit bin packing over integer resource vectors, with atomic placement for gangs.

Vectors are plain tuples/lists in one dimension order per planning run. A request is kept as its
non-zero `(index, amount)` pairs, so a fit test touches only the dimensions the pod asks for.

Speed comes from one observation: bins only ever lose room while packing, so once a request did
not fit bins [0, k) it never will; each distinct request remembers where to resume its scan.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Request = tuple[tuple[int, int], ...]  # non-zero (dimension index, amount) pairs


def fits(request: Request, free: list[int] | tuple[int, ...]) -> bool:
    """Whether `request` fits in `free`."""
    # An explicit loop: this is the planner's hottest line and all() over a generator is slower.
    for index, amount in request:  # noqa: SIM110
        if free[index] < amount:
            return False
    return True


@dataclass
class Bins:
    """One set of interchangeable-by-labels bins: existing nodes of one kind, or one group's nodes.

    `free[i]` is the room left in bin i; `ids[i]` names it (node name, or None for a node not yet
    registered). New bins of `new_shape` may be opened, at most `max_new` of them.
    """

    free: list[list[int]]
    ids: list[str | None]
    new_shape: tuple[int, ...] | None = None
    max_new: int = 0
    opened: int = 0
    placed: list[int] = field(default_factory=list)  # pods placed per bin
    _resume: dict[Request, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.placed:
            self.placed = [0] * len(self.free)

    @property
    def can_open(self) -> bool:
        return self.new_shape is not None and self.opened < self.max_new

    def place(self, request: Request, journal: Journal | None = None) -> int | None:
        """First fit (opening a new bin if allowed); returns the bin index or None."""
        free = self.free
        start = self._resume.get(request, 0)
        for index in range(start, len(free)):
            room = free[index]
            if fits(request, room):
                if journal is not None:
                    journal.touch(self, index)
                for dim, amount in request:
                    room[dim] -= amount
                self.placed[index] += 1
                self._resume[request] = index
                return index
        self._resume[request] = len(free)
        if self.can_open and self.new_shape is not None and fits(request, self.new_shape):
            if journal is not None:
                journal.opening(self)
            room = list(self.new_shape)
            for dim, amount in request:
                room[dim] -= amount
            free.append(room)
            self.ids.append(None)
            self.placed.append(1)
            self.opened += 1
            return len(free) - 1
        return None

    def forget_resume_points(self) -> None:
        """After a rollback bins have regained room: scans must start from the beginning again."""
        self._resume.clear()


@dataclass
class Journal:
    """Undo log so a gang's placements can be rolled back when one member does not fit."""

    touched: list[tuple[Bins, int, list[int], int]] = field(default_factory=list)
    opened: list[Bins] = field(default_factory=list)

    def touch(self, bins: Bins, index: int) -> None:
        self.touched.append((bins, index, list(bins.free[index]), bins.placed[index]))

    def opening(self, bins: Bins) -> None:
        self.opened.append(bins)

    def rollback(self) -> None:
        """Undo every placement recorded here, newest first."""
        for bins in reversed(self.opened):
            bins.free.pop()
            bins.ids.pop()
            bins.placed.pop()
            bins.opened -= 1
        for bins, index, old, placed in reversed(self.touched):
            if index < len(bins.free):
                bins.free[index][:] = old  # in place: simulation nodes share the list
                bins.placed[index] = placed
        for bins in {id(b): b for b, *_ in self.touched}.values():
            bins.forget_resume_points()
        for bins in {id(b): b for b in self.opened}.values():
            bins.forget_resume_points()
        self.touched.clear()
        self.opened.clear()
