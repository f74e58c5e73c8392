"""`AsgFleet` against moto's Auto Scaling and EC2, and against botocore's Stubber where moto has no data.

moto 5.2.5 facts these tests rely on: it accepts a desired capacity above max (so only our own check is
tested), records no scaling activities (failed activities are stubbed), and knows no p3 instance types.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from shared import constants
from shared.adapters.aws import clients
from shared.adapters.aws.fleet import AsgFleet
from shared.config import ScalerConfig
from shared.domain.errors import AuthError, FleetActionError, FleetReadError, ThrottledError
from shared.domain.model import AsgState, Snapshot
from shared.domain.operations import FailureKind
from shared.domain.resources import CPU, GPU, MEMORY, PODS, Resources
from shared.formats.kubernetes import nodes_from_list, pods_from_list
from shared.planner import plan
from tests.builders import NOW, node, pod

REGION = "us-east-1"
OTHER_REGION = "us-west-2"
CLUSTER = "research"
GIB = 2**30
# One session for every client of this module: it parses each service model once (a new session re-reads
# the EC2 model, ~1 s). Created after `import moto`, so its clients go through moto's interception.
SESSION = boto3.session.Session()


@pytest.fixture(autouse=True)
def no_default_amis(fake_aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Loading moto's default AMIs costs ~0.2 s per test; launch templates here need no real AMI.
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")


class RecordingFactory:
    """Builds real (moto-backed) clients and records every API call made through them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self._clients: dict[tuple[str, str], Any] = {}
        self.built: list[tuple[str, str]] = []  # (service, region) of each client, in order

    def __call__(self, service: str, region: str) -> Any:
        key = (service, region)
        if key not in self._clients:
            self.built.append(key)
            client = SESSION.client(service, region_name=region, config=clients.client_config())

            def record(params: dict[str, Any], model: Any, **_: Any) -> None:
                self.calls.append((service, model.name, dict(params)))

            client.meta.events.register("provide-client-params", record)
            self._clients[key] = client
        return self._clients[key]

    def operations(self, name: str) -> list[dict[str, Any]]:
        return [params for _, operation, params in self.calls if operation == name]


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def factory(aws: None) -> RecordingFactory:
    return RecordingFactory()


def create_group(
    name: str,
    *,
    region: str = REGION,
    desired: int = 0,
    min_size: int = 0,
    max_size: int = 5,
    cluster: str | None = CLUSTER,
    instance_type: str = "g5.xlarge",
) -> None:
    ec2 = SESSION.client("ec2", region_name=region)
    template = f"lt-{name}"
    ec2.create_launch_template(
        LaunchTemplateName=template,
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": instance_type},
    )
    tags = [{"Key": "team", "Value": "ml", "PropagateAtLaunch": True}]
    if cluster is not None:
        tags.append({"Key": constants.TAG_CLUSTER, "Value": cluster, "PropagateAtLaunch": False})
    SESSION.client("autoscaling", region_name=region).create_auto_scaling_group(
        AutoScalingGroupName=name,
        MinSize=min_size,
        MaxSize=max_size,
        DesiredCapacity=desired,
        LaunchTemplate={"LaunchTemplateName": template},
        AvailabilityZones=[f"{region}a"],
        Tags=[{**tag, "ResourceId": name, "ResourceType": "auto-scaling-group"} for tag in tags],
    )


def read_group(name: str, region: str = REGION) -> dict[str, Any]:
    client = SESSION.client("autoscaling", region_name=region)
    group: dict[str, Any] = client.describe_auto_scaling_groups(AutoScalingGroupNames=[name])[
        "AutoScalingGroups"
    ][0]
    return group


def fleet_with(factory: Callable[[str, str], Any], **asg_regions: str) -> AsgFleet:
    return AsgFleet(asg_regions, default_region=REGION, client_factory=factory)


# describe / discover


def test_describe_groups_reads_sizes_instances_and_tags(factory: RecordingFactory) -> None:
    # Given a group with two instances and a tag
    create_group("gpu-a", desired=2, min_size=1, max_size=6)
    fleet = fleet_with(factory)

    # When it is described together with a group that does not exist
    groups = fleet.describe_groups(["gpu-a", "missing"])

    # Then the group's sizes, live instances, tags and region are read; the missing one is absent
    assert set(groups) == {"gpu-a"}
    asg = groups["gpu-a"]
    assert (asg.min_size, asg.desired, asg.max_size) == (1, 2, 6)
    assert len(asg.live_instances) == 2
    assert {i.instance_type for i in asg.instances} == {"g5.xlarge"}
    assert {i.lifecycle_state for i in asg.instances} == {"InService"}
    assert asg.tags["team"] == "ml"
    assert asg.tags[constants.TAG_CLUSTER] == CLUSTER
    assert asg.region == REGION
    assert asg.availability_zones == (f"{REGION}a",)


