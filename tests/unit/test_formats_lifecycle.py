"""Node lifecycle inputs in their real formats: node conditions and capacity (`kubectl get node -o
json`), `aws ec2 describe-instance-status --include-all-instances`, `aws ec2 describe-launch-templates`
and the launch templates of `aws autoscaling describe-auto-scaling-groups`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from shared.domain.errors import InputError
from shared.formats.aws import asgs_from_describe
from shared.formats.kubernetes import node_from_json
from shared.formats.lifecycle import instance_statuses_from_describe, launch_templates_from_describe
from tests.builders import asg, node


def test_every_node_condition_and_the_capacity_are_read_as_written() -> None:
    obj = node("n0", "i-0")
    obj["status"]["conditions"].append(
        {
            "type": "AcceleratedHardwareReady",
            "status": "False",
            "reason": "NvidiaXID79Error",
            "message": "GPU has fallen off the bus",
            "lastTransitionTime": "2026-12-02T11:00:00Z",
        }
    )
    obj["status"]["capacity"] = {**obj["status"]["allocatable"], "nvidia.com/gpu": "8"}
    obj["status"]["allocatable"] = {**obj["status"]["allocatable"], "nvidia.com/gpu": "7"}

    parsed = node_from_json(obj)

    gpu = next(c for c in parsed.conditions if c.type == "AcceleratedHardwareReady")
    assert (gpu.status, gpu.reason) == ("False", "NvidiaXID79Error")
    assert gpu.changed_at == datetime(2026, 12, 2, 11, tzinfo=UTC)
    assert parsed.capacity is not None and parsed.capacity.gpus == 8 and parsed.allocatable.gpus == 7


def test_a_node_without_status_capacity_has_none() -> None:
    obj = node("n0", "i-0")
    del obj["status"]["capacity"]

    assert node_from_json(obj).capacity is None


def test_instance_status_reads_checks_impaired_since_and_events() -> None:
    document = {
        "InstanceStatuses": [
            {
                "AvailabilityZone": "us-west-2a",
                "InstanceId": "i-0a1",
                "InstanceState": {"Code": 16, "Name": "running"},
                "InstanceStatus": {
                    "Details": [
                        {"Name": "reachability", "Status": "failed", "ImpairedSince": "2026-12-02T10:30:00Z"}
                    ],
                    "Status": "impaired",
                },
                "SystemStatus": {"Details": [{"Name": "reachability", "Status": "passed"}], "Status": "ok"},
                "Events": [
                    {
                        "InstanceEventId": "instance-event-0d59937288b749b32",
                        "Code": "system-reboot",
                        "Description": "[Completed] Scheduled reboot",
                        "NotBefore": "2026-12-01T10:00:00Z",
                    },
                    {
                        "InstanceEventId": "instance-event-0d59937288b749b33",
                        "Code": "instance-retirement",
                        "Description": "The instance is running on degraded hardware",
                        "NotBefore": "2026-12-04T10:00:00Z",
                    },
                ],
            }
        ]
    }

    status = instance_statuses_from_describe(document)["i-0a1"]

    assert status.impaired and status.impaired_since == datetime(2026, 12, 2, 10, 30, tzinfo=UTC)
    assert [(e.code, e.is_done) for e in status.events] == [
        ("system-reboot", True),
        ("instance-retirement", False),
    ]


def test_a_malformed_instance_status_names_its_element() -> None:
    with pytest.raises(InputError, match=r"status.json: InstanceStatuses\[1\]: KeyError"):
        instance_statuses_from_describe({"InstanceStatuses": [{"InstanceId": "i-1"}, {}]}, "status.json")


def test_launch_templates_and_the_group_and_instance_references() -> None:
    templates = launch_templates_from_describe(
        {
            "LaunchTemplates": [
                {
                    "LaunchTemplateId": "lt-0abc",
                    "LaunchTemplateName": "gpu",
                    "DefaultVersionNumber": 3,
                    "LatestVersionNumber": 5,
                }
            ]
        }
    )
    described = asg("g", desired=1, instances=["i-0"])
    described["MixedInstancesPolicy"] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": {"LaunchTemplateId": "lt-0abc", "Version": "$Latest"}
        },
        "InstancesDistribution": {"OnDemandBaseCapacity": 0, "OnDemandPercentageAboveBaseCapacity": 0},
    }
    described["Instances"][0]["LaunchTemplate"] = {"LaunchTemplateId": "lt-0abc", "Version": "4"}

    group = asgs_from_describe({"AutoScalingGroups": [described]})["g"]

    assert (templates["lt-0abc"].default_version, templates["lt-0abc"].latest_version) == (3, 5)
    assert group.launch_template is not None and group.launch_template.version == "$Latest"
    instance = group.instances[0].launch_template
    assert instance is not None and (instance.template_id, instance.version) == ("lt-0abc", "4")


def test_a_launch_template_without_version_numbers_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"LaunchTemplates\[0\]: KeyError"):
        launch_templates_from_describe({"LaunchTemplates": [{"LaunchTemplateId": "lt-0abc"}]})
