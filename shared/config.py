"""The scaler config: one pydantic model, loaded from YAML/JSON or from cdk.json context (`scaler`).

Errors name the field and the problem (`node_groups[1].taints[0].effect: ...`).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import zlib
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.constants import DEFAULT_STATUS_NAMESPACE
from shared.domain.dra import ResourceSlice
from shared.domain.errors import ConfigError
from shared.domain.model import Taint, TaintEffect
from shared.domain.quantity import resources as parse_resources
from shared.domain.resources import Resources
from shared.formats.dra import slice_spec_from_json
from shared.formats.validation import format_validation_error

if TYPE_CHECKING:
    import yaml

NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]


# No number of the config needs more (a billion seconds is 31 years): a larger one is a typo, or
# YAML's 1e400, which is infinity.
MAX_NUMBER = 1_000_000_000
# Kubernetes' documented limit of a cluster ("Considerations for large clusters": no more than
# 5,000 nodes): a group or a headroom beyond it is a typo.
MAX_NODES = 5000
NodeCount = Annotated[int, Field(ge=0, le=MAX_NODES)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if isinstance(value, int | float) and not isinstance(value, bool) and abs(value) > MAX_NUMBER:
            got = f"{value:,}" if isinstance(value, int) else f"{value:g}"
            raise ValueError(f"must be at most {MAX_NUMBER:,} (got {got})")
        return value


class TaintConfig(_Model):
    # The taint of every node of the group, as in the Node's spec.taints: the planner lets only pods
    # that tolerate it into the group.
    key: str = Field(min_length=1)
    value: str = ""
    effect: TaintEffect

    def to_domain(self) -> Taint:
        return Taint(self.key, self.value, self.effect)


def _validate_quantities(value: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    if value is not None:
        parse_resources(value)  # raises ValueError naming the resource
    return value


class NodeGroupConfig(_Model):
    """One GPU node group: an Auto Scaling group and the shape/labels/taints of its nodes."""

    # The group's name in plans, metrics, Events and the status ConfigMap.
    name: str = Field(min_length=1, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
    # The exact name of its Auto Scaling group (tagged backlog-scaler/cluster=<cluster_name>).
    asg_name: str = Field(min_length=1)
    # EC2 instance type of its nodes: the node shape (vCPUs, memory, GPUs minus the EKS AMI's
    # reservation) when `allocatable` is not given, so the group scales from zero without tags.
    instance_type: str = ""
    # Allocatable of one node as Kubernetes quantities (e.g. {cpu: "95", nvidia.com/gpu: 8}), each at
    # most 2^63-1 as Kubernetes holds them (cpu: in millicores), `pods` and extended resources
    # (nvidia.com/gpu) whole, as a Node's must be; wins over the instance type's.
    allocatable: dict[str, str | int | float] | None = None
    # Labels of its nodes (nodeSelector and node affinity are matched against them, with the
    # well-known ones the template adds).
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[TaintConfig, ...] = ()
    # Higher tiers are chosen first for a pod; within a tier, the least cost for the backlog.
    priority: int = 0
    # USD per node-hour, for the least-cost choice and the simulator's cost (None: unknown).
    price_per_hour: Annotated[float, Field(ge=0)] | None = None
    # At most this many nodes (None: the ASG's MaxSize); the lower of the two holds.
    max_size: NodeCount | None = None
    # The group's AWS region when it is not the config's `region`.
    region: str | None = None
    # Spare nodes kept warm in the group for pods yet to come (beside migration, one keeps the mean
    # wait of arrivals within 10 % of what it was without either on the Philly replay: docs/migration.md).
    headroom_nodes: NodeCount = 0
    idle_seconds: NonNegativeInt | None = None  # overrides policy.idle_seconds for this group
    # Capacity reservations (On-Demand Capacity Reservations or Capacity Blocks for ML, "cr-...")
    # the group launches into, as its launch template targets them; the group's own
    # CapacityReservationSpecification target ids are read from the ASG and need no entry here.
    capacity_reservation_ids: tuple[Annotated[str, Field(pattern=r"^cr-[0-9a-f]{8,17}$")], ...] = ()
    # Where the nodes' AMI puts the kubelet on the NVMe instance store, as the launch template's user
    # data says: nodeadm's NodeConfig spec.instance.localStorage.strategy (AL2023) or bootstrap.sh
    # --local-disks (AL2). RAID0 / RAID10: the instance store is the nodes' ephemeral storage; Mount or
    # unset: it is not, and ephemeral storage is what a registered node shows (else not limiting).
    local_storage: Literal["RAID0", "RAID10", "Mount"] | None = None
    # DRA (resource.k8s.io/v1): the ResourceSlice specs the group's DRA driver publishes for one
    # node, without nodeName. Used at zero, when no registered node of the group shows its slices.
    resource_slices: tuple[dict[str, Any], ...] = ()

    _validate_allocatable = field_validator("allocatable")(_validate_quantities)

    @field_validator("asg_name")
    @classmethod
    def _no_wildcards(cls, value: str) -> str:
        # The name goes into the IAM resource ARN of the scaling permissions, where * and ? are wildcards.
        if "*" in value or "?" in value:
            raise ValueError(
                "must be the exact name of one Auto Scaling group: '*' and '?' would be IAM wildcards"
                " and grant scaling on other groups"
            )
        return value

    @field_validator("resource_slices")
    @classmethod
    def _valid_slices(cls, value: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
        for index, spec in enumerate(value):
            where = f"resource_slices[{index}]"
            for key in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"):
                if key in spec:
                    raise ValueError(
                        f"{where}: drop {key}: the slices are those of one new node of the group"
                    )
            try:
                parsed = slice_spec_from_json(spec, where)
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                raise ValueError(f"{where}: not a ResourceSlice spec: {detail}") from exc
            if parsed.invalid:
                raise ValueError(f"{where}: {parsed.invalid}")
        return value

    @property
    def device_slices(self) -> tuple[ResourceSlice, ...]:
        """resource_slices as the domain's slices (pool names are per new node)."""
        return tuple(slice_spec_from_json(s, f"{self.name}-{i}") for i, s in enumerate(self.resource_slices))

    @model_validator(mode="after")
    def _needs_a_shape(self) -> NodeGroupConfig:
        if self.allocatable is None and not self.instance_type:
            raise ValueError("give allocatable or instance_type so the node shape is known")
        return self

    @property
    def shape(self) -> Resources | None:
        """Allocatable of one node from config (None: derive it from the instance type)."""
        if self.allocatable is None:
            return None
        return _shape(tuple(sorted(self.allocatable.items())))

    @property
    def domain_taints(self) -> tuple[Taint, ...]:
        return tuple(t.to_domain() for t in self.taints)