def test_describe_groups_reads_the_scale_in_protection_the_operator_set(factory: RecordingFactory) -> None:
    # Given a group of two instances, one of which the operator protected from scale-in
    create_group("gpu-a", desired=2)
    autoscaling = SESSION.client("autoscaling", region_name=REGION)
    first = sorted(i["InstanceId"] for i in read_group("gpu-a")["Instances"])[0]
    autoscaling.set_instance_protection(
        AutoScalingGroupName="gpu-a", InstanceIds=[first], ProtectedFromScaleIn=True
    )
    # When it is described
    asg = fleet_with(factory).describe_groups(["gpu-a"])["gpu-a"]
    # Then the instance's flag and the group's default are read (AWS: instance scale-in protection)
    assert {i.instance_id for i in asg.instances if i.protected_from_scale_in} == {first}
    assert asg.new_instances_protected is False


def test_describe_groups_asks_for_at_most_100_names_per_call(factory: RecordingFactory) -> None:
    # Given 105 groups
    names = [f"gpu-{i:03d}" for i in range(105)]
    ec2 = SESSION.client("ec2", region_name=REGION)
    ec2.create_launch_template(
        LaunchTemplateName="lt-many",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g5.xlarge"},
    )
    autoscaling = SESSION.client("autoscaling", region_name=REGION)
    for name in names:
        autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=name,
            MinSize=0,
            MaxSize=1,
            DesiredCapacity=0,
            LaunchTemplate={"LaunchTemplateName": "lt-many"},
            AvailabilityZones=["us-east-1a"],
        )
    fleet = fleet_with(factory)

    # When all of them are described
    groups = fleet.describe_groups(reversed(names))

    # Then every group is returned, from two calls of at most 100 names each
    assert sorted(groups) == names
    calls = factory.operations("DescribeAutoScalingGroups")
    assert [len(c["AutoScalingGroupNames"]) for c in calls] == [100, 5]
    assert all(c["MaxRecords"] == 100 for c in calls)


def test_describe_groups_reads_each_group_in_its_region(factory: RecordingFactory) -> None:
    # Given one group per region and a fleet that knows where each lives
    create_group("gpu-east", region=REGION)
    create_group("gpu-west", region=OTHER_REGION)
    fleet = fleet_with(factory, **{"gpu-east": REGION, "gpu-west": OTHER_REGION})

    # When both are described
    groups = fleet.describe_groups(["gpu-east", "gpu-west"])

    # Then each comes from its own region's client
    assert {name: asg.region for name, asg in groups.items()} == {
        "gpu-east": REGION,
        "gpu-west": OTHER_REGION,
    }


def test_discover_group_names_by_cluster_tag(factory: RecordingFactory) -> None:
    # Given groups of this cluster (in two regions), of another cluster, and untagged
    create_group("gpu-a")
    create_group("gpu-b")
    create_group("gpu-west", region=OTHER_REGION)
    create_group("other-cluster", cluster="someone-else")
    create_group("untagged", cluster=None)
    fleet = fleet_with(factory, **{"gpu-west": OTHER_REGION})

    # When the cluster's groups are discovered
    names = fleet.discover_group_names(CLUSTER)

    # Then only the tagged groups are found, sorted, with a tag filter (not a full listing)
    assert names == ("gpu-a", "gpu-b", "gpu-west")
    filters = [c["Filters"] for c in factory.operations("DescribeAutoScalingGroups")]
    assert filters == [[{"Name": f"tag:{constants.TAG_CLUSTER}", "Values": [CLUSTER]}]] * 2


def test_from_config_takes_the_regions_of_the_scaler_config(factory: RecordingFactory) -> None:
    # Given a config with a group in another region
    create_group("gpu-west", region=OTHER_REGION)
    config = ScalerConfig.model_validate(
        {
            "cluster_name": CLUSTER,
            "region": REGION,
            "node_groups": [
                {"name": "west", "asg_name": "gpu-west", "instance_type": "g5.xlarge", "region": OTHER_REGION}
            ],
        }
    )

    # When the fleet is built from it and describes the group
    fleet = AsgFleet.from_config(config, client_factory=factory)
    groups = fleet.describe_groups(["gpu-west"])

    # Then the group is read in its region
    assert groups["gpu-west"].region == OTHER_REGION


# set desired


