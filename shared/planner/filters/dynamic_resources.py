"""DynamicResources (DRA): a pod with `spec.resourceClaims` needs devices a DRA driver allocates.

The planner sees no ResourceSlices, so it cannot verify that a device is free on any node, nor
that a new node of a group would publish one. The conservative answer: such a pod is never counted
on existing, booting or new room (it pins no node and buys none) and its reason says so; the
scheduler and the DRA driver decide.
"""

from __future__ import annotations

from shared.domain.constraints import PodConstraints
from shared.planner.filters.framework import Reason


def dynamic_resources(constraints: PodConstraints) -> Reason:
    """None for pods without DRA claims; else why the planner does not place them."""
    if not constraints.resource_claims:
        return None
    names = ", ".join(constraints.resource_claims)
    return f"uses DRA resource claims ({names}): the planner cannot verify devices, left to the scheduler"
