"""Optional VPC placement of the functions, from IDs in the config (no lookups, no AWS calls)."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from cdk.constructs.scaler_function import VpcPlacement


class FunctionNetwork(Construct):
    """Imports the VPC, subnets and security groups by ID; makes one egress-only group if none given.

    The subnets need a route to the AWS APIs and the cluster endpoint (NAT gateway or VPC endpoints
    for DynamoDB, SQS, SNS, Secrets Manager, Auto Scaling, EC2, EKS, CloudWatch Logs).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc_id: str,
        subnet_ids: Sequence[str],
        security_group_ids: Sequence[str],
    ) -> None:
        super().__init__(scope, id)
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id=vpc_id,
            # Only used when subnets are selected by type; ours are given explicitly. An unresolved
            # Fn::GetAZs keeps the synth free of lookups (it is never rendered into the template).
            availability_zones=cdk.Fn.get_azs(),
        )
        cdk.Annotations.of(vpc).acknowledge_warning(
            "@aws-cdk/aws-ec2:vpcAttributeIsListTokenavailabilityZones",
            "The functions name their subnets explicitly; the VPC's AZ list is never used.",
        )
        subnets = [
            ec2.Subnet.from_subnet_id(self, f"Subnet{i}", subnet) for i, subnet in enumerate(subnet_ids)
        ]
        for subnet in subnets:
            cdk.Annotations.of(subnet).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId",
                "Lambda only needs the subnet ids; nothing reads the route tables.",
            )
        groups: list[ec2.ISecurityGroup] = [
            ec2.SecurityGroup.from_security_group_id(self, f"SecurityGroup{i}", group, mutable=False)
            for i, group in enumerate(security_group_ids)
        ]
        if not groups:
            groups.append(
                ec2.SecurityGroup(
                    self,
                    "FunctionsSecurityGroup",
                    vpc=vpc,
                    description="backlog-scaler functions: no inbound, outbound to AWS APIs and the cluster",
                    allow_all_outbound=True,
                )
            )
        self.placement = VpcPlacement(vpc=vpc, subnets=subnets, security_groups=groups)