def test_set_desired_capacity_within_bounds(factory: RecordingFactory) -> None:
    # Given a group at 1 of [0, 5]
    create_group("gpu-a", desired=1)
    fleet = fleet_with(factory)
    asg = fleet.describe_groups(["gpu-a"])["gpu-a"]

    # When desired is set to 3
    fleet.set_desired_capacity(asg, 3)

    # Then the group wants 3, set without honouring the cooldown
    assert read_group("gpu-a")["DesiredCapacity"] == 3
    (call,) = factory.operations("SetDesiredCapacity")
    assert call == {"AutoScalingGroupName": "gpu-a", "DesiredCapacity": 3, "HonorCooldown": False}


@pytest.mark.parametrize("desired", [-1, 6])
def test_set_desired_capacity_outside_bounds_raises_before_any_call(
    factory: RecordingFactory, desired: int
) -> None:
    # Given a group of [0, 5] (moto itself would accept 6)
    asg = AsgState(name="gpu-a", min_size=0, max_size=5, desired=1, region=REGION)
    fleet = fleet_with(factory)

    # When desired outside the bounds is asked for
    with pytest.raises(ValueError, match="outside"):
        fleet.set_desired_capacity(asg, desired)

    # Then no API call was made
    assert factory.calls == []


# terminate


def test_terminate_instance_with_decrement_shrinks_the_group(factory: RecordingFactory) -> None:
    # Given a group of two instances
    create_group("gpu-a", desired=2)
    fleet = fleet_with(factory)
    victim = read_group("gpu-a")["Instances"][0]["InstanceId"]

    # When one is terminated with decrement
    fleet.terminate_instance(victim, decrement=True, region=REGION)

    # Then the group wants one and no longer holds that instance
    group = read_group("gpu-a")
    assert group["DesiredCapacity"] == 1
    assert victim not in {i["InstanceId"] for i in group["Instances"]}
    (call,) = factory.operations("TerminateInstanceInAutoScalingGroup")
    assert call == {"InstanceId": victim, "ShouldDecrementDesiredCapacity": True}


def test_terminate_instance_without_decrement_lets_the_group_replace_it(factory: RecordingFactory) -> None:
    # Given a group of two instances
    create_group("gpu-a", desired=2)
    fleet = fleet_with(factory)
    victim = read_group("gpu-a")["Instances"][0]["InstanceId"]

    # When one is terminated without decrement
    fleet.terminate_instance(victim, decrement=False)

    # Then desired stays 2 and a replacement took its place
    group = read_group("gpu-a")
    assert group["DesiredCapacity"] == 2
    assert len(group["Instances"]) == 2
    assert victim not in {i["InstanceId"] for i in group["Instances"]}


def stubbed(service: str) -> tuple[Any, Stubber]:
    client = SESSION.client(service, region_name=REGION, config=clients.client_config())
    return client, Stubber(client)


def only(client: Any) -> Callable[[str, str], Any]:
    return lambda service, region: client


def test_terminating_an_instance_already_gone_is_success() -> None:
    # Given Auto Scaling answers ValidationError, and a fresh read shows no such managed instance
    client, stub = stubbed("autoscaling")
    stub.add_client_error(
        "terminate_instance_in_auto_scaling_group",
        service_error_code="ValidationError",
        service_message="Instance Id not found - No managed instance found for instance ID: i-0abc",
        http_status_code=400,
    )
    stub.add_response(
        "describe_auto_scaling_instances", {"AutoScalingInstances": []}, {"InstanceIds": ["i-0abc"]}
    )

    # When the instance is terminated
    with stub:
        fleet_with(only(client)).terminate_instance("i-0abc", decrement=True)

    # Then it succeeds, decided by the code and the re-read (not by the message)
    stub.assert_no_pending_responses()


def test_terminating_an_instance_already_terminating_is_success() -> None:
    # Given ValidationError, and the re-read shows the instance leaving
    client, stub = stubbed("autoscaling")
    stub.add_client_error("terminate_instance_in_auto_scaling_group", "ValidationError", "not in InService")
    stub.add_response(
        "describe_auto_scaling_instances", {"AutoScalingInstances": [_instance("Terminating:Wait")]}
    )

    # When / Then it succeeds
    with stub:
        fleet_with(only(client)).terminate_instance("i-0abc", decrement=False)


def test_a_validation_error_for_a_live_instance_is_a_fleet_action_error() -> None:
    # Given ValidationError for an instance the re-read shows in service
    client, stub = stubbed("autoscaling")
    stub.add_client_error("terminate_instance_in_auto_scaling_group", "ValidationError", "some other problem")
    stub.add_response("describe_auto_scaling_instances", {"AutoScalingInstances": [_instance("InService")]})

    # When / Then the failure is reported
    with stub, pytest.raises(FleetActionError, match="ValidationError"):
        fleet_with(only(client)).terminate_instance("i-0abc", decrement=True)


