"""AWS CLI / API JSON to domain objects: `aws autoscaling describe-auto-scaling-groups`,
`aws ec2 describe-subnets`, `aws ec2 describe-capacity-reservations`, `aws ec2 describe-instance-types`
(boto3 gives the same shapes, with datetimes where the CLI prints ISO 8601 strings)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from shared.domain.errors import InputError
from shared.domain.model import (
    AsgInstance,
    AsgState,
    CapacityReservation,
    CapacityUnits,
    InstanceType,
    nodes_for_units,
)
from shared.domain.resources import CPU, GAUDI, GPU, MEMORY, NEURON, NEURONCORE, PODS, Resources
from shared.formats.describe import described_items
from shared.formats.lifecycle import launch_template_ref, type_launch_templates

# DesiredCapacityType values that count each instance by its size, not by one (attribute-based
# instance type selection); "units" counts WeightedCapacity (1 per instance without weights).
SIZE_CAPACITY_TYPES = frozenset({"vcpu", "memory-mib"})


def asg_from_json(obj: Mapping[str, Any], region: str = "") -> AsgState:
    """One AutoScalingGroup element of DescribeAutoScalingGroups; sizes in nodes (see `with_units`)."""
    policy = obj.get("MixedInstancesPolicy")
    overrides = _overrides(policy)
    reservation = obj.get("CapacityReservationSpecification") or {}
    target = reservation.get("CapacityReservationTarget") or {}
    warm_pool = obj.get("WarmPoolConfiguration")
    asg = AsgState(
        name=str(obj["AutoScalingGroupName"]),
        min_size=_integer(obj["MinSize"], "MinSize"),
        max_size=_integer(obj["MaxSize"], "MaxSize"),
        desired=_integer(obj["DesiredCapacity"], "DesiredCapacity"),
        instances=tuple(
            AsgInstance(
                instance_id=str(i["InstanceId"]),
                lifecycle_state=str(i.get("LifecycleState") or "InService"),
                health_status=str(i.get("HealthStatus") or "Healthy"),
                availability_zone=str(i.get("AvailabilityZone") or ""),
                instance_type=str(i.get("InstanceType") or ""),
                weighted_capacity=_int_or_none(i.get("WeightedCapacity")),
                protected_from_scale_in=i.get("ProtectedFromScaleIn") is True,
                launch_template=launch_template_ref(i),
                launch_configuration=str(i.get("LaunchConfigurationName") or ""),
            )
            for i in obj.get("Instances") or ()
        ),
        tags={str(t["Key"]): str(t.get("Value") or "") for t in obj.get("Tags") or ()},
        region=region or _region_from_arn(obj.get("AutoScalingGroupARN")),
        spot_only=_spot_only(policy),
        availability_zones=tuple(sorted({str(zone) for zone in obj.get("AvailabilityZones") or ()})),
        instance_types=tuple(dict.fromkeys(name for name, _ in overrides)),
        type_weights={name: weight for name, weight in overrides if weight is not None},
        suspended_processes=frozenset(
            str(p["ProcessName"]) for p in obj.get("SuspendedProcesses") or () if p.get("ProcessName")
        ),
        subnet_ids=tuple(s.strip() for s in str(obj.get("VPCZoneIdentifier") or "").split(",") if s.strip()),
        warm_pool_size=(
            _integer(obj.get("WarmPoolSize") or 0, "WarmPoolSize") if isinstance(warm_pool, Mapping) else None
        ),
        reservation_preference=str(reservation.get("CapacityReservationPreference") or ""),
        reservation_ids=tuple(str(r) for r in target.get("CapacityReservationIds") or ()),
        new_instances_protected=obj.get("NewInstancesProtectedFromScaleIn") is True,
        launch_template=launch_template_ref(obj),
        launch_configuration=str(obj.get("LaunchConfigurationName") or ""),
        type_templates=type_launch_templates(obj),
    )
    capacity_type = str(obj.get("DesiredCapacityType") or "units")
    if asg.type_weights or capacity_type in SIZE_CAPACITY_TYPES:
        return with_units(asg, _per_node(asg, capacity_type), capacity_type)
    return asg


def with_units(asg: AsgState, per_node: int, capacity_type: str = "") -> AsgState:
    """The group with its sizes in nodes, from its sizes in units and the units of one template node.

    The units -> nodes direction of the weighted-capacity rule (`AsgState.units_for` is the other):
    called by the parser, and by the fleet adapter once instance type data tells how many vCPUs or
    MiB one node of a vcpu / memory-mib group counts for.
    """
    raw = asg.units or CapacityUnits(asg.desired, asg.min_size, asg.max_size, per_node)
    units = CapacityUnits(
        raw.desired, raw.min_size, raw.max_size, per_node, capacity_type or raw.capacity_type
    )
    sized = replace(asg, units=units)
    live = [sized.instance_units(i) for i in sized.live_instances]
    desired = nodes_for_units(units.desired, live, per_node)
    return replace(
        sized,
        desired=desired,
        min_size=min(nodes_for_units(units.min_size, live, per_node), desired),
        # Never below what the group has or is launching: AWS may overshoot the maximum by less
        # than one instance's weight.
        max_size=max(nodes_for_units(units.max_size, live, per_node, round_up=False), desired, len(live)),
    )


def _overrides(policy: object) -> list[tuple[str, int | None]]:
    """(instance type, WeightedCapacity) of each MixedInstancesPolicy override naming a type."""
    if not isinstance(policy, Mapping):
        return []
    template = policy.get("LaunchTemplate") or {}
    return [
        (str(o["InstanceType"]), _int_or_none(o.get("WeightedCapacity")))
        for o in template.get("Overrides") or ()
        if o.get("InstanceType")
    ]


def _per_node(asg: AsgState, capacity_type: str) -> int:
    """Units of one template node: the smallest weight of the group's types, the template being its
    smallest shape. vcpu / memory-mib groups: what their smallest live instance counts for, else 0
    (unknown until instance type data tells; the fleet adapter fills it in)."""
    if capacity_type not in SIZE_CAPACITY_TYPES:
        weights = [asg.type_weights.get(t, 1) for t in asg.instance_types] or [1]
        return min(weights)
    seen = [i.weighted_capacity for i in asg.live_instances if i.weighted_capacity]
    return min(seen) if seen else 0


def _integer(value: object, field: str) -> int:
    """An Integer of the AutoScaling API model (a JSON number in the CLI's output, an int from boto3):
    `"3"` or `3.5` never comes from AWS, and int() would read the one and truncate the other."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field}: expected an integer, got {value!r}")
    return value


