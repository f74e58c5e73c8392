"""The simulated world around the scaler: kubelets, a scheduler, running jobs, and EC2's shortages.

Everything happens through the same surfaces as in production: the instances are moto's (launched
when the scaler raises desired capacity), the Nodes and Pods live in the fake Kubernetes API server
(which the scaler's real client reads over HTTP). The rules are the simulated world's
(`shared.local.sim.world`: boot model, scheduler, job lifecycle, EC2 capacity), the same the replay
runs; this module is their surface over moto and the fake API server. One `step(now)`:

1. Instances. Reads the groups (DescribeAutoScalingGroups). A new instance boots; one that left the
   group was terminated: the world records whether its node still ran a job (a busy termination is
   what the scaler must never do), then removes the Node if the scaler has not.
2. Kubelets. `boot_seconds` after launch (`BootModel`) the instance registers its Node (providerID
   `aws:///<az>/<instance-id>`, the group's labels and taints, Ready) with a DaemonSet pod (the NVIDIA
   device plugin); `gpu_delay_seconds` later the plugin advertises `nvidia.com/gpu`.
3. Jobs. Running pods whose duration is over succeed (phase Succeeded).
4. Scheduler. Pending pods, oldest job first, are bound by the simulated kube-scheduler that
   `simulate` uses too (shared.local.sim.scheduler: the planner's filters for feasibility, the
   default profile's NodeResourcesFit and TaintToleration scores to choose among Ready nodes); a
   gang's pods all at once or none. Pods that do not fit get `PodScheduled=False,
   reason=Unschedulable`, the backlog the scaler reads.
5. EC2. A capped group whose desired capacity is above its instances is retrying launches that fail:
   every `launch_retry_seconds` the world emits "EC2 Instance Launch Unsuccessful".

Pod and node matching reuse the project's parsers (`shared.formats.kubernetes`), so the scheduler
and the planner read the same objects the same way.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from shared.adapters.aws import clients
from shared.adapters.aws.fleet import AsgFleet
from shared.config import NodeGroupConfig, ScalerConfig
from shared.domain.model import LIVE_LIFECYCLE_STATES, InstanceType, Node, Pod
from shared.domain.resources import CPU, GPU, PODS, Resources
from shared.formats.aws import DEFAULT_ARCHITECTURE
from shared.formats.kubernetes import node_from_json, pod_from_json
from shared.local.demo.lambda_events import launch_unsuccessful
from shared.local.demo.scenario import DemoJob, Scenario
from shared.local.sim.scheduler import DEFAULT_SCORING, NodeClass, PodRequest, Scheduler, Scoring, Slot
from shared.local.sim.world import BootModel, job_done
from shared.planner.attrition import ATTRITION_TAINT_KEY
from shared.planner.eks import node_allocatable
from shared.planner.health import MONITORING_AGENT_CONDITIONS

Json = dict[str, Any]
NAMESPACE = "research"
SYSTEM_NAMESPACE = "kube-system"
DEVICE_PLUGIN = "nvidia-device-plugin"
DAEMON_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
DEFAULT_MAX_PODS = 110
JOB_LABEL = "job-name"  # what the Job controller labels its pods with


class KubeApi(Protocol):
    """What the world uses of `shared.local.kube_api_server.FakeKubeApiServer` (its seeding API)."""

    def add_pod(self, obj: Json) -> Json: ...

    def add_node(self, obj: Json) -> Json: ...

    def add_daemonset(self, obj: Json) -> Json: ...

    def pods(self) -> list[Json]: ...

    def nodes(self) -> list[Json]: ...

    def get_node(self, name: str) -> Json | None: ...

    def delete_pod(self, namespace: str, name: str) -> bool: ...

    def delete_node(self, name: str) -> bool: ...

    def update_pod(self, namespace: str, name: str, fn: Callable[[Json], None]) -> Json: ...

    def update_node(self, name: str, fn: Callable[[Json], None]) -> Json: ...


def timestamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def quantities(resources: Resources) -> dict[str, str]:
    """A Resources vector as a Kubernetes resource list."""
    out = {}
    for name, amount in resources.items:
        out[name] = f"{amount}m" if name == CPU else str(amount)
    return out


@dataclass(frozen=True)
class GroupShape:
    """A node group as the world builds its nodes."""

    name: str
    asg_name: str
    instance_type: str
    labels: Mapping[str, str]
    taints: tuple[Json, ...]
    allocatable: Resources
    architecture: str = DEFAULT_ARCHITECTURE  # the kubernetes.io/arch label of its nodes

    @property
    def gpus(self) -> int:
        return self.allocatable.gpus


@dataclass
class Instance:
    instance_id: str
    group: GroupShape
    zone: str
    node_name: str
    launched_at: datetime
    registered_at: datetime | None = None
    gpus_at: datetime | None = None
    terminated_at: datetime | None = None
    busy_at_termination: tuple[str, ...] = ()  # the job pods it still ran when it was terminated


@dataclass
class JobRun:
    job: DemoJob
    submitted_at: datetime
    pods: tuple[str, ...]  # pod names in NAMESPACE
    started_at: datetime | None = None
    finished_at: datetime | None = None
    nodes: tuple[str, ...] = ()
    node_gpus: tuple[int, ...] = ()  # GPUs of the job's pod on each of `nodes` (a launcher has none)
    groups: tuple[str, ...] = ()
    lost: bool = False  # its node was terminated under it

    @property
    def wait_seconds(self) -> float | None:
        return (self.started_at - self.submitted_at).total_seconds() if self.started_at else None


@dataclass(frozen=True)
class DesiredChange:
    """A group's desired capacity as AWS reported it changed between two reads."""

    at: datetime
    group: str
    before: int
    after: int
    removed: int  # instances that left the group between the two reads

    @property
    def set_back(self) -> bool:
        """Lowered by more than the instances that left with a decrement: launches were cancelled."""
        return self.before - self.after > self.removed