def _instance(state: str) -> dict[str, Any]:
    return {
        "InstanceId": "i-0abc",
        "AutoScalingGroupName": "gpu-a",
        "AvailabilityZone": "us-east-1a",
        "LifecycleState": state,
        "HealthStatus": "Healthy",
        "ProtectedFromScaleIn": False,
    }


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("Throttling", 400, ThrottledError),
        ("AccessDenied", 403, AuthError),
        ("ScalingActivityInProgress", 400, FleetActionError),
    ],
)
def test_set_desired_errors_are_mapped_by_code(code: str, status: int, error: type[Exception]) -> None:
    # Given Auto Scaling answers with an error once
    client, stub = stubbed("autoscaling")
    stub.add_client_error("set_desired_capacity", code, "text", http_status_code=status)
    asg = AsgState(name="gpu-a", min_size=0, max_size=5, desired=1, region=REGION)

    # When desired is set
    with stub, pytest.raises(error) as caught:
        fleet_with(only(client)).set_desired_capacity(asg, 2)

    # Then the project error is raised from the boto error, after exactly one call
    assert caught.value.__cause__ is not None
    stub.assert_no_pending_responses()


# failed activities


def _activity(activity_id: str, at: datetime, status: str, message: str = "") -> dict[str, Any]:
    return {
        "ActivityId": activity_id,
        "AutoScalingGroupName": "gpu-a",
        "Description": f"Launching a new EC2 instance. Status Reason: {message}" if message else "Launching",
        "Cause": "At 2026-12-02T10:00:00Z a user request update of AutoScalingGroup constraints ...",
        "StartTime": at,
        "StatusCode": status,
        "Progress": 100,
        **({"StatusMessage": message} if message else {}),
    }


def test_failed_activities_are_read_newest_first_until_since() -> None:
    # Given two pages of activities, newest first; the second page reaches past `since`
    now = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    since = now - timedelta(minutes=30)
    client, stub = stubbed("autoscaling")
    stub.add_response(
        "describe_scaling_activities",
        {
            "Activities": [
                _activity(
                    "a1", now - timedelta(minutes=1), "Failed", "InsufficientInstanceCapacity - We currently"
                ),
                _activity("a2", now - timedelta(minutes=2), "Successful"),
                _activity(
                    "a3", now - timedelta(minutes=3), "Cancelled", "There is no Spot capacity available"
                ),
            ],
            "NextToken": "page-2",
        },
        {"AutoScalingGroupName": "gpu-a", "MaxRecords": 100},
    )
    stub.add_response(
        "describe_scaling_activities",
        {
            "Activities": [
                _activity("a4", since, "Failed", "VcpuLimitExceeded - You have requested more vCPU capacity"),
                _activity("a5", since - timedelta(seconds=1), "Failed", "InsufficientInstanceCapacity"),
                _activity("a6", since - timedelta(hours=1), "Failed", "InsufficientInstanceCapacity"),
            ],
            "NextToken": "page-3",  # never asked for: a5 is already older than `since`
        },
        {"AutoScalingGroupName": "gpu-a", "MaxRecords": 100, "NextToken": "page-2"},
    )
    asg = AsgState(name="gpu-a", min_size=0, max_size=5, desired=1, region=REGION)

    # When the failed activities since `since` are read
    with stub:
        failures = fleet_with(only(client)).failed_activities(asg, since)

    # Then failed and cancelled ones at or after `since` are kept, classified, and no third page is read
    assert [(f.activity_id, f.kind) for f in failures] == [
        ("a1", FailureKind.INSUFFICIENT_CAPACITY),
        ("a3", FailureKind.SPOT_CAPACITY),
        ("a4", FailureKind.INSTANCE_LIMIT),
    ]
    assert failures[0].at == now - timedelta(minutes=1)
    assert failures[0].asg_name == "gpu-a"
    assert "InsufficientInstanceCapacity" in failures[0].message
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(("code", "error"), [("Throttling", FleetReadError), ("AccessDenied", AuthError)])
def test_failed_activities_errors_follow_the_read_contract(code: str, error: type[Exception]) -> None:
    # Given the activity read fails
    client, stub = stubbed("autoscaling")
    stub.add_client_error("describe_scaling_activities", code, "text")
    asg = AsgState(name="gpu-a", min_size=0, max_size=5, desired=1, region=REGION)

    # When / Then throttling is a FleetReadError (as the port says) and a denial an AuthError
    with stub, pytest.raises(error):
        fleet_with(only(client)).failed_activities(asg, datetime(2026, 12, 2, tzinfo=UTC))


