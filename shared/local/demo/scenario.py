"""The embedded scenario: the scaler config, the simulated world's timings and the synthetic workload.

Two GPU groups with different prices, and a CPU group for the launchers of MPIJob-shaped gangs.
The cheaper GPU group (v100, p3.16xlarge) is preferred by the
planner but EC2 "has no capacity" for more than `capacity` of its instances: the extra launches fail,
the ASG emits "EC2 Instance Launch Unsuccessful", and the backlog must spill to the a100 group
(p4d.24xlarge). The v100 shape is given in the config (moto's instance catalogue has no p3.16xlarge);
the a100 shape comes from DescribeInstanceTypes, as in production.

All times are simulated seconds. The policy is scaled down from the production defaults (idle 10 min,
provisioning 20 min, backoff 5 min) so the whole story fits in about 22 minutes of simulated time
(~40 s at the default speed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from shared.domain.provisioning import BEST_EFFORT_ATOMIC_CLASS
from shared.domain.resources import GPU

CLUSTER_NAME = "demo"
REGION = "us-east-1"
GANG_LABEL = "scheduling.x-k8s.io/pod-group"
GPU_TAINT = {"key": GPU, "value": "true", "effect": "NoSchedule"}


@dataclass(frozen=True, slots=True)
class DemoJob:
    """One batch job: `pods` pods of `gpus` GPUs each (more than one pod: a gang, all or nothing)."""

    name: str
    submit: int  # seconds after the start
    duration: int  # run time once all its pods are placed
    gpus: int  # per pod
    pods: int = 1
    selector: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)  # on every pod of the job
    # MPIJob-shaped (kubeflow.org/v2beta1): a CPU launcher pod beside the `pods` GPU workers, one gang
    launcher: bool = False

    @property
    def total_gpus(self) -> int:
        return self.gpus * self.pods

    @property
    def gang(self) -> bool:
        return self.pods > 1 or self.launcher

    @property
    def pod_names(self) -> tuple[str, ...]:
        if self.launcher:
            return (f"{self.name}-launcher", *(f"{self.name}-worker-{i}" for i in range(self.pods)))
        return (self.name,) if self.pods == 1 else tuple(f"{self.name}-{i}" for i in range(self.pods))


@dataclass(frozen=True, slots=True)
class DemoRequest:
    """A job a Kueue-like queue admits through a ProvisioningRequest: it asks for the capacity of all
    its pods first (`class_name`), and creates them only once the request is Provisioned."""

    job: DemoJob
    class_name: str = BEST_EFFORT_ATOMIC_CLASS
    # How the scaler must answer it for the run to pass: "admitted" (Provisioned=True, its pods run)
    # or "pending" (Provisioned=False, nothing bought: more than any group may hold).
    expected: str = "admitted"

    @property
    def name(self) -> str:
        return f"{self.job.name}-prov"


@dataclass(frozen=True, slots=True)
class WorldTimings:
    """How the simulated AWS and Kubernetes behave (not the scaler: that is what is shown)."""

    step_seconds: int = 5  # the world advances in steps; triggers are delivered between them
    schedule_seconds: int = 60  # the EventBridge schedule of the reconcile function
    boot_seconds: int = 90  # instance launched -> Node registered (Ready, GPUs not yet advertised)
    gpu_delay_seconds: int = 30  # Node registered -> nvidia.com/gpu advertised by the device plugin
    launch_retry_seconds: int = 30  # a group short of capacity retries (and fails) this often
    end_after_seconds: int = 3600  # give up (and fail) if the story has not ended by then
    # Most instances EC2 will run per ASG name; launches beyond fail with InsufficientInstanceCapacity.
    capacity: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GpuFault:
    """One GPU fault the world injects (shared.local.demo.faults): from `after` seconds, on the first
    idle GPU node (of `group`, if given)."""

    after: int
    group: str = ""


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    config: Mapping[str, Any]  # the scaler config document (what SCALER_CONFIG holds)
    timings: WorldTimings
    jobs: tuple[DemoJob, ...]
    requests: tuple[DemoRequest, ...] = ()  # jobs admitted through ProvisioningRequests
    asg_max_size: int = 6
    cpu_per_gpu: str = "7"  # what each pod asks per GPU besides the GPU itself
    memory_per_gpu: str = "56Gi"
    gpu_fault: GpuFault | None = None

    @property
    def last_submit(self) -> int:
        return max((job.submit for job in (*self.jobs, *(r.job for r in self.requests))), default=0)


def _config(*, max_size: int) -> dict[str, Any]:
    return {
        "cluster_name": CLUSTER_NAME,
        "region": REGION,
        "node_groups": [
            {
                "name": "v100",
                "asg_name": f"{CLUSTER_NAME}-v100",
                "instance_type": "p3.16xlarge",
                # moto knows no p3.16xlarge: the shape comes from the config, as for custom AMIs.
                "allocatable": {"cpu": "63", "memory": "480Gi", GPU: "8", "pods": "110"},
                "labels": {"gpu": "v100"},
                "taints": [GPU_TAINT],
                "price_per_hour": 24.48,
                "max_size": max_size,
            },
            {
                "name": "a100",
                "asg_name": f"{CLUSTER_NAME}-a100",
                "instance_type": "p4d.24xlarge",  # shape from DescribeInstanceTypes (8 x A100)
                "labels": {"gpu": "a100"},
                "taints": [GPU_TAINT],
                "price_per_hour": 32.77,
                "max_size": max_size,
            },
            {
                # Untainted CPU nodes: an MPIJob's launcher (no GPU, no GPU toleration) runs here
                # while its workers run on GPU nodes; shape from DescribeInstanceTypes.
                "name": "cpu",
                "asg_name": f"{CLUSTER_NAME}-cpu",
                "instance_type": "m5.2xlarge",
                "labels": {"node-role": "cpu"},
                "price_per_hour": 0.384,
                "max_size": 2,
            },
        ],
        "policy": {
            "idle_seconds": 120,
            "scale_down_delay_after_add_seconds": 120,
            "max_node_provision_seconds": 600,
            "max_scale_in_fraction": 0.5,
            "gang_label": GANG_LABEL,
            "cordon_settle_seconds": 20,
            "scale_down_delay_after_delete_seconds": 20,
            "backoff_initial_seconds": 240,
            "backoff_max_seconds": 960,
            # A GPU fault is replaced 1 min after the node reports it (production default 10 min).
            "repair": {"toleration_seconds": 60},
        },
        "notifications": {},
    }


def _burst(prefix: str, at: int, count: int, gpus: int, duration: int, **extra: Any) -> list[DemoJob]:
    return [DemoJob(f"{prefix}-{i + 1}", at, duration, gpus, **extra) for i in range(count)]


def default_scenario() -> Scenario:
    """`make demo`: 30 jobs in seven bursts, a gang, an MPIJob-shaped gang (CPU launcher + 2 GPU workers),
    an a100-only job, a GPU fault on the first idle node after 7 minutes; about 22 simulated minutes."""
    jobs = [
        *_burst("eval-1gpu", 0, 4, 1, 240),
        *_burst("eval-2gpu", 0, 3, 2, 300),
        *_burst("sweep-4gpu", 0, 2, 4, 360),
        *_burst("train-8gpu", 30, 2, 8, 480),
        DemoJob("llm-gang", 180, 420, 8, pods=2),
        DemoJob("mpi-allreduce", 240, 300, 8, pods=2, launcher=True),
        *_burst("eval-1gpu-b", 300, 6, 1, 180),
        *_burst("eval-2gpu-b", 300, 2, 2, 240),
        DemoJob("a100-only-4gpu", 300, 300, 4, selector={"gpu": "a100"}),
        *_burst("finetune-2gpu", 540, 4, 2, 240),
        DemoJob("finetune-8gpu", 540, 300, 8),
        # After the first backoff ended, v100 is the cheapest choice again and fails again: the backoff
        # doubles and this burst spills to a100 too.
        *_burst("pretrain-8gpu", 570, 3, 8, 300),
    ]
    timings = WorldTimings(capacity={f"{CLUSTER_NAME}-v100": 2})
    requests = _requests(max_size=8, at=240)
    return Scenario("default", _config(max_size=8), timings, tuple(jobs), requests, gpu_fault=GpuFault(420))


def quick_scenario() -> Scenario:
    """The shortened form the test suite runs: 7 jobs, a gang, an MPIJob-shaped gang, v100 capped at
    one instance, a GPU fault on the first idle node after 150 s."""
    jobs = [
        *_burst("eval-1gpu", 0, 2, 1, 120),
        DemoJob("sweep-4gpu", 0, 150, 4),
        DemoJob("train-8gpu", 0, 180, 8),
        DemoJob("llm-gang", 30, 150, 8, pods=2),
        DemoJob("a100-only-2gpu", 30, 120, 2, selector={"gpu": "a100"}),
        DemoJob("mpi-allreduce", 60, 120, 2, pods=2, launcher=True),
    ]
    timings = WorldTimings(capacity={f"{CLUSTER_NAME}-v100": 1}, end_after_seconds=1800)
    requests = _requests(max_size=4, at=0)
    return Scenario("quick", _config(max_size=4), timings, tuple(jobs), requests, gpu_fault=GpuFault(150))


def _requests(*, max_size: int, at: int) -> tuple[DemoRequest, ...]:
    """A Kueue-style 2 x 8-GPU job on a100, provisioned atomically and then consumed, and one that
    asks for more a100 nodes than the group may have: answered Provisioned=False with why, nothing
    bought, and left pending (as cluster-autoscaler answers it)."""
    a100 = {"gpu": "a100"}
    return (
        DemoRequest(DemoJob("kueue-llm-2x8", at, 180, 8, pods=2, selector=a100)),
        DemoRequest(
            DemoJob("kueue-too-big", at, 180, 8, pods=max_size + 2, selector=a100), expected="pending"
        ),
    )


SCENARIOS = {"default": default_scenario, "quick": quick_scenario}
