"""The Controller of the reconcile, force-scale-down and AWS-events functions, built from the environment.

Each handler holds it in a `functions.common.dependencies.Dependencies` (built at first use, replaced
through the handler's `set_dependencies`).
"""

from __future__ import annotations

import os
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