def _int_or_none(value: object) -> int | None:
    if value is None or value == "":
        return None
    return int(str(value))


def _spot_only(policy: object) -> bool | None:
    if not isinstance(policy, Mapping):
        return None
    distribution = policy.get("InstancesDistribution") or {}
    base = _integer(distribution.get("OnDemandBaseCapacity") or 0, "OnDemandBaseCapacity")
    # AWS's default for the percentage above base is 100 (all on-demand).
    above = distribution.get("OnDemandPercentageAboveBaseCapacity")
    return base == 0 and above is not None and _integer(above, "OnDemandPercentageAboveBaseCapacity") == 0


def _region_from_arn(arn: object) -> str:
    parts = arn.split(":") if isinstance(arn, str) else []
    return parts[3] if len(parts) > 3 else ""


def asgs_from_describe(document: object, source: str = "asgs") -> dict[str, AsgState]:
    """DescribeAutoScalingGroups output to ASG states by name; InputError naming the source."""
    groups = described_items(
        document,
        "AutoScalingGroups",
        source,
        "describe-auto-scaling-groups (AutoScalingGroups)",
    )
    out: dict[str, AsgState] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(groups):
        try:
            asg = asg_from_json(item)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputError(f"{source}: AutoScalingGroups[{index}]: malformed group: {detail}") from exc
        if asg.min_size < 0 or asg.max_size < asg.min_size or not 0 <= asg.desired <= max(asg.max_size, 0):
            raise InputError(
                f"{source}: AutoScalingGroups[{index}] ({asg.name}): inconsistent sizes "
                f"min={asg.min_size} desired={asg.desired} max={asg.max_size}"
            )
        if asg.name in first:
            # A group name is unique in its account and region (CreateAutoScalingGroup answers
            # AlreadyExists), so AWS lists each group once: a second entry is a dump put together by
            # hand or from overlapping pages, and which one is current cannot be told.
            raise InputError(
                f"{source}: AutoScalingGroups[{index}] ({asg.name}): listed twice "
                f"(AutoScalingGroups[{first[asg.name]}] too){_regions(out[asg.name], asg)}"
            )
        first[asg.name] = index
        out[asg.name] = asg
    return out


