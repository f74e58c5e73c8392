"""What a node advertises as allocatable, from the raw capacity of its instance type.

The kubelet of an EKS-optimized AMI reserves cpu and memory for itself and keeps an eviction
threshold free: Allocatable = Capacity - kubeReserved - evictionHard. The planner reads these rules
to size nodes that do not exist yet, so they must match what the AMI writes into the kubelet config.
"""

from __future__ import annotations

from shared.domain.resources import CPU, MEMORY, PODS, Resources

MIB = 2**20
# The kubelet's own default when nothing sets maxPods.
KUBELET_DEFAULT_MAX_PODS = 110

# awslabs/amazon-eks-ami, templates/al2/runtime/bootstrap.sh, get_cpu_millicores_to_reserve and
# get_resource_to_reserve_in_range (AL2); nodeadm/internal/kubelet/config.go withDefaultReservedResources
# writes the same kubeReserved for AL2023. Ranges in millicores and the share of each range reserved,
# in hundredths of a percent: 6% of the first core, 1% of the second, 0.5% of the third and fourth,
# 0.25% of every core above four (GKE's tiers).
_CPU_TIERS: tuple[tuple[int, int | None, int], ...] = (
    (0, 1000, 600),
    (1000, 2000, 100),
    (2000, 4000, 50),
    (4000, None, 25),
)
# bootstrap.sh get_memory_mebibytes_to_reserve (nodeadm: getMemoryMebibytesToReserve(maxPods)):
# 255Mi + 11Mi per pod the node may run (max pods of the instance type).
_MEMORY_BASE_MIB = 255
_MEMORY_PER_POD_MIB = 11
# evictionHard memory.available (bootstrap.sh and nodeadm's defaultKubeletSubConfig).
_EVICTION_HARD_MEMORY_MIB = 100


def eks_cpu_millicores_to_reserve(cpu_millicores: int) -> int:
    """kubeReserved cpu of an EKS AMI node with `cpu_millicores` of capacity (integer maths as in bash)."""
    reserved = 0
    for start, end, share in _CPU_TIERS:
        if cpu_millicores > start:
            top = cpu_millicores if end is None else min(cpu_millicores, end)
            reserved += (top - start) * share // 100 // 100
    return reserved


def eks_memory_mebibytes_to_reserve(max_pods: int) -> int:
    """kubeReserved memory (MiB) of an EKS AMI node that may run `max_pods` pods."""
    return _MEMORY_BASE_MIB + _MEMORY_PER_POD_MIB * max_pods


def eks_allocatable(capacity: Resources) -> Resources:
    """What a node of an EKS-optimized AMI with this raw capacity advertises as allocatable.

    cpu minus the tiered kubeReserved, memory minus kubeReserved (255Mi + 11Mi x max pods) and the
    100Mi eviction threshold, pods = max pods (the kubelet's 110 when the capacity names none);
    other resources (GPUs, other accelerators) unchanged; nothing below zero. The AMI's 1Gi
    ephemeral-storage reservation is not modelled: instance types carry no ephemeral storage here.
    """
    max_pods = capacity.get(PODS) or KUBELET_DEFAULT_MAX_PODS
    reserved_memory = (eks_memory_mebibytes_to_reserve(max_pods) + _EVICTION_HARD_MEMORY_MIB) * MIB
    reservation = Resources.of(
        {CPU: eks_cpu_millicores_to_reserve(capacity.get(CPU)), MEMORY: reserved_memory}
    )
    return reserved_allocatable(capacity + Resources.of({PODS: max_pods - capacity.get(PODS)}), reservation)


def reserved_allocatable(capacity: Resources, reservation: Resources) -> Resources:
    """Capacity minus an explicit reservation (the config's `node_reservation`), never below zero."""
    return Resources.of({name: max(0, amount - reservation.get(name)) for name, amount in capacity.items})


def node_allocatable(capacity: Resources, reservation: Resources | None) -> Resources:
    """The allocatable the planner assumes: the explicit reservation when configured, else the EKS AMI's."""
    return eks_allocatable(capacity) if reservation is None else reserved_allocatable(capacity, reservation)
