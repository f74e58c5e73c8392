"""Environment variables of each function: only what that function uses (names from shared.constants)."""

from __future__ import annotations

from collections.abc import Mapping

from shared.config import ScalerConfig
from shared.constants import (
    ENV_CLUSTER_NAME,
    ENV_DRY_RUN,
    ENV_POWERTOOLS_METRICS_NAMESPACE,
    ENV_POWERTOOLS_SERVICE_NAME,
    ENV_QUEUE_URL,
    ENV_SLACK_SECRET_ARN,
    ENV_TABLE_NAME,
    ENV_TOPIC_ARN,
    ENV_TRACE_DISABLED,
    ENV_WEBHOOK_SECRET_ARN,
    FUNCTION_AWS_EVENTS,
    FUNCTION_FORCE_SCALE_DOWN,
    FUNCTION_RECONCILE,
    FUNCTION_WEBHOOK,
    METRICS_NAMESPACE,
    SERVICE_NAME,
)


def config_json(config: ScalerConfig) -> str:
    """The config as the functions read it: everything but the CDK-only `deployment` section."""
    return config.model_dump_json(exclude={"deployment"})


def function_environments(
    config: ScalerConfig,
    *,
    table_name: str,
    queue_url: str,
    topic_arn: str,
    webhook_secret_arn: str,
    slack_secret_arn: str | None,
    config_parameter: Mapping[str, str],
) -> dict[str, dict[str, str]]:
    """Function name -> environment. Values may be CloudFormation tokens.

    The scaling functions read the config from its SSM parameter (`config_parameter`: its name and
    version; Lambda allows 4 KB of environment); the webhook gets only the cluster name.
    """
    common = {
        ENV_POWERTOOLS_SERVICE_NAME: SERVICE_NAME,
        ENV_POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        ENV_TRACE_DISABLED: "false" if config.deployment.tracing else "true",
    }
    scaling = {
        **common,
        **config_parameter,
        ENV_TABLE_NAME: table_name,
        ENV_TOPIC_ARN: topic_arn,
        ENV_DRY_RUN: "true" if config.dry_run else "false",
    }
    if slack_secret_arn:
        scaling[ENV_SLACK_SECRET_ARN] = slack_secret_arn
    return {
        FUNCTION_RECONCILE: dict(scaling),
        FUNCTION_FORCE_SCALE_DOWN: dict(scaling),
        FUNCTION_AWS_EVENTS: dict(scaling),  # it reconciles itself: no queue
        FUNCTION_WEBHOOK: {
            **common,
            ENV_CLUSTER_NAME: config.cluster_name,  # the message group of the queue
            ENV_WEBHOOK_SECRET_ARN: webhook_secret_arn,
            ENV_QUEUE_URL: queue_url,
        },
    }
