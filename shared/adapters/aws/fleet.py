"""`AsgFleet`: the `Fleet` port on EC2 Auto Scaling and EC2 instance-type data (boto3).

One autoscaling and one ec2 client per region the groups live in. Errors are mapped by code in
`clients.scaler_error`: reads raise FleetReadError (throttling included, as the port says) or
AuthError; mutations raise FleetActionError, ThrottledError or AuthError.

A described group comes back complete for planning: its zones (AvailabilityZones, else its
subnets' zones from DescribeSubnets, cached: a subnet never changes zone), the shapes of all its
instance types (DescribeInstanceTypes, cached), its sizes in nodes when it counts in units, and
the capacity reservations it launches into with their free instances (DescribeCapacityReservations,
read every time: the free count is what changes).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from shared import constants
from shared.adapters.aws import clients, lifecycle
from shared.adapters.aws.clients import BOTO_ERRORS, AwsClient, error_code, scaler_error
from shared.domain.errors import FleetActionError, FleetReadError, InputError, ScalerError
from shared.domain.model import (
    AsgState,
    CapacityReservation,
    InstanceStatus,
    InstanceType,
    LaunchTemplateVersions,
)
from shared.domain.operations import FailureKind, ScalingFailure
from shared.formats.aws import (
    SIZE_CAPACITY_TYPES,
    InstanceTypeInfo,
    asg_from_json,
    capacity_reservation_from_json,
    instance_type_from_json,
    reservation_ids_of,
    with_units,
)

if TYPE_CHECKING:
    from shared.config import ScalerConfig

logger = logging.getLogger(__name__)

ClientFactory = Callable[[str, str], AwsClient]
"""Builds the client of (service, region); `clients.client` in production, moto or Stubber in tests."""
_Parsed = TypeVar("_Parsed")  # what one EC2 list entry parses to

# API limits: DescribeAutoScalingGroups pages hold at most 100 groups, DescribeScalingActivities 100
# activities, DescribeInstanceTypes accepts 100 types per call.
ASG_PAGE_SIZE = 100
ASG_NAMES_PER_CALL = 100
ACTIVITY_PAGE_SIZE = 100
INSTANCE_TYPES_PER_CALL = 100
# DescribeSubnets and DescribeCapacityReservations take up to 1000 ids per call (MaxResults bounds).
SUBNETS_PER_CALL = 200
RESERVATIONS_PER_CALL = 100

FAILED_ACTIVITY_STATUSES = frozenset({"Failed", "Cancelled"})
# An instance that is already leaving needs no second termination.
_TERMINATING_STATES = frozenset({"Terminating", "Terminating:Wait", "Terminating:Proceed", "Terminated"})

# Failed activities carry no error code, only prose: these substrings (matched case-insensitively, first
# match wins) are what EC2 and Auto Scaling write for the failures backing off can help with. Spot and
# quota patterns come first because their messages often also contain the generic capacity wording.
FAILURE_PATTERNS: tuple[tuple[str, FailureKind], ...] = (
    ("There is no Spot capacity available", FailureKind.SPOT_CAPACITY),
    ("SpotMaxPriceTooLow", FailureKind.SPOT_CAPACITY),
    ("capacity-not-available", FailureKind.SPOT_CAPACITY),  # Spot request status code
    # A quota, not a shortage: the fix is a limit increase, so it is reported as one.
    ("MaxSpotInstanceCountExceeded", FailureKind.INSTANCE_LIMIT),
    ("VcpuLimitExceeded", FailureKind.INSTANCE_LIMIT),
    ("You have requested more vCPU capacity", FailureKind.INSTANCE_LIMIT),
    ("InstanceLimitExceeded", FailureKind.INSTANCE_LIMIT),
    ("You have requested more instances", FailureKind.INSTANCE_LIMIT),
    ("InsufficientInstanceCapacity", FailureKind.INSUFFICIENT_CAPACITY),
    ("We currently do not have sufficient", FailureKind.INSUFFICIENT_CAPACITY),
    ("UnfulfillableCapacity", FailureKind.INSUFFICIENT_CAPACITY),
)


def classify_failure(*texts: str | None) -> FailureKind:
    """The kind of a failed scaling activity, from its StatusMessage / Description / Cause."""
    haystack = " ".join(t for t in texts if t).casefold()
    for pattern, kind in FAILURE_PATTERNS:
        if pattern.casefold() in haystack:
            return kind
    return FailureKind.OTHER


class AsgFleet:
    """The Auto Scaling groups of one cluster, in one or more regions."""

    def __init__(
        self,
        asg_regions: Mapping[str, str],
        *,
        default_region: str,
        client_factory: ClientFactory = clients.client,
        reservation_ids: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self._asg_regions = dict(asg_regions)
        self._default_region = default_region
        self._client_factory = client_factory
        self._lock = threading.Lock()
        self._types: dict[tuple[str, str], InstanceTypeInfo | None] = {}  # None: unknown type
        self._subnet_zones: dict[tuple[str, str], str] = {}
        # Reservations a group launches into by its launch template (configured), by ASG name.
        self._reservation_ids = {name: tuple(ids) for name, ids in (reservation_ids or {}).items()}

    @classmethod
    def from_config(cls, config: ScalerConfig, *, client_factory: ClientFactory = clients.client) -> AsgFleet:
        """The fleet of a scaler config: its groups' regions."""
        return cls(
            {group.asg_name: config.region_of(group) for group in config.node_groups},
            default_region=config.region,
            client_factory=client_factory,
            reservation_ids={
                group.asg_name: group.capacity_reservation_ids
                for group in config.node_groups
                if group.capacity_reservation_ids
            },
        )

    # Reads

    def describe_groups(self, asg_names: Iterable[str]) -> Mapping[str, AsgState]:
        """Current state of the named groups; missing groups are absent. Raises FleetReadError, AuthError."""
        by_region: dict[str, list[str]] = {}
        for name in sorted(set(asg_names)):
            by_region.setdefault(self._region_of(name), []).append(name)
        out: dict[str, AsgState] = {}
        for region, names in sorted(by_region.items()):
            for start in range(0, len(names), ASG_NAMES_PER_CALL):
                batch = names[start : start + ASG_NAMES_PER_CALL]
                what = f"describe {len(batch)} groups from {batch[0]}"
                out.update(self._describe(region, {"AutoScalingGroupNames": batch}, what))
        return out

    def discover_groups(self, cluster_name: str) -> Mapping[str, AsgState]:
        """The groups tagged `TAG_CLUSTER=<cluster_name>` in every region of the fleet."""
        filters = [{"Name": f"tag:{constants.TAG_CLUSTER}", "Values": [cluster_name]}]
        out: dict[str, AsgState] = {}
        for region in self._regions():
            found = self._describe(region, {"Filters": filters}, f"discover groups of cluster {cluster_name}")
            out.update(found)
            with self._lock:
                for name in found:
                    self._asg_regions.setdefault(name, region)
        return out

    def discover_group_names(self, cluster_name: str) -> tuple[str, ...]:
        """Names of the groups tagged `TAG_CLUSTER=<cluster_name>`, sorted."""
        return tuple(sorted(self.discover_groups(cluster_name)))

    def failed_activities(self, asg: AsgState, since: datetime) -> tuple[ScalingFailure, ...]:
        """Failed or cancelled activities of one group started at or after `since`, newest first."""
        region = asg.region or self._region_of(asg.name)
        failures: list[ScalingFailure] = []
        try:
            pages = (
                self._client("autoscaling", region)
                .get_paginator("describe_scaling_activities")
                .paginate(AutoScalingGroupName=asg.name, PaginationConfig={"PageSize": ACTIVITY_PAGE_SIZE})
            )
            # Activities come newest first, so the first one older than `since` ends the read without
            # fetching the group's whole history (up to six weeks of it).
            for activity in _until_older(pages, since):
                if activity.get("StatusCode") not in FAILED_ACTIVITY_STATUSES:
                    continue
                message = str(activity.get("StatusMessage") or activity.get("Description") or "")
                failures.append(
                    ScalingFailure(
                        asg_name=asg.name,
                        activity_id=str(activity["ActivityId"]),
                        at=activity["StartTime"].astimezone(UTC),
                        kind=classify_failure(
                            activity.get("StatusMessage"), activity.get("Description"), activity.get("Cause")
                        ),
                        message=message,
                    )
                )
        except BOTO_ERRORS as exc:
            raise _read_error(exc, f"scaling activities of {asg.name}") from exc
        except (KeyError, TypeError) as exc:
            raise FleetReadError(f"scaling activities of {asg.name}: malformed activity: {exc!r}") from exc
        return tuple(failures)

    def instance_types(self, instance_types: Iterable[str], region: str = "") -> Mapping[str, InstanceType]:
        """Raw capacity and architecture per instance type; unknown types are absent. Cached per process."""
        return {name: info.to_domain() for name, info in self._instance_types(instance_types, region).items()}

    def gpu_models(self, instance_types: Iterable[str], region: str = "") -> Mapping[str, str]:
        """GPU model per instance type ("A100"); types without GPUs and unknown types are absent."""
        return {
            name: info.gpu_model
            for name, info in self._instance_types(instance_types, region).items()
            if info.gpu_model
        }

    def instance_statuses(
        self, instance_ids: Iterable[str], region: str = ""
    ) -> Mapping[str, InstanceStatus]:
        """Status checks and scheduled events per instance (DescribeInstanceStatus); unknown ids absent."""
        ec2 = self._client("ec2", region)
        return self._lifecycle_read(
            lambda batch: lifecycle.describe_instance_statuses(ec2, batch),
            sorted(set(instance_ids)),
            lifecycle.INSTANCE_IDS_PER_CALL,
            lifecycle.is_unknown_instance,
            "instance status of",
        )

    def launch_templates(
        self, template_ids: Iterable[str], region: str = ""
    ) -> Mapping[str, LaunchTemplateVersions]:
        """Default and latest version of each launch template; unknown ids absent."""
        ec2 = self._client("ec2", region)
        return self._lifecycle_read(
            lambda batch: lifecycle.describe_launch_templates(ec2, batch),
            sorted(set(template_ids)),
            lifecycle.LAUNCH_TEMPLATES_PER_CALL,
            lifecycle.is_unknown_launch_template,
            "launch template",
        )

    @staticmethod
    def _lifecycle_read(
        describe: Callable[[list[str]], dict[str, _Parsed]],
        ids: list[str],
        per_call: int,
        is_unknown: Callable[[str], bool],
        noun: str,
    ) -> dict[str, _Parsed]:
        try:
            return _describe_known(describe, ids, per_call, is_unknown, noun)
        except InputError as exc:
            raise FleetReadError(f"describe {noun}: malformed entry: {exc}") from exc

    # Mutations

    def set_desired_capacity(self, asg: AsgState, desired: int) -> None:
        """Set an absolute desired capacity, HonorCooldown=False.

        Raises ValueError outside [min, max] (before any call), FleetActionError, ThrottledError, AuthError.
        """
        if not asg.min_size <= desired <= asg.max_size:
            raise ValueError(
                f"{asg.name}: desired {desired} is outside [{asg.min_size}, {asg.max_size}] (min, max)"
            )
        region = asg.region or self._region_of(asg.name)
        units = asg.units_for(desired)  # a weighted group counts desired capacity in its units
        what = f"set desired of {asg.name} to {desired}" + (f" ({units} units)" if asg.units else "")
        try:
            self._client("autoscaling", region).set_desired_capacity(
                AutoScalingGroupName=asg.name, DesiredCapacity=units, HonorCooldown=False
            )
        except BOTO_ERRORS as exc:
            raise scaler_error(exc, FleetActionError, what) from exc

    def terminate_instance(self, instance_id: str, *, decrement: bool, region: str = "") -> None:
        """Terminate one instance of a group; an instance already gone or leaving is success.

        Raises FleetActionError, ThrottledError, AuthError.
        """
        client = self._client("autoscaling", region or self._default_region)
        try:
            client.terminate_instance_in_auto_scaling_group(
                InstanceId=instance_id, ShouldDecrementDesiredCapacity=decrement
            )
        except BOTO_ERRORS as exc:
            # "Instance not found" and "not in InService or Standby" share the code ValidationError with
            # real request errors and differ only in prose, so a fresh read decides instead of the message.
            if error_code(exc) == "ValidationError" and self._already_leaving(client, instance_id):
                logger.info("instance %s is already gone or terminating", instance_id)
                return
            raise scaler_error(exc, FleetActionError, f"terminate {instance_id}") from exc

    # Internals

    def _already_leaving(self, client: AwsClient, instance_id: str) -> bool:
        try:
            found = client.describe_auto_scaling_instances(InstanceIds=[instance_id])["AutoScalingInstances"]
        except BOTO_ERRORS:
            logger.warning(
                "could not re-read instance %s after a failed termination", instance_id, exc_info=True
            )
            return False
        return all(i.get("LifecycleState") in _TERMINATING_STATES for i in found)

    def _describe(self, region: str, params: dict[str, Any], what: str) -> dict[str, AsgState]:
        out: dict[str, AsgState] = {}
        try:
            paginator = self._client("autoscaling", region).get_paginator("describe_auto_scaling_groups")
            for page in paginator.paginate(**params, PaginationConfig={"PageSize": ASG_PAGE_SIZE}):
                for item in page["AutoScalingGroups"]:
                    asg = asg_from_json(item, region)
                    out[asg.name] = asg
        except BOTO_ERRORS as exc:
            raise _read_error(exc, what) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise FleetReadError(f"{what}: malformed group: {exc!r}") from exc
        return self._complete(region, out)

    def _complete(self, region: str, groups: dict[str, AsgState]) -> dict[str, AsgState]:
        """Zones, instance type shapes, sizes in nodes and reservations of freshly described groups."""
        if not groups:
            return groups
        zones = self._zones_of_subnets(
            region, {s for g in groups.values() if not g.availability_zones for s in g.subnet_ids}
        )
        shapes = self._instance_types({t for g in groups.values() for t in g.instance_types}, region)
        wanted = {g.name: reservation_ids_of(g, self._reservation_ids) for g in groups.values()}
        reservations = self._reservations(region, {r for ids in wanted.values() for r in ids})
        out: dict[str, AsgState] = {}
        for name, asg in groups.items():
            if not asg.availability_zones and asg.subnet_ids:
                found = {zones[s] for s in asg.subnet_ids if s in zones}
                asg = replace(asg, availability_zones=tuple(sorted(found)))
            own = {t: shapes[t].to_domain() for t in asg.instance_types if t in shapes}
            asg = replace(
                asg,
                type_shapes=own,
                reservations=tuple(reservations[r] for r in dict.fromkeys(wanted[name]) if r in reservations),
            )
            out[name] = _sized_by_type(asg, shapes)
        return out

    def _zones_of_subnets(self, region: str, subnet_ids: set[str]) -> dict[str, str]:
        """Zone of each subnet (cached per process); unknown subnets are absent."""
        with self._lock:
            missing = sorted(s for s in subnet_ids if (region, s) not in self._subnet_zones)
        for start in range(0, len(missing), SUBNETS_PER_CALL):
            batch = missing[start : start + SUBNETS_PER_CALL]
            try:
                pages = (
                    self._client("ec2", region).get_paginator("describe_subnets").paginate(SubnetIds=batch)
                )
                found = {str(s["SubnetId"]): str(s["AvailabilityZone"]) for p in pages for s in p["Subnets"]}
            except BOTO_ERRORS as exc:
                raise _read_error(exc, f"describe subnets {batch}") from exc
            except (KeyError, TypeError) as exc:
                raise FleetReadError(f"describe subnets {batch}: malformed subnet: {exc!r}") from exc
            with self._lock:
                self._subnet_zones.update({(region, s): zone for s, zone in found.items()})
        with self._lock:
            return {
                s: self._subnet_zones[(region, s)] for s in subnet_ids if (region, s) in self._subnet_zones
            }

    def _reservations(self, region: str, ids: set[str]) -> dict[str, CapacityReservation]:
        """The named capacity reservations as they are now; unknown ids are absent."""
        ec2 = self._client("ec2", region)
        return _describe_known(
            lambda batch: _describe_reservations(ec2, batch),
            sorted(ids),
            RESERVATIONS_PER_CALL,
            lambda code: code.startswith("InvalidCapacityReservationId"),
            "capacity reservation",
        )

    def _instance_types(self, instance_types: Iterable[str], region: str) -> dict[str, InstanceTypeInfo]:
        region = region or self._default_region
        wanted = sorted({t for t in instance_types if t})
        with self._lock:
            missing = [t for t in wanted if (region, t) not in self._types]
        if missing:
            fetched = self._fetch_instance_types(region, missing)
            with self._lock:
                for name in missing:
                    self._types[(region, name)] = fetched.get(name)
        with self._lock:
            known = {t: self._types[(region, t)] for t in wanted}
        return {name: info for name, info in known.items() if info is not None}

    def _fetch_instance_types(self, region: str, names: Sequence[str]) -> dict[str, InstanceTypeInfo]:
        ec2 = self._client("ec2", region)
        return _describe_known(
            lambda batch: _describe_instance_types(ec2, batch),
            names,
            INSTANCE_TYPES_PER_CALL,
            lambda code: code == "InvalidInstanceType",
            "instance type",
        )

    def _client(self, service: str, region: str) -> AwsClient:
        return self._client_factory(service, region or self._default_region)

    def _region_of(self, asg_name: str) -> str:
        with self._lock:
            return self._asg_regions.get(asg_name) or self._default_region

    def _regions(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(sorted({*self._asg_regions.values(), self._default_region} - {""}))


def _describe_known(
    describe: Callable[[list[str]], dict[str, _Parsed]],
    ids: Sequence[str],
    per_call: int,
    is_unknown: Callable[[str], bool],
    noun: str,
) -> dict[str, _Parsed]:
    """`describe` of `ids`, `per_call` at a time; unknown ids are absent from the result."""
    # One unknown id fails the whole call (InvalidInstanceType, InvalidCapacityReservationId.NotFound),
    # so that batch is asked one id at a time to keep the known ones.
    out: dict[str, _Parsed] = {}
    for start in range(0, len(ids), per_call):
        batch = list(ids[start : start + per_call])
        try:
            out.update(describe(batch))
        except BOTO_ERRORS as exc:
            if not is_unknown(error_code(exc)):
                raise _read_error(exc, f"describe {noun} {batch}") from exc
            if len(batch) > 1:
                for one in batch:
                    out.update(_describe_known(describe, [one], 1, is_unknown, noun))
            else:
                logger.warning("%s %s does not exist", noun, batch[0])
    return out


def _read_error(exc: BaseException, what: str) -> ScalerError:
    """The FleetReadError of a failed read: the Fleet port folds throttling into it (no ThrottledError)."""
    return scaler_error(exc, FleetReadError, what, throttled=FleetReadError)


def _describe_instance_types(ec2: AwsClient, names: list[str]) -> dict[str, InstanceTypeInfo]:
    pages = ec2.get_paginator("describe_instance_types").paginate(InstanceTypes=names)
    return _parsed_by_key(
        (item for page in pages for item in page["InstanceTypes"]),
        instance_type_from_json,
        lambda info: info.instance_type,
        f"describe instance types {names}",
    )


def _describe_reservations(ec2: AwsClient, ids: list[str]) -> dict[str, CapacityReservation]:
    pages = ec2.get_paginator("describe_capacity_reservations").paginate(CapacityReservationIds=ids)
    return _parsed_by_key(
        (item for page in pages for item in page["CapacityReservations"]),
        capacity_reservation_from_json,
        lambda reservation: reservation.reservation_id,
        f"describe capacity reservations {ids}",
    )


def _parsed_by_key(
    items: Iterable[dict[str, Any]],
    parse: Callable[[dict[str, Any]], _Parsed],
    key_of: Callable[[_Parsed], str],
    what: str,
) -> dict[str, _Parsed]:
    """Each EC2 list entry parsed, by its key; a malformed entry (or page) is a FleetReadError."""
    # The items are a lazy walk of the pages, so a page missing its list key is caught here too.
    out: dict[str, _Parsed] = {}
    try:
        for item in items:
            parsed = parse(item)
            out[key_of(parsed)] = parsed
    except (KeyError, TypeError, ValueError) as exc:
        raise FleetReadError(f"{what}: malformed entry: {exc!r}") from exc
    return out


def _sized_by_type(asg: AsgState, shapes: Mapping[str, InstanceTypeInfo]) -> AsgState:
    """A vcpu / memory-mib group whose node size the ASG output does not tell: the smallest of its
    types' vCPUs or MiB (what DesiredCapacityType counts each instance as)."""
    if asg.units is None or asg.units.per_node or asg.units.capacity_type not in SIZE_CAPACITY_TYPES:
        return asg
    known = [shapes[t] for t in asg.instance_types if t in shapes]
    if not known:
        return asg  # still unknown: the planner reports the group as unable to grow
    per_node = min(i.vcpus if asg.units.capacity_type == "vcpu" else i.memory_mib for i in known)
    return with_units(asg, per_node)


def _until_older(pages: Iterable[Mapping[str, Any]], since: datetime) -> Iterator[Mapping[str, Any]]:
    for page in pages:
        for activity in page.get("Activities") or ():
            if activity["StartTime"] < since:
                return
            yield activity
