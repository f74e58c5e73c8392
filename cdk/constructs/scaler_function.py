"""One Lambda function of the scaler with its own role and log group (nothing shared between them),
and the SSM parameter from which the functions read the scaler config.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from cdk.constructs.function_code import FunctionCode
from cdk.nag import acknowledge
from shared.config import encode_stored_config
from shared.constants import ENV_CONFIG_PARAMETER, ENV_CONFIG_VERSION, SERVICE_NAME
from shared.domain.errors import ConfigError

# Lambda caps the environment of a function at 4 KB (keys + values).
LAMBDA_ENVIRONMENT_LIMIT_BYTES = 4 * 1024
# Values resolved only at deploy time (ARNs, URLs, names) are counted at this generous size.
UNRESOLVED_VALUE_ALLOWANCE_BYTES = 256
# SSM Parameter Store caps a String parameter's value at 4 KB (Standard tier) or 8 KB (Advanced).
SSM_STANDARD_LIMIT_BYTES = 4 * 1024
SSM_ADVANCED_LIMIT_BYTES = 8 * 1024


@dataclass(frozen=True)
class FunctionSizing:
    memory_mb: int
    timeout: cdk.Duration
    reserved_concurrency: int | None = None


@dataclass(frozen=True)
class VpcPlacement:
    vpc: ec2.IVpc
    subnets: Sequence[ec2.ISubnet]
    security_groups: Sequence[ec2.ISecurityGroup]


def environment_size(environment: Mapping[str, str]) -> int:
    """Bytes the environment takes against Lambda's 4 KB limit (deploy-time values estimated)."""
    size = 0
    for key, value in environment.items():
        value_size = (
            UNRESOLVED_VALUE_ALLOWANCE_BYTES if cdk.Token.is_unresolved(value) else len(value.encode())
        )
        size += len(key.encode()) + value_size
    return size


def check_environment_size(function_name: str, environment: Mapping[str, str], config_key: str) -> None:
    """Fail the synth when the environment (mostly the config JSON) would exceed Lambda's limit."""
    size = environment_size(environment)
    if size > LAMBDA_ENVIRONMENT_LIMIT_BYTES:
        config_size = len(environment.get(config_key, "").encode())
        raise ConfigError(
            f"cdk.json context 'scaler': the {function_name} function's environment would be about "
            f"{size} bytes (the config JSON alone is {config_size}); Lambda allows "
            f"{LAMBDA_ENVIRONMENT_LIMIT_BYTES} bytes. Shorten the config: drop `allocatable` where "
            "`instance_type` gives the node shape, and settings that repeat their defaults."
        )


class ScalerConfigParameter(Construct):
    """The validated scaler config in an SSM String parameter: the functions get its name, not its text.

    Lambda allows 4 KB of environment, which a dozen node groups outgrow. The stored value is the
    config JSON, gzip + base64 beyond 4 KB (shared.config.encode_stored_config), in the Standard tier
    when it fits 4 KB and the Advanced tier up to 8 KB. Not a secret: no SecureString, no KMS.
    """

    def __init__(self, scope: Construct, id: str, *, cluster_name: str, config_json: str) -> None:
        super().__init__(scope, id)
        value = encode_stored_config(config_json)
        size = len(value.encode())
        if size > SSM_ADVANCED_LIMIT_BYTES:
            raise ConfigError(
                f"cdk.json context 'scaler': the config is {len(config_json.encode())} bytes of JSON, "
                f"{size} bytes compressed; an SSM parameter holds {SSM_ADVANCED_LIMIT_BYTES} bytes. "
                "Shorten the config: drop `allocatable` where `instance_type` gives the node shape, and "
                "settings that repeat their defaults."
            )
        self.size = size
        name = f"/{SERVICE_NAME}/{cluster_name}/config"
        self.parameter = ssm.StringParameter(
            self,
            "Parameter",
            parameter_name=name,
            string_value=value,
            description=f"backlog-scaler config of the EKS cluster {cluster_name} (written by cdk deploy)",
            tier=(
                ssm.ParameterTier.STANDARD if size <= SSM_STANDARD_LIMIT_BYTES else ssm.ParameterTier.ADVANCED
            ),
        )
        # Spelled out from the known name (the construct's ARN joins in a Ref of the name): a plain ARN
        # that the policy scanners read as the parameter's.
        self.arn = cdk.Stack.of(self).format_arn(
            service="ssm", resource="parameter", resource_name=name.removeprefix("/")
        )
        # In the environment, so that a changed config changes every function's configuration.
        self.version = hashlib.sha256(value.encode()).hexdigest()[:16]

    @property
    def environment(self) -> dict[str, str]:
        """What a function needs to read the config: the parameter's name and the config's version."""
        return {ENV_CONFIG_PARAMETER: self.parameter.parameter_name, ENV_CONFIG_VERSION: self.version}

    def grant_read(self, role: iam.IRole) -> None:
        """ssm:GetParameter on this parameter only (a String parameter: no kms:Decrypt)."""
        role.add_to_principal_policy(iam.PolicyStatement(actions=["ssm:GetParameter"], resources=[self.arn]))