@lru_cache(maxsize=256)
def _shape(allocatable: tuple[tuple[str, str | int | float], ...]) -> Resources:
    """The parsed allocatable, memoized on the whole input (the planner asks once per group per run;
    a pure function of its argument, nothing to go stale)."""
    return parse_resources(dict(allocatable))


class AttritionConfig(_Model):
    """Consolidation by attrition (shared.planner.attrition): when a group has more free GPUs than
    new pods need, its nodes cheapest to empty get the scaler's taint so new pods land elsewhere and
    they empty as their jobs finish; idle scale-down then takes them. Never evicts anything."""

    # Mark nodes for consolidation by attrition at all.
    enabled: bool = True
    # PreferNoSchedule: the scheduler still uses a marked node when no other fits, so no pod ever
    # waits for a lift; measured in the simulator against NoSchedule (docs/simulate.md).
    effect: Literal["PreferNoSchedule", "NoSchedule"] = "PreferNoSchedule"
    # Free GPUs per group kept on unmarked nodes for new pods (None: one node's GPUs). With 0 every
    # node with a free GPU is marked while the min size allows, and where every node with room is
    # marked a PreferNoSchedule mark steers no pod.
    spare_gpus: NonNegativeInt | None = None


class MigrationConfig(_Model):
    """Migration of jobs that checkpoint (shared.planner.migration): a node whose busy pods all opted
    in (backlog-scaler/checkpoint-interval-seconds or backlog-scaler/last-checkpoint) and fit on free
    room elsewhere is emptied through the Eviction API when the GPU-hours saved beat the work lost
    since the pods' last checkpoints plus their restart, by `min_gain`. Off until measured."""

    enabled: bool = False
    # What a moved pod takes to start again elsewhere (image pull, checkpoint load), per GPU.
    restart_seconds: NonNegativeInt = 300
    # The saving must be at least this many times the cost (the estimates are rough).
    min_gain: Annotated[float, Field(ge=1)] = 2.0
    max_nodes_per_run: NonNegativeInt = 1  # per group
    max_nodes_per_hour: NonNegativeInt = 4  # per group, counted from the stored migrations
    # A job moved this many times (while it runs) is not moved again: a bound on any job's disruption.
    max_moves_per_job: NonNegativeInt = 3


