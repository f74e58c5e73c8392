"""Docker-free packaging: pip cross-installs wheels for the Lambda platform; app code is copied."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from cdk.bundling import (
    BundlingError,
    PipLayerBundler,
    layer_asset_hash,
    runtime_requirements,
)
from tests.infra.conftest import Synthesized

REPO_ROOT = Path(__file__).resolve().parents[2]


class RecordingPip:
    """Stands in for subprocess.run: records the command, creates the target, returns `returncode`."""

    def __init__(self, returncode: int = 0, stderr: str = "") -> None:
        self.returncode = returncode
        self.stderr = stderr
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        target = Path(command[command.index("--target") + 1])
        (target / "bin").mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(command, self.returncode, stdout="", stderr=self.stderr)


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_requirements_are_the_projects_runtime_dependencies() -> None:
    requirements = runtime_requirements()
    assert any(r.startswith("boto3") for r in requirements)
    assert any(r.startswith("kubernetes") for r in requirements)
    assert not any(r.startswith(("aws-cdk-lib", "pytest")) for r in requirements)


@pytest.mark.parametrize(
    ("architecture", "platform"),
    [("arm64", "manylinux2014_aarch64"), ("x86_64", "manylinux2014_x86_64")],
)
def test_layer_is_installed_for_the_lambda_platform(architecture: str, platform: str, tmp_path: Path) -> None:
    # Given a bundler for the architecture, When it bundles, Then pip fetches binary wheels for Lambda
    pip = RecordingPip()
    bundler = PipLayerBundler(
        requirements=("pydantic~=2.14.0",), architecture=architecture, python_version="3.12", run=pip
    )
    assert bundler.try_bundle(str(tmp_path)) is True
    (command,) = pip.commands
    assert _option(command, "--platform") == platform
    assert _option(command, "--python-version") == "3.12"
    assert _option(command, "--implementation") == "cp"
    assert "--only-binary=:all:" in command
    assert _option(command, "--target") == str(tmp_path / "python")  # the layer's import root
    assert command[-1] == "pydantic~=2.14.0"
    assert not (tmp_path / "python" / "bin").exists()


def test_pip_failure_is_a_clear_error_not_a_docker_fallback(tmp_path: Path) -> None:
    pip = RecordingPip(returncode=1, stderr="ERROR: No matching distribution found for nothing==0")
    bundler = PipLayerBundler(
        requirements=("nothing==0",), architecture="arm64", python_version="3.12", run=pip
    )
    with pytest.raises(BundlingError, match=r"manylinux2014_aarch64 / Python 3.12.*No matching distribution"):
        bundler.try_bundle(str(tmp_path))


def test_layer_hash_follows_requirements_and_platform() -> None:
    base = layer_asset_hash(requirements=("a==1",), architecture="arm64", python_version="3.12")
    assert base == layer_asset_hash(requirements=("a==1",), architecture="arm64", python_version="3.12")
    assert base != layer_asset_hash(requirements=("a==2",), architecture="arm64", python_version="3.12")
    assert base != layer_asset_hash(requirements=("a==1",), architecture="x86_64", python_version="3.12")
    assert base != layer_asset_hash(requirements=("a==1",), architecture="arm64", python_version="3.13")


def _uses_powertools_tracer() -> bool:
    packaged = [*REPO_ROOT.glob("functions/**/*.py"), *REPO_ROOT.glob("shared/**/*.py")]
    return any("Tracer(" in path.read_text(encoding="utf-8") for path in packaged)


def test_layer_has_what_the_powertools_tracer_imports() -> None:
    # Given code that builds a Powertools Tracer, Then the layer's requirements bring aws-xray-sdk
    if not _uses_powertools_tracer():
        pytest.skip("no Tracer in the packaged code")
    requirements = [Requirement(r) for r in runtime_requirements()]
    assert any(
        r.name == "aws-xray-sdk" or (r.name == "aws-lambda-powertools" and "tracer" in r.extras)
        for r in requirements
    )


def test_function_code_asset_holds_only_the_app_packages(synthesized: Synthesized) -> None:
    # Given the staged code asset (the layer is not bundled in tests, so it is the only asset dir)
    (asset,) = [p for p in synthesized.assembly_dir.iterdir() if p.is_dir() and p.name.startswith("asset.")]
    # Then it has shared/ and functions/ at its root, and no tests, caches or tooling
    assert {p.name for p in asset.iterdir()} == {"shared", "functions"}
    files = [p.relative_to(asset).as_posix() for p in asset.rglob("*")]
    assert "shared/config.py" in files
    # The local entry points (simulator, demo, CLI) stay out of the functions
    assert not [f for f in files if f.startswith("shared/local")]
    assert not [f for f in files if "__pycache__" in f or f.endswith(".pyc") or "/tests/" in f]
