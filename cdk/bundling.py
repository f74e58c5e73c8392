"""Docker-free packaging of the functions: the app code and a pip-built dependency layer, both with
byte code compiled for the Lambda runtime's Python when this machine has that version (cdk/packaging.py
says why and how).

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
from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
import jsii

from cdk.context import REPO_ROOT
from cdk.packaging import (
    LAYER_ROOT,
    BundlingError,
    Runner,
    build_function_package,
    compile_bytecode,
)

PYPROJECT = REPO_ROOT / "pyproject.toml"
PIP_ARCHES = {"arm64": "aarch64", "x86_64": "x86_64"}
# The glibc of the runtime's OS: python3.12 and python3.13 run on Amazon Linux 2023, glibc 2.34
# (https://docs.aws.amazon.com/lambda/latest/dg/lambda-runtimes.html). A wheel for any manylinux level
# up to it loads there; some dependencies publish manylinux_2_28 wheels only (cel-expr-python 0.1.3).
RUNTIME_GLIBC = {"3.12": 34, "3.13": 34}
OLDEST_PEP600_GLIBC = 17  # manylinux_2_17 = manylinux2014, the first level PEP 600 names this way
# Parts of the dependencies no function imports, left as source: byte code would only grow the layer
# toward Lambda's limit. kubernetes' asyncio client (the functions use the synchronous one), and the
# build tree cel-expr-python 0.1.3's wheel installs as a top-level directory.
NOT_COMPILED = ("kubernetes/aio", "bazel-project")
# Lambda's limit on a function's code and layers together, unzipped
# (https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html): 250 MB.
LAMBDA_UNZIPPED_LIMIT_BYTES = 250 * 2**20


def pip_platforms(architecture: str, python_version: str) -> list[str]:
    """The platform tags of the wheels the runtime can load, oldest first. pip matches `--platform`
    tags exactly, except that it widens manylinux2014 to the older manylinux2010 and manylinux1: every
    PEP 600 level up to the runtime's glibc is named."""
    arch = PIP_ARCHES[architecture]
    newest = RUNTIME_GLIBC[python_version]
    return [f"manylinux2014_{arch}"] + [
        f"manylinux_2_{minor}_{arch}" for minor in range(OLDEST_PEP600_GLIBC + 1, newest + 1)
    ]


# Named only because BundlingOptions requires an image; local bundling never falls back to it.
UNUSED_BUNDLING_IMAGE = "public.ecr.aws/sam/build-python3.12"


@jsii.implements(cdk.ILocalBundling)
class AppCodeBundler:
    """Builds the function package (cdk/packaging.py) in CDK's bundling directory."""

    def __init__(self, *, source: Path, interpreter: str | None, run: Runner = subprocess.run) -> None:
        self.source = source
        self.interpreter = interpreter
        self._run = run

    def try_bundle(self, output_dir: str, *, image: cdk.DockerImage | None = None) -> bool:
        build_function_package(self.source, Path(output_dir), interpreter=self.interpreter, run=self._run)
        return True


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
        # pip would compile for the build machine's Python; the runtime's compiles it afterwards.
        "--no-compile",
        *(arg for tag in pip_platforms(architecture, python_version) for arg in ("--platform", tag)),
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
        interpreter: str | None = None,
        run: Runner = subprocess.run,
    ) -> None:
        self.requirements = tuple(requirements)
        self.architecture = architecture
        self.python_version = python_version
        self.interpreter = interpreter
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
            glibc = RUNTIME_GLIBC[self.python_version]
            raise BundlingError(
                f"pip could not install the Lambda dependencies for {self.architecture} / Python "
                f"{self.python_version} (wheels for manylinux up to glibc 2.{glibc}) "
                f"(exit {result.returncode}): {detail}\n"
                f"command: {' '.join(command)}"
            )
        shutil.rmtree(target / "bin", ignore_errors=True)  # console scripts are of no use in Lambda
        if self.interpreter:
            compile_bytecode(
                self.interpreter,
                target,
                staged=Path(output_dir),
                deployed=LAYER_ROOT,
                skip=NOT_COMPILED,
                run=self._run,
            )
        _check_size(target)
        return True


def _check_size(layer: Path) -> None:
    """Refuse a layer Lambda would refuse at deploy time, with the packages that make it up."""
    sizes = {
        p.name: sum(f.stat().st_size for f in [p, *p.rglob("*")] if f.is_file()) for p in layer.iterdir()
    }
    total = sum(sizes.values())
    if total > LAMBDA_UNZIPPED_LIMIT_BYTES:
        largest = ", ".join(
            f"{n} {b / 2**20:.0f} MiB" for n, b in sorted(sizes.items(), key=lambda i: -i[1])[:5]
        )
        raise BundlingError(
            f"the dependency layer is {total / 2**20:.0f} MiB unzipped, over Lambda's "
            f"{LAMBDA_UNZIPPED_LIMIT_BYTES / 2**20:.0f} MiB for a function's code and layers together; "
            f"largest: {largest}"
        )


def layer_asset_hash(
    *, requirements: Sequence[str], architecture: str, python_version: str, compiled: bool = False
) -> str:
    """Content key of the layer: it changes when the requirements, the target platform or the byte
    code it ships change."""
    key = {
        "requirements": list(requirements),
        "platform": pip_platforms(architecture, python_version),
        "python": python_version,
        "compiled": compiled,
        "not_compiled": list(NOT_COMPILED),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
