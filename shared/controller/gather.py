"""Gather: every read of a reconcile, concurrently, into one frozen picture (any failure raises)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from shared.config import ScalerConfig
from shared.constants import TAG_CLUSTER
from shared.domain.dra import NO_DRA, DraObjects
from shared.domain.model import (
    ANNOTATION_CORDONED_AT,
    AsgState,
    DaemonSet,
    InstanceStatus,
    InstanceType,
    LaunchTemplateVersions,
    Node,
    Pod,
    ScalerState,
    Snapshot,
)
from shared.domain.operations import DrainIntent, ScalingFailure
from shared.domain.provisioning import PodGroup, PodTemplate, ProvisioningRequest
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.ports import Cluster, Fleet, StateStore

GATHER_THREADS = 20  # reads of one run in flight at once (17 listings and loads, plus one per group)


@dataclass(frozen=True)
class Gathered:
    """What one reconcile read, before planning."""

    pods: tuple[Pod, ...]
    nodes: tuple[Node, ...]
    asgs: Mapping[str, AsgState]  # by ASG name
    state: ScalerState
    intents: tuple[DrainIntent, ...]
    failures: Mapping[str, tuple[ScalingFailure, ...]]  # by group name
    instance_types: Mapping[str, InstanceType]  # by name, for groups without config allocatable
    daemonsets: tuple[DaemonSet, ...]
    pvcs: tuple[PersistentVolumeClaim, ...]
    pvs: tuple[PersistentVolume, ...]
    storage_classes: tuple[StorageClass, ...]
    namespaces: Mapping[str, Mapping[str, str]]  # name -> labels
    pod_groups: tuple[PodGroup, ...] = ()  # coscheduling and Volcano PodGroups (gang sizes)
    provisioning_requests: tuple[ProvisioningRequest, ...] = ()  # () without the CRD
    pod_templates: tuple[PodTemplate, ...] = ()
    dra: DraObjects = NO_DRA  # resource.k8s.io/v1 objects; empty without the API
    instance_statuses: Mapping[str, InstanceStatus] | None = None  # EC2 status checks, by instance id
    launch_templates: Mapping[str, LaunchTemplateVersions] = field(default_factory=dict)  # by id
    foreign: tuple[str, ...] = ()  # configured ASGs without the cluster's tag: left alone (ours)

    @property
    def draining(self) -> frozenset[str]:
        """Nodes of stored drain intents: the drains own them, the planner keeps its hands off."""
        return frozenset(n for intent in self.intents for n in intent.nodes)

    def snapshot(self, state: ScalerState) -> Snapshot:
        """The planner's input; nodes under a drain look cordoned by someone else (hands off)."""
        draining = self.draining
        nodes = tuple(_as_foreign_cordon(n) if n.name in draining else n for n in self.nodes)
        return Snapshot(
            self.pods,
            nodes,
            self.asgs,
            state,
            instance_types=self.instance_types,
            daemonsets=self.daemonsets,
            pvcs=self.pvcs,
            pvs=self.pvs,
            storage_classes=self.storage_classes,
            namespaces=self.namespaces,
            pod_groups=self.pod_groups,
            provisioning_requests=self.provisioning_requests,
            pod_templates=self.pod_templates,
            dra=self.dra,
            instance_statuses=self.instance_statuses,
            launch_templates=self.launch_templates,
        )


def _as_foreign_cordon(node: Node) -> Node:
    annotations = {k: v for k, v in node.annotations.items() if k != ANNOTATION_CORDONED_AT}
    return replace(node, unschedulable=True, annotations=annotations)