class ExtraConditionConfig(_Model):
    """A node condition an operator's agent sets (node-problem-detector, DCGM or NVSentinel style):
    the node is unhealthy while condition `type` has `status`."""

    type: str = Field(min_length=1, max_length=316)
    status: Literal["True", "False", "Unknown"] = "True"
    toleration_seconds: NonNegativeInt | None = None  # None: repair.toleration_seconds


class RepairConfig(_Model):
    """Node health repair (shared.planner.repair): unhealthy nodes are never counted as room; past
    their toleration they are replaced when idle and cordoned when busy (never evicted)."""

    enabled: bool = True
    # Karpenter's repair tolerations (karpenter-provider-aws DefaultRepairPolicies, as EKS node auto
    # repair): the EKS node monitoring agent's AcceleratedHardwareReady=False, 10 minutes (lost GPUs
    # and impaired EC2 status checks use it too); its NetworkingReady, StorageReady, KernelReady and
    # ContainerRuntimeReady=False, 30 minutes; Ready False/Unknown, 30 minutes.
    toleration_seconds: NonNegativeInt = 600
    system_toleration_seconds: NonNegativeInt = 1800
    ready_toleration_seconds: NonNegativeInt = 1800
    # Above this share of a group's nodes unhealthy at once, nothing is terminated for health
    # (a bad AMI, driver or zone; an alarm says so). Karpenter stops repair above 20 %.
    max_unhealthy_fraction: Annotated[float, Field(ge=0, le=1)] = 0.2
    extra_conditions: tuple[ExtraConditionConfig, ...] = ()


class RotationConfig(_Model):
    """Rotation by attrition of drifted, expired or maintenance-bound nodes (shared.planner.rotation)."""

    enabled: bool = True
    max_in_flight: PositiveInt = 1  # nodes of one group marked or being replaced at a time


class PolicyConfig(_Model):
    """Planning policy: what the planner may do, and when; a default that mirrors cluster-autoscaler or
    Karpenter says so in its description."""

    # A node running nothing but DaemonSet and mirror pods this long is cordoned, then terminated
    # (cluster-autoscaler's scale-down-unneeded-time is 10 minutes).
    idle_seconds: NonNegativeInt = 600
    # No scale-down in a group this long after it grew (cluster-autoscaler's 10 minutes).
    scale_down_delay_after_add_seconds: NonNegativeInt = 600
    # An instance that has not become a usable node this long after launch is a failed launch:
    # replaced, and the group backed off (GPU AMIs boot slowly; cluster-autoscaler's is 15 minutes).
    max_node_provision_seconds: PositiveInt = 1200
    # At most this share of a group's nodes (at least one) is removed per run.
    max_scale_in_fraction: Annotated[float, Field(gt=0, le=1)] = 0.1
    # The pod label that makes pods one gang (placed all or nothing), beside the known queue markers.
    gang_label: str = "scheduling.x-k8s.io/pod-group"
    # Pods with a lower priority neither trigger a scale-up nor keep a node from scale-down (None:
    # no cutoff). -10 is cluster-autoscaler's expendable-pods-priority-cutoff default.
    pod_priority_cutoff: int | None = -10
    # kube-scheduler moves an unschedulable pod back to its active queue at the latest after
    # podMaxInUnschedulablePodsDuration (5 min), and at once on node or pod changes. Room the
    # planner counted for a pod for longer than this, unused by the scheduler, is a model error.
    scheduler_retry_seconds: PositiveInt = 300
    # How long capacity the scheduler refused for a pod is not bought again in that group.
    scheduler_refusal_ttl_seconds: PositiveInt = 6 * 3600
    # Taints a node carries only while it starts (agents, CSI drivers, the GPU operator): a pod
    # waiting for one is waiting for a booting node, and templates never carry them. Keys with
    # cluster-autoscaler's startup-taint./ignore-taint. prefixes are startup taints too.
    startup_taints: tuple[str, ...] = (
        "node.cilium.io/agent-not-ready",
        "ebs.csi.aws.com/agent-not-ready",
        "efs.csi.aws.com/agent-not-ready",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.kubernetes.io/network-unavailable",
        "nvidia.com/gpu.deploying",
    )
    # Pods younger than this are left to the scheduler first.
    new_pod_delay_seconds: NonNegativeInt = 0
    # A node cordoned by the scaler is terminated no earlier than this after the cordon, so a pod
    # the scheduler bound just before the cordon is seen first.
    cordon_settle_seconds: NonNegativeInt = 30
    # After terminating nodes of a group, wait this long before cordoning more of it, so the
    # scale-in limit is a rate and a repeated run right after an applied plan changes nothing.
    scale_down_delay_after_delete_seconds: NonNegativeInt = 30
    # Capacity of a Provisioned ProvisioningRequest is held from scale-down and from other pods
    # until its pods arrive or this long after Provisioned (cluster-autoscaler's 10 minutes);
    # then the request gets BookingExpired.
    provisioning_booking_seconds: NonNegativeInt = 600
    # No scale-up into a Capacity Block within this long of its end, and its nodes are cordoned
    # from then on: EC2 starts terminating a block's instances 30 minutes before its end, and
    # Karpenter drains 10 minutes before that (40 minutes, its capacity-block design).
    reservation_end_margin_seconds: NonNegativeInt = 2400
    # A group whose launches fail for capacity is skipped this long, doubling per failure up to
    # backoff_max_seconds (cluster-autoscaler: 5 to 30 minutes); backlog spills to the next group.
    backoff_initial_seconds: PositiveInt = 300
    backoff_max_seconds: PositiveInt = 1800
    # A group without a capacity failure this long starts again from backoff_initial_seconds.
    backoff_reset_seconds: PositiveInt = 3 * 3600
    attrition: AttritionConfig = Field(default_factory=AttritionConfig)
    repair: RepairConfig = Field(default_factory=RepairConfig)
    rotation: RotationConfig = Field(default_factory=RotationConfig)
    # Nodes older than this are rotated (Karpenter's expireAfter); None: no lifetime limit.
    max_node_lifetime_seconds: PositiveInt | None = None
    migration: MigrationConfig = Field(default_factory=MigrationConfig)

    @model_validator(mode="after")
    def _backoff_order(self) -> PolicyConfig:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must be >= backoff_initial_seconds")
        return self