@dataclass(frozen=True)
class Happening:
    """Something the world did, for the timeline."""

    at: datetime
    kind: str
    text: str


@dataclass
class StepReport:
    happenings: list[Happening] = field(default_factory=list)
    launch_failures: list[Json] = field(default_factory=list)  # EventBridge events to deliver
    new_pods: list[Json] = field(default_factory=list)  # pods created this step (for admission)

    def add(self, at: datetime, kind: str, text: str) -> None:
        self.happenings.append(Happening(at, kind, text))


@dataclass(frozen=True)
class Sample:
    """The world at one instant, for the plot."""

    at: datetime
    pending_gpus: int
    provisioned: Mapping[str, int]  # group -> GPUs of live instances (booting included)
    busy: Mapping[str, int]  # group -> GPUs of running pods
    # Idle GPUs: booting, empty, fragmented, held by marks, on broken nodes (as the replay counts them).
    idle: tuple[int, int, int, int, int] = (0, 0, 0, 0, 0)


def group_shapes(config: ScalerConfig) -> dict[str, GroupShape]:
    """Each group's node as its kubelet reports it: config allocatable, else from the instance type.

    From the instance type, the kubelet reserves what the planner assumes it does (the configured
    reservation, else the EKS AMI's), so the demo's nodes are the ones the scaler bought.
    """
    need = [g for g in config.node_groups if g.shape is None]
    types: Mapping[str, InstanceType] = {}
    if need:
        types = AsgFleet.from_config(config).instance_types([g.instance_type for g in need], config.region)
    shapes = {}
    for group in config.node_groups:
        known = types.get(group.instance_type)
        architecture = known.architecture if known is not None else DEFAULT_ARCHITECTURE
        if group.shape is not None:
            shape: Resources | None = group.shape
        elif known is not None:
            shape = node_allocatable(known.capacity, config.reservation)
        else:
            shape = None
        if shape is None:
            raise ValueError(f"group {group.name}: no shape for {group.instance_type}")
        if not shape.get(PODS):
            shape = shape + Resources.of({PODS: DEFAULT_MAX_PODS})
        shapes[group.name] = _shape(group, shape, architecture)
    return shapes


def _shape(group: NodeGroupConfig, allocatable: Resources, architecture: str) -> GroupShape:
    taints = tuple({"key": t.key, "value": t.value, "effect": str(t.effect)} for t in group.taints)
    return GroupShape(
        group.name, group.asg_name, group.instance_type, dict(group.labels), taints, allocatable, architecture
    )


