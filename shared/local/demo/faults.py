"""A GPU fault in the local run, for the scaler's node repair to replace (issue 23).

The scenario's `GpuFault` says when: from `after` seconds, the first GPU node (in launch order) whose GPUs
are advertised, that runs no job and is not cordoned fails (waiting for one if every node is busy):
its job would fail with it otherwise, and the demo's bar is that every job runs. The node then
reports the fault as a real one does, through the fake Kubernetes API server the functions read:
- the EKS node monitoring agent's `AcceleratedHardwareReady` condition turns False (lastTransitionTime
  now), as Karpenter's and the scaler's repair watch it;
- the NVIDIA device plugin withdraws the faulty GPU: `status.allocatable` of nvidia.com/gpu drops by
  one while `status.capacity` keeps it (kubelet's devicemanager advertises healthy devices only).
The scaler does the rest with its real functions: the node's room is no longer counted, and once the
condition is older than `policy.repair.toleration_seconds` it is terminated (the plan's
`terminate[].cause: repair`). The world's kube-scheduler still reads the node's remaining GPUs; a job
it puts there gets the node cordoned for health instead, never evicted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.domain.resources import GPU
from shared.local.demo.scenario import GpuFault
from shared.local.demo.world import NAMESPACE, Instance, Json, KubeApi, StepReport, World, timestamp
from shared.planner.health import MONITORING_AGENT_CONDITIONS

FAULT_CONDITION = MONITORING_AGENT_CONDITIONS[0]  # AcceleratedHardwareReady


@dataclass
class Faulted:
    """A node the demo broke, and its instance (terminated once repaired)."""

    instance: Instance
    at: datetime

    @property
    def repaired(self) -> bool:
        return self.instance.terminated_at is not None


@dataclass
class GpuFaults:
    """Injects the scenario's GPU fault into the world when it is due."""

    kube: KubeApi
    world: World
    fault: GpuFault | None
    start: datetime
    faulted: list[Faulted] = field(default_factory=list)

    @property
    def repaired(self) -> int:
        return sum(1 for f in self.faulted if f.repaired)

    def step(self, now: datetime, report: StepReport) -> None:
        """Break the chosen node once the fault is due and a node qualifies."""
        if self.fault is None or self.faulted or now < self.start + timedelta(seconds=self.fault.after):
            return
        instance = self._victim()
        if instance is None:
            return
        self.kube.update_node(instance.node_name, _fails(now))
        self.faulted.append(Faulted(instance, now))
        gpus = instance.group.gpus
        report.add(
            now,
            "kubelet",
            f"{instance.group.name}: GPU fault on {instance.node_name}: {FAULT_CONDITION}=False, "
            f"1 of {gpus} {GPU} withdrawn from allocatable by the device plugin",
        )

    def _victim(self) -> Instance | None:
        busy = {
            (pod.get("spec") or {}).get("nodeName")
            for pod in self.kube.pods()
            if pod["metadata"].get("namespace") == NAMESPACE
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        }
        # In the order the world met the instances (launch order), not by name: moto draws node names
        # at random, and a victim chosen by name made the demo's figures differ from run to run.
        for instance in self.world.instances.values():
            if instance.terminated_at is not None or instance.gpus_at is None or not instance.group.gpus:
                continue
            if self.fault is not None and self.fault.group and instance.group.name != self.fault.group:
                continue
            node = self.kube.get_node(instance.node_name)
            if node is None or (node.get("spec") or {}).get("unschedulable") or instance.node_name in busy:
                continue
            return instance
        return None


def _fails(now: datetime) -> Callable[[Json], None]:
    at = timestamp(now)

    def fail(node: Json) -> None:
        status = node["status"]
        allocatable = dict(status["allocatable"])
        allocatable[GPU] = str(int(allocatable[GPU]) - 1)
        status["allocatable"] = allocatable
        status["conditions"] = [
            *(c for c in status.get("conditions") or () if c.get("type") != FAULT_CONDITION),
            {
                "type": FAULT_CONDITION,
                "status": "False",
                "reason": "AcceleratedHardwareFailure",
                "message": "a GPU failed (simulated fault, XID 79: fallen off the bus)",
                "lastHeartbeatTime": at,
                "lastTransitionTime": at,
            },
        ]

    return fail
