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


def every_misfit(request: Request, free: Sequence[int], dims: Sequence[str]) -> Reason:
    """Every resource that does not fit, as the plugin's status lists them ("Too many pods" first,
    then "Insufficient <name>" each, joined as a Status message joins its reasons); None when it fits.
    For explaining one pod: the placement paths stop at the first."""
    names = insufficient(request, free, dims)
    if not names:
        return None
    # fit.go's fitsRequest order: pods, cpu, memory, ephemeral-storage, then the extended resources
    first = {PODS: 0, "cpu": 1, "memory": 2, "ephemeral-storage": 3}
    ordered = sorted(names, key=lambda name: (first.get(name, 4), name))
    return ", ".join("Too many pods" if name == PODS else f"Insufficient {name}" for name in ordered)