def test_moto_records_no_scaling_activities(factory: RecordingFactory) -> None:
    # Given a moto group that scaled (why the tests above use the Stubber)
    create_group("gpu-a", desired=1)
    fleet = fleet_with(factory)
    asg = fleet.describe_groups(["gpu-a"])["gpu-a"]

    # When its failures are read / Then there are none, and nothing breaks
    assert fleet.failed_activities(asg, datetime(2000, 1, 1, tzinfo=UTC)) == ()


# instance types


def test_instance_types_give_raw_capacity_and_architecture_from_moto_data(factory: RecordingFactory) -> None:
    # Given moto's instance-type data
    fleet = fleet_with(factory)

    # When GPU and arm64 types are asked, including one moto does not know (p3.16xlarge)
    types = fleet.instance_types(["p4d.24xlarge", "p3.16xlarge", "g5.xlarge", "g5g.xlarge", "nope.large"])

    # Then known types get raw vCPU/memory/GPU/pod capacity (no reservation) and their kubernetes.io/arch;
    # unknown ones are absent
    assert set(types) == {"p4d.24xlarge", "g5.xlarge", "g5g.xlarge"}
    p4d = types["p4d.24xlarge"]
    assert p4d.name == "p4d.24xlarge"
    assert p4d.capacity == Resources.of({CPU: 96_000, MEMORY: 1152 * GIB, GPU: 8, PODS: 737})
    assert p4d.architecture == "amd64"
    assert types["g5.xlarge"].capacity == Resources.of({CPU: 4_000, MEMORY: 16 * GIB, GPU: 1, PODS: 58})
    assert types["g5.xlarge"].architecture == "amd64"
    assert types["g5g.xlarge"].capacity == Resources.of({CPU: 4_000, MEMORY: 8 * GIB, GPU: 1, PODS: 58})
    assert types["g5g.xlarge"].architecture == "arm64"
    # EFA interfaces and NVMe instance store travel with the type, for the template to use where
    # software on the node makes them real
    assert (p4d.efa_interfaces, p4d.nvme_instance_store_gb) == (4, 8000)
    assert (types["g5g.xlarge"].efa_interfaces, types["g5g.xlarge"].nvme_instance_store_gb) == (0, 0)
    assert fleet.gpu_models(["p4d.24xlarge", "g5.xlarge", "nope.large"]) == {
        "p4d.24xlarge": "A100",
        "g5.xlarge": "A10G",
    }


def test_instance_types_are_cached(factory: RecordingFactory) -> None:
    # Given types already read once, unknown type included
    fleet = fleet_with(factory)
    fleet.instance_types(["g5.xlarge", "nope.large"])
    calls = len(factory.operations("DescribeInstanceTypes"))

    # When they are asked again
    again = fleet.instance_types(["nope.large", "g5.xlarge"])

    # Then no further call is made
    assert set(again) == {"g5.xlarge"}
    assert len(factory.operations("DescribeInstanceTypes")) == calls


def test_instance_types_are_read_in_the_region_asked(factory: RecordingFactory) -> None:
    # Given a fleet whose default region is us-east-1
    fleet = fleet_with(factory)

    # When a type is asked in another region
    fleet.instance_types(["g5.xlarge"], OTHER_REGION)

    # Then the other region's ec2 client is the one asked
    assert factory.built == [("ec2", OTHER_REGION)]


def test_instance_type_errors_are_read_errors() -> None:
    # Given EC2 throttles the instance-type read
    client, stub = stubbed("ec2")
    stub.add_client_error("describe_instance_types", "RequestLimitExceeded", "slow down")

    # When / Then it is a FleetReadError
    with stub, pytest.raises(FleetReadError):
        fleet_with(only(client)).instance_types(["g5.xlarge"])


# AWS capacity as it really behaves: weights, suspended processes, zones from subnets, reservations


def create_mixed_group(name: str, *, desired: int) -> None:
    """A MixedInstancesPolicy group: g5.48xlarge (8 GPUs, weight 8) first, g5.12xlarge (4 GPUs, weight 4).

    moto 5.2.5 launches the first override's weight but lists its instances with the launch template's
    type and no WeightedCapacity (AWS lists both): the template names g5.48xlarge so the weight is found
    by type, the fallback the adapter uses for instances without a WeightedCapacity.
    """
    SESSION.client("ec2", region_name=REGION).create_launch_template(
        LaunchTemplateName=f"lt-{name}",
        LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": "g5.48xlarge"},
    )
    SESSION.client("autoscaling", region_name=REGION).create_auto_scaling_group(
        AutoScalingGroupName=name,
        MinSize=0,
        MaxSize=64,
        DesiredCapacity=desired,
        AvailabilityZones=[f"{REGION}a"],
        MixedInstancesPolicy={
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateName": f"lt-{name}", "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": "g5.48xlarge", "WeightedCapacity": "8"},
                    {"InstanceType": "g5.12xlarge", "WeightedCapacity": "4"},
                ],
            }
        },
    )


