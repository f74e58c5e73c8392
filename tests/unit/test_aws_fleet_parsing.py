"""Pure parts of the AWS fleet adapter: failure classification, instance-type data, and the groups,
subnets and capacity reservations as `aws autoscaling` / `aws ec2` print them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.adapters.aws.fleet import classify_failure
from shared.domain.errors import InputError
from shared.domain.model import CapacityReservation, CapacityUnits, InstanceType, nodes_for_units
from shared.domain.operations import FailureKind
from shared.domain.resources import CPU, GPU, MEMORY, PODS, Resources
from shared.formats.aws import (
    architecture,
    asg_from_json,
    capacity_reservation_from_json,
    capacity_reservations_from_describe,
    instance_type_from_json,
    max_pods,
    subnet_zones,
)

# Status messages as Auto Scaling writes them into failed activities.
CAPACITY = (
    "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We currently do not have "
    "sufficient p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a). Our system will "
    "be working on provisioning additional capacity. Launching EC2 instance failed."
)
VCPU_LIMIT = (
    "Could not launch On-Demand Instances. VcpuLimitExceeded - You have requested more vCPU capacity than "
    "your current vCPU limit of 96 allows for the instance bucket that the specified instance type belongs "
    "to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."
)
INSTANCE_LIMIT = (
    "Could not launch On-Demand Instances. InstanceLimitExceeded - You have requested more instances (21) "
    "than your current instance limit of 20 allows for the specified instance type."
)
SPOT_NO_CAPACITY = (
    "Could not launch Spot Instances. InsufficientInstanceCapacity - There is no Spot capacity available "
    "that matches your request. Launching EC2 instance failed."
)
SPOT_PRICE = "Could not launch Spot Instances. SpotMaxPriceTooLow - Your Spot request price of 0.1 is lower."
SPOT_COUNT = (
    "Could not launch Spot Instances. MaxSpotInstanceCountExceeded - Max spot instance count exceeded."
)
UNFULFILLABLE = "Could not launch Spot Instances. UnfulfillableCapacity - Unable to fulfill capacity."
OTHER = "The image id '[ami-0123]' does not exist. Launching EC2 instance failed."


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        (CAPACITY, FailureKind.INSUFFICIENT_CAPACITY),
        ("We currently do not have sufficient g5.48xlarge capacity", FailureKind.INSUFFICIENT_CAPACITY),
        (UNFULFILLABLE, FailureKind.INSUFFICIENT_CAPACITY),
        (VCPU_LIMIT, FailureKind.INSTANCE_LIMIT),
        ("You have requested more vCPU capacity than your current vCPU limit", FailureKind.INSTANCE_LIMIT),
        (INSTANCE_LIMIT, FailureKind.INSTANCE_LIMIT),
        (SPOT_COUNT, FailureKind.INSTANCE_LIMIT),
        (SPOT_NO_CAPACITY, FailureKind.SPOT_CAPACITY),
        (SPOT_PRICE, FailureKind.SPOT_CAPACITY),
        (OTHER, FailureKind.OTHER),
        ("", FailureKind.OTHER),
    ],
)
def test_classify_failure_by_known_patterns(message: str, kind: FailureKind) -> None:
    # Given the status message of a failed activity
    # When it is classified
    # Then the kind follows the pattern table (spot and quota before generic capacity)
    assert classify_failure(message) is kind


def test_classify_failure_reads_every_text_and_ignores_case() -> None:
    # Given an activity whose StatusMessage is empty but whose description names the cause in other case
    # When it is classified from status message, description and cause
    kind = classify_failure(
        None, "launching a new ec2 instance. status reason: insufficientinstancecapacity", ""
    )

    # Then the description decides
    assert kind is FailureKind.INSUFFICIENT_CAPACITY


def test_instance_type_shape_counts_nvidia_gpus_and_memory_in_bytes() -> None:
    # Given a DescribeInstanceTypes entry of a p4d.24xlarge (values as EC2 reports them)
    entry = {
        "InstanceType": "p4d.24xlarge",
        "VCpuInfo": {"DefaultVCpus": 96},
        "MemoryInfo": {"SizeInMiB": 1179648},
        "GpuInfo": {"Gpus": [{"Name": "A100", "Manufacturer": "NVIDIA", "Count": 8}]},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
        "NetworkInfo": {
            "MaximumNetworkInterfaces": 60,
            "Ipv4AddressesPerInterface": 50,
            "DefaultNetworkCardIndex": 0,
            "NetworkCards": [{"NetworkCardIndex": i, "MaximumNetworkInterfaces": 15} for i in range(4)],
        },
    }

    # When it is parsed
    info = instance_type_from_json(entry)

    # Then cpu is in millicores, memory in bytes, GPUs under nvidia.com/gpu, pods from the default card
    capacity = info.capacity()
    assert capacity.get(CPU) == 96_000
    assert capacity.get(MEMORY) == 1179648 * 2**20
    assert capacity.get(GPU) == 8
    assert capacity.get(PODS) == 737  # eni-max-pods.txt
    assert info.gpu_model == "A100"
    assert info.to_domain() == InstanceType("p4d.24xlarge", capacity, "amd64")


def test_instance_type_shape_names_other_vendors_and_neuron_devices() -> None:
    # Given an AMD GPU type and an Inferentia type
    amd = {
        "InstanceType": "g4ad.xlarge",
        "VCpuInfo": {"DefaultVCpus": 4},
        "MemoryInfo": {"SizeInMiB": 16384},
        "GpuInfo": {"Gpus": [{"Name": "Radeon Pro V520", "Manufacturer": "AMD", "Count": 1}]},
    }
    inferentia = {
        "InstanceType": "inf2.xlarge",
        "VCpuInfo": {"DefaultVCpus": 4},
        "MemoryInfo": {"SizeInMiB": 16384},
        "NeuronInfo": {"NeuronDevices": [{"Count": 1, "Name": "Inferentia2"}]},
    }

    # When they are parsed
    amd_capacity = instance_type_from_json(amd).capacity()
    inf_capacity = instance_type_from_json(inferentia).capacity()

    # Then each accelerator appears under its device plugin's resource name, and no nvidia.com/gpu
    assert amd_capacity.get("amd.com/gpu") == 1
    assert amd_capacity.get(GPU) == 0
    assert inf_capacity.get("aws.amazon.com/neuron") == 1


@pytest.mark.parametrize(
    ("network", "pods"),
    [
        ({"MaximumNetworkInterfaces": 4, "Ipv4AddressesPerInterface": 15}, 58),  # g5.xlarge
        ({"MaximumNetworkInterfaces": 8, "Ipv4AddressesPerInterface": 30}, 234),  # m5.4xlarge
        ({}, 110),  # unknown: the kubelet's default
    ],
)
def test_max_pods_follows_the_vpc_cni_formula(network: dict[str, int], pods: int) -> None:
    # Given the network limits of an instance type
    # When / Then max pods is ENIs x (IPs per ENI - 1) + 2
    assert max_pods(network) == pods


@pytest.mark.parametrize(
    ("supported", "arch"),
    [
        (["x86_64"], "amd64"),
        (["i386", "x86_64"], "amd64"),  # older x86 types list both; their nodes run 64-bit
        (["arm64"], "arm64"),
        (["arm64_mac"], "arm64"),
        ([], "amd64"),  # EC2 said nothing: the domain's default
    ],
)
def test_architecture_uses_the_kubernetes_arch_spelling(supported: list[str], arch: str) -> None:
    # Given ProcessorInfo.SupportedArchitectures as EC2 reports them
    # When / Then the architecture is spelled as the kubernetes.io/arch label spells it
    assert architecture({"SupportedArchitectures": supported}) == arch


def test_instance_type_without_processor_info_is_amd64() -> None:
    # Given an entry without ProcessorInfo (as some Stubber responses are)
    entry = {"InstanceType": "m5.large", "VCpuInfo": {"DefaultVCpus": 2}, "MemoryInfo": {"SizeInMiB": 8192}}

    # When it is parsed into the domain's instance type
    instance_type = instance_type_from_json(entry).to_domain()

    # Then it is amd64 with its raw capacity (the kubelet's default pods without network data)
    assert instance_type == InstanceType(
        "m5.large", Resources.of({CPU: 2000, MEMORY: 8 * 2**30, PODS: 110}), "amd64"
    )


# DescribeAutoScalingGroups as the AWS CLI prints it: weights, processes, warm pool, reservations

WEIGHTED_GROUP = {
    "AutoScalingGroupName": "research-mixed",
    "AutoScalingGroupARN": (
        "arn:aws:autoscaling:us-west-2:123456789012:autoScalingGroup:0f1e2d3c-aaaa-bbbb-cccc-0123456789ab"
        ":autoScalingGroupName/research-mixed"
    ),
    "MixedInstancesPolicy": {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {
                "LaunchTemplateId": "lt-0abc123def4567890",
                "LaunchTemplateName": "gpu-nodes",
                "Version": "$Latest",
            },
            "Overrides": [
                {"InstanceType": "p4d.24xlarge", "WeightedCapacity": "8"},
                {"InstanceType": "g6.12xlarge", "WeightedCapacity": "4"},
            ],
        },
        "InstancesDistribution": {
            "OnDemandAllocationStrategy": "prioritized",
            "OnDemandBaseCapacity": 0,
            "OnDemandPercentageAboveBaseCapacity": 100,
            "SpotAllocationStrategy": "price-capacity-optimized",
        },
    },
    "MinSize": 0,
    "MaxSize": 64,
    "DesiredCapacity": 20,
    "DefaultCooldown": 300,
    "AvailabilityZones": ["us-west-2b"],
    "LoadBalancerNames": [],
    "TargetGroupARNs": [],
    "HealthCheckType": "EC2",
    "HealthCheckGracePeriod": 300,
    "Instances": [
        {
            "InstanceId": "i-0a1b2c3d4e5f60001",
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-west-2b",
            "LifecycleState": "InService",
            "HealthStatus": "Healthy",
            "LaunchTemplate": {"LaunchTemplateId": "lt-0abc123def4567890", "Version": "3"},
            "ProtectedFromScaleIn": False,
            "WeightedCapacity": "8",
        },
        {
            "InstanceId": "i-0a1b2c3d4e5f60002",
            "InstanceType": "g6.12xlarge",
            "AvailabilityZone": "us-west-2b",
            "LifecycleState": "Pending:Wait",
            "HealthStatus": "Healthy",
            "ProtectedFromScaleIn": False,
            "WeightedCapacity": "4",
        },
        {
            "InstanceId": "i-0a1b2c3d4e5f60003",
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-west-2b",
            "LifecycleState": "Standby",
            "HealthStatus": "Healthy",
            "ProtectedFromScaleIn": False,
            "WeightedCapacity": "8",
        },
    ],
    "CreatedTime": "2026-11-01T10:00:00.000Z",
    "SuspendedProcesses": [
        {"ProcessName": "Terminate", "SuspensionReason": "User suspended at 2026-12-01T08:00:00Z"},
        {"ProcessName": "AZRebalance", "SuspensionReason": "User suspended at 2026-12-01T08:00:00Z"},
    ],
    "VPCZoneIdentifier": "subnet-0aaa1111bbbb2222c",
    "EnabledMetrics": [],
    "Tags": [],
    "TerminationPolicies": ["Default"],
    "NewInstancesProtectedFromScaleIn": False,
    "ServiceLinkedRoleARN": "arn:aws:iam::123456789012:role/aws-service-role/autoscaling.amazonaws.com/x",
    "WarmPoolConfiguration": {
        "MinSize": 1,
        "PoolState": "Stopped",
        "InstanceReusePolicy": {"ReuseOnScaleIn": False},
    },
    "WarmPoolSize": 2,
    "CapacityRebalance": False,
    "CapacityReservationSpecification": {
        "CapacityReservationPreference": "capacity-reservations-first",
        "CapacityReservationTarget": {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
    },
}


def test_weighted_group_sizes_are_read_in_nodes() -> None:
    # Given desired 20 units: a p4d (8) in service, a g6 (4) held by a launch hook, a p4d in Standby
    asg = asg_from_json(WEIGHTED_GROUP)
    # Then the units are kept, one template node is the smallest weight, and 8 units are one more node to come
    assert asg.units == CapacityUnits(desired=20, min_size=0, max_size=64, per_node=4)
    assert [i.instance_id[-1] for i in asg.live_instances] == ["1", "2"]
    assert (asg.desired, asg.min_size, asg.max_size) == (4, 0, 15)
    assert asg.instance_types == ("p4d.24xlarge", "g6.12xlarge")


def test_nodes_and_units_convert_both_ways() -> None:
    # Given the weighted group (12 live units in two instances, 4 units per template node)
    asg = asg_from_json(WEIGHTED_GROUP)
    # Then every node count maps to units and back, clamped to the group's bounds in units
    for nodes in range(2, asg.max_size + 1):
        units = asg.units_for(nodes)
        assert units == 12 + (nodes - 2) * 4
        assert nodes_for_units(units, [8, 4], 4) == nodes
    assert asg.units_for(100) == 64
    assert asg.units_for(1) == 8  # below the live count: the heaviest instance kept


def test_processes_warm_pool_subnets_and_reservation_target_are_read() -> None:
    asg = asg_from_json(WEIGHTED_GROUP)
    assert asg.suspended_processes == frozenset({"Terminate", "AZRebalance"})
    assert asg.terminate_suspended and not asg.launch_suspended
    assert asg.warm_pool_size == 2
    assert asg.subnet_ids == ("subnet-0aaa1111bbbb2222c",)
    assert asg.reservation_preference == "capacity-reservations-first"
    assert asg.reservation_ids == ("cr-0123456789abcdef0",)
    assert asg.region == "us-west-2"


def test_group_without_weights_counts_one_unit_per_instance() -> None:
    plain = {
        k: v for k, v in WEIGHTED_GROUP.items() if k not in ("MixedInstancesPolicy", "WarmPoolConfiguration")
    }
    asg = asg_from_json(plain)
    assert asg.units is None and asg.warm_pool_size is None
    assert asg.desired == 20 and asg.units_for(7) == 7


def test_vcpu_counted_group_without_size_data_has_an_unknown_node_size() -> None:
    # Given DesiredCapacityType vcpu and no live instance telling how many vCPUs one counts for
    group = {**WEIGHTED_GROUP, "DesiredCapacityType": "vcpu", "Instances": []}
    group["MixedInstancesPolicy"] = {"LaunchTemplate": {"Overrides": [{"InstanceRequirements": {}}]}}
    asg = asg_from_json(group)
    # Then the units per node are unknown (the planner says the group cannot grow)
    assert asg.units is not None and asg.units.per_node == 0


def test_warm_pool_and_standby_instances_are_not_live() -> None:
    states = [
        "Warmed:Pending",
        "Warmed:Running",
        "Warmed:Stopped",
        "Standby",
        "EnteringStandby",
        "Terminating:Wait",
    ]
    group = {
        **WEIGHTED_GROUP,
        "Instances": [
            {"InstanceId": f"i-{n}", "LifecycleState": s, "HealthStatus": "Healthy"}
            for n, s in enumerate(states)
        ],
    }
    assert asg_from_json(group).live_instances == ()


CLI_RESERVATION = {
    "CapacityReservationId": "cr-0123456789abcdef0",
    "OwnerId": "123456789012",
    "CapacityReservationArn": "arn:aws:ec2:us-west-2:123456789012:capacity-reservation/cr-0123456789abcdef0",
    "AvailabilityZoneId": "usw2-az2",
    "InstanceType": "p5.48xlarge",
    "InstancePlatform": "Linux/UNIX",
    "AvailabilityZone": "us-west-2b",
    "Tenancy": "default",
    "TotalInstanceCount": 8,
    "AvailableInstanceCount": 5,
    "EbsOptimized": True,
    "EphemeralStorage": False,
    "State": "active",
    "StartDate": "2026-12-01T11:30:00+00:00",
    "EndDate": "2026-12-15T11:30:00+00:00",
    "EndDateType": "limited",
    "InstanceMatchCriteria": "targeted",
    "CreateDate": "2026-11-20T08:00:00+00:00",
    "Tags": [],
    "ReservationType": "capacity-block",
}


def test_capacity_reservation_is_read_from_cli_output() -> None:
    reservation = capacity_reservation_from_json(CLI_RESERVATION)
    assert reservation == CapacityReservation(
        reservation_id="cr-0123456789abcdef0",
        instance_type="p5.48xlarge",
        availability_zone="us-west-2b",
        total=8,
        available=5,
        state="active",
        reservation_type="capacity-block",
        start=datetime(2026, 12, 1, 11, 30, tzinfo=UTC),
        end=datetime(2026, 12, 15, 11, 30, tzinfo=UTC),
        match_criteria="targeted",
    )
    assert reservation.is_capacity_block


def test_unlimited_odcr_has_no_end() -> None:
    odcr = {**CLI_RESERVATION, "ReservationType": "default", "EndDateType": "unlimited"}
    del odcr["EndDate"]
    assert capacity_reservation_from_json(odcr).end is None


def test_reservations_document_errors_name_the_source() -> None:
    with pytest.raises(InputError, match=r"reservations.json: CapacityReservations\[0\]"):
        capacity_reservations_from_describe({"CapacityReservations": [{}]}, "reservations.json")
    assert capacity_reservations_from_describe({"CapacityReservations": [CLI_RESERVATION]}).keys() == {
        "cr-0123456789abcdef0"
    }


def test_subnet_zones_from_describe_subnets_output() -> None:
    document = {
        "Subnets": [
            {"SubnetId": "subnet-0aaa", "AvailabilityZone": "us-west-2a", "AvailabilityZoneId": "usw2-az1"},
            {"SubnetId": "subnet-0bbb", "AvailabilityZone": "us-west-2b", "AvailabilityZoneId": "usw2-az2"},
        ]
    }
    assert subnet_zones(document) == {"subnet-0aaa": "us-west-2a", "subnet-0bbb": "us-west-2b"}
