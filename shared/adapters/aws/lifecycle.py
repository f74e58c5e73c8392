"""EC2 reads of node lifecycle for `AsgFleet`: instance status checks and scheduled events
(DescribeInstanceStatus) and launch templates' current versions (DescribeLaunchTemplates).

Both are read every run (a status or a default version is what changes). Ids EC2 does not know
(an instance terminated meanwhile, a template deleted) are absent from the result; any other error
is a FleetReadError or AuthError, as the Fleet port says.
"""

from __future__ import annotations

from collections.abc import Sequence

from shared.adapters.aws.clients import AwsClient
from shared.domain.model import InstanceStatus, LaunchTemplateVersions
from shared.formats.lifecycle import instance_statuses_from_describe, launch_templates_from_describe

# DescribeInstanceStatus takes at most 100 instance ids per call; DescribeLaunchTemplates 200 ids.
INSTANCE_IDS_PER_CALL = 100
LAUNCH_TEMPLATES_PER_CALL = 200


def is_unknown_instance(code: str) -> bool:
    return code.startswith("InvalidInstanceID")


def is_unknown_launch_template(code: str) -> bool:
    return code.startswith("InvalidLaunchTemplateId")


def describe_instance_statuses(ec2: AwsClient, ids: Sequence[str]) -> dict[str, InstanceStatus]:
    """Status checks and events of `ids`, stopped and pending instances included
    (IncludeAllInstances: else only running instances are listed)."""
    pages = ec2.get_paginator("describe_instance_status").paginate(
        InstanceIds=list(ids), IncludeAllInstances=True
    )
    statuses = [item for page in pages for item in page["InstanceStatuses"]]
    return instance_statuses_from_describe({"InstanceStatuses": statuses}, "describe instance status")


def describe_launch_templates(ec2: AwsClient, ids: Sequence[str]) -> dict[str, LaunchTemplateVersions]:
    """Default and latest version numbers of the launch templates `ids`."""
    pages = ec2.get_paginator("describe_launch_templates").paginate(LaunchTemplateIds=list(ids))
    templates = [item for page in pages for item in page["LaunchTemplates"]]
    return launch_templates_from_describe({"LaunchTemplates": templates}, "describe launch templates")
