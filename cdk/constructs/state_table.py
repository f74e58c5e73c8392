"""The scaler's state: one DynamoDB table (lease, node state, backoff, drain intents)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from constructs import Construct

from shared.constants import TABLE_PARTITION_KEY, TABLE_SORT_KEY, TABLE_TTL_ATTRIBUTE

# What shared/adapters/aws/state_store.py calls (transactions are authorized per item: ConditionCheck,
# Put, Update, Delete). Not `grant_read_write_data`: the table has no stream (GetRecords,
# GetShardIterator) and the adapter never scans, batches or describes it.
STATE_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)


class StateTable(Construct):
    """Single-table design keyed by strings `pk`/`sk`; expired items go by TTL."""

    def __init__(self, scope: Construct, id: str) -> None:
        super().__init__(scope, id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=TABLE_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=TABLE_SORT_KEY, type=dynamodb.AttributeType.STRING),
            # A handful of small writes per minute: on-demand costs cents and never throttles a burst.
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute=TABLE_TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            # RETAIN: the table holds in-flight drain intents, node cordon times and capacity backoff.
            # Losing them with a `cdk destroy` (or a replacement) could strand cordoned nodes or
            # retry a group that has no capacity; an operator deletes the table deliberately.
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )

    def grant_state_access(self, grantee: iam.IGrantable) -> None:
        """Let `grantee` read and write the state items (STATE_ACTIONS on this table only)."""
        self.table.grant(grantee, *STATE_ACTIONS)