def test_weighted_group_is_read_in_nodes_and_desired_is_set_in_units(factory: RecordingFactory) -> None:
    # Given a weighted group at 16 units: moto launched two g5.48xlarge (8 units each)
    create_mixed_group("gpu-mixed", desired=16)
    fleet = fleet_with(factory, **{"gpu-mixed": REGION})
    asg = fleet.describe_groups(["gpu-mixed"])["gpu-mixed"]
    # Then the group is two nodes with nothing launching, and a template node is 4 units
    assert (asg.desired, len(asg.live_instances), asg.max_size) == (2, 2, 14)
    assert asg.units is not None and (asg.units.desired, asg.units.per_node) == (16, 4)
    assert asg.instance_types == ("g5.48xlarge", "g5.12xlarge")
    # And the shapes of both types are known (the template is the smaller one)
    assert asg.type_shapes["g5.12xlarge"].capacity.get(GPU) == 4
    assert asg.type_shapes["g5.48xlarge"].capacity.get(GPU) == 8
    # When one more node is asked for
    fleet.set_desired_capacity(asg, 3)
    # Then AWS is asked for 4 units more
    assert factory.operations("SetDesiredCapacity")[-1]["DesiredCapacity"] == 20
    assert read_group("gpu-mixed")["DesiredCapacity"] == 20


def test_suspended_processes_are_read(factory: RecordingFactory) -> None:
    # Given a group whose Launch process is suspended
    create_group("gpu-a", desired=0)
    SESSION.client("autoscaling", region_name=REGION).suspend_processes(
        AutoScalingGroupName="gpu-a", ScalingProcesses=["Launch"]
    )
    asg = fleet_with(factory, **{"gpu-a": REGION}).describe_groups(["gpu-a"])["gpu-a"]
    # Then the group knows it cannot launch, and can still terminate
    assert asg.launch_suspended and not asg.terminate_suspended


def _stubbed_pair() -> tuple[Any, Stubber, Any, Stubber]:
    autoscaling, as_stub = stubbed("autoscaling")
    ec2, ec2_stub = stubbed("ec2")
    return autoscaling, as_stub, ec2, ec2_stub


def _group_output(**fields: Any) -> dict[str, Any]:
    """One group as `aws autoscaling describe-auto-scaling-groups` prints it."""
    return {
        "AutoScalingGroupName": "gpu-a",
        "AutoScalingGroupARN": (
            f"arn:aws:autoscaling:{REGION}:123456789012:autoScalingGroup:0f1e:autoScalingGroupName/gpu-a"
        ),
        "LaunchTemplate": {"LaunchTemplateId": "lt-0abc", "LaunchTemplateName": "gpu", "Version": "$Latest"},
        "MinSize": 0,
        "MaxSize": 8,
        "DesiredCapacity": 0,
        "DefaultCooldown": 300,
        "AvailabilityZones": [],
        "HealthCheckType": "EC2",
        "HealthCheckGracePeriod": 300,
        "Instances": [],
        "CreatedTime": datetime(2026, 11, 1, tzinfo=UTC),
        "SuspendedProcesses": [],
        "VPCZoneIdentifier": "subnet-0aaa1111,subnet-0bbb2222",
        "Tags": [],
        "TerminationPolicies": ["Default"],
        "NewInstancesProtectedFromScaleIn": False,
        **fields,
    }


def _subnet(subnet_id: str, zone: str) -> dict[str, Any]:
    return {
        "AvailabilityZone": zone,
        "AvailabilityZoneId": "use1-az1",
        "AvailableIpAddressCount": 4000,
        "CidrBlock": "10.0.0.0/20",
        "DefaultForAz": False,
        "MapPublicIpOnLaunch": False,
        "State": "available",
        "SubnetId": subnet_id,
        "VpcId": "vpc-0abc",
        "OwnerId": "123456789012",
    }


def _by_service(autoscaling: Any, ec2: Any) -> Callable[[str, str], Any]:
    return lambda service, region: autoscaling if service == "autoscaling" else ec2


