"""The whole scaler for one cluster: composition of the constructs, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Foundations:
    """What the functions are built on: state, queues, topic, secrets, code, network, config."""

    state: StateTable
    queue: TriggerQueue
    notifications: Notifications
    secrets: ScalerSecrets
    code: FunctionCode
    network: FunctionNetwork | None
    config_parameter: ScalerConfigParameter
    failed_invocations: FailedInvocations


class BacklogScalerStack(cdk.Stack):
    """The scaler of one cluster, composed in steps: foundations, functions, permissions, entry
    points, observability, outputs (each a `_build_*` step, as the Lambda handler cookbook's stack)."""

    def __init__(self, scope: Construct, id: str, *, config: ScalerConfig, **kwargs: Any) -> None:
        super().__init__(
            scope, id, description=f"backlog-scaler for the EKS cluster {config.cluster_name}", **kwargs
        )
        self.config = config
        cdk.Tags.of(self).add("Application", SERVICE_NAME)
        base = self._build_foundations()
        functions = self._build_functions(base)
        self._build_permissions(base, functions)
        api = self._build_entry_points(base, functions)
        observability = self._build_observability(base, functions)
        self.webhook_url = api.url
        self._build_outputs(base, functions, api, observability)

    def _build_foundations(self) -> _Foundations:
        config, deployment = self.config, self.config.deployment
        state = StateTable(self, "State")
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
        return _Foundations(
            state,
            queue,
            notifications,
            secrets,
            code,
            network,
            config_parameter,
            FailedInvocations(self, "FailedInvocations"),
        )

    def _build_functions(self, base: _Foundations) -> dict[str, ScalerFunction]:
        config, deployment = self.config, self.config.deployment
        environments = function_environments(
            config,
            table_name=base.state.table.table_name,
            queue_url=base.queue.queue.queue_url,
            topic_arn=base.notifications.topic.topic_arn,
            webhook_secret_arn=base.secrets.webhook.secret_arn,
            slack_secret_arn=base.secrets.slack.secret_arn if base.secrets.slack else None,
            config_parameter=base.config_parameter.environment,
        )
        functions: dict[str, ScalerFunction] = {}
        for name in (FUNCTION_RECONCILE, FUNCTION_WEBHOOK, FUNCTION_FORCE_SCALE_DOWN, FUNCTION_AWS_EVENTS):
            check_environment_size(name, environments[name], ENV_CONFIG)
            functions[name] = ScalerFunction(
                self,
                name.title().replace("_", ""),
                name=name,
                description=DESCRIPTIONS[name],
                code=base.code,
                sizing=SIZING[name],
                environment=environments[name],
                log_retention=retention(deployment.log_retention_days),
                placement=base.network.placement if base.network else None,
                tracing=deployment.tracing,
                # Scheduled ticks are not retried and expire with the next tick: the next run redoes them.
                max_event_age=(
                    cdk.Duration.minutes(max(1, deployment.schedule_minutes))
                    if name == FUNCTION_RECONCILE
                    else None
                ),
                retry_attempts=0 if name == FUNCTION_RECONCILE else None,
                # EventBridge invokes aws_events asynchronously: keep what still fails after retries.
                on_failure=base.failed_invocations.destination if name == FUNCTION_AWS_EVENTS else None,
            )
        return functions

    def _build_permissions(self, base: _Foundations, functions: dict[str, ScalerFunction]) -> None:
        webhook = functions[FUNCTION_WEBHOOK]
        fleet_functions = _fleet_functions(functions)
        for scaler in fleet_functions:
            base.config_parameter.grant_read(scaler.role)
            base.state.grant_state_access(scaler.role)
            base.notifications.grant_publish(scaler.role)
            if base.secrets.slack:
                base.secrets.slack.grant_read(scaler.role)
        base.queue.queue.grant_send_messages(webhook.role)
        base.secrets.webhook.grant_read(webhook.role)

        fleet = FleetAccess(self, "FleetAccess", config=self.config, roles=[f.role for f in fleet_functions])
        for scaler in fleet_functions:
            scaler.depend_on(fleet.policy)
        if base.network:
            vpc_access = VpcNetworking(self, "VpcNetworking", roles=[f.role for f in functions.values()])
            for scaler in functions.values():
                scaler.depend_on(vpc_access.policy)

    def _build_entry_points(self, base: _Foundations, functions: dict[str, ScalerFunction]) -> WebhookApi:
        """The triggers, the webhook's API and the functions' access to the cluster."""
        deployment = self.config.deployment
        Triggers(
            self,
            "Triggers",
            reconcile=functions[FUNCTION_RECONCILE].function,
            aws_events=functions[FUNCTION_AWS_EVENTS].function,
            queue=base.queue.queue,
            schedule_minutes=deployment.schedule_minutes,
            asg_names=[g.asg_name for g in self.config.node_groups],
        )
        api = WebhookApi(
            self,
            "WebhookApi",
            handler=functions[FUNCTION_WEBHOOK].function,
            log_retention=retention(deployment.log_retention_days),
        )
        if deployment.eks_access_entry:
            ClusterAccess(
                self,
                "ClusterAccess",
                cluster_name=self.config.cluster_name,
                roles={f.name: f.role for f in _fleet_functions(functions)},
            )
        return api

    def _build_observability(self, base: _Foundations, functions: dict[str, ScalerFunction]) -> Observability:
        config, deployment = self.config, self.config.deployment
        return Observability(
            self,
            "Observability",
            cluster_name=config.cluster_name,
            group_names=config.group_names,
            functions={name: f.function for name, f in functions.items()},
            dead_letter_queue=base.queue.dead_letter_queue,
            failed_invocations=base.failed_invocations.queue,
            topic=base.notifications.topic,
            oldest_pending_seconds=deployment.alarm_oldest_pending_seconds,
            capacity_failures=deployment.alarm_capacity_failures,
            schedule_minutes=deployment.schedule_minutes,
        )

    def _build_outputs(
        self,
        base: _Foundations,
        functions: dict[str, ScalerFunction],
        api: WebhookApi,
        observability: Observability,
    ) -> None:
        output, secret_arn = self._output, base.secrets.webhook.secret_arn
        output("WebhookUrl", api.url, "POST target for the admission webhook and the event forwarder")
        output("WebhookSecretArn", secret_arn, "HMAC key of the webhook")
        for name, scaler in functions.items():
            output(f"{name.title().replace('_', '')}FunctionName", scaler.function.function_name, name)
        output("StateTableName", base.state.table.table_name, "DynamoDB state table (retained on destroy)")
        output("TriggerQueueUrl", base.queue.queue.queue_url, "SQS FIFO wake-up queue")
        output(
            "NotificationsTopicArn",
            base.notifications.topic.topic_arn,
            "SNS topic of notifications and alarms",
        )
        output("DashboardName", observability.dashboard.dashboard_name, "CloudWatch dashboard")
        output(
            "RbacManifest",
            rbac_manifest(self.config.cluster_name, self.config.kubernetes.status_namespace),
            "kubectl apply -f - (RBAC of the scaler)",
        )
        self._build_webhook_outputs(api, secret_arn)

    def _build_webhook_outputs(self, api: WebhookApi, secret_arn: str) -> None:
        """How the admission webhook and an event forwarder reach and authenticate to the webhook."""
        before, after = admission_webhook_manifest(self.config.cluster_name).split(WEBHOOK_URL_PLACEHOLDER)
        self._output(
            "AdmissionWebhookManifest",
            cdk.Fn.join("", [before, f"{api.url}{ADMISSION_ROUTE}/{ADMISSION_TOKEN_PLACEHOLDER}", after]),
            "kubectl apply -f - (optional: wake the scaler when a GPU pod is created)",
        )
        self._output(
            "EventForwarderNote",
            cdk.Fn.join(
                "",
                [
                    f"POST Kubernetes Events as JSON (at most {WEBHOOK_MAX_BODY_BYTES} bytes) to ",
                    f"{api.url}{EVENTS_ROUTE}",
                    f" with headers {HEADER_TIMESTAMP}: <unix seconds> and {HEADER_SIGNATURE}: "
                    "sha256=<hex HMAC-SHA256 of '<timestamp>.<body>'> keyed with the SecretString of ",
                    secret_arn,
                    f"; requests older than {WEBHOOK_REPLAY_WINDOW_SECONDS} s are rejected.",
                ],
            ),
            "How an in-cluster event forwarder authenticates",
        )

    def _output(self, id: str, value: str, description: str) -> None:
        cdk.CfnOutput(self, id, value=value, description=description)


def _fleet_functions(functions: dict[str, ScalerFunction]) -> tuple[ScalerFunction, ...]:
    """The functions that act on the fleet (every one but the webhook)."""
    return (
        functions[FUNCTION_RECONCILE],
        functions[FUNCTION_FORCE_SCALE_DOWN],
        functions[FUNCTION_AWS_EVENTS],
    )
