"""Where the scaler and its alarms report: an SNS topic (ours, or one given in the config)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct


class Notifications(Construct):
    """Our topic is KMS-encrypted with a customer-managed key (CloudWatch alarms cannot publish to a
    topic under the AWS-managed `alias/aws/sns` key) and refuses publishing without TLS."""

    def __init__(self, scope: Construct, id: str, *, existing_topic_arn: str | None = None) -> None:
        super().__init__(scope, id)
        self.key: kms.IKey | None = None
        if existing_topic_arn:
            self.topic: sns.ITopic = sns.Topic.from_topic_arn(self, "Topic", existing_topic_arn)
            return

        key = kms.Key(
            self,
            "Key",
            description="backlog-scaler notifications topic",
            enable_key_rotation=True,
            removal_policy=cdk.RemovalPolicy.DESTROY,
            pending_window=cdk.Duration.days(7),
        )
        # CloudWatch publishes alarm notifications into the encrypted topic: on behalf of this
        # account's alarms in this region only (the confused-deputy guard; CloudWatch sends the
        # alarm's ARN and account with the KMS and SNS requests it makes for it, unlike EventBridge).
        alarms_here = {
            "StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID},
            "ArnLike": {"aws:SourceArn": _alarms_arn(self)},
        }
        key.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToUseTheKey",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["kms:Decrypt", "kms:GenerateDataKey"],
                resources=["*"],  # in a key policy, "*" is this key
                conditions=alarms_here,
            )
        )
        topic = sns.Topic(self, "Topic", display_name="backlog-scaler", master_key=key, enforce_ssl=True)
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AllowCloudWatchAlarmsToPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions=alarms_here,
            )
        )
        self.key = key
        self.topic = topic

    def grant_publish(self, grantee: iam.IGrantable) -> None:
        """sns:Publish on the topic, and the two KMS actions an encrypted publish needs (no wildcards,
        unlike `Topic.grant_publish`, which grants `kms:GenerateDataKey*`)."""
        grantee.grant_principal.add_to_principal_policy(
            iam.PolicyStatement(actions=["sns:Publish"], resources=[self.topic.topic_arn])
        )
        if self.key is not None:
            self.key.grant(grantee, "kms:Decrypt", "kms:GenerateDataKey")


def _alarms_arn(scope: Construct) -> str:
    """arn:<partition>:cloudwatch:<region>:<account>:alarm:* of the stack's account and region."""
    return cdk.Stack.of(scope).format_arn(
        service="cloudwatch",
        resource="alarm",
        resource_name="*",
        arn_format=cdk.ArnFormat.COLON_RESOURCE_NAME,
    )
