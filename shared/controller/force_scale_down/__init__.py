"""Forced scale-down, from the request to the report, on top of the applier; one module per step.

An operator asks (`{"group": "a100", "target": 0}` or named nodes):

    request.py     the payload's model and its validation (`parse_force_scale_down`)
    first_pass.py  under the lease: store the drain intent, cordon, evict, terminate, cancel launches
    drain.py       the continuation every reconcile runs over the stored drains, and the spot hold
    report.py      what the run did, JSON-able

The choice of nodes is pure and lives in the planner (`shared.planner.force_scale_down`: unregistered
instances, idle nodes, fewest pods, fewest GPUs, newest first; never below the group's min size).

Every reconcile runs the drain continuation; the request, the first pass and the report are the forced
scale-down function's alone. The names below load their module on first use (PEP 562), so a reconcile's
cold start does not pay for parsing requests it never receives.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shared.controller.force_scale_down.drain import (
        GIVE_UP_AFTER_GRACE,
        INTERRUPTION_HOLD,
        INTERRUPTION_REQUESTER,
        DrainProgress,
        Removal,
        continue_drains,
        hold_interrupted,
        merge_intents,
        step,
    )
    from shared.controller.force_scale_down.first_pass import force_scale_down
    from shared.controller.force_scale_down.report import ForceScaleDownReport
    from shared.controller.force_scale_down.request import (
        DEFAULT_GRACE_SECONDS,
        MAX_GRACE_SECONDS,
        MAX_TARGET,
        ForceScaleDownRequest,
        InvalidRequestError,
        parse_force_scale_down,
    )

_HOMES = {
    **dict.fromkeys(
        (
            "GIVE_UP_AFTER_GRACE",
            "INTERRUPTION_HOLD",
            "INTERRUPTION_REQUESTER",
            "DrainProgress",
            "Removal",
            "continue_drains",
            "hold_interrupted",
            "merge_intents",
            "step",
        ),
        "drain",
    ),
    "force_scale_down": "first_pass",
    "ForceScaleDownReport": "report",
    **dict.fromkeys(
        (
            "DEFAULT_GRACE_SECONDS",
            "MAX_GRACE_SECONDS",
            "MAX_TARGET",
            "ForceScaleDownRequest",
            "InvalidRequestError",
            "parse_force_scale_down",
        ),
        "request",
    ),
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)


__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "GIVE_UP_AFTER_GRACE",
    "INTERRUPTION_HOLD",
    "INTERRUPTION_REQUESTER",
    "MAX_GRACE_SECONDS",
    "MAX_TARGET",
    "DrainProgress",
    "ForceScaleDownReport",
    "ForceScaleDownRequest",
    "InvalidRequestError",
    "Removal",
    "continue_drains",
    "force_scale_down",
    "hold_interrupted",
    "merge_intents",
    "parse_force_scale_down",
    "step",
]
