"""Names shared by the functions, the adapters and the CDK app: env vars, tags, metrics.

Imported by cdk/ too, so this module imports nothing heavy.
"""

from __future__ import annotations

SERVICE_NAME = "backlog-scaler"

# The ProvisioningRequest API group (cluster-autoscaler's CRD), which the webhook admits too.
PROVISIONING_API_GROUP = "autoscaling.x-k8s.io"

# Environment variables of the Lambda functions.
ENV_CONFIG = "SCALER_CONFIG"  # the scaler config document (JSON); local runs and tests
# The deployed functions read the config from this SSM parameter (see shared.runtime) ...
ENV_CONFIG_PARAMETER = "SCALER_CONFIG_PARAMETER"
# ... and carry its version (a hash of the stored value): a changed config changes the function
# configuration, so a deploy rolls every function onto it.
ENV_CONFIG_VERSION = "SCALER_CONFIG_VERSION"
# The webhook needs only the cluster name (the message group of its queue), never the config.
ENV_CLUSTER_NAME = "SCALER_CLUSTER_NAME"
ENV_TABLE_NAME = "SCALER_TABLE_NAME"
ENV_QUEUE_URL = "SCALER_QUEUE_URL"
ENV_TOPIC_ARN = "SCALER_TOPIC_ARN"
ENV_WEBHOOK_SECRET_ARN = "SCALER_WEBHOOK_SECRET_ARN"
ENV_SLACK_SECRET_ARN = "SCALER_SLACK_SECRET_ARN"
ENV_DRY_RUN = "SCALER_DRY_RUN"
ENV_KUBECONFIG = "SCALER_KUBECONFIG"
ENV_CLUSTER_ENDPOINT = "SCALER_CLUSTER_ENDPOINT"
ENV_CLUSTER_CA = "SCALER_CLUSTER_CA"
ENV_AWS_ENDPOINT_URL = "AWS_ENDPOINT_URL"  # honoured by boto3 itself; used by the local run
ENV_POWERTOOLS_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
ENV_POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
ENV_LOG_LEVEL = "POWERTOOLS_LOG_LEVEL"
ENV_TRACE_DISABLED = "POWERTOOLS_TRACE_DISABLED"  # "true": no Tracer, the X-Ray SDK is never loaded

ALL_ENV_VARS = (
    ENV_CONFIG,
    ENV_CONFIG_PARAMETER,
    ENV_CONFIG_VERSION,
    ENV_CLUSTER_NAME,
    ENV_TABLE_NAME,
    ENV_QUEUE_URL,
    ENV_TOPIC_ARN,
    ENV_WEBHOOK_SECRET_ARN,
    ENV_SLACK_SECRET_ARN,
    ENV_DRY_RUN,
    ENV_KUBECONFIG,
    ENV_CLUSTER_ENDPOINT,
    ENV_CLUSTER_CA,
)

# Tags: the ASGs the scaler may touch carry TAG_CLUSTER=<cluster_name>; IAM conditions key on it.
TAG_CLUSTER = "backlog-scaler/cluster"
TAG_GROUP = "backlog-scaler/group"

# Kubernetes.
RBAC_GROUP = "backlog-scaler"
EVENT_SOURCE = "backlog-scaler"

# Webhook.
HEADER_SIGNATURE = "x-backlog-scaler-signature"  # "sha256=<hex>" over f"{timestamp}.{body}"
HEADER_TIMESTAMP = "x-backlog-scaler-timestamp"  # unix seconds
WEBHOOK_MAX_BODY_BYTES = 256 * 1024
WEBHOOK_REPLAY_WINDOW_SECONDS = 300
QUEUE_DEDUP_WINDOW_SECONDS = 5

