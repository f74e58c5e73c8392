"""Kubernetes access of the functions: EKS access entries into the scaler's RBAC group."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from shared.constants import RBAC_GROUP


class ClusterAccess(Construct):
    """One `AWS::EKS::AccessEntry` per role, mapped to the group the RBAC manifest binds.

    Needs a cluster whose authentication mode includes API (`API` or `API_AND_CONFIG_MAP`).
    """

    def __init__(
        self, scope: Construct, id: str, *, cluster_name: str, roles: Mapping[str, iam.IRole]
    ) -> None:
        super().__init__(scope, id)
        self.entries = {
            name: eks.CfnAccessEntry(
                self,
                f"{name.title().replace('_', '')}Entry",
                cluster_name=cluster_name,
                principal_arn=role.role_arn,
                kubernetes_groups=[RBAC_GROUP],
                type="STANDARD",
            )
            for name, role in roles.items()
        }