def _regions(one: AsgState, other: AsgState) -> str:
    if one.region == other.region:
        return ""
    return f", in {one.region} and {other.region}: give plan one region's groups per name"


def subnet_zones(document: Mapping[str, Any]) -> dict[str, str]:
    """Zone of each subnet in a DescribeSubnets output (`aws ec2 describe-subnets`)."""
    return {str(s["SubnetId"]): str(s["AvailabilityZone"]) for s in document.get("Subnets") or ()}


def capacity_reservation_from_json(obj: Mapping[str, Any]) -> CapacityReservation:
    """One CapacityReservations element of DescribeCapacityReservations."""
    return CapacityReservation(
        reservation_id=str(obj["CapacityReservationId"]),
        instance_type=str(obj.get("InstanceType") or ""),
        availability_zone=str(obj.get("AvailabilityZone") or ""),
        total=int(obj.get("TotalInstanceCount") or 0),
        available=int(obj.get("AvailableInstanceCount") or 0),
        state=str(obj.get("State") or ""),
        reservation_type=str(obj.get("ReservationType") or "default"),
        start=_time(obj.get("StartDate")),
        end=_time(obj.get("EndDate")) if obj.get("EndDateType") != "unlimited" else None,
        match_criteria=str(obj.get("InstanceMatchCriteria") or "open"),
    )


def capacity_reservations_from_describe(
    document: object, source: str = "reservations"
) -> dict[str, CapacityReservation]:
    """DescribeCapacityReservations output to reservations by id; InputError naming the source."""
    items = described_items(
        document, "CapacityReservations", source, "describe-capacity-reservations (CapacityReservations)"
    )
    out: dict[str, CapacityReservation] = {}
    for index, item in enumerate(items):
        try:
            reservation = capacity_reservation_from_json(item)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(
                f"{source}: CapacityReservations[{index}]: malformed reservation: {exc}"
            ) from exc
        out[reservation.reservation_id] = reservation
    return out