def job_pod(job: DemoJob, name: str, now: datetime, scenario: Scenario, gang_label: str) -> Json:
    """One of the job's pods, as its Job controller creates it (Pending, waiting for the scheduler).
    An MPIJob's launcher asks for CPU only and tolerates no GPU taint, as mpi-operator creates it."""
    labels = {JOB_LABEL: job.name, "app": "batch"}
    if job.gang:
        labels[gang_label] = job.name
    requests = {
        "cpu": str(int(scenario.cpu_per_gpu) * job.gpus),
        "memory": _scale_quantity(scenario.memory_per_gpu, job.gpus),
        GPU: str(job.gpus),
    }
    spec: Json = {
        "restartPolicy": "Never",
        "schedulerName": "default-scheduler",
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                "resources": {"requests": requests, "limits": {GPU: str(job.gpus)}},
            }
        ],
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if job.selector:
        spec["nodeSelector"] = dict(job.selector)
    pod: Json = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels,
            **({"annotations": dict(job.annotations)} if job.annotations else {}),
            "creationTimestamp": timestamp(now),
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": job.name,
                    "uid": f"job-{job.name}",
                    "controller": True,
                }
            ],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }
    return _launcher_pod(pod) if job.launcher and name == job.pod_names[0] else pod


def _launcher_pod(pod: Json) -> Json:
    """A worker pod turned into the job's launcher: 1 CPU and 2Gi, no GPU, no GPU toleration."""
    container = pod["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "1", "memory": "2Gi"}}
    pod["spec"]["tolerations"] = []
    pod["metadata"]["labels"]["training.kubeflow.org/job-role"] = "launcher"
    return pod


class World:
    """The simulated cluster and EC2 around the scaler; `step(now)` advances it."""

    def __init__(
        self, kube: KubeApi, config: ScalerConfig, scenario: Scenario, scoring: Scoring = DEFAULT_SCORING
    ) -> None:
        self._kube = kube
        self._config = config
        self._scenario = scenario
        self._timings = scenario.timings
        self._caps = dict(scenario.timings.capacity)
        self._shapes = group_shapes(config)
        self._by_asg = {shape.asg_name: shape for shape in self._shapes.values()}
        self._autoscaling = clients.client("autoscaling", config.region)
        self._ec2 = clients.client("ec2", config.region)
        self.instances: dict[str, Instance] = {}
        self.jobs: dict[str, JobRun] = {}
        self.desired: dict[str, int] = {name: 0 for name in self._shapes}
        self.desired_changes: list[DesiredChange] = []
        self.peak_instances: dict[str, int] = {name: 0 for name in self._shapes}
        self.launch_failures_emitted: dict[str, int] = {}
        self._last_failure_event: dict[str, datetime] = {}
        self._gang_label = config.policy.gang_label
        self.scoring = scoring

    # ------------------------------------------------------------------ the workload

    def submit(self, job: DemoJob, now: datetime, report: StepReport) -> None:
        """Create the job's pods (as a Job controller would); they wait for the scheduler."""
        names = job.pod_names
        self.jobs[job.name] = JobRun(job, now, names)
        for name in names:
            pod = self._job_pod(job, name, now)
            self._kube.add_pod(pod)
            report.new_pods.append(pod)

    def _job_pod(self, job: DemoJob, name: str, now: datetime) -> Json:
        return job_pod(job, name, now, self._scenario, self._gang_label)

    def pod_template(self, job: DemoJob, name: str, now: datetime) -> Json:
        """A core/v1 PodTemplate of the job's pods (what a queue puts in a ProvisioningRequest)."""
        pod = self._job_pod(job, job.name, now)
        meta = pod["metadata"]
        return {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "template": {"metadata": {"labels": meta["labels"]}, "spec": pod["spec"]},
        }

    # ------------------------------------------------------------------ one step

    def step(self, now: datetime, report: StepReport) -> None:
        """Advance the world to `now` (see the module docstring for the order)."""
        asgs = self.observe(now, report)
        self._boot(now, report)
        self._finish_jobs(now, report)
        self._schedule(now, report)
        self._launch_failures(now, asgs, report)

    def observe(self, now: datetime, report: StepReport) -> dict[str, Json]:
        """Read the groups: new instances start booting, vanished ones were terminated. By ASG name."""
        names = sorted(self._by_asg)
        groups = self._autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=names)[
            "AutoScalingGroups"
        ]
        asgs = {g["AutoScalingGroupName"]: g for g in groups}
        live: dict[str, tuple[GroupShape, Json]] = {}
        for asg in asgs.values():
            shape = self._by_asg[asg["AutoScalingGroupName"]]
            for item in asg.get("Instances") or ():
                if item.get("LifecycleState") in LIVE_LIFECYCLE_STATES:
                    live[item["InstanceId"]] = (shape, item)
        new = [iid for iid in live if iid not in self.instances]
        if new:
            names_by_id = _private_dns_names(self._ec2, new)
            launched: dict[str, list[str]] = {}
            for iid in new:  # in the ASGs' launch order: moto's instance ids are random
                shape, item = live[iid]
                zone = str(item.get("AvailabilityZone") or "")
                self.instances[iid] = Instance(iid, shape, zone, names_by_id.get(iid) or iid, now)
                launched.setdefault(shape.name, []).append(iid)
            for group, ids in launched.items():
                report.add(now, "ec2", f"{group}: {len(ids)} instance(s) launched, booting: {_names(ids)}")
        removed: Counter[str] = Counter()
        for instance in self.instances.values():
            if instance.terminated_at is None and instance.instance_id not in live:
                self._terminated(instance, now, report)
                removed[instance.group.name] += 1
        for asg in asgs.values():
            name = self._by_asg[asg["AutoScalingGroupName"]].name
            desired = int(asg["DesiredCapacity"])
            if desired != self.desired[name]:
                self.desired_changes.append(
                    DesiredChange(now, name, self.desired[name], desired, removed[name])
                )
                self.desired[name] = desired
            running = sum(1 for shape, _ in live.values() if shape.name == name)
            self.peak_instances[name] = max(self.peak_instances[name], running)
        return asgs

    def _terminated(self, instance: Instance, now: datetime, report: StepReport) -> None:
        instance.terminated_at = now
        if instance.registered_at is None:
            report.add(
                now, "ec2", f"{instance.group.name}: instance {instance.instance_id} ended before booting"
            )
            return
        name = instance.node_name
        busy = [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            for p in self._pods_on(name)
            if _counts_for_busy(p, now)
        ]
        instance.busy_at_termination = tuple(busy)
        for pod in self._pods_on(name):
            meta = pod["metadata"]
            if _counts_for_busy(pod, now):
                self._fail_lost_pod(meta["namespace"], meta["name"], now)
            else:
                self._kube.delete_pod(meta["namespace"], meta["name"])  # DaemonSet pods go with the node
        node_left = self._kube.delete_node(name)
        how = "BUSY, its jobs were lost" if busy else "idle"
        cleanup = " (the world removed its Node)" if node_left else ""
        report.add(now, "ec2", f"{instance.group.name}: {name} terminated while {how}{cleanup}")

    def _fail_lost_pod(self, namespace: str, name: str, now: datetime) -> None:
        def fail(pod: Json) -> None:
            pod["status"]["phase"] = "Failed"
            pod["status"]["reason"] = "NodeLost"

        self._kube.update_pod(namespace, name, fail)
        for run in self.jobs.values():
            if name in run.pods and run.finished_at is None:
                run.finished_at = now
                run.lost = True

    def _boot(self, now: datetime, report: StepReport) -> None:
        model = BootModel(self._timings.boot_seconds, self._timings.gpu_delay_seconds)
        registered: dict[str, list[str]] = {}
        advertised: dict[str, list[str]] = {}
        for instance in self.instances.values():
            if instance.terminated_at is not None:
                continue
            if instance.registered_at is None:
                if model.registered(instance.launched_at, now):
                    self._register(instance, now)
                    registered.setdefault(instance.group.name, []).append(instance.node_name)
                continue
            if instance.gpus_at is None and model.advertised(instance.registered_at, now):
                self._advertise_gpus(instance, now)
                advertised.setdefault(instance.group.name, []).append(instance.node_name)
        for group, names in registered.items():
            later = ", GPUs not yet advertised" if self._shapes[group].gpus else ""
            text = f"{group}: {len(names)} node(s) registered, Ready{later}: {_names(names)}"
            report.add(now, "kubelet", text)
        for group, names in advertised.items():
            gpus = self._shapes[group].gpus
            if not gpus:
                continue  # a CPU group: no device plugin to wait for
            report.add(now, "kubelet", f"{group}: device plugin advertises {gpus} GPUs on {_names(names)}")

    def _register(self, instance: Instance, now: datetime) -> None:
        shape = instance.group
        booting = Resources.of({k: v for k, v in shape.allocatable.items if k != GPU})
        labels = {
            **shape.labels,
            "kubernetes.io/hostname": instance.node_name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": shape.architecture,
            "node.kubernetes.io/instance-type": shape.instance_type,
            "topology.kubernetes.io/region": self._config.region,
            "topology.kubernetes.io/zone": instance.zone,
        }
        at = timestamp(now)
        self._kube.add_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": instance.node_name, "labels": labels, "creationTimestamp": at},
                "spec": {
                    "providerID": f"aws:///{instance.zone}/{instance.instance_id}",
                    "taints": [dict(t) for t in shape.taints],
                },
                "status": {
                    "capacity": quantities(booting),
                    "allocatable": quantities(booting),
                    "conditions": [
                        {
                            "type": "Ready",
                            "status": "True",
                            "reason": "KubeletReady",
                            "message": "kubelet is posting ready status",
                            "lastHeartbeatTime": at,
                            "lastTransitionTime": at,
                        }
                    ],
                    "nodeInfo": {"kubeletVersion": "v1.34.1-eks", "architecture": "amd64"},
                },
            }
        )
        self._kube.add_pod(_device_plugin_pod(instance.node_name, at))
        instance.registered_at = now

    def leave_nodes(self, now: datetime) -> list[str]:
        """For `--hold`: one Ready node per group, running one job pod, so the documented `kubectl
        cordon` and `drain` have something to act on (not instances: no function runs while held)."""
        names = []
        self._kube.add_daemonset(_device_plugin_daemonset(timestamp(now)))
        for index, shape in enumerate(self._shapes.values()):
            zone = f"{self._config.region}a"
            instance = Instance(f"i-0hold{index:012d}", shape, zone, f"hold-{shape.name}-0", now)
            self._register(instance, now)
            self._advertise_gpus(instance, now)
            self._kube.add_pod(_held_job_pod(instance.node_name, shape, timestamp(now)))
            names.append(instance.node_name)
        return names

    def _advertise_gpus(self, instance: Instance, now: datetime) -> None:
        amounts = quantities(instance.group.allocatable)

        def advertise(node: Json) -> None:
            node["status"]["capacity"] = dict(amounts)
            node["status"]["allocatable"] = dict(amounts)

        if self._kube.get_node(instance.node_name) is not None:
            self._kube.update_node(instance.node_name, advertise)
        instance.gpus_at = now

    def _finish_jobs(self, now: datetime, report: StepReport) -> None:
        done = []
        for run in self.jobs.values():
            if run.started_at is None or run.finished_at is not None:
                continue
            if not job_done(run.started_at, run.job.duration, now):
                continue
            for name in run.pods:
                self._kube.update_pod(NAMESPACE, name, _succeed(now))
            run.finished_at = now
            done.append(run.job.name)
        if done:
            report.add(now, "jobs", f"{len(done)} job(s) finished: {_names(done)}")

    # ------------------------------------------------------------------ the scheduler

    def _schedule(self, now: datetime, report: StepReport) -> None:
        """Bind pending pods, oldest unit first (a gang is one unit); mark the rest Unschedulable."""
        nodes = sorted(
            (node_from_json(n) for n in self._kube.nodes()), key=lambda n: (n.created_at or now, n.name)
        )
        free = {node.name: node.allocatable for node in nodes}
        units: dict[str, list[Pod]] = {}
        for pod in (pod_from_json(obj) for obj in self._kube.pods()):
            if pod.is_terminal:
                continue
            if pod.node_name:
                if pod.node_name in free:
                    free[pod.node_name] = free[pod.node_name] - pod.requests
                continue
            units.setdefault(pod.labels.get(self._gang_label) or pod.key, []).append(pod)
        scheduler = _scheduler(self.scoring, [n for n in nodes if n.ready], free, units.values(), now)
        by_name = {node.name: node for node in nodes}
        started: list[JobRun] = []
        for pods in sorted(units.values(), key=lambda unit: min((p.created_at or now, p.key) for p in unit)):
            slots = scheduler.place(
                [PodRequest(p.scheduling, _vector(p.requests, scheduler.dims)) for p in pods]
            )
            placement = None if slots is None else [by_name[slot.name] for slot in slots]
            if placement is None:
                for pod in pods:
                    if not pod.unschedulable:
                        self._kube.update_pod(pod.namespace, pod.name, _unschedulable(len(nodes), now))
                continue
            for pod, node in zip(pods, placement, strict=True):
                free[node.name] = free[node.name] - pod.requests
                self._kube.update_pod(pod.namespace, pod.name, _bind(node.name, now))
            run = self.jobs.get(pods[0].labels.get(JOB_LABEL, ""))
            if run is not None and run.started_at is None:
                run.started_at = now
                run.nodes = tuple(node.name for node in placement)
                run.node_gpus = tuple(pod.requests.gpus for pod in pods)
                run.groups = tuple(sorted({self.group_of_node_name(node.name) or "?" for node in placement}))
                started.append(run)
        if started:
            waits = sorted(int(r.wait_seconds or 0) for r in started)
            by_group: dict[str, list[str]] = {}
            for run in started:
                by_group.setdefault("+".join(run.groups), []).append(run.job.name)
            where = "; ".join(f"on {group}: {_names(names)}" for group, names in sorted(by_group.items()))
            report.add(now, "scheduler", f"{len(started)} job(s) started (waited {_span(waits)}) {where}")

    def group_of_node_name(self, node_name: str) -> str | None:
        for instance in self.instances.values():
            if instance.node_name == node_name:
                return instance.group.name
        return None

    def _pods_on(self, node_name: str) -> list[Json]:
        return [p for p in self._kube.pods() if (p.get("spec") or {}).get("nodeName") == node_name]

    # ------------------------------------------------------------------ EC2 capacity

    def _launch_failures(self, now: datetime, asgs: Mapping[str, Json], report: StepReport) -> None:
        retry = timedelta(seconds=self._timings.launch_retry_seconds)
        for asg_name, cap in sorted(self._caps.items()):
            asg = asgs.get(asg_name)
            if asg is None:
                continue
            running = sum(
                1 for i in asg.get("Instances") or () if i.get("LifecycleState") in LIVE_LIFECYCLE_STATES
            )
            desired = int(asg["DesiredCapacity"])
            if desired <= running:
                continue
            last = self._last_failure_event.get(asg_name)
            if last is not None and now - last < retry:
                continue
            self._last_failure_event[asg_name] = now
            shape = self._by_asg[asg_name]
            zone = (asg.get("AvailabilityZones") or ["us-east-1a"])[0]
            report.launch_failures.append(
                launch_unsuccessful(
                    asg_name=asg_name,
                    region=self._config.region,
                    now=now,
                    availability_zone=zone,
                    instance_type=shape.instance_type,
                    desired=desired,
                    running=running,
                )
            )
            self.launch_failures_emitted[shape.name] = self.launch_failures_emitted.get(shape.name, 0) + 1
            report.add(
                now,
                "ec2",
                f"{shape.name}: InsufficientInstanceCapacity: {running} of {desired} instances running "
                f"(EC2 has {cap}); launch unsuccessful",
            )

    # ------------------------------------------------------------------ observation

    def sample(self, now: datetime) -> Sample:
        provisioned = {name: 0 for name in self._shapes}
        for instance in self.instances.values():
            if instance.terminated_at is None:
                provisioned[instance.group.name] += instance.group.gpus
        node_group = {i.node_name: i.group.name for i in self.instances.values() if i.terminated_at is None}
        busy = {name: 0 for name in self._shapes}
        on_node: Counter[str] = Counter()
        pending = 0
        for run in self.jobs.values():
            if run.finished_at is not None:
                continue
            if run.started_at is None:
                pending += run.job.total_gpus
                continue
            for node, gpus in zip(run.nodes, run.node_gpus, strict=True):
                group = node_group.get(node)
                if group is not None:
                    busy[group] += gpus
                    on_node[node] += gpus
        return Sample(now, pending, provisioned, busy, self._idle(on_node))

    def _idle(self, on_node: Mapping[str, int]) -> tuple[int, int, int, int, int]:
        """Idle GPUs by cause, as the replay counts them (entities.BOOTING ... BROKEN)."""
        nodes = self._kube.nodes()
        marked = {
            n["metadata"]["name"]
            for n in nodes
            if any(t.get("key") == ATTRITION_TAINT_KEY for t in (n.get("spec") or {}).get("taints") or ())
        }
        broken = {n["metadata"]["name"] for n in nodes if _reports_gpu_fault(n)}
        idle = [0, 0, 0, 0, 0]
        for instance in self.instances.values():
            if instance.terminated_at is not None:
                continue
            gpus = instance.group.gpus
            used = on_node.get(instance.node_name, 0)
            if instance.gpus_at is None:
                idle[0] += gpus
            elif instance.node_name in broken:
                idle[4] += gpus - used
            elif not used:
                idle[1] += gpus
            else:
                idle[3 if instance.node_name in marked else 2] += gpus - used
        booting, empty, fragmented, held, on_broken = idle
        return (booting, empty, fragmented, held, on_broken)

    @property
    def group_names(self) -> tuple[str, ...]:
        return tuple(self._shapes)

    def all_done(self) -> bool:
        return all(run.finished_at is not None for run in self.jobs.values())

    def drained(self) -> bool:
        """No instance left and no desired capacity: every node was given back."""
        live = any(i.terminated_at is None for i in self.instances.values())
        return not live and not any(self.desired.values())


