"""Packaging of the function code without CDK: which files make up the function package, and the byte
code compiled for the Lambda runtime's Python (cdk/bundling.py runs it inside the CDK's bundling; the
latency bench builds the same package to measure its imports).

Lambda unpacks the function code and its layers onto a read-only file system, so Python cannot write
`__pycache__` there and compiles every module it imports at every cold start unless the package ships
the `.pyc` files (bench/latency_bench.py prints the cost: several times the import from byte code).
Byte code is specific to a Python minor version, so it is compiled by an interpreter of exactly the
runtime's version found on this machine (`find_interpreter`), as hash-based `.pyc` files that never
check the source's timestamp (PEP 552, https://peps.python.org/pep-0552/; the zip keeps no
modification times), with the paths the code has in Lambda so that tracebacks show the source lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

# Top-level entries of the repo that make up the function code; everything else (tests, cdk, docs,
# .venv, cdk.out) stays out of the asset.
APP_CODE_DIRS = ("shared", "functions")
# Directories left out wherever they are (caches, tests), and the local entry points (trace replay,
# the local run, the CLI), which no function imports.
APP_CODE_SKIPPED_DIRS = frozenset({"__pycache__", ".mypy_cache", "tests"})
APP_CODE_SKIPPED_TREES = ("shared/local",)
# What the local build compiles for this machine's Python (shared/local/native.py): Lambda runs the
# sources. Its extension modules (`*.so`) and manifest never enter the package.
APP_CODE_SKIPPED_SUFFIXES = frozenset({".pyc", ".so"})
APP_CODE_SKIPPED_FILES = frozenset({"shared/_native.json"})
# Where Lambda puts the code: the function package at LAMBDA_TASK_ROOT (/var/task), layers under /opt
# (https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html#configuration-envvars-runtime,
# https://docs.aws.amazon.com/lambda/latest/dg/packaging-layers.html#packaging-layers-paths).
FUNCTION_ROOT = "/var/task"
LAYER_ROOT = "/opt"


class BundlingError(RuntimeError):
    """Local bundling failed (pip could not install the wheels, or the byte code did not compile)."""


Runner = Callable[..., subprocess.CompletedProcess[str]]
VERSION_PROBE = "import sys; print('%d.%d' % sys.version_info[:2])"


def _interpreter_candidates(version: str) -> list[str]:
    home = Path.home()
    pyenv = Path(os.environ.get("PYENV_ROOT", home / ".pyenv")) / "versions"
    uv = home / ".local" / "share" / "uv" / "python"
    found = [shutil.which(f"python{version}")]
    found += [str(p) for p in sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True)]
    found += [str(p) for p in sorted(uv.glob(f"cpython-{version}.*/bin/python{version}"), reverse=True)]
    return [f for f in found if f]


def find_interpreter(version: str, *, run: Runner = subprocess.run) -> str | None:
    """A CPython of exactly `version` ("3.12") on this machine, to compile byte code for that runtime:
    the one running the synth, `python<version>` on PATH, or a pyenv or uv install; None if none."""
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        return sys.executable
    for candidate in _interpreter_candidates(version):
        try:  # a pyenv shim exists on PATH even when it cannot run that version: ask the interpreter
            probe = run(
                [candidate, "-c", VERSION_PROBE], capture_output=True, text=True, check=False, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None


def compile_command(
    interpreter: str, directory: Path, *, staged: Path, deployed: str, skip: Sequence[str] = ()
) -> list[str]:
    """compileall arguments writing hash-based `.pyc` files for every module under `directory` but
    those under the `skip` subdirectories, whose code objects name `deployed/...` (where Lambda
    unpacks it) instead of the staging path `staged`."""
    root = directory.resolve()
    excluded = "|".join(re.escape(str(root / name) + os.sep) for name in skip)
    return [
        interpreter, "-m", "compileall", "-q", "-j", "0",
        "--invalidation-mode", "unchecked-hash",
        # compileall strips `staged` only from paths spelt the same way: both resolved.
        "-s", str(staged.resolve()), "-p", deployed,
        *(("-x", f"^({excluded})") if skip else ()),
        str(root),
    ]  # fmt: skip


def compile_bytecode(
    interpreter: str,
    directory: Path,
    *,
    staged: Path,
    deployed: str,
    skip: Sequence[str] = (),
    run: Runner = subprocess.run,
) -> None:
    """Compile `directory` in place; raises BundlingError naming the modules that did not compile."""
    command = compile_command(interpreter, directory, staged=staged, deployed=deployed, skip=skip)
    # A cache prefix would send the .pyc files out of the package.
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    try:
        result = run(command, capture_output=True, text=True, check=False, env=environment)
    except OSError as exc:
        raise BundlingError(f"cannot run {interpreter} to compile byte code: {exc}") from exc
    if result.returncode != 0:
        detail = (result.stdout + result.stderr).strip()[-3000:]
        raise BundlingError(
            f"byte code for {directory} did not compile with {interpreter} (exit {result.returncode}): "
            f"{detail}\ncommand: {' '.join(command)}"
        )


def _packaged(relative: Path) -> bool:
    parts = relative.parts
    return (
        parts[0] in APP_CODE_DIRS
        and not APP_CODE_SKIPPED_DIRS.intersection(parts[:-1])
        and relative.suffix not in APP_CODE_SKIPPED_SUFFIXES
        and relative.as_posix() not in APP_CODE_SKIPPED_FILES
        and not any(relative.is_relative_to(tree) for tree in APP_CODE_SKIPPED_TREES)
    )


def app_code_files(root: Path) -> list[Path]:
    """The files of the function package, relative to the repo root, sorted."""
    files = (p.relative_to(root) for name in APP_CODE_DIRS for p in (root / name).rglob("*") if p.is_file())
    return sorted(f for f in files if _packaged(f))


def app_code_hash(root: Path, *, python_version: str, compiled: bool) -> str:
    """Content key of the function package: its files, the runtime's version and whether it ships byte
    code (a later synth that finds the interpreter must deploy the compiled package)."""
    digest = hashlib.sha256(json.dumps({"python": python_version, "compiled": compiled}).encode())
    for relative in app_code_files(root):
        digest.update(relative.as_posix().encode() + b"\0")
        digest.update(hashlib.sha256((root / relative).read_bytes()).digest())
    return digest.hexdigest()


def build_function_package(
    source: Path, output: Path, *, interpreter: str | None, run: Runner = subprocess.run
) -> None:
    """Copy the function package (`app_code_files`) from the repo `source` into `output`, and compile
    it for the runtime with `interpreter` when there is one."""
    for relative in app_code_files(source):
        (output / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / relative, output / relative)
    if interpreter:
        compile_bytecode(interpreter, output, staged=output, deployed=FUNCTION_ROOT, run=run)
