"""Resource vectors in integer base units: millicores for cpu, bytes for memory, counts otherwise."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

GPU = "nvidia.com/gpu"
# The AWS Neuron device plugin registers whole devices and their cores (Neuron docs, "Neuron device
# plugin": aws.amazon.com/neuron allocates devices, aws.amazon.com/neuroncore single cores); before
# Neuron 2.20 it also registered aws.amazon.com/neurondevice, since renamed to aws.amazon.com/neuron.
NEURON = "aws.amazon.com/neuron"
NEURONCORE = "aws.amazon.com/neuroncore"
NEURONDEVICE = "aws.amazon.com/neurondevice"
GAUDI = "habana.ai/gaudi"  # Habana's device plugin (DL1 instances)
# Devices a device plugin allocates and withdraws when unhealthy (NVIDIA GPUs, AWS Neuron devices).
ACCELERATORS = (GPU, NEURON)

# What "needs an accelerator" means for a pod's extended resources: the one rule the webhook applies
# to a new pod and the admission webhook's matchCondition is generated from (cdk/manifests.py), so the
# API server sends exactly the pods the webhook wakes the scaler for. It covers every accelerator the
# planner's templates give a group (ACCELERATORS and the instance types' GPUs and Neuron resources,
# shared/formats/aws.py), MIG slices the NVIDIA device plugin advertises under its mixed strategy
# (nvidia.com/mig-<profile>, e.g. nvidia.com/mig-1g.5gb), and any vendor's "gpu" resource (amd.com/gpu,
# gpu.intel.com/i915, nvidia.com/gpu.shared). Names are compared as written: kube-scheduler's
# NodeResourcesFit matches a pod's resource names to a node's exactly.
ACCELERATOR_RESOURCES = frozenset({GPU, NEURON, NEURONCORE, NEURONDEVICE, GAUDI})
ACCELERATOR_RESOURCE_PREFIXES = ("nvidia.com/mig-",)
ACCELERATOR_RESOURCE_MARK = "gpu"  # in any part of the name
CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
EPHEMERAL_STORAGE = "ephemeral-storage"


@dataclass(frozen=True, slots=True)
class Resources:
    """An immutable resource vector; names absent from `items` are zero. Items sorted, no zeros."""

    items: tuple[tuple[str, int], ...] = ()
    # The `nvidia.com/gpu` count, read once at construction: the planner reads it of every pod and
    # node in every run, the scan of `items` it saves was a tenth of a plan's time.
    gpus: int = field(init=False, repr=False, compare=False)
    # The hash the dataclass would compute, computed once: vectors key the planner's per-run caches
    # and dedupe the nodes' shapes, so each is hashed many times a run.
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpus", self.get(GPU))
        object.__setattr__(self, "_hash", hash((self.items,)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[Resources], tuple[tuple[tuple[str, int], ...]]]:
        # Rebuilt from `items` on unpickling: a string's hash differs between processes.
        return (Resources, (self.items,))

    @classmethod
    def of(cls, amounts: Mapping[str, int] | Iterable[tuple[str, int]]) -> Resources:
        """Build from a mapping of name to integer amount (zeros dropped)."""
        pairs = amounts.items() if isinstance(amounts, Mapping) else amounts
        merged: dict[str, int] = {}
        for name, value in pairs:
            merged[name] = merged.get(name, 0) + int(value)
        return cls(tuple(sorted((k, v) for k, v in merged.items() if v != 0)))

    def get(self, name: str) -> int:
        """Amount of one resource (0 when absent)."""
        for key, value in self.items:
            if key == name:
                return value
        return 0

    def as_dict(self) -> dict[str, int]:
        """A plain, mutable copy."""
        return dict(self.items)

    def names(self) -> frozenset[str]:
        """Names with a non-zero amount."""
        return frozenset(k for k, _ in self.items)

    def __add__(self, other: Resources) -> Resources:
        merged = self.as_dict()
        for name, value in other.items:
            merged[name] = merged.get(name, 0) + value
        return Resources.of(merged)

    def __sub__(self, other: Resources) -> Resources:
        merged = self.as_dict()
        for name, value in other.items:
            merged[name] = merged.get(name, 0) - value
        return Resources.of(merged)

    def maximum(self, other: Resources) -> Resources:
        """Element-wise maximum."""
        merged = self.as_dict()
        for name, value in other.items:
            merged[name] = max(merged.get(name, 0), value)
        return Resources.of(merged)

    def fits_in(self, capacity: Resources) -> bool:
        """True when every amount here is at most the same amount in `capacity`."""
        return all(value <= capacity.get(name) for name, value in self.items)

    def exceeding(self, capacity: Resources) -> tuple[str, ...]:
        """Names whose amount here is larger than in `capacity`."""
        return tuple(name for name, value in self.items if value > capacity.get(name))

    def __bool__(self) -> bool:
        return bool(self.items)

    def __str__(self) -> str:
        return ", ".join(f"{name}={format_amount(name, value)}" for name, value in self.items) or "none"


def format_amount(name: str, value: int) -> str:
    """Human form of one amount (cpu in cores, memory in Gi)."""
    if name == CPU:
        return f"{value / 1000:g}"
    if name in (MEMORY, EPHEMERAL_STORAGE) or name.startswith("hugepages-"):
        return f"{value / 2**30:.4g}Gi"
    return str(value)


EMPTY = Resources()


def is_accelerator(name: str) -> bool:
    """Whether the extended resource `name` is an accelerator (see ACCELERATOR_RESOURCES)."""
    return (
        name in ACCELERATOR_RESOURCES
        or ACCELERATOR_RESOURCE_MARK in name
        or name.startswith(ACCELERATOR_RESOURCE_PREFIXES)
    )


def needs_accelerator(resource_names: Iterable[str], *, claims_devices: bool) -> bool:
    """Whether a pod needs an accelerator: it requests or limits one by name, or it claims devices
    through DRA (spec.resourceClaims; which devices is the claims' business, and the planner scales
    for any claim a group's ResourceSlices can satisfy)."""
    return claims_devices or any(is_accelerator(name) for name in resource_names)
