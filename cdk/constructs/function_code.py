"""The code every function runs: the app packages as one asset, the dependencies as one layer."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from cdk.bundling import (
    APP_CODE_EXCLUDE,
    UNUSED_BUNDLING_IMAGE,
    PipLayerBundler,
    layer_asset_hash,
    runtime_requirements,
)
from cdk.context import REPO_ROOT

RUNTIMES = {"python3.12": lambda_.Runtime.PYTHON_3_12, "python3.13": lambda_.Runtime.PYTHON_3_13}
ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}


class FunctionCode(Construct):
    """`code` (shared/ + functions/, handler root = repo root) and `layer` (pip-installed dependencies)."""

    def __init__(self, scope: Construct, id: str, *, python_runtime: str, architecture: str) -> None:
        super().__init__(scope, id)
        self.runtime = RUNTIMES[python_runtime]
        self.architecture = ARCHITECTURES[architecture]

        # Plain copy, hashed by content: shared/ and functions/ only (gitignore-style patterns, so the
        # rest of the repo, .venv included, is never even walked).
        self.code = lambda_.Code.from_asset(
            str(REPO_ROOT), ignore_mode=cdk.IgnoreMode.GIT, exclude=APP_CODE_EXCLUDE
        )

        requirements = runtime_requirements()
        python_version = python_runtime.removeprefix("python")
        bundler = PipLayerBundler(
            requirements=requirements, architecture=architecture, python_version=python_version
        )
        self.layer = lambda_.LayerVersion(
            self,
            "Dependencies",
            description=f"backlog-scaler runtime dependencies ({python_runtime}, {architecture})",
            compatible_runtimes=[self.runtime],
            compatible_architectures=[self.architecture],
            removal_policy=cdk.RemovalPolicy.DESTROY,
            code=lambda_.Code.from_asset(
                str(REPO_ROOT),
                # The layer is a function of the requirement specifiers and the target platform;
                # the source directory is not read (pip fetches the wheels).
                asset_hash_type=cdk.AssetHashType.CUSTOM,
                asset_hash=layer_asset_hash(
                    requirements=requirements, architecture=architecture, python_version=python_version
                ),
                ignore_mode=cdk.IgnoreMode.GIT,
                exclude=["/*", "!/pyproject.toml"],
                bundling=cdk.BundlingOptions(
                    image=cdk.DockerImage.from_registry(UNUSED_BUNDLING_IMAGE),
                    # jsii checks the interface at run time; mypy cannot see @jsii.implements.
                    local=cast(cdk.ILocalBundling, bundler),
                ),
            ),
        )
