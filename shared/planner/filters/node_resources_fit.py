"""NodeResourcesFit: the pod's requests against the node's free room
(plugins/noderesources/fit.go). Requests already include native sidecars, init containers and
the pod overhead (shared.formats.kubernetes.pod_requests); `pods` is one slot per pod."""

from __future__ import annotations

from collections.abc import Sequence

from shared.domain.resources import PODS
from shared.planner.filters.framework import Reason

Request = tuple[tuple[int, int], ...]  # non-zero (dimension index, amount) pairs


def insufficient(request: Request, free: Sequence[int], dims: Sequence[str]) -> tuple[str, ...]:
    """Names of the resources that do not fit, in the run's dimension order."""
    return tuple(dims[dim] for dim, amount in request if free[dim] < amount)


def node_resources_fit(request: Request, free: Sequence[int], dims: Sequence[str]) -> Reason:
    """None when the request fits; else "Insufficient nvidia.com/gpu" (or "Too many pods")."""
    for dim, amount in request:
        if free[dim] < amount:
            name = dims[dim]
            return "Too many pods" if name == PODS else f"Insufficient {name}"
    return None