def gather(
    config: ScalerConfig, cluster: Cluster, fleet: Fleet, state: StateStore, now: datetime
) -> Gathered:
    """Every read of a run, concurrently (each is a network round trip); any failure raises."""
    # Backoffs end at most backoff_max after their failure: older failures cannot matter any more.
    since = now - timedelta(seconds=config.policy.backoff_max_seconds)
    with ThreadPoolExecutor(max_workers=GATHER_THREADS, thread_name_prefix="gather") as pool:
        pods = pool.submit(cluster.list_pods)
        nodes = pool.submit(cluster.list_nodes)
        daemonsets = pool.submit(cluster.list_daemonsets)
        pvcs = pool.submit(cluster.list_persistent_volume_claims)
        pvs = pool.submit(cluster.list_persistent_volumes)
        storage_classes = pool.submit(cluster.list_storage_classes)
        namespaces = pool.submit(cluster.list_namespaces)
        pod_groups = pool.submit(cluster.list_pod_groups)
        provisioning_requests = pool.submit(cluster.list_provisioning_requests)
        pod_templates = pool.submit(cluster.list_pod_templates)
        slices = pool.submit(cluster.list_resource_slices)
        device_classes = pool.submit(cluster.list_device_classes)
        claims = pool.submit(cluster.list_resource_claims)
        claim_templates = pool.submit(cluster.list_resource_claim_templates)
        stored = pool.submit(state.load)
        intents = pool.submit(state.drain_intents)
        instance_types = pool.submit(_instance_types, config, fleet)
        asgs, foreign = ours(
            fleet.describe_groups([g.asg_name for g in config.node_groups]), config.cluster_name
        )
        failures = {
            g.name: pool.submit(fleet.failed_activities, asgs[g.asg_name], since)
            for g in config.node_groups
            if g.asg_name in asgs
        }
        lifecycle = pool.submit(_lifecycle, fleet, asgs)
        return Gathered(
            pods=pods.result(),
            nodes=nodes.result(),
            asgs=asgs,
            state=stored.result(),
            intents=intents.result(),
            failures={name: future.result() for name, future in failures.items()},
            instance_types=instance_types.result(),
            daemonsets=daemonsets.result(),
            pvcs=pvcs.result(),
            pvs=pvs.result(),
            storage_classes=storage_classes.result(),
            namespaces=namespaces.result(),
            pod_groups=pod_groups.result(),
            provisioning_requests=provisioning_requests.result(),
            pod_templates=pod_templates.result(),
            dra=DraObjects(
                slices.result(), device_classes.result(), claims.result(), claim_templates.result()
            ),
            instance_statuses=lifecycle.result()[0],
            launch_templates=lifecycle.result()[1],
            foreign=foreign,
        )


def ours(asgs: Mapping[str, AsgState], cluster: str) -> tuple[dict[str, AsgState], tuple[str, ...]]:
    """The ASGs tagged TAG_CLUSTER=<cluster> (the ones IAM lets this scaler change), and the names of
    the others. A group whose ASG is not tagged is left alone whole: none of its nodes is cordoned,
    marked or drained, since its instances could never be terminated (IAM would refuse) and the
    cordons would stay."""
    kept = {name: asg for name, asg in asgs.items() if asg.tags.get(TAG_CLUSTER) == cluster}
    return kept, tuple(sorted(set(asgs) - set(kept)))


def foreign_reason(asg_name: str, cluster: str) -> str:
    """Why a configured group whose ASG lacks the cluster's tag is left alone."""
    return (
        f"Auto Scaling group {asg_name} is not tagged {TAG_CLUSTER}={cluster}: the scaler leaves its"
        " group alone (IAM refuses changes to an ASG without the tag; see docs/deploy.md)"
    )


def _lifecycle(
    fleet: Fleet, asgs: Mapping[str, AsgState]
) -> tuple[dict[str, InstanceStatus], dict[str, LaunchTemplateVersions]]:
    """EC2 status checks and events of the groups' live instances, and their launch templates' current
    versions (drift), per region."""
    by_region: dict[str, tuple[set[str], set[str]]] = {}
    for asg in asgs.values():
        instances, templates = by_region.setdefault(asg.region, (set(), set()))
        instances.update(i.instance_id for i in asg.live_instances)
        refs = [
            asg.launch_template,
            *asg.type_templates.values(),
            *(i.launch_template for i in asg.live_instances),
        ]
        templates.update(ref.template_id for ref in refs if ref is not None)
    statuses: dict[str, InstanceStatus] = {}
    versions: dict[str, LaunchTemplateVersions] = {}
    for region, (instances, templates) in sorted(by_region.items()):
        if instances:
            statuses.update(fleet.instance_statuses(sorted(instances), region))
        if templates:
            versions.update(fleet.launch_templates(sorted(templates), region))
    return statuses, versions


def _instance_types(config: ScalerConfig, fleet: Fleet) -> dict[str, InstanceType]:
    """EC2's data on the groups' instance types: the architecture, accelerators, EFA and instance store
    of their nodes, and the shape where the config gives no allocatable."""
    by_region: dict[str, set[str]] = {}
    for group in config.node_groups:
        if group.instance_type:
            by_region.setdefault(config.region_of(group), set()).add(group.instance_type)
    found: dict[str, InstanceType] = {}
    for region, types in sorted(by_region.items()):
        found.update(fleet.instance_types(sorted(types), region))
    return found