def test_zones_come_from_the_subnets_when_the_group_lists_none_and_are_cached() -> None:
    # Given a group output without AvailabilityZones, in two subnets of us-east-1b
    autoscaling, as_stub, ec2, ec2_stub = _stubbed_pair()
    for _ in range(2):
        as_stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [_group_output()]})
    ec2_stub.add_response(
        "describe_subnets",
        {"Subnets": [_subnet("subnet-0aaa1111", "us-east-1b"), _subnet("subnet-0bbb2222", "us-east-1b")]},
        {"SubnetIds": ["subnet-0aaa1111", "subnet-0bbb2222"]},
    )
    fleet = AsgFleet({"gpu-a": REGION}, default_region=REGION, client_factory=_by_service(autoscaling, ec2))
    with as_stub, ec2_stub:
        first = fleet.describe_groups(["gpu-a"])["gpu-a"]
        second = fleet.describe_groups(["gpu-a"])["gpu-a"]
        # Then both reads know the one zone, and the subnets were described once
        ec2_stub.assert_no_pending_responses()
    assert first.availability_zones == second.availability_zones == ("us-east-1b",)


BLOCK = {
    "CapacityReservationId": "cr-0123456789abcdef0",
    "OwnerId": "123456789012",
    "CapacityReservationArn": f"arn:aws:ec2:{REGION}:123456789012:capacity-reservation/cr-0123456789abcdef0",
    "AvailabilityZoneId": "use1-az1",
    "InstanceType": "p5.48xlarge",
    "InstancePlatform": "Linux/UNIX",
    "AvailabilityZone": "us-east-1a",
    "Tenancy": "default",
    "TotalInstanceCount": 4,
    "AvailableInstanceCount": 3,
    "EbsOptimized": True,
    "EphemeralStorage": False,
    "State": "active",
    "StartDate": datetime(2026, 12, 1, 11, 30, tzinfo=UTC),
    "EndDate": datetime(2026, 12, 8, 11, 30, tzinfo=UTC),
    "EndDateType": "limited",
    "InstanceMatchCriteria": "targeted",
    "CreateDate": datetime(2026, 11, 20, 8, 0, tzinfo=UTC),
    "ReservationType": "capacity-block",
}


def test_reservations_of_the_group_and_of_the_config_are_read_with_their_free_instances() -> None:
    # Given a group targeting one reservation itself, and a config naming a second (its launch template's),
    # which no longer exists
    spec = {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
    }
    autoscaling, as_stub, ec2, ec2_stub = _stubbed_pair()
    as_stub.add_response(
        "describe_auto_scaling_groups",
        {
            "AutoScalingGroups": [
                _group_output(AvailabilityZones=["us-east-1a"], CapacityReservationSpecification=spec)
            ]
        },
    )
    gone = "cr-0fedcba9876543210"
    both = {"CapacityReservationIds": ["cr-0123456789abcdef0", gone]}
    ec2_stub.add_client_error(
        "describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", expected_params=both
    )
    ec2_stub.add_response(
        "describe_capacity_reservations",
        {"CapacityReservations": [BLOCK]},
        {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
    )
    ec2_stub.add_client_error(
        "describe_capacity_reservations",
        "InvalidCapacityReservationId.NotFound",
        expected_params={"CapacityReservationIds": [gone]},
    )
    fleet = AsgFleet(
        {"gpu-a": REGION},
        default_region=REGION,
        client_factory=_by_service(autoscaling, ec2),
        reservation_ids={"gpu-a": [gone]},
    )
    with as_stub, ec2_stub:
        asg = fleet.describe_groups(["gpu-a"])["gpu-a"]
    # Then the existing block is attached with its free count, the missing one is left out
    (block,) = asg.reservations
    assert (block.reservation_id, block.available, block.is_capacity_block) == (
        "cr-0123456789abcdef0",
        3,
        True,
    )
    assert block.end == datetime(2026, 12, 8, 11, 30, tzinfo=UTC)
    assert asg.reservation_preference == "capacity-reservations-only"


def test_reservation_read_errors_are_fleet_read_errors() -> None:
    autoscaling, as_stub, ec2, ec2_stub = _stubbed_pair()
    as_stub.add_response(
        "describe_auto_scaling_groups",
        {"AutoScalingGroups": [_group_output(AvailabilityZones=["us-east-1a"])]},
    )
    ec2_stub.add_client_error("describe_capacity_reservations", "UnauthorizedOperation", http_status_code=403)
    fleet = AsgFleet(
        {"gpu-a": REGION},
        default_region=REGION,
        client_factory=_by_service(autoscaling, ec2),
        reservation_ids={"gpu-a": ["cr-0123456789abcdef0"]},
    )
    with as_stub, ec2_stub, pytest.raises(AuthError):
        fleet.describe_groups(["gpu-a"])


def test_vcpu_counted_group_learns_its_node_size_from_instance_type_data(factory: RecordingFactory) -> None:
    # Given a vcpu-counted group (attribute-based selection) described with one g5.12xlarge override
    autoscaling, as_stub = stubbed("autoscaling")
    policy = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0abc", "Version": "$Latest"},
            "Overrides": [{"InstanceType": "g5.12xlarge"}],
        }
    }
    group = _group_output(
        AvailabilityZones=["us-east-1a"],
        DesiredCapacityType="vcpu",
        MixedInstancesPolicy=policy,
        DesiredCapacity=96,
    )
    as_stub.add_response("describe_auto_scaling_groups", {"AutoScalingGroups": [group]})
    ec2 = factory("ec2", REGION)  # moto knows g5.12xlarge: 48 vCPUs
    fleet = AsgFleet({"gpu-a": REGION}, default_region=REGION, client_factory=_by_service(autoscaling, ec2))
    with as_stub:
        asg = fleet.describe_groups(["gpu-a"])["gpu-a"]
    # Then 96 vCPUs are two nodes
    assert asg.units is not None and (asg.units.capacity_type, asg.units.per_node) == ("vcpu", 48)
    assert asg.desired == 2


