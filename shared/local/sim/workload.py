"""A trace job as Kubernetes pods: one pod when it fits a node, else a gang of whole-node pods.

64 GPUs on 8-GPU nodes are 8 pods of 8 GPUs; 12 GPUs are 8 + 4, one gang, placed all-or-nothing.
Traces rarely carry CPU and memory, so pods get them in proportion to their GPUs: by default 90 %
of a node's per-GPU share (95 cores / 8 GPUs -> 10.6 cores per GPU), so a full node's worth of
GPUs always fits with room for the kubelet's daemons.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared.config import ScalerConfig
from shared.domain.errors import ConfigError
from shared.domain.resources import CPU, GPU, MEMORY, PODS, Resources
from shared.local.sim.trace import Job

MIB = 2**20
DEFAULT_SHARE = 0.9  # of a node's per-GPU cpu/memory that a pod gets per GPU
CPU_ONLY_DEFAULT_MILLICORES = 1000


@dataclass(frozen=True, slots=True)
class PodSize:
    """What one pod of a job asks for: GPUs, millicores, bytes of memory."""

    gpus: int
    cpu_millicores: int
    memory_bytes: int

    def resources(self) -> Resources:
        return Resources.of({GPU: self.gpus, CPU: self.cpu_millicores, MEMORY: self.memory_bytes, PODS: 1})


@dataclass(frozen=True, slots=True)
class Sizing:
    """How jobs become pods for one config: per-GPU cpu/memory and GPUs per node."""

    cpu_per_gpu: int  # millicores
    memory_per_gpu: int  # bytes

    def split(self, job: Job, gpus_per_node: int) -> tuple[PodSize, ...]:
        """The job's pods: whole nodes of `gpus_per_node` GPUs then the remainder (one pod if it fits)."""
        if job.gpus <= gpus_per_node or gpus_per_node <= 0:
            parts = [job.gpus]
        else:
            whole, rest = divmod(job.gpus, gpus_per_node)
            parts = [gpus_per_node] * whole + ([rest] if rest else [])
        pods = []
        for gpus in parts:
            if job.gpus:
                share = gpus / job.gpus
                cpu = (
                    round(job.cpu_millicores * share)
                    if job.cpu_millicores is not None
                    else gpus * self.cpu_per_gpu
                )
                memory = (
                    round(job.memory_mib * share) * MIB
                    if job.memory_mib is not None
                    else gpus * self.memory_per_gpu
                )
            else:
                cpu = job.cpu_millicores or CPU_ONLY_DEFAULT_MILLICORES
                memory = (job.memory_mib or 1024) * MIB
            pods.append(PodSize(gpus, cpu, memory))
        return tuple(pods)


def missing_allocatable(group: str) -> ConfigError:
    """The error of a group the simulator cannot size: it has no `allocatable`."""
    return ConfigError(
        f"simulate: node group {group!r} needs `allocatable` (in production the shape comes from EC2 "
        "instance type data, which the simulator does not read)"
    )


def default_sizing(config: ScalerConfig) -> Sizing:
    """90 % of the smallest per-GPU cpu and memory share among the GPU groups (rounded down).

    Raises ConfigError when no group has an `allocatable` with GPUs.
    """
    cpu_shares: list[float] = []
    memory_shares: list[float] = []
    for group in config.node_groups:
        shape = group.shape
        if shape is None or not shape.gpus:
            continue
        cpu_shares.append(shape.get(CPU) / shape.gpus)
        memory_shares.append(shape.get(MEMORY) / shape.gpus)
    if not cpu_shares:
        without = [group.name for group in config.node_groups if group.shape is None]
        if without:
            raise missing_allocatable(without[0])
        raise ConfigError("simulate: no node group has an allocatable with nvidia.com/gpu")
    cpu = int(min(cpu_shares) * DEFAULT_SHARE) // 100 * 100  # whole 100m
    memory = int(min(memory_shares) * DEFAULT_SHARE) // MIB * MIB  # whole MiB
    return Sizing(cpu, memory)
