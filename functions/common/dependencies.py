"""Dependencies of a handler: built once per cold start, at first use; replaceable in tests and the demo.

    dependencies = Dependencies(controller_from_environment)   # module level, costs nothing
    dependencies.get()                                          # first call builds, later calls reuse
    set_dependencies = dependencies.override                    # every handler's one seam
    set_dependencies(controller_on_fakes)                       # tests (None: back to the real one)

Kept free of the runtime's imports: the webhook uses it too and pays for every import at cold start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Dependencies(Generic[T]):
    """A lazily built, process-wide dependency (the Controller, or the webhook's Webhook)."""

    def __init__(self, build: Callable[[], T]) -> None:
        self._build = build
        self._value: T | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        with self._lock:
            if self._value is None:
                self._value = self._build()
            return self._value

    def override(self, value: T | None) -> None:
        """Use `value` from now on (None: build the real one again at next use)."""
        with self._lock:
            self._value = value
