"""Docker-free packaging: pip cross-installs wheels for the Lambda platform; app code is copied;
both ship byte code compiled for the runtime's Python."""

from __future__ import annotations

import importlib.util
import marshal
import subprocess
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import assertions
from constructs import Construct
from packaging.requirements import Requirement

from cdk import packaging
from cdk.bundling import AppCodeBundler, PipLayerBundler, layer_asset_hash, runtime_requirements
from cdk.constructs import function_code
from cdk.packaging import (
    BundlingError,
    app_code_files,
    app_code_hash,
    compile_bytecode,
    find_interpreter,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
THIS_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


class RecordingPip:
    """Stands in for subprocess.run: records the command, creates pip's target, returns `returncode`."""

    def __init__(self, returncode: int = 0, stderr: str = "") -> None:
        self.returncode = returncode
        self.stderr = stderr
        self.commands: list[list[str]] = []

    def __call__(self, command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.commands.append(command)
        if "--target" in command:
            target = Path(command[command.index("--target") + 1])
            (target / "bin").mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(command, self.returncode, stdout="", stderr=self.stderr)


def _bytecode_of(source: Path) -> tuple[int, Any]:
    """The flags word (PEP 552) and the code object of the .pyc this interpreter would load."""
    data = Path(importlib.util.cache_from_source(str(source))).read_bytes()
    assert data[:4] == importlib.util.MAGIC_NUMBER
    return int.from_bytes(data[4:8], "little"), marshal.loads(data[16:])


def _option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_requirements_are_the_projects_runtime_dependencies() -> None:
    requirements = runtime_requirements()
    assert any(r.startswith("boto3") for r in requirements)
    assert any(r.startswith("kubernetes") for r in requirements)
    assert not any(r.startswith(("aws-cdk-lib", "pytest")) for r in requirements)


@pytest.mark.parametrize(("architecture", "arch"), [("arm64", "aarch64"), ("x86_64", "x86_64")])
def test_layer_is_installed_for_the_lambda_platform(architecture: str, arch: str, tmp_path: Path) -> None:
    # Given a bundler for the architecture, When it bundles, Then pip fetches binary wheels for Lambda
    pip = RecordingPip()
    bundler = PipLayerBundler(
        requirements=("pydantic~=2.14.0",), architecture=architecture, python_version="3.12", run=pip
    )
    assert bundler.try_bundle(str(tmp_path)) is True
    (command,) = pip.commands
    platforms = [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"]
    # Every manylinux level the runtime's glibc (Amazon Linux 2023: 2.34) loads, none newer: pip
    # matches these tags exactly (a manylinux_2_28-only wheel, as cel-expr-python ships, included)
    assert platforms[0] == f"manylinux2014_{arch}"
    assert f"manylinux_2_28_{arch}" in platforms and platforms[-1] == f"manylinux_2_34_{arch}"
    assert len(platforms) == 1 + (34 - 17)
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
    with pytest.raises(BundlingError, match=r"arm64 / Python 3.12 .*glibc 2.34.*No matching distribution"):
        bundler.try_bundle(str(tmp_path))


def test_layer_hash_follows_requirements_and_platform() -> None:
    base = layer_asset_hash(requirements=("a==1",), architecture="arm64", python_version="3.12")
    assert base == layer_asset_hash(requirements=("a==1",), architecture="arm64", python_version="3.12")
    assert base != layer_asset_hash(requirements=("a==2",), architecture="arm64", python_version="3.12")
    assert base != layer_asset_hash(requirements=("a==1",), architecture="x86_64", python_version="3.12")
    assert base != layer_asset_hash(requirements=("a==1",), architecture="arm64", python_version="3.13")
    assert base != layer_asset_hash(
        requirements=("a==1",), architecture="arm64", python_version="3.12", compiled=True
    )


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


def test_function_package_holds_only_the_app_packages_with_their_byte_code(tmp_path: Path) -> None:
    # Given the app code bundler with this machine's interpreter standing in for the runtime's
    bundler = AppCodeBundler(source=REPO_ROOT, interpreter=sys.executable)

    # When it bundles
    assert bundler.try_bundle(str(tmp_path)) is True

    # Then the package has shared/ and functions/ at its root, and no tests, caches or tooling
    assert {p.name for p in tmp_path.iterdir()} == {"shared", "functions"}
    sources = sorted(
        p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".pyc"
    )
    assert sources == app_code_files(REPO_ROOT)
    names = [p.as_posix() for p in sources]
    assert "shared/config.py" in names and "functions/reconcile/handler.py" in names
    assert not [f for f in names if f.startswith("shared/local") or "/tests/" in f or "__pycache__" in f]
    # And every module has hash-based byte code that never checks the source (the zip keeps no
    # modification times), naming the path Lambda unpacks it to, so tracebacks show the lines
    for module in (tmp_path / "shared" / "config.py", tmp_path / "functions" / "reconcile" / "handler.py"):
        flags, code = _bytecode_of(module)
        assert flags == 0b01  # hash-based, unchecked
        assert code.co_filename == "/var/task/" + module.relative_to(tmp_path).as_posix()
    assert all(
        Path(importlib.util.cache_from_source(str(tmp_path / s))).exists() for s in names if s.endswith(".py")
    )


def test_the_layer_is_compiled_after_pip_with_paths_under_opt(tmp_path: Path) -> None:
    # Given a bundler that found the runtime's interpreter
    pip = RecordingPip()
    bundler = PipLayerBundler(
        requirements=("pydantic~=2.14.0",),
        architecture="arm64",
        python_version="3.12",
        interpreter="/usr/bin/python3.12",
        run=pip,
    )

    # When it bundles
    bundler.try_bundle(str(tmp_path))

    # Then pip installs without compiling, and the runtime's interpreter compiles the layer in place
    install, compile_ = pip.commands
    assert "--no-compile" in install
    assert compile_[:3] == ["/usr/bin/python3.12", "-m", "compileall"]
    assert _option(compile_, "--invalidation-mode") == "unchecked-hash"
    assert _option(compile_, "-s") == str(tmp_path) and _option(compile_, "-p") == "/opt"
    assert compile_[-1] == str(tmp_path / "python")
    assert "kubernetes/aio" in _option(compile_, "-x")  # the asyncio client no function imports


def test_layer_byte_code_names_the_layer_path(tmp_path: Path) -> None:
    # Given a layer staged as pip leaves it
    module = tmp_path / "python" / "pkg" / "mod.py"
    module.parent.mkdir(parents=True)
    module.write_text("def f():\n    return 1\n", encoding="utf-8")

    # When it is compiled as a layer
    compile_bytecode(sys.executable, tmp_path / "python", staged=tmp_path, deployed="/opt")

    # Then the code object names /opt/python/..., where Lambda mounts layers
    assert _bytecode_of(module)[1].co_filename == "/opt/python/pkg/mod.py"


def test_what_no_function_imports_is_left_as_source(tmp_path: Path) -> None:
    # Given a layer with the synchronous and the asyncio kubernetes clients
    layer = tmp_path / "python"
    for module in ("kubernetes/client/api.py", "kubernetes/aio/client/api.py", "bazel-project/setup.py"):
        (layer / module).parent.mkdir(parents=True, exist_ok=True)
        (layer / module).write_text("X = 1\n", encoding="utf-8")

    # When it is compiled skipping what the functions never import
    compile_bytecode(
        sys.executable, layer, staged=tmp_path, deployed="/opt", skip=("kubernetes/aio", "bazel-project")
    )

    # Then only the rest has byte code
    compiled = {
        p.as_posix() for p in layer.rglob("*.py") if Path(importlib.util.cache_from_source(str(p))).exists()
    }
    assert compiled == {(layer / "kubernetes/client/api.py").as_posix()}


def test_a_layer_over_lambdas_size_limit_fails_the_synth_with_its_largest_packages(tmp_path: Path) -> None:
    # Given pip installing a package that makes the layer larger than Lambda accepts
    class BigPip(RecordingPip):
        def __call__(self, command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
            done = super().__call__(command, **kwargs)
            big = Path(command[command.index("--target") + 1]) / "huge" / "data.bin"
            big.parent.mkdir(parents=True)
            with big.open("wb") as handle:  # sparse: no disk used
                handle.truncate(251 * 2**20)
            return done

    bundler = PipLayerBundler(
        requirements=("huge",), architecture="arm64", python_version="3.12", run=BigPip()
    )

    # Then the bundle fails before any deploy would
    with pytest.raises(
        BundlingError, match=r"251 MiB unzipped, over Lambda's 250 MiB.*largest: huge 251 MiB"
    ):
        bundler.try_bundle(str(tmp_path))


def test_a_module_that_does_not_compile_fails_the_bundle_by_name(tmp_path: Path) -> None:
    bad = tmp_path / "python" / "broken.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("def f(:\n", encoding="utf-8")
    with pytest.raises(BundlingError, match=r"did not compile.*broken\.py"):
        compile_bytecode(sys.executable, tmp_path / "python", staged=tmp_path, deployed="/opt")


def test_the_interpreter_is_the_first_that_says_it_is_the_runtimes_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a shim that cannot run, an interpreter of another version, and one of the wanted version
    monkeypatch.setattr(
        packaging, "_interpreter_candidates", lambda version: ["/shim", "/py311", "/py399", "/x"]
    )
    outputs = {"/py311": "3.11\n", "/py399": "3.99\n", "/x": "3.99\n"}
    asked: list[str] = []

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        asked.append(command[0])
        if command[0] == "/shim":
            return subprocess.CompletedProcess(command, 127, stdout="", stderr="pyenv: command not found")
        return subprocess.CompletedProcess(command, 0, stdout=outputs[command[0]], stderr="")

    # Then the one whose own version matches is chosen, and none when none matches
    assert find_interpreter("3.99", run=run) == "/py399"
    assert asked == ["/shim", "/py311", "/py399"]
    assert find_interpreter("3.98", run=run) is None
    # And the interpreter running the synth is taken without asking when it is the runtime's version
    assert find_interpreter(THIS_PYTHON, run=run) == sys.executable


def test_the_package_hash_follows_its_files_and_its_byte_code(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "functions").mkdir()
    (tmp_path / "shared" / "a.py").write_text("A = 1\n", encoding="utf-8")
    base = app_code_hash(tmp_path, python_version="3.12", compiled=True)
    assert base != app_code_hash(tmp_path, python_version="3.12", compiled=False)
    assert base != app_code_hash(tmp_path, python_version="3.13", compiled=True)
    (tmp_path / "shared" / "local").mkdir()
    (tmp_path / "shared" / "local" / "cli.py").write_text("X = 1\n", encoding="utf-8")
    assert base == app_code_hash(tmp_path, python_version="3.12", compiled=True)  # not packaged
    (tmp_path / "shared" / "a.py").write_text("A = 2\n", encoding="utf-8")
    assert base != app_code_hash(tmp_path, python_version="3.12", compiled=True)


def test_a_synth_without_the_runtimes_python_warns_and_ships_source(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Given a machine without the runtime's Python, and pip standing in for the layer
    monkeypatch.setattr(function_code, "find_interpreter", lambda version: None)

    def pip_layer(self: PipLayerBundler, output_dir: str, *_: Any, **__: Any) -> bool:
        (Path(output_dir) / "python").mkdir()
        return True

    monkeypatch.setattr(PipLayerBundler, "try_bundle", pip_layer)

    # When a stack that is bundled builds the function code
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Code")
    code = function_code.FunctionCode(stack, "Code", python_runtime="python3.12", architecture="arm64")
    code.code.bind(Construct(stack, "Function"))  # the code asset is staged when a function takes it

    # Then the synth says why the cold starts will be slow and what to do
    warnings = assertions.Annotations.from_stack(stack).find_warning("*", assertions.Match.any_value())
    (warning,) = [str(w.entry.data) for w in warnings]
    assert "No Python 3.12 on this machine" in warning and "deployment.python_runtime" in warning
    # And the package is staged with its sources only
    (staged,) = [p for p in tmp_path.glob("asset.*") if (p / "shared").is_dir()]
    assert (staged / "shared" / "config.py").exists()
    assert not list(staged.rglob("*.pyc"))


@pytest.mark.parametrize("version", ["3.12", "3.13"])
def test_the_package_byte_code_is_the_runtimes_own(version: str, tmp_path: Path) -> None:
    # Given the runtime's Python on this machine (the CI machine has both; elsewhere the test skips)
    interpreter = find_interpreter(version)
    if interpreter is None:
        pytest.skip(f"no Python {version} on this machine")

    # When the function package is built with it
    AppCodeBundler(source=REPO_ROOT, interpreter=interpreter).try_bundle(str(tmp_path))

    # Then its byte code carries that interpreter's magic number, under that interpreter's name
    probe = (
        "import importlib.util, sys; print(importlib.util.MAGIC_NUMBER.hex(), sys.implementation.cache_tag)"
    )
    magic, tag = subprocess.run(
        [interpreter, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    compiled = tmp_path / "shared" / "__pycache__" / f"constants.{tag}.pyc"
    assert compiled.read_bytes()[:4].hex() == magic


def test_the_local_native_build_never_enters_the_function_package(tmp_path: Path) -> None:
    # Given the sources with what `make native` leaves beside them (extension modules, its manifest)
    for name in ("shared/__init__.py", "shared/planner/plan.py", "functions/reconcile/handler.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "shared/planner/plan.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (tmp_path / "shared/_native.json").write_text("{}")

    # Then the function package holds the sources only: Lambda runs them
    assert [p.as_posix() for p in app_code_files(tmp_path)] == [
        "functions/reconcile/handler.py",
        "shared/__init__.py",
        "shared/planner/plan.py",
    ]
