"""`gc_paused`: Python's cyclic garbage collector paused over a block that builds objects it keeps.

CPython collects whenever allocations outnumber deallocations by its threshold, so a block that
allocates a lot and keeps most of it triggers collection after collection over a growing heap, each
finding nothing. Two such blocks here:

- a cold start's import (`functions/*/handler.py`): ~55,000 objects (modules, classes, functions,
  pydantic's validators, botocore's loaders), all long-lived; for the reconcile handler ~120 young
  and ~12 older collections and one full one, 50-70 ms of a 350-550 ms import
  (`bench/latency_bench.py` prints the import against its baseline);
- a list's decode and parse (`shared/adapters/kubernetes/listing.py`): millions of containers, the
  domain objects and their labels kept; ~30 % of the time of a 20,000-pod list. Decoded JSON has no
  reference cycles.

Pausing loses nothing: whatever cycles such a block leaves are collected at the next collection after
it, and the collector is back as it was even when the block raises.

A cold start also keeps what it built out of every later collection (`keep=True`: `gc.freeze`, what
the Python documentation advises for objects that live as long as the process). Without it, the
first allocation after the import ran a young collection over every object the import made (~26 ms
of the reconcile handler's import, cProfile of the import), and each later full collection walked
them again. What it costs: the reference cycles the import left as garbage are frozen too, never
freed (~27,000 objects, ~8.6 MB, once per container: the functions' memory is 1,024 MB); collecting
them first would add ~49 ms to every cold start. A list's decode does not keep: its objects are
dropped after the run, and a frozen object in a reference cycle would never be freed.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(*, keep: bool = False) -> Iterator[None]:
    """Within the block, no automatic collection; after it, the collector as it was. With `keep`,
    what the block built is also taken out of every later collection's reach (`gc.freeze`)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if keep:
            gc.freeze()
        if enabled:
            gc.enable()
