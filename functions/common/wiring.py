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
from shared.ports import Clock
from shared.reporting import Reporter
from shared.runtime import build_controller, load_settings


def controller_from_environment(
    *, clock: Clock | None = None, wrap_reporter: Callable[[Reporter], Reporter] | None = None
) -> Controller:
    """The Controller on the real adapters, configured by the function's environment.

    The local run passes its simulated clock and a reporter wrapper that keeps the timeline.
    """
    settings = load_settings(os.environ)
    reporter: Reporter = PowertoolsReporter(logger=logger, cluster=settings.config.cluster_name)
    if wrap_reporter is not None:
        reporter = wrap_reporter(reporter)
    overrides = {"clock": clock} if clock is not None else {}
    return build_controller(settings, reporter=reporter, **overrides)


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