class NotificationsConfig(_Model):
    """Where each run that changed something or failed on an object is told (never a dry run)."""

    # An SNS topic of your own (the stack also creates one, for alarms and notifications).
    sns_topic_arn: str | None = None
    slack_webhook_secret_arn: str | None = None  # Secrets Manager secret holding the webhook URL


class KubernetesConfig(_Model):
    """How the functions reach the cluster: endpoint + CA, or eks:DescribeCluster when absent."""

    # The API server URL (https://...); with certificate_authority, no eks:DescribeCluster call.
    endpoint: str | None = None
    certificate_authority: str | None = None  # base64 PEM, as eks:DescribeCluster returns it
    kubeconfig: str | None = None  # local use only
    # Where the status ConfigMap (constants.STATUS_CONFIGMAP) lives; the printed manifests create it
    # there and grant get/patch on it alone.
    status_namespace: str = Field(
        default=DEFAULT_STATUS_NAMESPACE,
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",  # a DNS-1123 label, as namespace names are
    )


class DeploymentConfig(_Model):
    """Settings of the CDK app only (ignored by the planner)."""

    # The EventBridge schedule of the reconcile function.
    schedule_minutes: PositiveInt = 1
    # The functions' CPU architecture and Python runtime.
    architecture: Literal["arm64", "x86_64"] = "arm64"
    python_runtime: Literal["python3.12", "python3.13"] = "python3.12"
    # A wake-up from the webhook reaches the reconcile function this much later (SQS DelaySeconds): an
    # AdmissionReview arrives before the scheduler has tried the pod, which must first be Unschedulable.
    webhook_queue_delay_seconds: Annotated[int, Field(ge=0, le=900)] = 10
    # CloudWatch alarm: the oldest pending pod has waited this long.
    alarm_oldest_pending_seconds: PositiveInt = 1800
    # CloudWatch alarm: this many capacity failures in a group within the alarm's period.
    alarm_capacity_failures: PositiveInt = 3
    # Run the functions in this VPC (subnets and security groups) to reach a private API endpoint.
    vpc_id: str | None = None
    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    # Create the EKS access entries mapping the functions' roles to the scaler's RBAC group.
    eks_access_entry: bool = True
    # X-Ray active tracing with the Powertools Tracer. Off by default: loading the X-Ray SDK roughly
    # doubles a function's cold-start import time (~250 ms).
    tracing: bool = False
    log_retention_days: PositiveInt = 30


