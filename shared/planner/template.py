"""Template nodes: the node a scale-up of a group would create, modelled as a full Node, like
cluster-autoscaler's template NodeInfo (simulator/node_info_utils.go: a real node of the group,
sanitized, plus its DaemonSet pods; cloudprovider/aws/aws_manager.go buildNodeFromTemplate for
groups with no node yet).

- allocatable, per resource: the config's `allocatable` for what it names; else the smallest of what
  the group's registered nodes advertise (Ready, past their startup taints, GPUs advertised if they
  should have any: `gpu_not_advertised`; devices the device plugin withdrew as unhealthy counted
  back from capacity: `with_devices_restored`), extended resources included; else cluster-autoscaler's
  `node-template/resources/*` ASG tags; else the instance type (GPUs, Neuron, EFA where the EFA device
  plugin runs, NVMe instance store where the AMI mounts it) minus the kubelet reservation of the
  EKS-optimized AMI (shared.planner.eks), or minus the config's explicit `node_reservation`;
- labels: well-known labels (buildGenericLabels: kubernetes.io/arch of the instance type, os,
  instance type, region, zone), the labels every registered node of the group shares, cluster-
  autoscaler's `k8s.io/cluster-autoscaler/node-template/label/*` ASG tags, the config's labels. No
  accelerator label is invented: neither the EKS AMI nor buildGenericLabels sets one;
- taints: the config's, the `node-template/taint/*` tags', those every registered node shares,
  minus startup taints (they go away once the node's agents are up);
- DaemonSet pods whose selector, affinity and tolerations admit the node take their share first; on a
  group that launches in several zones, those any of its zones admits (a DaemonSet pinned to one zone
  runs on the nodes that land there), the room left being the smallest of any zone's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from shared.config import PolicyConfig, ScalerConfig
from shared.domain.constraints import HOSTNAME, REGION, ZONE
from shared.domain.model import AsgState, DaemonSet, InstanceType, Node, Taint, TaintEffect
from shared.domain.quantity import quantity
from shared.domain.resources import EMPTY, EPHEMERAL_STORAGE, GPU, PODS, Resources
from shared.planner.eks import KUBELET_DEFAULT_MAX_PODS, instance_store_capacity, node_allocatable
from shared.planner.filters.node_ports import port_key
from shared.planner.simulation import static_reason
from shared.planner.zones import NO_ZONE_IDS, launch_labels, unknown_zone_id

CA_TEMPLATE = "k8s.io/cluster-autoscaler/node-template/"
# cluster-autoscaler's taint prefixes (utils/taints/taints.go): startup taints are expected to go
# away once the node is up; ignore-taint is their deprecated spelling.
STARTUP_TAINT_PREFIXES = (
    "startup-taint.cluster-autoscaler.kubernetes.io/",
    "ignore-taint.cluster-autoscaler.kubernetes.io/",
)
# Condition taints the node lifecycle controller manages, the cordon taint and autoscalers'
# deletion markers: never part of what a new node looks like.
_TRANSIENT_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/memory-pressure",
        "node.kubernetes.io/disk-pressure",
        "node.kubernetes.io/pid-pressure",
        "node.kubernetes.io/network-unavailable",
        "ToBeDeletedByClusterAutoscaler",
        "DeletionCandidateOfClusterAutoscaler",
        "karpenter.sh/disrupted",
    }
)
# The prefix of the scaler's own taints (attrition, rotation, repair): each says something of one
# node now (marked to empty, due for rotation, broken), never of what the group launches. A group
# whose only node is broken must not have new nodes judged as if they were broken too.
SCALER_TAINT_PREFIX = "backlog-scaler/"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# Per-node or per-zone labels a registered node carries that a new node need not share.
_PER_NODE_LABELS = frozenset({HOSTNAME, "alpha.eksctl.io/instance-id", "node.kubernetes.io/instance-id"})
# Labels that name the instance type: not shared by the nodes of a group launching several types.
_TYPE_LABELS = frozenset({INSTANCE_TYPE, "beta.kubernetes.io/instance-type"})
_ZONE_LABELS = frozenset(
    {
        ZONE,
        "failure-domain.beta.kubernetes.io/zone",
        "topology.ebs.csi.aws.com/zone",
        "topology.k8s.aws/zone-id",
    }
)
# An instance type says nothing about the root volume: unless a node or a tag tells, local
# storage is not what limits placement.
UNKNOWN_EPHEMERAL_STORAGE = 2**50
# EFA interfaces as the EFA device plugin advertises them, and that plugin's image and chart name
# (aws/eks-charts stable/aws-efa-k8s-device-plugin; image <registry>/eks/aws-efa-k8s-device-plugin).
EFA = "vpc.amazonaws.com/efa"
EFA_DEVICE_PLUGIN = "aws-efa-k8s-device-plugin"


# Labels that say a node has GPUs before the device plugin advertises them: cluster-autoscaler's AWS
# GPULabel (cloudprovider/aws, `k8s.amazonaws.com/accelerator`) and NVIDIA GPU feature discovery's.
GPU_LABELS = ("k8s.amazonaws.com/accelerator", "nvidia.com/gpu.present", "nvidia.com/gpu.count")


def gpu_not_advertised(node: Node, known: Mapping[str, InstanceType], group_type: str | None) -> bool:
    """A node that should have GPUs (GPU label, or an instance type with GPUs) but advertises none yet:
    its drivers or device plugin are still coming up. cluster-autoscaler treats a node with the GPU
    label and no nvidia.com/gpu allocatable as not ready (processors/customresources/gpu_processor.go
    FilterOutNodesWithUnreadyResources, gpu.ResourceNvidiaGPU of utils/gpu), so it is never a
    template (nodeinfosprovider/mixed_nodeinfos_processor.go isNodeGoodTemplateCandidate: ready,
    stable, schedulable) and the group's template comes from the cloud provider's instance shape.
    We also read the instance type, for nodes without the label."""
    if node.allocatable.gpus > 0:
        return False
    if any(node.labels.get(key) not in (None, "", "false", "0") for key in GPU_LABELS):
        return True
    shape = known.get(node.labels.get(INSTANCE_TYPE) or group_type or "")
    return shape is not None and shape.capacity.get(GPU) > 0


def with_devices_restored(node: Node) -> Node:
    """A registered node as a template source: the accelerators its device plugin withdrew as
    unhealthy (`Node.lost_devices`) counted back from its capacity. A broken GPU is this machine's
    fault, not the shape a new node of the group comes with; without this, one node with a dropped
    GPU would shrink the group's template (the smallest registered node), and a pod asking for every
    GPU of a node would see no group that fits it, and never get the replacement it waits for.
    cluster-autoscaler likewise builds its template from a sanitized node that is a good template
    candidate (core/utils/utils.go sanitizeNodeInfo, processors/nodeinfosprovider/
    mixed_nodeinfos_processor.go isNodeGoodTemplateCandidate)."""
    lost = node.lost_devices
    if not lost:
        return node
    return replace(node, allocatable=node.allocatable + lost)


def has_startup_taint(taints: tuple[Taint, ...], policy: PolicyConfig) -> bool:
    """Whether any taint is one a node carries only while it starts (configured keys and
    cluster-autoscaler's prefixes). One test over the tuple, no call per taint: it runs for every node
    of every run."""
    keys = policy.startup_taints
    return any(taint.key in keys or taint.key.startswith(STARTUP_TAINT_PREFIXES) for taint in taints)


def is_startup_taint(taint: Taint, policy: PolicyConfig) -> bool:
    """A taint a node carries only while it starts (see has_startup_taint)."""
    return has_startup_taint((taint,), policy)


@dataclass(frozen=True)
class Template:
    """The node a scale-up of one group would create, with the DaemonSet pods that land on it."""

    group: str
    allocatable: Resources | None  # None: the shape is unknown (no config, node or instance data)
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    source: str  # where the allocatable comes from, for reasons
    daemonsets: tuple[DaemonSet, ...] = ()
    overhead: Resources = EMPTY  # what the DaemonSets request
    ports: frozenset[tuple[str, str, int]] = field(default_factory=frozenset)

    @property
    def free(self) -> Resources | None:
        """Room left for pending pods once the DaemonSets run (negative amounts kept: nothing fits)."""
        return None if self.allocatable is None else self.allocatable - self.overhead

    def node_labels(self, index: int) -> dict[str, str]:
        """Labels of the index-th new node: each new node is its own hostname domain."""
        return template_node_labels(self.group, self.labels, index)


def template_node_labels(group: str, labels: Mapping[str, str], index: int) -> dict[str, str]:
    """Labels of a group's index-th new node: each new node is its own hostname domain."""
    return {**labels, HOSTNAME: f"template-{group}-{index}"}


def _shared_labels(nodes: list[Node], single_zone: bool) -> dict[str, str]:
    if not nodes:
        return {}
    # Each distinct label mapping once (a group's nodes often share one; intersecting is idempotent).
    distinct = list({id(node.labels): node.labels for node in nodes}.values())
    shared = dict(distinct[0])
    for labels in distinct[1:]:
        shared = {k: v for k, v in shared.items() if labels.get(k) == v}
    return {
        k: v
        for k, v in shared.items()
        if k not in _PER_NODE_LABELS and (single_zone or k not in _ZONE_LABELS)
    }


def _shared_taints(nodes: list[Node]) -> list[Taint]:
    if not nodes:
        return []
    distinct = list({id(node.taints): node.taints for node in nodes}.values())  # as _shared_labels
    shared = set(distinct[0])
    for taints in distinct[1:]:
        shared &= set(taints)
    return sorted(shared, key=lambda t: (t.key, t.effect))


def _tag_labels_taints_resources(
    tags: Mapping[str, str],
) -> tuple[dict[str, str], list[Taint], dict[str, int]]:
    """cluster-autoscaler's node-template ASG tags (cloudprovider/aws/README.md, "Auto-Discovery")."""
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    resources: dict[str, int] = {}
    effects = {e.value: e for e in TaintEffect}
    for key, value in sorted(tags.items()):
        if not key.startswith(CA_TEMPLATE):
            continue
        kind, _, name = key[len(CA_TEMPLATE) :].partition("/")
        if not name:
            continue
        if kind == "label":
            labels[name] = value
        elif kind == "taint":
            taint_value, _, effect = value.rpartition(":")
            if effect in effects:
                taints.append(Taint(name, taint_value, effects[effect]))
        elif kind == "resources":
            try:
                # As cluster-autoscaler reads the tag (ParseQuantity, no API validation): 1.5 GPUs
                # count as 2, what the scheduler's Value() makes of them.
                resources[name] = quantity(name, value, validated=False)
            except ValueError:
                continue  # a malformed tag is ignored as cluster-autoscaler ignores it
    return labels, taints, resources


def _smallest(nodes: Iterable[Node]) -> Resources | None:
    """Element-wise minimum over nodes that advertise every resource any of them advertises."""
    # Distinct shapes only (the minimum does not depend on how many nodes share one); a group's
    # nodes share a handful, so a run judges each once instead of once per node.
    shapes = list(dict.fromkeys(node.allocatable for node in nodes))
    if not shapes:
        return None
    names = {name for shape in shapes for name, _ in shape.items}
    complete = [s for s in shapes if all(s.get(name) > 0 for name in names)]
    if not complete:
        return None
    smallest = complete[0].as_dict()
    for shape in complete[1:]:
        for name in smallest:
            smallest[name] = min(smallest[name], shape.get(name))
    return Resources.of(smallest)


def _filled(observed: Resources, tag_resources: Mapping[str, int]) -> Resources:
    """A registered node's allocatable, with the node-template resource tags for what it does not
    advertise: what the scheduler sees of real nodes wins, the operator's tag fills the rest."""
    return Resources.of({**tag_resources, **observed.as_dict()})


@dataclass(frozen=True)
class _AwsFacts:
    """What AWS says of a group's new nodes: its instance types' data, its node-template resource
    tags, and whether the EFA device plugin's DaemonSet would run on them."""

    known: Mapping[str, InstanceType]
    tags: Mapping[str, int]
    efa_plugin: bool


def _from_aws(
    config: ScalerConfig, group_name: str, instance_type: InstanceType | None, aws: _AwsFacts
) -> tuple[Resources | None, str]:
    """A new node by AWS's word, as cluster-autoscaler's buildNodeFromTemplate: the instance type's
    capacity, the node-template resource tags over it (extractAllocatableResourcesFromAsg), minus the
    kubelet reservation. Plus what software on the node adds: EFA interfaces when the EFA device
    plugin's DaemonSet runs there, and the NVMe instance store when the AMI puts the kubelet on it
    (the group's `local_storage`). An instance type says nothing about the root volume: without
    either, ephemeral storage is not what limits placement."""
    if instance_type is None and not aws.tags:
        return None, "no allocatable in config, no registered node, no instance type data"
    capacity = (instance_type.capacity if instance_type else EMPTY).as_dict()
    if instance_type is not None:
        local_storage = config.group(group_name).local_storage
        storage = instance_store_capacity(instance_type.nvme_instance_store_gb, local_storage)
        if storage:
            capacity[EPHEMERAL_STORAGE] = storage
        if aws.efa_plugin and instance_type.efa_interfaces:
            capacity[EFA] = instance_type.efa_interfaces
    capacity.update(aws.tags)
    capacity.setdefault(PODS, KUBELET_DEFAULT_MAX_PODS)
    allocatable = node_allocatable(Resources.of(capacity), config.reservation)
    if not allocatable.get(EPHEMERAL_STORAGE):
        allocatable = allocatable + Resources.of({EPHEMERAL_STORAGE: UNKNOWN_EPHEMERAL_STORAGE})
    how = "the configured node_reservation" if config.reservation is not None else "the EKS AMI reservation"
    name = instance_type.name if instance_type else "node-template tags"
    return allocatable, f"{name} minus {how}"


def _type_allocatable(
    config: ScalerConfig, group_name: str, name: str, usable: list[Node], aws: _AwsFacts
) -> tuple[Resources | None, str]:
    """What a new node of one instance type advertises: its registered nodes' smallest, else the type."""
    observed = _smallest(n for n in usable if n.labels.get(INSTANCE_TYPE) == name)
    if observed is not None:
        return _filled(observed, aws.tags), f"the smallest registered {name} node"
    return _from_aws(config, group_name, aws.known.get(name), aws)


def _mixed_allocatable(
    config: ScalerConfig, group_name: str, types: tuple[str, ...], usable: list[Node], aws: _AwsFacts
) -> tuple[Resources | None, str]:
    """A group that launches several types: the element-wise smallest of their shapes, the only
    node any launch is guaranteed to give. Types with no data at all are left out and named."""
    shapes: list[Resources] = []
    unknown: list[str] = []
    for name in types:
        allocatable, _ = _type_allocatable(config, group_name, name, usable, aws)
        if allocatable is None:
            unknown.append(name)
        else:
            shapes.append(allocatable)
    if not shapes:
        return None, f"no registered node and no instance type data for any of {', '.join(types)}"
    names = {name for shape in shapes for name, _ in shape.items}
    smallest = Resources.of({name: min(shape.get(name) for shape in shapes) for name in sorted(names)})
    source = f"the smallest of {', '.join(types)}"
    if unknown:
        source += f" ({', '.join(unknown)}: no data, not counted)"
    return smallest, source


def _discovered(
    config: ScalerConfig,
    group_name: str,
    types: tuple[str, ...],
    usable: list[Node],
    observed: Resources | None,
    aws: _AwsFacts,
) -> tuple[Resources | None, str]:
    """What the registered nodes and AWS say a new node advertises, before the config has its say.
    `observed`: the smallest usable node (`_smallest`, computed once per group and run)."""
    if len(types) > 1:
        return _mixed_allocatable(config, group_name, types, usable, aws)
    if observed is not None:
        return _filled(observed, aws.tags), f"the smallest registered node ({len(usable)} seen)"
    return _from_aws(config, group_name, aws.known.get(types[0]) if types else None, aws)


def _allocatable(
    shape: Resources | None, discovered: Resources | None, source: str, observed: Resources | None
) -> tuple[Resources | None, str]:
    """The config wins for every resource it names; what it is silent on comes from the registered
    nodes and AWS (`discovered`, with `source` saying where from). `observed`: the smallest usable node."""
    if shape is None:
        return discovered, source
    # The scheduler sees what nodes advertise: a config that promises more than a real node of the
    # group has would buy a node per run for a pod no node can hold.
    capped = {
        name: min(value, observed.get(name)) if observed is not None and observed.get(name) else value
        for name, value in shape.items
    }
    how = "config allocatable"
    if Resources.of(capped) != shape:
        how += ", capped by the smallest registered node"
    silent = {name: value for name, value in (discovered or EMPTY).items if name not in capped}
    if not silent:
        return Resources.of(capped), how
    return Resources.of({**silent, **capped}), f"{how}; {', '.join(sorted(silent))} from {source}"


# The last template built for each group, with the inputs it was built from (see build_template).
_LAST_TEMPLATES: dict[str, tuple[tuple[object, ...], Template]] = {}
_LAST_TEMPLATES_MAX = 256  # groups; past it the memo starts over (a bound, never reached in practice)


def _template_sources(
    registered: list[Node], policy: PolicyConfig, known: Mapping[str, InstanceType], group_type: str | None
) -> list[Node]:
    """The registered nodes a template may be read off: Ready, past their startup taints, GPUs
    advertised if they should have any, devices withdrawn as unhealthy counted back. Judged once per
    kind of node (its readiness, taints, labels and allocatable, the objects a group's nodes share)."""
    verdicts: dict[tuple[bool, int, int, int], bool] = {}  # the nodes, so these ids, live all call
    usable: list[Node] = []
    for n in registered:
        kind = (n.ready, id(n.taints), id(n.labels), id(n.allocatable))
        good = verdicts.get(kind)
        if good is None:
            good = verdicts[kind] = (
                n.ready
                and not has_startup_taint(n.taints, policy)
                and not gpu_not_advertised(n, known, group_type)
            )
        if good:
            usable.append(with_devices_restored(n))
    return usable


def _asg_facts(asg: AsgState | None) -> tuple[object, ...] | None:
    """What of the ASG a template reads: not its instances nor its sizes, which change every scale-up.
    Mappings as item tuples, so the memo holds values, not objects someone could change."""
    if asg is None:
        return None
    return (
        tuple(asg.tags.items()),
        tuple(asg.type_shapes.items()),
        asg.instance_types,
        asg.availability_zones,
        asg.spot_only,
        asg.reservations,
    )


def build_template(
    config: ScalerConfig,
    group_name: str,
    asg: AsgState | None,
    registered: list[Node],
    instance_types: Mapping[str, InstanceType],
    daemonsets: tuple[DaemonSet, ...],
    zone_ids: Mapping[str, str] = NO_ZONE_IDS,
) -> Template:
    """The template node of one configured group (`zone_ids`: each zone's id as registered nodes
    show it, zones.zone_ids_of, for the DaemonSets of a group that spans several zones).

    A pure function of its inputs, so it is remembered from the last run: the key holds every input
    it reads (`_asg_facts` for the ASG), compared by value; frozen objects compare equal to themselves
    at once, so a run whose group and nodes did not change pays a tuple comparison instead of a pass
    over the group's nodes. An input that differs in any field misses: the memo cannot go stale.
    """
    key = (
        config,
        _asg_facts(asg),
        tuple(registered),
        tuple(instance_types.items()),
        daemonsets,
        tuple(zone_ids.items()),
    )
    last = _LAST_TEMPLATES.get(group_name)
    if last is not None and last[0] == key:
        return last[1]
    template = _build_template(config, group_name, asg, registered, instance_types, daemonsets, zone_ids)
    if len(_LAST_TEMPLATES) >= _LAST_TEMPLATES_MAX:
        _LAST_TEMPLATES.clear()
    _LAST_TEMPLATES[group_name] = (key, template)
    return template


def _build_template(
    config: ScalerConfig,
    group_name: str,
    asg: AsgState | None,
    registered: list[Node],
    instance_types: Mapping[str, InstanceType],
    daemonsets: tuple[DaemonSet, ...],
    zone_ids: Mapping[str, str],
) -> Template:
    group = config.group(group_name)
    policy = config.policy
    tag_labels, tag_taints, tag_resources = _tag_labels_taints_resources(asg.tags if asg else {})
    # What the group launches: the ASG's mixed-instances overrides, else the configured type.
    known = {**instance_types, **(asg.type_shapes if asg else {})}
    types = asg.instance_types if asg is not None and asg.instance_types else (group.instance_type,)
    types = tuple(t for t in types if t)
    group_type = types[0] if len(types) == 1 else None
    usable = _template_sources(registered, policy, known, group_type)
    labels = _template_labels(config, group_name, asg, types, known, usable or registered)
    labels.update(tag_labels)
    labels.update(group.labels)
    taints = _template_taints(config, group_name, registered, tag_taints)
    zones = asg.availability_zones if asg is not None else ()
    launches = launch_labels(zones, template_node_labels(group.name, labels, 0), zone_ids)
    per_zone = tuple(admitted_daemonsets(zone_labels, taints, daemonsets) for zone_labels in launches)
    admitted = _admitted_anywhere(per_zone)
    aws = _AwsFacts(known, tag_resources, any(is_efa_device_plugin(ds) for ds in admitted))
    observed = _smallest(usable)
    discovered, source = _discovered(config, group_name, types, usable, observed, aws)
    allocatable, source = _allocatable(group.shape, discovered, source, observed)
    if allocatable is None:
        gpu_pending = sum(1 for n in registered if n.ready and gpu_not_advertised(n, known, group_type))
        if gpu_pending:
            source += f" ({gpu_pending} registered node(s) not advertising their GPUs yet)"
    if allocatable is not None and not allocatable.get(PODS):
        allocatable = allocatable + Resources.of({PODS: KUBELET_DEFAULT_MAX_PODS})
    template = Template(group.name, allocatable, labels, taints, source)
    return with_daemonsets(template, per_zone)


def _template_labels(
    config: ScalerConfig,
    group_name: str,
    asg: AsgState | None,
    types: tuple[str, ...],
    known: Mapping[str, InstanceType],
    sources: list[Node],
) -> dict[str, str]:
    """The labels a new node of the group will carry, before the tags' and the config's own."""
    group = config.group(group_name)
    single_zone = asg is not None and len(asg.availability_zones) == 1
    architectures = {known[t].architecture for t in types if t in known}
    labels: dict[str, str] = {"kubernetes.io/os": "linux", REGION: config.region_of(group)}
    if len(architectures) == 1 and len(architectures) == len(types):
        labels["kubernetes.io/arch"] = architectures.pop()
    if len(types) == 1:
        labels[INSTANCE_TYPE] = types[0]
    if asg is not None and single_zone:
        zone = asg.availability_zones[0]
        labels[ZONE] = zone
        labels["topology.ebs.csi.aws.com/zone"] = zone  # the EBS CSI node plugin's key
    if asg is not None and "eks:nodegroup-name" in asg.tags:
        # An EKS managed node group labels its nodes with its name and capacity type; a Spot
        # group is one whose mixed-instances policy launches nothing on demand.
        labels["eks.amazonaws.com/nodegroup"] = asg.tags["eks:nodegroup-name"]
        capacity_type = "SPOT" if asg.spot_only else "ON_DEMAND"
        if any(r.is_capacity_block for r in asg.reservations):
            capacity_type = "CAPACITY_BLOCK"  # a managed node group of capacity type CAPACITY_BLOCK
        labels["eks.amazonaws.com/capacityType"] = capacity_type
    shared = _shared_labels(sources, single_zone)
    if len(types) > 1:  # what its registered nodes share by type, the next launch may not
        shared = {k: v for k, v in shared.items() if k not in _TYPE_LABELS}
    labels.update(shared)
    labels.setdefault("kubernetes.io/arch", "amd64")
    return labels


def _template_taints(
    config: ScalerConfig, group_name: str, registered: list[Node], tag_taints: Iterable[Taint]
) -> tuple[Taint, ...]:
    """The taints a new node keeps once it is ready: not the transient or startup ones, nor the
    scaler's own marks of a registered node."""
    taints: dict[tuple[str, str], Taint] = {}
    for taint in (*_shared_taints(registered), *tag_taints, *config.group(group_name).domain_taints):
        if (
            taint.key in _TRANSIENT_TAINTS
            or taint.key.startswith(SCALER_TAINT_PREFIX)
            or is_startup_taint(taint, config.policy)
        ):
            continue
        taints[(taint.key, taint.effect)] = taint
    return tuple(sorted(taints.values(), key=lambda t: (t.key, t.effect)))


def admitted_daemonsets(
    labels: Mapping[str, str], taints: tuple[Taint, ...], daemonsets: tuple[DaemonSet, ...]
) -> tuple[DaemonSet, ...]:
    """The DaemonSets whose pods a node with these labels and taints admits, by key. A node of a
    zone whose id no registered node shows may run one that reads the id (zones.unknown_zone_id):
    counted, so that its room is never overstated."""
    return tuple(
        ds
        for ds in sorted(daemonsets, key=lambda d: d.key)
        if static_reason(ds.pod.scheduling, labels, taints, False) is None
        or unknown_zone_id(ds.pod.scheduling, labels) is not None
    )


def _admitted_anywhere(per_zone: tuple[tuple[DaemonSet, ...], ...]) -> tuple[DaemonSet, ...]:
    """The DaemonSets a new node admits in some zone it may launch in (`per_zone`: those each zone
    admits, admitted_daemonsets), by key."""
    if len(per_zone) == 1:
        return per_zone[0]
    found = {ds.key: ds for admitted in per_zone for ds in admitted}
    return tuple(found[key] for key in sorted(found))


def is_efa_device_plugin(daemonset: DaemonSet) -> bool:
    """The EFA device plugin's DaemonSet (aws/eks-charts stable/aws-efa-k8s-device-plugin), by its
    image's repository name in any registry or by its chart's name."""
    repositories = (image.split("@")[0].rsplit("/", 1)[-1].split(":")[0] for image in daemonset.images)
    return EFA_DEVICE_PLUGIN in daemonset.name or EFA_DEVICE_PLUGIN in repositories


def with_daemonsets(template: Template, per_zone: tuple[tuple[DaemonSet, ...], ...]) -> Template:
    """The template with the DaemonSets it admits, their requests and host ports. `per_zone`: those a
    new node admits in each zone it may launch in (zones.launch_labels; one entry for a group of one
    zone). A node runs the DaemonSets of the zone it lands in: the overhead is the largest any zone's
    is, per resource, and the ports are all zones' (what the scheduler will see on the node, whichever
    zone EC2 picks)."""
    overhead: Resources | None = None
    ports: set[tuple[str, str, int]] = set()
    for admitted in per_zone:
        zone_overhead = EMPTY
        for ds in admitted:
            zone_overhead = zone_overhead + ds.pod.requests
            ports.update(port_key(p) for p in ds.pod.constraints.host_ports)
        overhead = zone_overhead if overhead is None else overhead.maximum(zone_overhead)
    return Template(
        template.group,
        template.allocatable,
        template.labels,
        template.taints,
        template.source,
        _admitted_anywhere(per_zone),
        overhead or EMPTY,
        frozenset(ports),
    )
