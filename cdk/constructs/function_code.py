"""The code every function runs: the app packages as one asset, the dependencies as one layer, both
with byte code for the runtime's Python when this machine has that version (cdk/packaging.py)."""

from __future__ import annotations

from typing import cast

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from cdk.bundling import (
    UNUSED_BUNDLING_IMAGE,
    AppCodeBundler,
    PipLayerBundler,
    layer_asset_hash,
    runtime_requirements,
)
from cdk.context import REPO_ROOT
from cdk.packaging import app_code_hash, find_interpreter

RUNTIMES = {"python3.12": lambda_.Runtime.PYTHON_3_12, "python3.13": lambda_.Runtime.PYTHON_3_13}
ARCHITECTURES = {"arm64": lambda_.Architecture.ARM_64, "x86_64": lambda_.Architecture.X86_64}


class FunctionCode(Construct):
    """`code` (shared/ + functions/, handler root = repo root) and `layer` (pip-installed dependencies)."""

    def __init__(self, scope: Construct, id: str, *, python_runtime: str, architecture: str) -> None:
        super().__init__(scope, id)
        self.runtime = RUNTIMES[python_runtime]
        self.architecture = ARCHITECTURES[architecture]

        python_version = python_runtime.removeprefix("python")
        interpreter = self._interpreter(python_version)
        compiled = interpreter is not None

        # shared/ and functions/ only (cdk/packaging.py app_code_files), hashed by content.
        self.code = lambda_.Code.from_asset(
            str(REPO_ROOT),
            asset_hash_type=cdk.AssetHashType.CUSTOM,
            asset_hash=app_code_hash(REPO_ROOT, python_version=python_version, compiled=compiled),
            bundling=cdk.BundlingOptions(
                image=cdk.DockerImage.from_registry(UNUSED_BUNDLING_IMAGE),
                local=cast(cdk.ILocalBundling, AppCodeBundler(source=REPO_ROOT, interpreter=interpreter)),
            ),
        )

        requirements = runtime_requirements()
        bundler = PipLayerBundler(
            requirements=requirements,
            architecture=architecture,
            python_version=python_version,
            interpreter=interpreter,
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
                    requirements=requirements,
                    architecture=architecture,
                    python_version=python_version,
                    compiled=compiled,
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

    def _interpreter(self, python_version: str) -> str | None:
        """The interpreter that compiles the byte code, looked for only when this synth bundles."""
        if not cdk.Stack.of(self).bundling_required:
            return None
        interpreter = find_interpreter(python_version)
        if interpreter is None:
            cdk.Annotations.of(self).add_warning_v2(
                "backlog-scaler:no-bytecode",
                f"No Python {python_version} on this machine (PATH, pyenv, uv): the functions ship "
                f"source only, and Lambda, whose code directories are read-only, compiles every module "
                f"they import at each cold start (seconds). Install Python {python_version} or set "
                "deployment.python_runtime to this machine's version, and synthesize again.",
            )
        return interpreter