def _vector(resources: Resources, dims: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(resources.get(name) for name in dims)


def _scheduler(
    scoring: Scoring,
    nodes: Sequence[Node],
    free: Mapping[str, Resources],
    units: Iterable[list[Pod]],
    now: datetime,
) -> Scheduler:
    """The simulated scheduler over the Ready nodes as they are now (their free room after bound pods)."""
    names = {PODS} | {n for node in nodes for n, _ in node.allocatable.items}
    names |= {n for unit in units for pod in unit for n, _ in pod.requests.items}
    scheduler = Scheduler(tuple(sorted(names)), scoring)
    for node in nodes:
        created = int((node.created_at or now).timestamp())
        scheduler.add(
            Slot(
                node.name,
                (created, node.name),
                NodeClass(node.labels, node.taints, node.unschedulable),
                _vector(node.allocatable, scheduler.dims),
                list(_vector(free[node.name], scheduler.dims)),
            )
        )
    return scheduler


def _reports_gpu_fault(node: Json) -> bool:
    """The node's EKS monitoring agent reports a GPU fault (AcceleratedHardwareReady=False, faults.py)."""
    conditions = (node.get("status") or {}).get("conditions") or ()
    fault = MONITORING_AGENT_CONDITIONS[0]
    return any(c.get("type") == fault and c.get("status") == "False" for c in conditions)


def _counts_for_busy(pod: Json, now: datetime) -> bool:
    """A pod that keeps its node busy, by the scaler's own rule (no priority cutoff: any job lost counts)."""
    return pod_from_json(copy.deepcopy(pod)).keeps_node_busy(None, now)


def _bind(node_name: str, now: datetime) -> Callable[[Json], None]:
    at = timestamp(now)

    def bind(pod: Json) -> None:
        pod["spec"]["nodeName"] = node_name
        pod["status"] = {
            "phase": "Running",
            "startTime": at,
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": at},
                {"type": "Ready", "status": "True", "lastTransitionTime": at},
            ],
        }

    return bind


