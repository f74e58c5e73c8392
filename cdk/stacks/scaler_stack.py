"""The whole scaler for one cluster: composition of the constructs, nothing else."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk.constructs.cluster_access import ClusterAccess
from cdk.constructs.failed_invocations import FailedInvocations
from cdk.constructs.fleet_access import FleetAccess, VpcNetworking
from cdk.constructs.function_code import FunctionCode
from cdk.constructs.network import FunctionNetwork
from cdk.constructs.notifications import Notifications
from cdk.constructs.observability import Observability
from cdk.constructs.scaler_function import (
    FunctionSizing,
    ScalerConfigParameter,
    ScalerFunction,
    check_environment_size,
)
from cdk.constructs.secrets import ScalerSecrets
from cdk.constructs.state_table import StateTable
from cdk.constructs.trigger_queue import TriggerQueue
from cdk.constructs.triggers import Triggers
from cdk.constructs.webhook_api import WebhookApi
from cdk.context import LOG_RETENTION_DAYS
from cdk.environment import config_json, function_environments
from cdk.manifests import (
    ADMISSION_ROUTE,
    ADMISSION_TOKEN_PLACEHOLDER,
    EVENTS_ROUTE,
    WEBHOOK_URL_PLACEHOLDER,
    admission_webhook_manifest,
    rbac_manifest,
)
from shared.config import ScalerConfig
from shared.constants import (
    ENV_CONFIG,
    FUNCTION_AWS_EVENTS,
    FUNCTION_FORCE_SCALE_DOWN,
    FUNCTION_RECONCILE,
    FUNCTION_WEBHOOK,
    HEADER_SIGNATURE,
    HEADER_TIMESTAMP,
    SERVICE_NAME,
    WEBHOOK_MAX_BODY_BYTES,
    WEBHOOK_REPLAY_WINDOW_SECONDS,
)

SIZING = {
    # Lists every pod and node of the cluster (thousands of pods: tens of MB of JSON parsed by the
    # kubernetes client and pydantic) and plans in pure Python. Memory buys CPU on Lambda: 1024 MB is
    # ~0.6 vCPU. A normal run takes seconds; 5 min caps a run stuck on a slow API, and must stay below
    # the DynamoDB lease's lifetime. Reserved concurrency 1: one writer at a time (the lease is the real
    # guard; this keeps a burst of triggers from starting runs that would only find the lease held).
    FUNCTION_RECONCILE: FunctionSizing(1024, cdk.Duration.minutes(5), reserved_concurrency=1),
    # Verifies an HMAC and sends one SQS message. The admission webhook gives up after 2 s anyway
    # (failurePolicy Ignore); 10 s leaves room for a cold start when called by a forwarder.
    FUNCTION_WEBHOOK: FunctionSizing(256, cdk.Duration.seconds(10)),
    # Cordons, evicts through the Eviction API and waits for grace periods. 15 min is Lambda's
    # maximum; a longer drain is stored as an intent and continued by reconcile.
    FUNCTION_FORCE_SCALE_DOWN: FunctionSizing(512, cdk.Duration.minutes(15)),
    # Records capacity failures (backoff) and enqueues a reconcile; reads a few groups and instances.
    FUNCTION_AWS_EVENTS: FunctionSizing(512, cdk.Duration.minutes(2)),
}

DESCRIPTIONS = {
    FUNCTION_RECONCILE: "backlog-scaler: gather, plan and apply scaling for the cluster",
    FUNCTION_WEBHOOK: "backlog-scaler: authenticated webhook that wakes the reconciler",
    FUNCTION_FORCE_SCALE_DOWN: "backlog-scaler: operator-invoked forced scale-down of a group",
    FUNCTION_AWS_EVENTS: "backlog-scaler: launch failures and spot warnings of the scaler's groups",
}


def retention(days: int) -> logs.RetentionDays:
    """The RetentionDays member for a number of days (validated in cdk.context)."""
    return logs.RetentionDays[LOG_RETENTION_DAYS[days]]


class BacklogScalerStack(cdk.Stack):
    def __init__(self, scope: Construct, id: str, *, config: ScalerConfig, **kwargs: Any) -> None:
        super().__init__(
            scope, id, description=f"backlog-scaler for the EKS cluster {config.cluster_name}", **kwargs
        )
        self.config = config
        deployment = config.deployment
        log_retention = retention(deployment.log_retention_days)
        cdk.Tags.of(self).add("Application", SERVICE_NAME)

        state = StateTable(self, "State")
        table = state.table
        queue = TriggerQueue(
            self,
            "TriggerQueue",
            consumer_timeout=SIZING[FUNCTION_RECONCILE].timeout,
            delivery_delay=cdk.Duration.seconds(deployment.webhook_queue_delay_seconds),
        )
        notifications = Notifications(
            self, "Notifications", existing_topic_arn=config.notifications.sns_topic_arn
        )
        secrets = ScalerSecrets(
            self, "Secrets", slack_secret_arn=config.notifications.slack_webhook_secret_arn
        )
        code = FunctionCode(
            self, "Code", python_runtime=deployment.python_runtime, architecture=deployment.architecture
        )
        network = (
            FunctionNetwork(
                self,
                "Network",
                vpc_id=deployment.vpc_id,
                subnet_ids=deployment.subnet_ids,
                security_group_ids=deployment.security_group_ids,
            )
            if deployment.vpc_id
            else None
        )

        config_parameter = ScalerConfigParameter(
            self, "Config", cluster_name=config.cluster_name, config_json=config_json(config)
        )
        environments = function_environments(
            config,
            table_name=table.table_name,
            queue_url=queue.queue.queue_url,
            topic_arn=notifications.topic.topic_arn,
            webhook_secret_arn=secrets.webhook.secret_arn,
            slack_secret_arn=secrets.slack.secret_arn if secrets.slack else None,
            config_parameter=config_parameter.environment,
        )
        failed_invocations = FailedInvocations(self, "FailedInvocations")
        functions: dict[str, ScalerFunction] = {}
        for name in (FUNCTION_RECONCILE, FUNCTION_WEBHOOK, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS):
            check_environment_size(name, environments[name], ENV_CONFIG)
            functions[name] = ScalerFunction(
                self,
                name.title().replace("_", ""),
                name=name,
                description=DESCRIPTIONS[name],
                code=code,
                sizing=SIZING[name],
                environment=environments[name],
                log_retention=log_retention,
                placement=network.placement if network else None,
                tracing=deployment.tracing,
                # Scheduled ticks are not retried and expire with the next tick: the next run redoes them.
                max_event_age=(
                    cdk.Duration.minutes(max(1, deployment.schedule_minutes))
                    if name == FUNCTION_RECONCILE
                    else None
                ),
                retry_attempts=0 if name == FUNCTION_RECONCILE else None,
                # EventBridge invokes aws_events asynchronously: keep what still fails after retries.
                on_failure=failed_invocations.destination if name == FUNCTION_AWS_EVENTS else None,
            )
        reconcile = functions[FUNCTION_RECONCILE]
        webhook = functions[FUNCTION_WEBHOOK]
        force_scale_down = functions[FUNCTION_FORCE_SCALE_DOWN]
        aws_events = functions[FUNCTION_AWS_EVENTS]
        fleet_functions = (reconcile, force_scale_down, aws_events)

        for scaler in fleet_functions:
            config_parameter.grant_read(scaler.role)
            state.grant_state_access(scaler.role)
            notifications.grant_publish(scaler.role)
            if secrets.slack:
                secrets.slack.grant_read(scaler.role)
        queue.queue.grant_send_messages(webhook.role)
        secrets.webhook.grant_read(webhook.role)

        fleet = FleetAccess(self, "FleetAccess", config=config, roles=[f.role for f in fleet_functions])
        for scaler in fleet_functions:
            scaler.depend_on(fleet.policy)
        if network:
            vpc_access = VpcNetworking(self, "VpcNetworking", roles=[f.role for f in functions.values()])
            for scaler in functions.values():
                scaler.depend_on(vpc_access.policy)

        Triggers(
            self,
            "Triggers",
            reconcile=reconcile.function,
            aws_events=aws_events.function,
            queue=queue.queue,
            schedule_minutes=deployment.schedule_minutes,
            asg_names=[g.asg_name for g in config.node_groups],
        )
        api = WebhookApi(self, "WebhookApi", handler=webhook.function, log_retention=log_retention)

        if deployment.eks_access_entry:
            ClusterAccess(
                self,
                "ClusterAccess",
                cluster_name=config.cluster_name,
                roles={f.name: f.role for f in fleet_functions},
            )

        observability = Observability(
            self,
            "Observability",
            cluster_name=config.cluster_name,
            group_names=config.group_names,
            functions={name: f.function for name, f in functions.items()},
            dead_letter_queue=queue.dead_letter_queue,
            failed_invocations=failed_invocations.queue,
            topic=notifications.topic,
            oldest_pending_seconds=deployment.alarm_oldest_pending_seconds,
            capacity_failures=deployment.alarm_capacity_failures,
            schedule_minutes=deployment.schedule_minutes,
        )

        self.webhook_url = api.url
        output = self._output
        output("WebhookUrl", api.url, "POST target for the admission webhook and the event forwarder")
        output("WebhookSecretArn", secrets.webhook.secret_arn, "HMAC key of the webhook")
        for name, scaler in functions.items():
            output(f"{name.title().replace('_', '')}FunctionName", scaler.function.function_name, name)
        output("StateTableName", table.table_name, "DynamoDB state table (retained on destroy)")
        output("TriggerQueueUrl", queue.queue.queue_url, "SQS FIFO wake-up queue")
        output(
            "NotificationsTopicArn", notifications.topic.topic_arn, "SNS topic of notifications and alarms"
        )
        output("DashboardName", observability.dashboard.dashboard_name, "CloudWatch dashboard")
        output(
            "RbacManifest",
            rbac_manifest(config.cluster_name, config.kubernetes.status_namespace),
            "kubectl apply -f - (RBAC of the scaler)",
        )
        before, after = admission_webhook_manifest(config.cluster_name).split(WEBHOOK_URL_PLACEHOLDER)
        output(
            "AdmissionWebhookManifest",
            cdk.Fn.join("", [before, f"{api.url}{ADMISSION_ROUTE}/{ADMISSION_TOKEN_PLACEHOLDER}", after]),
            "kubectl apply -f - (optional: wake the scaler when a GPU pod is created)",
        )
        output(
            "EventForwarderNote",
            cdk.Fn.join(
                "",
                [
                    f"POST Kubernetes Events as JSON (at most {WEBHOOK_MAX_BODY_BYTES} bytes) to ",
                    f"{api.url}{EVENTS_ROUTE}",
                    f" with headers {HEADER_TIMESTAMP}: <unix seconds> and {HEADER_SIGNATURE}: "
                    "sha256=<hex HMAC-SHA256 of '<timestamp>.<body>'> keyed with the SecretString of ",
                    secrets.webhook.secret_arn,
                    f"; requests older than {WEBHOOK_REPLAY_WINDOW_SECONDS} s are rejected.",
                ],
            ),
            "How an in-cluster event forwarder authenticates",
        )

    def _output(self, id: str, value: str, description: str) -> None:
        cdk.CfnOutput(self, id, value=value, description=description)
