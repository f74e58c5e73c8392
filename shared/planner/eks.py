"""What a node advertises as allocatable, from the raw capacity of its instance type.

The kubelet of an EKS-optimized AMI reserves cpu and memory for itself and keeps an eviction
threshold free: Allocatable = Capacity - kubeReserved - evictionHard. The planner reads these rules
to size nodes that do not exist yet, so they must match what the AMI writes into the kubelet config.
"""

from __future__ import annotations

from shared.domain.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, Resources

MIB = 2**20
GIB = 2**30
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
# kubeReserved ephemeral-storage (bootstrap.sh; nodeadm withDefaultReservedResources) and evictionHard
# nodefs.available, a share of the filesystem (both AMIs' kubelet config: "10%").
_RESERVED_EPHEMERAL_GIB = 1
_EVICTION_HARD_NODEFS_PERCENT = 10

# Where the AMI puts the kubelet on the NVMe instance store: nodeadm's NodeConfig
# spec.instance.localStorage.strategy (AL2023; bootstrap.sh --local-disks on AL2). RAID0 stripes every
# NVMe instance store disk into one array and bind-mounts /var/lib/kubelet, /var/lib/containerd and
# /var/log/pods onto it; RAID10 mirrors them (half the bytes). "Mount" mounts each disk on its own
# under /mnt/k8s-disks and leaves the kubelet on the root volume: the instance store is not ephemeral
# storage then. Without a strategy the AMI leaves the disks alone.
LOCAL_STORAGE_SHARE = {"RAID0": (1, 1), "RAID10": (1, 2)}
# TotalSizeInGB counts raw decimal gigabytes; the filesystem keeps some for itself (xfs metadata and
# log, about 1-2 %). A conservative 95 % of the raw bytes is what the kubelet is sure to see.
_FILESYSTEM_PERCENT = 95


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
    ephemeral-storage (when the capacity has any: the instance store the AMI mounts) minus the 1Gi
    kubeReserved and the 10 % nodefs eviction threshold; other resources (GPUs, other accelerators)
    unchanged; nothing below zero.
    """
    max_pods = capacity.get(PODS) or KUBELET_DEFAULT_MAX_PODS
    reserved_memory = (eks_memory_mebibytes_to_reserve(max_pods) + _EVICTION_HARD_MEMORY_MIB) * MIB
    storage = capacity.get(EPHEMERAL_STORAGE)
    reserved_storage = _RESERVED_EPHEMERAL_GIB * GIB + storage * _EVICTION_HARD_NODEFS_PERCENT // 100
    reservation = Resources.of(
        {
            CPU: eks_cpu_millicores_to_reserve(capacity.get(CPU)),
            MEMORY: reserved_memory,
            EPHEMERAL_STORAGE: reserved_storage if storage else 0,
        }
    )
    return reserved_allocatable(capacity + Resources.of({PODS: max_pods - capacity.get(PODS)}), reservation)


def reserved_allocatable(capacity: Resources, reservation: Resources) -> Resources:
    """Capacity minus an explicit reservation (the config's `node_reservation`), never below zero."""
    return Resources.of({name: max(0, amount - reservation.get(name)) for name, amount in capacity.items})


def node_allocatable(capacity: Resources, reservation: Resources | None) -> Resources:
    """The allocatable the planner assumes: the explicit reservation when configured, else the EKS AMI's."""
    return eks_allocatable(capacity) if reservation is None else reserved_allocatable(capacity, reservation)


def instance_store_capacity(nvme_instance_store_gb: int, strategy: str | None) -> int:
    """Ephemeral-storage capacity (bytes) of a node whose AMI puts the kubelet on its NVMe instance
    store with this strategy; 0 when it does not (no strategy, "Mount", or no NVMe instance store)."""
    share = LOCAL_STORAGE_SHARE.get(strategy or "")
    if share is None or nvme_instance_store_gb <= 0:
        return 0
    numerator, denominator = share
    raw = nvme_instance_store_gb * 10**9 * numerator // denominator
    return raw * _FILESYSTEM_PERCENT // 100