def reservation_ids_of(asg: AsgState, configured: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The reservations a group launches into: its own CapacityReservationTarget's, then those the
    config names for it (`node_groups[].capacity_reservation_ids`, by ASG name), each once."""
    return tuple(dict.fromkeys((*asg.reservation_ids, *configured.get(asg.name, ()))))


def with_reservations(
    groups: Mapping[str, AsgState],
    reservations: Mapping[str, CapacityReservation],
    configured: Mapping[str, Sequence[str]],
) -> dict[str, AsgState]:
    """Each group with the described reservations it launches into; ids not described are left out
    (a reservation that no longer exists holds no capacity)."""
    return {
        name: replace(
            asg,
            reservations=tuple(
                reservations[r] for r in reservation_ids_of(asg, configured) if r in reservations
            ),
        )
        for name, asg in groups.items()
    }


def _time(value: object) -> datetime | None:
    """A boto3 datetime or the CLI's ISO 8601 string, as an aware UTC datetime."""
    if value is None or value == "":
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


# DescribeInstanceTypes

# The Kubernetes extended resource each GPU vendor's device plugin advertises.
GPU_RESOURCE_BY_MANUFACTURER = {
    "NVIDIA": GPU,
    "AMD": "amd.com/gpu",
    "Habana": GAUDI,
}
# The AWS Neuron device plugin's resources (shared.domain.resources says which).
NEURON_RESOURCE = NEURON
NEURONCORE_RESOURCE = NEURONCORE
# NeuronInfo.NeuronDevices[].CoreInfo.Version from which physical cores pair into logical ones by default.
_FIRST_LOGICAL_CORE_VERSION = 3
_DEFAULT_LOGICAL_CORE_SIZE = 2
# The kubelet's own default when the instance type says nothing about its network interfaces.
DEFAULT_MAX_PODS = 110
# ProcessorInfo.SupportedArchitectures as the kubernetes.io/arch label spells them, in order of
# preference: x86 types list both i386 and x86_64, and their nodes run amd64.
ARCHITECTURE_BY_EC2_NAME = {
    "x86_64": "amd64",
    "arm64": "arm64",
    "x86_64_mac": "amd64",
    "arm64_mac": "arm64",
    "i386": "386",
}
DEFAULT_ARCHITECTURE = "amd64"
# InstanceStorageInfo.NvmeSupport values of instance store that shows up as NVMe devices: the only
# kind the EKS AMI's setup-local-disks assembles (it lists "Amazon EC2 NVMe Instance Storage").
_NVME_INSTANCE_STORE = frozenset({"required", "supported"})


@dataclass(frozen=True, slots=True)
class InstanceTypeInfo:
    """What the scaler reads of one DescribeInstanceTypes entry."""

    instance_type: str
    vcpus: int
    memory_mib: int
    accelerators: Mapping[str, int]  # extended resource name -> count
    gpu_model: str  # "A100", "" without GPUs
    max_pods: int
    architecture: str = DEFAULT_ARCHITECTURE  # kubernetes.io/arch spelling
    efa_interfaces: int = 0  # NetworkInfo.EfaInfo.MaximumEfaInterfaces (EfaSupported)
    nvme_instance_store_gb: int = 0  # InstanceStorageInfo.TotalSizeInGB when it is NVMe

    def capacity(self) -> Resources:
        """Capacity of one node before any reservation."""
        amounts = {CPU: self.vcpus * 1000, MEMORY: self.memory_mib * 2**20, PODS: self.max_pods}
        amounts.update(self.accelerators)
        return Resources.of(amounts)

    def to_domain(self) -> InstanceType:
        """The domain's view: raw capacity, architecture, EFA and NVMe instance store."""
        return InstanceType(
            name=self.instance_type,
            capacity=self.capacity(),
            architecture=self.architecture,
            efa_interfaces=self.efa_interfaces,
            nvme_instance_store_gb=self.nvme_instance_store_gb,
        )


def instance_type_from_json(obj: Mapping[str, Any]) -> InstanceTypeInfo:
    """One InstanceTypes element of DescribeInstanceTypes."""
    accelerators: dict[str, int] = {}
    models: list[str] = []
    for gpu in (obj.get("GpuInfo") or {}).get("Gpus") or ():
        manufacturer = str(gpu.get("Manufacturer") or "")
        name = GPU_RESOURCE_BY_MANUFACTURER.get(manufacturer, f"{manufacturer.lower() or 'unknown'}.com/gpu")
        accelerators[name] = accelerators.get(name, 0) + int(gpu.get("Count") or 0)
        if gpu.get("Name"):
            models.append(str(gpu["Name"]))
    accelerators.update(neuron_resources(obj.get("NeuronInfo") or {}))
    network = obj.get("NetworkInfo") or {}
    return InstanceTypeInfo(
        instance_type=str(obj["InstanceType"]),
        vcpus=int(obj["VCpuInfo"]["DefaultVCpus"]),
        memory_mib=int(obj["MemoryInfo"]["SizeInMiB"]),
        accelerators=accelerators,
        gpu_model="/".join(dict.fromkeys(models)),
        max_pods=max_pods(network),
        architecture=architecture(obj.get("ProcessorInfo") or {}),
        efa_interfaces=efa_interfaces(network),
        nvme_instance_store_gb=nvme_instance_store_gb(obj.get("InstanceStorageInfo") or {}),
    )


def neuron_resources(neuron_info: Mapping[str, Any]) -> dict[str, int]:
    """Neuron devices and their cores as the device plugin names them; empty without Neuron devices.

    Cores are NeuronDevices[].Count x CoreInfo.Count, at the default logical core size: NeuronCore-v3
    and later (Trainium2: 8 physical cores a device) group two physical cores into one logical core
    unless the node sets NEURON_LOGICAL_NC_CONFIG=1 (Neuron docs, "Logical NeuronCore
    configuration"), and the device plugin advertises logical cores. A group whose nodes run LNC=1 says
    so through its registered nodes, a node-template tag or its config, which all win over this."""
    devices = cores = 0
    for device in neuron_info.get("NeuronDevices") or ():
        count = int(device.get("Count") or 0)
        core_info = device.get("CoreInfo") or {}
        per_device = int(core_info.get("Count") or 0)
        if int(core_info.get("Version") or 0) >= _FIRST_LOGICAL_CORE_VERSION:
            per_device //= _DEFAULT_LOGICAL_CORE_SIZE
        devices += count
        cores += count * per_device
    found = {NEURON_RESOURCE: devices} if devices else {}
    if cores:
        found[NEURONCORE_RESOURCE] = cores
    return found


def efa_interfaces(network_info: Mapping[str, Any]) -> int:
    """How many EFA interfaces the type can attach (NetworkInfo.EfaInfo.MaximumEfaInterfaces); 0 when
    EfaSupported is false. What the EFA device plugin advertises as vpc.amazonaws.com/efa."""
    if not network_info.get("EfaSupported"):
        return 0
    return int((network_info.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0)


def nvme_instance_store_gb(storage_info: Mapping[str, Any]) -> int:
    """InstanceStorageInfo.TotalSizeInGB (decimal GB) when the instance store is NVMe, else 0."""
    if str(storage_info.get("NvmeSupport") or "") not in _NVME_INSTANCE_STORE:
        return 0
    return int(storage_info.get("TotalSizeInGB") or 0)


def architecture(processor_info: Mapping[str, Any]) -> str:
    """The kubernetes.io/arch of a type's nodes from ProcessorInfo (amd64 when EC2 says nothing known)."""
    supported = {str(a) for a in processor_info.get("SupportedArchitectures") or ()}
    for ec2_name, kubernetes_name in ARCHITECTURE_BY_EC2_NAME.items():
        if ec2_name in supported:
            return kubernetes_name
    return DEFAULT_ARCHITECTURE


def max_pods(network_info: Mapping[str, Any]) -> int:
    """The EKS VPC CNI's pod limit: ENIs x (IPv4 addresses per ENI - 1) + 2 (as in eni-max-pods.txt).

    Only the default network card's interfaces count: the others carry EFA traffic, not pods.
    """
    per_interface = int(network_info.get("Ipv4AddressesPerInterface") or 0)
    interfaces = int(network_info.get("MaximumNetworkInterfaces") or 0)
    default_card = int(network_info.get("DefaultNetworkCardIndex") or 0)
    for card in network_info.get("NetworkCards") or ():
        if int(card.get("NetworkCardIndex") or 0) == default_card:
            interfaces = int(card.get("MaximumNetworkInterfaces") or interfaces)
            break
    if not per_interface or not interfaces:
        return DEFAULT_MAX_PODS
    return interfaces * (per_interface - 1) + 2


def instance_types_from_describe(
    document: object, source: str = "instance-types"
) -> tuple[dict[str, InstanceType], tuple[str, ...]]:
    """DescribeInstanceTypes output to instance types by name, and one reason per malformed entry
    (which is left out; the others are kept). InputError when the document is not that output."""
    items = described_items(document, "InstanceTypes", source, "describe-instance-types (InstanceTypes)")
    found: dict[str, InstanceType] = {}
    problems: list[str] = []
    for index, item in enumerate(items):
        try:
            parsed = instance_type_from_json(item).to_domain()
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            problems.append(f"{source}: InstanceTypes[{index}]: malformed entry, left out: {detail}")
            continue
        found.setdefault(parsed.name, parsed)
    return found, tuple(problems)
