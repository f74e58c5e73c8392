"""Pure parts of the AWS fleet adapter: failure classification and instance-type data."""

from __future__ import annotations

import pytest

from shared.adapters.aws.fleet import architecture, classify_failure, instance_type_from_json, max_pods
from shared.domain.model import InstanceType
from shared.domain.operations import FailureKind
from shared.domain.resources import CPU, GPU, MEMORY, PODS, Resources

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
