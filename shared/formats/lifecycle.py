"""AWS CLI / API JSON of node lifecycle to domain objects: `aws ec2 describe-instance-status
--include-all-instances`, `aws ec2 describe-launch-templates` and the launch template or launch
configuration of an Auto Scaling group and its instances (boto3 gives the same shapes, with datetimes
where the CLI prints ISO 8601 strings)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from shared.domain.errors import InputError
from shared.domain.model import (
    InstanceStatus,
    LaunchTemplateRef,
    LaunchTemplateVersions,
    ScheduledEvent,
)
from shared.formats.describe import described_items


def type_launch_templates(obj: Mapping[str, Any]) -> dict[str, LaunchTemplateRef]:
    """The MixedInstancesPolicy overrides that name a launch template of their own, by instance type
    (Auto Scaling API Reference, LaunchTemplateOverrides: "LaunchTemplateSpecification ... the launch
    template to use for an instance type"; the other types use the group's)."""
    policy = obj.get("MixedInstancesPolicy")
    template = policy.get("LaunchTemplate") if isinstance(policy, Mapping) else None
    overrides = template.get("Overrides") if isinstance(template, Mapping) else None
    found: dict[str, LaunchTemplateRef] = {}
    for override in overrides if isinstance(overrides, list) else ():
        spec = override.get("LaunchTemplateSpecification") if isinstance(override, Mapping) else None
        if override.get("InstanceType") and isinstance(spec, Mapping) and spec.get("LaunchTemplateId"):
            found[str(override["InstanceType"])] = LaunchTemplateRef(
                template_id=str(spec["LaunchTemplateId"]),
                version=str(spec.get("Version") or "$Default"),
                name=str(spec.get("LaunchTemplateName") or ""),
            )
    return found


def launch_template_ref(obj: Mapping[str, Any]) -> LaunchTemplateRef | None:
    """The launch template of an ASG or one of its instances (`LaunchTemplate`, or the
    MixedInstancesPolicy's `LaunchTemplateSpecification`); None when it uses none."""
    spec = obj.get("LaunchTemplate")
    policy = obj.get("MixedInstancesPolicy")
    if not isinstance(spec, Mapping) and isinstance(policy, Mapping):
        spec = (policy.get("LaunchTemplate") or {}).get("LaunchTemplateSpecification")
    if not isinstance(spec, Mapping) or not spec.get("LaunchTemplateId"):
        return None
    return LaunchTemplateRef(
        template_id=str(spec["LaunchTemplateId"]),
        version=str(spec.get("Version") or "$Default"),
        name=str(spec.get("LaunchTemplateName") or ""),
    )


def _time(value: object) -> datetime | None:
    if value is None or value == "":
        return None
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _impaired_since(*summaries: Mapping[str, Any]) -> datetime | None:
    """The earliest ImpairedSince among the failed checks' Details."""
    times = [
        _time(detail.get("ImpairedSince"))
        for summary in summaries
        for detail in summary.get("Details") or ()
        if isinstance(detail, Mapping) and detail.get("Status") == "failed"
    ]
    known = [t for t in times if t is not None]
    return min(known) if known else None


def instance_status_from_json(obj: Mapping[str, Any]) -> InstanceStatus:
    """One InstanceStatuses element of DescribeInstanceStatus."""
    system = obj.get("SystemStatus") or {}
    instance = obj.get("InstanceStatus") or {}
    return InstanceStatus(
        instance_id=str(obj["InstanceId"]),
        availability_zone=str(obj.get("AvailabilityZone") or ""),
        state=str((obj.get("InstanceState") or {}).get("Name") or ""),
        system_status=str(system.get("Status") or ""),
        instance_status=str(instance.get("Status") or ""),
        impaired_since=_impaired_since(system, instance),
        events=tuple(
            ScheduledEvent(
                code=str(e.get("Code") or ""),
                description=str(e.get("Description") or ""),
                not_before=_time(e.get("NotBefore")),
                not_after=_time(e.get("NotAfter")),
            )
            for e in obj.get("Events") or ()
            if isinstance(e, Mapping)
        ),
    )


def instance_statuses_from_describe(
    document: object, source: str = "instance-status"
) -> dict[str, InstanceStatus]:
    """`{"InstanceStatuses": [...]}` (one page or several merged) by instance id; InputError naming
    the element that cannot be read."""
    items = described_items(document, "InstanceStatuses", source, "aws ec2 describe-instance-status")
    found: dict[str, InstanceStatus] = {}
    for index, item in enumerate(items):
        try:
            status = instance_status_from_json(item)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"{source}: InstanceStatuses[{index}]: {type(exc).__name__}: {exc}") from exc
        found[status.instance_id] = status
    return found


def launch_templates_from_describe(
    document: object, source: str = "launch-templates"
) -> dict[str, LaunchTemplateVersions]:
    """`{"LaunchTemplates": [...]}` by launch template id."""
    items = described_items(document, "LaunchTemplates", source, "aws ec2 describe-launch-templates")
    found: dict[str, LaunchTemplateVersions] = {}
    for index, item in enumerate(items):
        try:
            versions = LaunchTemplateVersions(
                template_id=str(item["LaunchTemplateId"]),
                name=str(item.get("LaunchTemplateName") or ""),
                default_version=int(item["DefaultVersionNumber"]),
                latest_version=int(item["LatestVersionNumber"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{source}: LaunchTemplates[{index}]: {type(exc).__name__}: {exc}") from exc
        found[versions.template_id] = versions
    return found
