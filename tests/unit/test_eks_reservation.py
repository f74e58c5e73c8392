"""What an EKS-optimized AMI node advertises as allocatable, and the explicit reservation override.

Expected figures are worked out by hand from bootstrap.sh's formulas:
kubeReserved cpu = 60m (first core) + 10m (second) + 10m (third and fourth) + 2.5m per core above four,
rounded down; kubeReserved memory = 255Mi + 11Mi x max pods; evictionHard memory.available = 100Mi.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.domain.resources import CPU, GPU, MEMORY, PODS, Resources
from shared.planner.eks import (
    eks_allocatable,
    eks_cpu_millicores_to_reserve,
    eks_memory_mebibytes_to_reserve,
    node_allocatable,
    reserved_allocatable,
)

MIB = 2**20
GIB = 2**30


@pytest.mark.parametrize(
    ("cores", "reserved"),
    [
        (1, 60),  # 6% of the first core
        (2, 70),  # + 1% of the second
        (4, 80),  # + 0.5% of the third and fourth
        (5, 82),  # + 0.25% of the fifth = 2.5m, rounded down as bash's integer arithmetic does
        (8, 90),  # + 4 x 2.5m
        (96, 310),  # + 92 x 2.5m
    ],
)
def test_cpu_reservation_follows_the_eks_ami_tiers(cores: int, reserved: int) -> None:
    # Given a node with `cores` vCPUs / When its kubeReserved cpu is computed / Then it follows the tiers
    assert eks_cpu_millicores_to_reserve(cores * 1000) == reserved


def test_memory_reservation_grows_with_max_pods() -> None:
    # Given max pods of m5.large (29) and p4d.24xlarge (737)
    # When / Then kubeReserved memory is 255Mi + 11Mi per pod
    assert eks_memory_mebibytes_to_reserve(29) == 574
    assert eks_memory_mebibytes_to_reserve(737) == 8362


def test_p4d_24xlarge_allocatable() -> None:
    # Given the raw capacity of a p4d.24xlarge: 96 vCPU, 1152 GiB, 8 A100s, 737 pods
    capacity = Resources.of({CPU: 96_000, MEMORY: 1152 * GIB, GPU: 8, PODS: 737})

    # When its allocatable is computed
    allocatable = eks_allocatable(capacity)

    # Then cpu loses 310m; memory loses 255 + 11 x 737 = 8362Mi reserved + 100Mi eviction = 8462Mi;
    # GPUs and pods are unchanged
    assert allocatable == Resources.of({CPU: 95_690, MEMORY: (1_179_648 - 8462) * MIB, GPU: 8, PODS: 737})


def test_g5_xlarge_allocatable() -> None:
    # Given the raw capacity of a g5.xlarge: 4 vCPU, 16 GiB, 1 A10G, 58 pods
    capacity = Resources.of({CPU: 4_000, MEMORY: 16 * GIB, GPU: 1, PODS: 58})

    # When its allocatable is computed
    allocatable = eks_allocatable(capacity)

    # Then cpu loses 80m; memory loses 255 + 11 x 58 = 893Mi + 100Mi = 993Mi
    assert allocatable == Resources.of({CPU: 3_920, MEMORY: (16_384 - 993) * MIB, GPU: 1, PODS: 58})


def test_m5_large_allocatable() -> None:
    # Given the raw capacity of an m5.large: 2 vCPU, 8 GiB, 29 pods
    capacity = Resources.of({CPU: 2_000, MEMORY: 8 * GIB, PODS: 29})

    # When its allocatable is computed
    allocatable = eks_allocatable(capacity)

    # Then cpu loses 70m; memory loses 255 + 11 x 29 = 574Mi + 100Mi = 674Mi
    assert allocatable == Resources.of({CPU: 1_930, MEMORY: (8_192 - 674) * MIB, PODS: 29})


def test_capacity_without_pods_gets_the_kubelet_default() -> None:
    # Given a capacity that names no pod limit
    capacity = Resources.of({CPU: 4_000, MEMORY: 16 * GIB})

    # When its allocatable is computed
    allocatable = eks_allocatable(capacity)

    # Then the kubelet's 110 pods apply, to the pod count and to the memory reservation (255 + 1210 + 100)
    assert allocatable.get(PODS) == 110
    assert allocatable.get(MEMORY) == (16_384 - 1_565) * MIB


def test_tiny_capacity_never_goes_below_zero() -> None:
    # Given a capacity smaller than the reservation it implies
    capacity = Resources.of({CPU: 50, MEMORY: 64 * MIB, PODS: 4})

    # When its allocatable is computed
    allocatable = eks_allocatable(capacity)

    # Then memory is zero (absent), not negative; cpu loses 6% of its 50m, rounded down (3m)
    assert allocatable == Resources.of({CPU: 47, PODS: 4})


def test_explicit_reservation_is_subtracted_and_floored_at_zero() -> None:
    # Given a g5.xlarge and a configured reservation larger than its cpu, with a pods reservation
    capacity = Resources.of({CPU: 4_000, MEMORY: 16 * GIB, GPU: 1, PODS: 58})
    reservation = Resources.of({CPU: 100_000, MEMORY: 2 * GIB, PODS: 8})

    # When the allocatable is computed from the override
    allocatable = reserved_allocatable(capacity, reservation)

    # Then each resource loses its reservation, none below zero, and unreserved ones are unchanged
    assert allocatable == Resources.of({MEMORY: 14 * GIB, GPU: 1, PODS: 50})


def test_node_allocatable_prefers_the_configured_reservation() -> None:
    # Given a g5.xlarge
    capacity = Resources.of({CPU: 4_000, MEMORY: 16 * GIB, GPU: 1, PODS: 58})

    # When / Then without a configured reservation the EKS AMI rule applies, with one the override does
    assert node_allocatable(capacity, None) == eks_allocatable(capacity)
    override = Resources.of({CPU: 500, MEMORY: GIB})
    assert node_allocatable(capacity, override) == reserved_allocatable(capacity, override)


capacities = st.builds(
    lambda cpu, memory, gpus, pods: Resources.of({CPU: cpu, MEMORY: memory, GPU: gpus, PODS: pods}),
    st.integers(min_value=0, max_value=448_000),
    st.integers(min_value=0, max_value=24 * 2**40),
    st.integers(min_value=0, max_value=16),
    st.integers(min_value=1, max_value=1_000),
)


@given(capacities)
def test_allocatable_never_exceeds_capacity_nor_goes_negative(capacity: Resources) -> None:
    # Given any raw capacity naming its pods / When its EKS allocatable is computed
    allocatable = eks_allocatable(capacity)

    # Then it fits in the capacity, has nothing negative, and keeps GPUs and pods
    assert allocatable.fits_in(capacity)
    assert all(amount > 0 for _, amount in allocatable.items)
    assert allocatable.get(GPU) == capacity.get(GPU)
    assert allocatable.get(PODS) == capacity.get(PODS)
