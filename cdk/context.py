"""The CDK app's inputs: cdk.json context, and the scaler config under its `scaler` key.

The config is validated by the same pydantic model as the CLI (`shared.config.parse_config`), so a bad
config fails `cdk synth` with the same field-named message. Importing `shared.config` pulls in
`kubernetes.utils.quantity` (hence the `kubernetes` package) at synth time; that is acceptable for a
synth, and nothing here imports boto3 or the adapters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from constructs import Construct

from shared.config import ScalerConfig, parse_config
from shared.domain.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parent.parent
CDK_JSON = REPO_ROOT / "cdk.json"
CONTEXT_KEY = "scaler"
CONFIG_SOURCE = f"cdk.json context '{CONTEXT_KEY}'"

# The retention periods CloudWatch Logs accepts (days) and their aws_logs.RetentionDays names.
LOG_RETENTION_DAYS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}  # fmt: skip


def cdk_json_context(path: Path = CDK_JSON) -> dict[str, Any]:
    """The `context` of cdk.json: the CLI passes it to the app; a direct run reads it here."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read cdk.json: {exc}") from exc
    context = document.get("context", {}) if isinstance(document, Mapping) else {}
    return dict(context) if isinstance(context, Mapping) else {}


def scaler_config(scope: Construct) -> ScalerConfig:
    """The validated scaler config from the `scaler` context key; ConfigError naming each bad field."""
    raw = scope.node.try_get_context(CONTEXT_KEY)
    if raw is None:
        raise ConfigError(f"{CONFIG_SOURCE}: missing; put the scaler config under context.{CONTEXT_KEY}")
    if isinstance(raw, str):  # `cdk synth -c scaler='{...}'` passes a string
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{CONFIG_SOURCE}: not valid JSON: {exc}") from exc
    config = parse_config(raw, source=CONFIG_SOURCE)
    _check_deployment(config)
    return config


def _check_deployment(config: ScalerConfig) -> None:
    """Rules that only matter to the CDK app; same message format as the model's own errors."""
    deployment = config.deployment
    problems = []
    if deployment.log_retention_days not in LOG_RETENTION_DAYS:
        allowed = ", ".join(str(days) for days in LOG_RETENTION_DAYS)
        problems.append(f"deployment.log_retention_days: CloudWatch Logs accepts only {allowed}")
    if deployment.vpc_id and not deployment.subnet_ids:
        problems.append(
            "deployment.subnet_ids: give the subnets to place the functions in when vpc_id is set"
        )
    if not deployment.vpc_id and (deployment.subnet_ids or deployment.security_group_ids):
        problems.append("deployment.vpc_id: required when subnet_ids or security_group_ids are given")
    if problems:
        raise ConfigError("\n".join(f"{CONFIG_SOURCE}: {problem}" for problem in problems))


def stack_name(config: ScalerConfig) -> str:
    """`BacklogScaler-<cluster>`; CloudFormation stack names allow no underscores."""
    return f"BacklogScaler-{config.cluster_name.replace('_', '-')}"
