"""The public HTTPS entry of the webhook: an HTTP API with stage throttling and access logs.

An HTTP API rather than a Lambda Function URL: the stage throttle drops floods before they cost an
invocation, routes other than the webhook's never reach the function, and access logs record callers.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from cdk.nag import acknowledge
from shared.constants import WEBHOOK_PATH

# Sustained requests/s and burst across the stage: far above what pod creation in a research cluster
# produces (the admission webhook fires once per GPU pod), low enough to cap a flood's cost.
THROTTLE_RATE_LIMIT = 50
THROTTLE_BURST_LIMIT = 100


_ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "protocol": "$context.protocol",
    "responseLength": "$context.responseLength",
}


@jsii.implements(apigwv2.IAccessLogSettings)
class _AccessLogSettings:
    """JSON access log lines (IAccessLogSettings is a jsii interface, so a class rather than a dict)."""

    def __init__(self, destination: apigwv2.IAccessLogDestination) -> None:
        self._destination = destination

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigateway.AccessLogFormat:
        # HTTP API variables (API Gateway developer guide, "Customizing HTTP API access logs"); the
        # REST API's standard fields would log $context.resourcePath, which an HTTP API does not set.
        # The route key names the route by its template (/webhook/admission/{token}), never the path,
        # which carries the admission token.
        return apigateway.AccessLogFormat.custom(json.dumps(_ACCESS_LOG_FIELDS, separators=(",", ":")))


class WebhookApi(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        handler: lambda_.IFunction,
        log_retention: logs.RetentionDays,
    ) -> None:
        super().__init__(scope, id)
        self.api = apigwv2.HttpApi(
            self,
            "Api",
            description="backlog-scaler webhook (HMAC-authenticated by the function)",
            create_default_stage=False,
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=log_retention, removal_policy=cdk.RemovalPolicy.DESTROY
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(
                rate_limit=THROTTLE_RATE_LIMIT, burst_limit=THROTTLE_BURST_LIMIT
            ),
            access_log_settings=_AccessLogSettings(apigwv2.LogGroupLogDestination(self.access_logs)),
        )
        integration = integrations.HttpLambdaIntegration("Webhook", handler)
        # The webhook path and its sub-paths (e.g. one per event source); nothing else is routed.
        routes = self.api.add_routes(
            path=WEBHOOK_PATH, methods=[apigwv2.HttpMethod.POST], integration=integration
        ) + self.api.add_routes(
            path=f"{WEBHOOK_PATH}/{{proxy+}}", methods=[apigwv2.HttpMethod.POST], integration=integration
        )
        for route in routes:
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                "Callers are the Kubernetes API server and an in-cluster event forwarder, which cannot "
                "use IAM, Cognito or JWT authorizers. The function authenticates every request itself "
                "(HMAC-SHA256 signature over timestamp and body, or a bearer secret, keyed by the "
                "Secrets Manager secret; constant-time compare, replay window, body size limit) and "
                "answers anything else with 4xx before it reaches the queue; the stage throttle caps "
                "what an unauthenticated flood can cost.",
            )

        self.url = f"{self.api.api_endpoint}{WEBHOOK_PATH}"
