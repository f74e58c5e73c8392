"""Dependencies of a handler: built once per cold start, at first use; replaceable in tests.

dependencies = Dependencies(controller_from_environment)   # module level, costs nothing
dependencies.controller()                                   # first call builds, later calls reuse
dependencies.override(controller_on_fakes)                  # tests (None: back to the real one)
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from functions.common.powertools import logger
from shared.controller import Controller
from shared.observability import PowertoolsReporter
from shared.runtime import build_controller, load_settings


def controller_from_environment() -> Controller:
    """The Controller on the real adapters, configured by the function's environment."""
    settings = load_settings(os.environ)
    reporter = PowertoolsReporter(logger=logger, cluster=settings.config.cluster_name)
    return build_controller(settings, reporter=reporter)


class Dependencies:
    """A lazily built, process-wide Controller."""

    def __init__(self, build: Callable[[], Controller]) -> None:
        self._build = build
        self._controller: Controller | None = None
        self._lock = threading.Lock()

    def controller(self) -> Controller:
        with self._lock:
            if self._controller is None:
                self._controller = self._build()
            return self._controller

    def override(self, controller: Controller | None) -> None:
        """Use `controller` from now on (None: build the real one again at next use)."""
        with self._lock:
            self._controller = controller