def _unschedulable(node_count: int, now: datetime) -> Callable[[Json], None]:
    message = f"0/{node_count} nodes are available: no node with room, matching labels and tolerated taints."

    def mark(pod: Json) -> None:
        status = pod.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or () if c.get("type") != "PodScheduled"]
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastProbeTime": None,
                "lastTransitionTime": timestamp(now),
            }
        )
        status["conditions"] = conditions

    return mark


def _succeed(now: datetime) -> Callable[[Json], None]:
    at = timestamp(now)

    def succeed(pod: Json) -> None:
        status = pod.setdefault("status", {})
        status["phase"] = "Succeeded"
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": at},
        ]
        status["containerStatuses"] = [
            {"name": "main", "ready": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]

    return succeed


def _device_plugin_pod(node_name: str, at: str) -> Json:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{DEVICE_PLUGIN}-{node_name.split('.')[0]}",
            "namespace": SYSTEM_NAMESPACE,
            "labels": {"app": DEVICE_PLUGIN},
            "creationTimestamp": at,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": DEVICE_PLUGIN,
                    "uid": "ds",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node_name,
            "containers": [
                {
                    "name": "plugin",
                    "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                    "resources": {"requests": DAEMON_REQUESTS},
                }
            ],
            "tolerations": [{"operator": "Exists"}],
        },
        "status": {"phase": "Running", "startTime": at},
    }


