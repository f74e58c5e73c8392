"""Docker-free packaging of the functions: app code as a plain asset, dependencies as a pip-built layer.

The Lambda runtime is Linux on arm64 or x86_64 whatever the build machine is, so the dependencies are
installed with pip's cross-platform options (`--platform manylinux2014_<arch> --only-binary=:all:`):
binary wheels for the target platform and Python version, no compilers, no Docker. The Docker image a
`BundlingOptions` must name is never used: local bundling always succeeds or raises.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import aws_cdk as cdk
import jsii

from cdk.context import REPO_ROOT

PYPROJECT = REPO_ROOT / "pyproject.toml"
# Top-level entries of the repo that make up the function code; everything else (tests, cdk, docs,
# .venv, cdk.out) stays out of the asset.
APP_CODE_DIRS = ("shared", "functions")
APP_CODE_EXCLUDE = [
    "/*",
    *(f"!/{name}/" for name in APP_CODE_DIRS),
    "__pycache__/",
    "*.pyc",
    ".mypy_cache/",
    "tests/",
    # Local entry points (trace replay, the local run): never imported by a function.
    "/shared/local/",
]
PIP_PLATFORMS = {"arm64": "manylinux2014_aarch64", "x86_64": "manylinux2014_x86_64"}
# Named only because BundlingOptions requires an image; local bundling never falls back to it.
UNUSED_BUNDLING_IMAGE = "public.ecr.aws/sam/build-python3.12"


class BundlingError(RuntimeError):
    """Local bundling of the dependency layer failed (pip could not install the wheels)."""


def runtime_requirements(pyproject: Path = PYPROJECT) -> tuple[str, ...]:
    """The `[project].dependencies` of pyproject.toml: what the functions need at run time."""
    with pyproject.open("rb") as handle:
        project = tomllib.load(handle).get("project", {})
    return tuple(project.get("dependencies", ()))


def pip_install_command(
    target: Path, *, requirements: Sequence[str], architecture: str, python_version: str
) -> list[str]:
    """pip arguments that fetch binary wheels for the Lambda platform into `target`."""
    return [
        sys.executable, "-m", "pip", "install",
        "--quiet", "--disable-pip-version-check", "--no-input",
        # Byte code compiled here would be for the build machine's Python, not the runtime's.
        "--no-compile",
        "--platform", PIP_PLATFORMS[architecture],
        "--implementation", "cp",
        "--python-version", python_version,
        "--only-binary=:all:",
        "--target", str(target),
        *requirements,
    ]  # fmt: skip


@jsii.implements(cdk.ILocalBundling)
class PipLayerBundler:
    """Builds the dependency layer (`python/` + packages) on the local machine with pip."""

    def __init__(
        self,
        *,
        requirements: Sequence[str],
        architecture: str,
        python_version: str,
        run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
    ) -> None:
        self.requirements = tuple(requirements)
        self.architecture = architecture
        self.python_version = python_version
        self._run = run

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage | None = None) -> bool:
        """Install the wheels into `<output_dir>/python`; raises BundlingError rather than use Docker."""
        target = Path(output_dir) / "python"
        command = pip_install_command(
            target,
            requirements=self.requirements,
            architecture=self.architecture,
            python_version=self.python_version,
        )
        try:
            result = self._run(command, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise BundlingError(f"cannot run pip ({sys.executable} -m pip): {exc}") from exc
        if result.returncode != 0:
            detail = (result.stderr or result.stdout).strip()[-3000:]
            raise BundlingError(
                f"pip could not install the Lambda dependencies for {PIP_PLATFORMS[self.architecture]} "
                f"/ Python {self.python_version} (exit {result.returncode}): {detail}\n"
                f"command: {' '.join(command)}"
            )
        shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts are of no use in Lambda
        return True


def layer_asset_hash(*, requirements: Sequence[str], architecture: str, python_version: str) -> str:
    """Content key of the layer: it changes when the requirements or the target platform change."""
    key = {
        "requirements": list(requirements),
        "platform": PIP_PLATFORMS[architecture],
        "python": python_version,
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
