"""`gc_paused`: the cyclic garbage collector paused while a handler module loads.

A cold start's import creates ~55,000 objects (modules, classes, functions, pydantic's validators,
botocore's loaders), none of them garbage. CPython's collector runs whenever allocations outnumber
deallocations by its threshold, so it walks the growing heap over and over while modules load:
measured here for the reconcile handler, ~120 young and ~12 older collections and one full one,
50-70 ms of a 350-550 ms import (`bench/latency_bench.py` prints the import against its baseline).
Pausing it for the import and turning it back on afterwards loses nothing: whatever cycles the
import leaves are collected at the next collection, during the first invocation.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Within the block, no automatic collection; after it, the collector as it was (even on error)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