class ScalerConfig(_Model):
    """The whole scaler config (the `scaler` key of cdk.json context)."""

    # The EKS cluster's name: the tag value of its groups, and the key of its lease and state.
    cluster_name: str = Field(min_length=1, max_length=100, pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]*$")
    # The AWS region of the cluster and (unless a group says otherwise) of its groups.
    region: str = "us-east-1"
    # The GPU node groups the scaler manages, one Auto Scaling group each.
    node_groups: tuple[NodeGroupConfig, ...] = Field(min_length=1)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    # An explicit override of what is kept back from an instance type's capacity for the kubelet
    # and system daemons. Unset (the default), the EKS-optimized AMI's own formula applies
    # (shared.planner.template: kube-reserved + eviction threshold, by instance size).
    node_reservation: dict[str, str | int | float] | None = None
    # Plan and report, change nothing (shadow mode; see "Trial beside another autoscaler").
    dry_run: bool = False
    kubernetes: KubernetesConfig = Field(default_factory=KubernetesConfig)
    notifications: NotificationsConfig = Field(default_factory=NotificationsConfig)
    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)

    _validate_reservation = field_validator("node_reservation")(_validate_quantities)

    @field_validator("node_groups")
    @classmethod
    def _unique_groups(cls, groups: tuple[NodeGroupConfig, ...]) -> tuple[NodeGroupConfig, ...]:
        for attr in ("name", "asg_name"):
            seen: dict[str, int] = {}
            for index, group in enumerate(groups):
                value = getattr(group, attr)
                if value in seen:
                    raise ValueError(
                        f"duplicate node group {attr} {value!r} (node_groups[{seen[value]}] and [{index}])"
                    )
                seen[value] = index
        return groups

    def group(self, name: str) -> NodeGroupConfig:
        """The group named `name`; ConfigError when absent."""
        for group in self.node_groups:
            if group.name == name:
                return group
        raise ConfigError(f"unknown node group {name!r}; configured: {', '.join(self.group_names)}")

    @property
    def group_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.node_groups)

    def region_of(self, group: NodeGroupConfig) -> str:
        return group.region or self.region

    @property
    def reservation(self) -> Resources | None:
        """The configured reservation override; None means the EKS AMI formula."""
        return parse_resources(self.node_reservation) if self.node_reservation is not None else None


def parse_config(document: object, source: str = "config") -> ScalerConfig:
    """Validate a decoded document; ConfigError naming each bad field."""
    if document is None:
        raise ConfigError(
            f"{source}: the config is empty (expected a mapping with cluster_name and node_groups)"
        )
    if not isinstance(document, Mapping):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(document).__name__}")
    try:
        return ScalerConfig.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, ScalerConfig)) from exc


def parse_config_variable(value: str, variable: str) -> ScalerConfig:
    """The config in an environment variable's JSON, for a pydantic validator of that variable:
    ValueError with one problem a line joined by "; ", each naming its field inside the document."""
    try:
        document = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
    try:
        return parse_config(document, variable)
    except ConfigError as exc:
        problems = (line.removeprefix(f"{variable}: ") for line in str(exc).splitlines())
        raise ValueError("; ".join(problems)) from exc


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """One line: PyYAML's own message spans several, with a snippet of the file."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    return f"{problem}{where}"


def load_config(path: str | Path) -> ScalerConfig:
    """Load a YAML or JSON config file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if path.suffix == ".json":
        try:
            return parse_config(json.loads(text), str(path))
        except json.JSONDecodeError as exc:
            where = f"line {exc.lineno} column {exc.colno}"
            raise ConfigError(f"{path}: not valid JSON: {exc.msg} at {where}") from exc
    # Imported only for YAML: the functions read their config as JSON from SSM
    # (`shared.runtime.read_config_parameter`), and a JSON file needs no parser of ~10 ms of import.
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_problem(exc)}") from exc
    return parse_config(document, str(path))


# The stored form of the config (an SSM String parameter). SSM allows 4 KB (Standard tier) or 8 KB
# (Advanced). A realistic 40-group config is ~20 KB of JSON but ~1.5 KB gzipped (groups repeat their
# keys): a document that fits 4 KB stays plain JSON, readable in the console; a larger one is stored
# gzip + base64, which never starts with "{" as a JSON document does.
STORED_CONFIG_PLAIN_LIMIT_BYTES = 4 * 1024


def encode_stored_config(document_json: str) -> str:
    """The parameter value for a config JSON document: itself if it fits 4 KB, else gzip + base64."""
    raw = document_json.encode()
    if len(raw) <= STORED_CONFIG_PLAIN_LIMIT_BYTES:
        return document_json
    return base64.b64encode(gzip.compress(raw, mtime=0)).decode("ascii")  # mtime 0: same input, same value


def decode_stored_config(value: str) -> str:
    """The config JSON document of a parameter value (plain JSON or gzip + base64)."""
    if value.lstrip().startswith("{"):
        return value
    try:
        return gzip.decompress(base64.b64decode(value, validate=True)).decode()
    except (binascii.Error, OSError, EOFError, zlib.error, UnicodeDecodeError) as exc:
        raise ConfigError("neither a JSON document nor gzip + base64 of one") from exc