def _device_plugin_daemonset(at: str) -> Json:
    """The DaemonSet of the device-plugin pods (kube-system), as `kubectl get ds -A -o json` shows it.
    Served only once the demo holds, for `kubectl drain --ignore-daemonsets` (which reads it): while
    the demo runs, the functions would count its pods' requests in every template."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DEVICE_PLUGIN, "namespace": SYSTEM_NAMESPACE, "creationTimestamp": at},
        "spec": {
            "selector": {"matchLabels": {"app": DEVICE_PLUGIN}},
            "template": {
                "metadata": {"labels": {"app": DEVICE_PLUGIN}},
                "spec": {
                    "containers": [
                        {
                            "name": "plugin",
                            "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                            "resources": {"requests": DAEMON_REQUESTS},
                        }
                    ],
                    "tolerations": [{"operator": "Exists"}],
                },
            },
        },
        "status": {},
    }


def _held_job_pod(node_name: str, shape: GroupShape, at: str) -> Json:
    """A running one-GPU job's pod on a node left for `--hold` (what `kubectl drain` evicts): owned by
    its Job, as drain wants (it refuses a pod no controller re-creates unless --force)."""
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": f"{node_name}-job", "uid": f"job-{node_name}"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{node_name}-job",
            "namespace": NAMESPACE,
            "creationTimestamp": at,
            "ownerReferences": [{**owner, "controller": True}],
        },
        "spec": {
            "nodeName": node_name,
            "containers": [{"name": "train", "image": "busybox", "resources": {"requests": {GPU: "1"}}}],
            "tolerations": [{"key": t["key"], "operator": "Exists"} for t in shape.taints],
        },
        "status": {"phase": "Running", "startTime": at},
    }


def _scale_quantity(per_gpu: str, gpus: int) -> str:
    number = "".join(ch for ch in per_gpu if ch.isdigit())
    unit = per_gpu[len(number) :]
    return f"{int(number) * gpus}{unit}"


def _names(names: Iterable[str], limit: int = 3) -> str:
    items = list(names)
    shown = ", ".join(items[:limit])
    return shown + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def _span(waits: Sequence[int]) -> str:
    low, high = _clock(waits[0]), _clock(waits[-1])
    return low if low == high else f"{low}..{high}"


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


def _private_dns_names(ec2: Any, instance_ids: Sequence[str]) -> dict[str, str]:
    """Instance id -> PrivateDnsName (the node name EKS gives it), from DescribeInstances."""
    out: dict[str, str] = {}
    for reservation in ec2.describe_instances(InstanceIds=list(instance_ids))["Reservations"]:
        for item in reservation.get("Instances") or ():
            dns = str(item.get("PrivateDnsName") or "")
            if dns:
                out[item["InstanceId"]] = dns
    return out
