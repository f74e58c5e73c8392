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
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shared.domain.errors import ConfigError
from shared.domain.model import Taint, TaintEffect
from shared.domain.quantity import resources as parse_resources
from shared.domain.resources import Resources

NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TaintConfig(_Model):
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

    name: str = Field(min_length=1, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
    asg_name: str = Field(min_length=1)
    instance_type: str = ""
    allocatable: dict[str, str | int | float] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    taints: tuple[TaintConfig, ...] = ()
    priority: int = 0
    price_per_hour: Annotated[float, Field(ge=0)] | None = None
    max_size: NonNegativeInt | None = None
    region: str | None = None
    headroom_nodes: NonNegativeInt = 0
    idle_seconds: NonNegativeInt | None = None  # overrides policy.idle_seconds for this group
    # Capacity reservations (On-Demand Capacity Reservations or Capacity Blocks for ML, "cr-...")
    # the group launches into, as its launch template targets them; the group's own
    # CapacityReservationSpecification target ids are read from the ASG and need no entry here.
    capacity_reservation_ids: tuple[Annotated[str, Field(pattern=r"^cr-[0-9a-f]{8,17}$")], ...] = ()

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

    @model_validator(mode="after")
    def _needs_a_shape(self) -> NodeGroupConfig:
        if self.allocatable is None and not self.instance_type:
            raise ValueError("give allocatable or instance_type so the node shape is known")
        return self

    @property
    def shape(self) -> Resources | None:
        """Allocatable of one node from config (None: derive it from the instance type)."""
        return parse_resources(self.allocatable) if self.allocatable is not None else None

    @property
    def domain_taints(self) -> tuple[Taint, ...]:
        return tuple(t.to_domain() for t in self.taints)


class AttritionConfig(_Model):
    """Consolidation by attrition (shared.planner.attrition): when a group has more free GPUs than
    new pods need, its nodes cheapest to empty get the scaler's taint so new pods land elsewhere and
    they empty as their jobs finish; idle scale-down then takes them. Never evicts anything."""

    enabled: bool = True
    # PreferNoSchedule: the scheduler still uses a marked node when no other fits, so no pod ever
    # waits for a lift; measured in the simulator against NoSchedule (README, "Simulator").
    effect: Literal["PreferNoSchedule", "NoSchedule"] = "PreferNoSchedule"
    # Free GPUs per group kept on unmarked nodes for new pods (None: one node's GPUs).
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
    # A job moved this many times (within 30 days) is not moved again: a bound on any job's disruption.
    max_moves_per_job: NonNegativeInt = 3


class PolicyConfig(_Model):
    """Planning policy; defaults and their anchors are in DESIGN.md."""

    idle_seconds: NonNegativeInt = 600
    scale_down_delay_after_add_seconds: NonNegativeInt = 600
    max_node_provision_seconds: PositiveInt = 1200
    max_scale_in_fraction: Annotated[float, Field(gt=0, le=1)] = 0.1
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
    backoff_initial_seconds: PositiveInt = 300
    backoff_max_seconds: PositiveInt = 1800
    backoff_reset_seconds: PositiveInt = 3 * 3600
    attrition: AttritionConfig = Field(default_factory=AttritionConfig)
    migration: MigrationConfig = Field(default_factory=MigrationConfig)

    @model_validator(mode="after")
    def _backoff_order(self) -> PolicyConfig:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must be >= backoff_initial_seconds")
        return self


class NotificationsConfig(_Model):
    sns_topic_arn: str | None = None
    slack_webhook_secret_arn: str | None = None  # Secrets Manager secret holding the webhook URL


class KubernetesConfig(_Model):
    """How the functions reach the cluster: endpoint + CA, or eks:DescribeCluster when absent."""

    endpoint: str | None = None
    certificate_authority: str | None = None  # base64 PEM, as eks:DescribeCluster returns it
    kubeconfig: str | None = None  # local use only


class DeploymentConfig(_Model):
    """Settings of the CDK app only (ignored by the planner)."""

    schedule_minutes: PositiveInt = 1
    architecture: Literal["arm64", "x86_64"] = "arm64"
    python_runtime: Literal["python3.12", "python3.13"] = "python3.12"
    webhook_queue_delay_seconds: Annotated[int, Field(ge=0, le=900)] = 10
    alarm_oldest_pending_seconds: PositiveInt = 1800
    alarm_capacity_failures: PositiveInt = 3
    vpc_id: str | None = None
    subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    eks_access_entry: bool = True
    # X-Ray active tracing with the Powertools Tracer. Off by default: loading the X-Ray SDK roughly
    # doubles a function's cold-start import time (~250 ms).
    tracing: bool = False
    log_retention_days: PositiveInt = 30


class ScalerConfig(_Model):
    """The whole scaler config (the `scaler` key of cdk.json context)."""

    cluster_name: str = Field(min_length=1, max_length=100, pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]*$")
    region: str = "us-east-1"
    node_groups: tuple[NodeGroupConfig, ...] = Field(min_length=1)
    policy: PolicyConfig = Field(default_factory=PolicyConfig)
    # An explicit override of what is kept back from an instance type's capacity for the kubelet
    # and system daemons. Unset (the default), the EKS-optimized AMI's own formula applies
    # (shared.planner.template: kube-reserved + eviction threshold, by instance size).
    node_reservation: dict[str, str | int | float] | None = None
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


def format_validation_error(exc: ValidationError, source: str = "config") -> str:
    """One line per problem: `source: node_groups[1].taints[0].effect: message`."""
    lines = []
    errors = exc.errors()
    located = {err["loc"][:1] for err in errors if len(err["loc"]) > 1}
    for err in errors:
        if err["type"] == "too_short" and err["loc"][:1] in located:
            continue  # pydantic also reports the list as empty once its items failed
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        message = err["msg"].removeprefix("Value error, ")
        lines.append(f"{source}: {path or '(root)'}: {message}")
    return "\n".join(lines)


def parse_config(document: object, source: str = "config") -> ScalerConfig:
    """Validate a decoded document; ConfigError naming each bad field."""
    if not isinstance(document, Mapping):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(document).__name__}")
    try:
        return ScalerConfig.model_validate(document)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from exc


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
    try:
        document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ConfigError(f"{path}: not valid JSON: {exc.msg} at {where}") from exc
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