class ScalerFunction(Construct):
    """`functions/<name>/handler.py:handler` on the shared code and layer, with a dedicated role."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        name: str,
        description: str,
        code: FunctionCode,
        sizing: FunctionSizing,
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
        placement: VpcPlacement | None = None,
        max_event_age: cdk.Duration | None = None,
        retry_attempts: int | None = None,
        on_failure: lambda_.IDestination | None = None,
        tracing: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self.name = name
        self.role, self.log_group = self._build_role_and_logs(name, log_retention)
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=code.runtime,
            architecture=code.architecture,
            handler=f"functions.{name}.handler.handler",
            code=code.code,
            layers=[code.layer],
            memory_size=sizing.memory_mb,
            timeout=sizing.timeout,
            reserved_concurrent_executions=sizing.reserved_concurrency,
            environment=dict(environment),
            role=self.role,
            log_group=self.log_group,
            max_event_age=max_event_age,
            retry_attempts=retry_attempts,
            on_failure=on_failure,  # asynchronous invocations only: where an event goes once retries end
            # With deployment.tracing the handlers trace with the Powertools Tracer, which X-Ray records
            # only under active tracing; without it the functions never load the X-Ray SDK.
            tracing=lambda_.Tracing.ACTIVE if tracing else lambda_.Tracing.DISABLED,
            vpc=placement.vpc if placement else None,
            vpc_subnets=ec2.SubnetSelection(subnets=list(placement.subnets)) if placement else None,
            security_groups=list(placement.security_groups) if placement else None,
        )
        self._acknowledge(code, tracing=tracing)

    def _build_role_and_logs(
        self, name: str, log_retention: logs.RetentionDays
    ) -> tuple[iam.Role, logs.LogGroup]:
        role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"backlog-scaler {name} function",
        )
        # Our own log group: retention and removal are ours, and the role can write only here (no
        # AWSLambdaBasicExecutionRole with its logs:* on every group).
        log_group = logs.LogGroup(
            self,
            "Logs",
            retention=log_retention,
            # Logs expire by retention anyway; a destroyed stack should not leave orphaned groups.
            removal_policy=cdk.RemovalPolicy.DESTROY,
        )
        log_group.grant_write(role)
        return role, log_group

    def _acknowledge(self, code: FunctionCode, *, tracing: bool) -> None:
        acknowledge(
            self.function,
            "AwsSolutions-L1",
            f"The runtime is chosen by deployment.python_runtime ({code.runtime.name}); the dependency "
            "layer is built for exactly that version, and the config model limits it to versions the "
            "dependencies are tested with.",
        )
        if tracing:
            acknowledge(
                self.role,
                "AwsSolutions-IAM5[Resource::*]",
                "xray:PutTraceSegments and xray:PutTelemetryRecords (added by active tracing) support no "
                "resource-level permissions; AWS requires Resource '*'. They only write trace data.",
            )

    def depend_on(self, *policies: iam.Policy) -> None:
        """Create the function only once separately attached policies exist (Lambda checks some)."""
        for policy in policies:
            self.function.node.add_dependency(policy)