def test_a_plan_for_a_weighted_group_sets_the_units_its_new_nodes_need(factory: RecordingFactory) -> None:
    # Given the weighted group at 16 units (two g5.48xlarge, registered and busy), three pending 4-GPU pods
    create_mixed_group("gpu-mixed", desired=16)
    fleet = fleet_with(factory, **{"gpu-mixed": REGION})
    asg = fleet.describe_groups(["gpu-mixed"])["gpu-mixed"]
    config = ScalerConfig.model_validate(
        {
            "cluster_name": CLUSTER,
            "region": REGION,
            "node_groups": [
                {
                    "name": "mixed",
                    "asg_name": "gpu-mixed",
                    "instance_type": "g5.48xlarge",
                    "price_per_hour": 16.3,
                }
            ],
        }
    )
    ids = sorted(i.instance_id for i in asg.instances)
    labels = {"node.kubernetes.io/instance-type": "g5.48xlarge"}
    nodes = [node(f"n{n}", iid, labels=labels) for n, iid in enumerate(ids)]
    busy = [pod(f"busy{n}", gpus=8, node=f"n{n}") for n in range(len(ids))]
    pending = [pod(f"p{i}", gpus=4, cpu="8", memory="64Gi") for i in range(3)]
    snap = Snapshot(
        pods=pods_from_list({"kind": "PodList", "items": [*busy, *pending]}),
        nodes=nodes_from_list({"kind": "NodeList", "items": nodes}),
        asgs={"gpu-mixed": asg},
    )
    # When the plan is made and applied through the fleet
    decision = plan(snap, config, NOW).group("mixed")
    fleet.set_desired_capacity(asg, decision.desired)
    # Then three g5.12xlarge-sized nodes are asked for: 3 x 4 units on top of the 16
    assert (decision.current_desired, decision.desired) == (2, 5)
    assert read_group("gpu-mixed")["DesiredCapacity"] == 28


# node lifecycle reads (repair and rotation)


def test_instance_statuses_and_launch_templates_of_a_groups_instances(factory: RecordingFactory) -> None:
    # Given a group of two instances launched from its launch template, a new template version made
    # default since, and one instance id EC2 no longer knows
    create_group("gpu-a", desired=2)
    fleet = fleet_with(factory)
    asg = fleet.describe_groups(["gpu-a"])["gpu-a"]
    ids = [i.instance_id for i in asg.live_instances]
    ec2 = SESSION.client("ec2", region_name=REGION)
    assert asg.launch_template is not None
    template = asg.launch_template.template_id
    ec2.create_launch_template_version(LaunchTemplateId=template, LaunchTemplateData={"ImageId": "ami-2"})
    ec2.modify_launch_template(LaunchTemplateId=template, DefaultVersion="2")

    # When their statuses and the template are read
    statuses = fleet.instance_statuses([*ids, "i-0123456789abcdef0"], REGION)
    templates = fleet.launch_templates([template], REGION)

    # Then every known instance has its checks (ok) and the unknown one is absent; the template's
    # default and latest versions are numbers, and the group names it by its id
    assert set(statuses) == set(ids)
    assert all(not s.impaired and s.state == "running" for s in statuses.values())
    assert (templates[template].default_version, templates[template].latest_version) == (2, 2)
    assert all(c["IncludeAllInstances"] is True for c in factory.operations("DescribeInstanceStatus"))
