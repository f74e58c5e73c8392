"""IAM for the AWS side of scaling: change only this cluster's groups, read what planning needs.

One managed-in-stack policy, attached to each role that acts on the fleet, so the permissions and
their cdk-nag acknowledgements live in one place.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from constructs import Construct

from cdk.nag import acknowledge
from shared.config import ScalerConfig
from shared.constants import TAG_CLUSTER

MUTATING_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")
# These APIs support no resource-level permissions: AWS requires Resource "*".
DESCRIBE_ACTIONS = (
    "autoscaling:DescribeAutoScalingGroups",
    "autoscaling:DescribeScalingActivities",
    # Re-reads an instance whose termination was refused (already leaving?) and maps spot warnings.
    "autoscaling:DescribeAutoScalingInstances",
    "ec2:DescribeInstanceTypes",
    # Zones of a group that lists none (its VPCZoneIdentifier subnets) and the free instances of the
    # capacity reservations groups launch into.
    "ec2:DescribeSubnets",
    "ec2:DescribeCapacityReservations",
    # Node repair and rotation: status checks and scheduled events of the groups' instances, and
    # the launch templates' $Latest/$Default version numbers (drift).
    "ec2:DescribeInstanceStatus",
    "ec2:DescribeLaunchTemplates",
)
# What a function in a VPC needs to attach its network interfaces (AWSLambdaVPCAccessExecutionRole).
VPC_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


def asg_arn(*, region: str, asg_name: str, partition: str, account: str) -> str:
    """ARN pattern of one group; the `*` is the group's random id, unknown before it exists."""
    return (
        f"arn:{partition}:autoscaling:{region}:{account}:autoScalingGroup:*:autoScalingGroupName/{asg_name}"
    )


def cluster_arn(*, region: str, cluster_name: str, partition: str, account: str) -> str:
    return f"arn:{partition}:eks:{region}:{account}:cluster/{cluster_name}"


class FleetAccess(Construct):
    """The fleet policy: scale only this cluster's tagged groups, read where they are."""

    def __init__(
        self, scope: Construct, id: str, *, config: ScalerConfig, roles: Sequence[iam.IRole]
    ) -> None:
        super().__init__(scope, id)
        statements = [*_build_fleet_statements(config)]
        if not (config.kubernetes.endpoint and config.kubernetes.certificate_authority):
            statements.append(_build_describe_cluster_statement(config))
        self.policy = iam.Policy(self, "Policy", statements=statements, roles=list(roles))
        self._acknowledge(config)

    def _acknowledge(self, config: ScalerConfig) -> None:
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "Describe calls of Auto Scaling and EC2 (DescribeAutoScalingGroups, DescribeScalingActivities, "
            "DescribeAutoScalingInstances, DescribeInstanceTypes, DescribeSubnets, "
            "DescribeCapacityReservations, DescribeInstanceStatus, DescribeLaunchTemplates) support no "
            "resource-level permissions; AWS requires Resource '*'. "
            "They are read-only and limited to the groups' regions.",
        )
        for group in config.node_groups:
            pattern = asg_arn(
                region=config.region_of(group),
                asg_name=group.asg_name,
                partition="<AWS::Partition>",
                account="<AWS::AccountId>",
            )
            acknowledge(
                self.policy,
                f"AwsSolutions-IAM5[Resource::{pattern}]",
                "An Auto Scaling group ARN contains a random id that is unknown at synth time; the "
                "statement is pinned to the group's name and region and requires the "
                f"{TAG_CLUSTER}={config.cluster_name} tag on the group.",
            )


def _build_fleet_statements(config: ScalerConfig) -> list[iam.PolicyStatement]:
    partition, account = cdk.Aws.PARTITION, cdk.Aws.ACCOUNT_ID
    group_arns = [
        asg_arn(region=config.region_of(g), asg_name=g.asg_name, partition=partition, account=account)
        for g in config.node_groups
    ]
    return [
        iam.PolicyStatement(
            sid="ScaleOnlyThisClustersGroups",
            actions=list(MUTATING_ACTIONS),
            resources=group_arns,
            # Both the configured names and the cluster tag must match: a group that is renamed
            # into the config but not tagged for this cluster stays untouched.
            conditions={"StringEquals": {f"autoscaling:ResourceTag/{TAG_CLUSTER}": config.cluster_name}},
        ),
        # Read only where the groups are: the one narrowing these actions support.
        iam.PolicyStatement(
            sid="ReadFleet",
            actions=list(DESCRIBE_ACTIONS),
            resources=["*"],
            conditions={
                "StringEquals": {
                    "aws:RequestedRegion": sorted(
                        {config.region, *(config.region_of(g) for g in config.node_groups)}
                    )
                }
            },
        ),
    ]


def _build_describe_cluster_statement(config: ScalerConfig) -> iam.PolicyStatement:
    """Endpoint and CA come from eks:DescribeCluster when the config does not give them. The EKS
    token is a presigned sts:GetCallerIdentity URL: signing needs no IAM permission."""
    return iam.PolicyStatement(
        sid="DescribeTheCluster",
        actions=["eks:DescribeCluster"],
        resources=[
            cluster_arn(
                region=config.region,
                cluster_name=config.cluster_name,
                partition=cdk.Aws.PARTITION,
                account=cdk.Aws.ACCOUNT_ID,
            )
        ],
    )


class VpcNetworking(Construct):
    """ENI permissions for functions placed in a VPC (given inline instead of the AWS managed policy)."""

    def __init__(self, scope: Construct, id: str, *, roles: Sequence[iam.IRole]) -> None:
        super().__init__(scope, id)
        self.policy = iam.Policy(
            self,
            "Policy",
            statements=[
                iam.PolicyStatement(sid="LambdaVpcNetworking", actions=list(VPC_ACTIONS), resources=["*"])
            ],
            roles=list(roles),
        )
        acknowledge(
            self.policy,
            "AwsSolutions-IAM5[Resource::*]",
            "Lambda creates and deletes the functions' network interfaces in the configured subnets; the "
            "ENI actions take Resource '*' (as in the AWS managed AWSLambdaVPCAccessExecutionRole).",
        )