# Metrics (CloudWatch EMF, namespace METRICS_NAMESPACE, dimension "Cluster" and, per group, "Group").
METRICS_NAMESPACE = "BacklogScaler"
METRIC_PENDING_PODS = "PendingPods"
METRIC_PENDING_GPUS = "PendingGpus"
METRIC_DESIRED = "DesiredNodes"
METRIC_IN_SERVICE = "InServiceNodes"
METRIC_SCALE_UPS = "ScaleUps"
METRIC_SCALE_DOWNS = "ScaleDowns"
METRIC_CAPACITY_FAILURES = "CapacityFailures"
METRIC_RECONCILE_DURATION = "ReconcileDuration"
METRIC_OLDEST_PENDING_AGE = "OldestPendingPodAge"
METRIC_UNHELPED_PODS = "UnhelpedPods"
# Fits the planner counted that the scheduler refuted (a gap in the scheduler model; see
# shared/planner/ground_truth.py). Non-zero is worth a look, never a cost per run.
METRIC_MODEL_ERRORS = "ModelErrors"
# Writes that failed on one object (AccessDenied on one ASG, a 403 eviction, a throttled write): each is
# isolated, the run goes on; an alarm fires on any (cdk/constructs/observability.py).
METRIC_ACTION_FAILURES = "ActionFailures"
# Wake-up messages the reconcile function acknowledged without acting on them: malformed, or meant for
# another cluster, so no retry could make them valid (functions/reconcile/triggers.py). Each leaves an
# error log line with its message id; an alarm fires on any (cdk/constructs/observability.py).
METRIC_DISCARDED_WAKE_UPS = "DiscardedWakeUps"
# Node lifecycle (shared.planner.repair, shared.planner.rotation): unhealthy nodes whose room is not
# counted, nodes replaced for health or rotated, and 1 while a group's repair is paused (alarm: more
# of the group is unhealthy than max_unhealthy_fraction, a bad AMI, driver or zone).
METRIC_UNHEALTHY_NODES = "UnhealthyNodes"
METRIC_NODES_REPAIRED = "NodesRepaired"
METRIC_NODES_ROTATED = "NodesRotated"
METRIC_REPAIR_PAUSED = "RepairPaused"
# Nodes emptied by migrating jobs that checkpoint, and the GPU-seconds those moves cost (work since
# the pods' last checkpoints plus restarts; shared/planner/migration.py).
METRIC_MIGRATIONS = "Migrations"
METRIC_MIGRATION_LOST_GPU_SECONDS = "MigrationLostGpuSeconds"

# DynamoDB state table (single-table design; see shared/adapters/aws/state_store.py).
TABLE_PARTITION_KEY = "pk"
TABLE_SORT_KEY = "sk"
TABLE_TTL_ATTRIBUTE = "ttl"

# Lambda function names inside the app (module paths functions/<name>/handler.py, entry `handler`).
FUNCTION_RECONCILE = "reconcile"
FUNCTION_WEBHOOK = "webhook"
FUNCTION_FORCE_SCALE_DOWN = "force_scale_down"
FUNCTION_AWS_EVENTS = "aws_events"
ALL_FUNCTIONS = (FUNCTION_RECONCILE, FUNCTION_WEBHOOK, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS)

# Metric dimensions (cdk/ builds the dashboard and the alarms on exactly these names). Cluster-level
# metrics carry {"Cluster"}; per-group metrics carry {"Cluster", "Group"} (Group = node group name).
METRIC_DIMENSION_CLUSTER = "Cluster"
METRIC_DIMENSION_GROUP = "Group"
CLUSTER_METRICS = (
    METRIC_PENDING_PODS,
    METRIC_PENDING_GPUS,
    METRIC_OLDEST_PENDING_AGE,
    METRIC_UNHELPED_PODS,
    METRIC_MODEL_ERRORS,
    METRIC_RECONCILE_DURATION,
    METRIC_ACTION_FAILURES,
    METRIC_DISCARDED_WAKE_UPS,
)
GROUP_METRICS = (
    METRIC_DESIRED,
    METRIC_IN_SERVICE,
    METRIC_SCALE_UPS,
    METRIC_SCALE_DOWNS,
    METRIC_CAPACITY_FAILURES,
    METRIC_UNHEALTHY_NODES,
    METRIC_NODES_REPAIRED,
    METRIC_NODES_ROTATED,
    METRIC_REPAIR_PAUSED,
    METRIC_MIGRATIONS,
    METRIC_MIGRATION_LOST_GPU_SECONDS,
)

# The webhook's HTTP path on the deployed API (POST; sub-paths are routed to the same function).
WEBHOOK_PATH = "/webhook"

# The status ConfigMap each reconcile keeps up to date (as cluster-autoscaler's
# `cluster-autoscaler-status`): the applied manifests create it, so the functions need only get and
# patch on this one object (RBAC resourceNames cannot restrict create).
STATUS_CONFIGMAP = "backlog-scaler-status"
STATUS_DATA_KEY = "status.json"
DEFAULT_STATUS_NAMESPACE = "kube-system"
