"""The compiled planner (shared/local/native.py) runs only when built from exactly these sources."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shared.local.native import COMPILED_TREES, compiled_sources, current, dependencies
from shared.native_guard import PURE_VARIABLE, is_compiled, source_digest, stale_sources
from tests.native import COMPILED_PASS_VARIABLE, PLANNER_COMPILED

ROOT = Path(__file__).resolve().parents[2]
WHICH_PLAN = "import importlib; print(importlib.import_module('shared.planner.plan').__file__)"


TREES = ["shared/domain", "shared/planner"]


def _tree(root: Path, files: dict[str, str]) -> dict[str, object]:
    """Write `files` under `root`; the manifest a build of them records (compiled: those under TREES;
    the others are modules the compiled ones import)."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "0123__mypyc.so").write_bytes(b"")
    return {
        "interpreter": "x",
        "trees": TREES,
        "library": "0123__mypyc.so",
        "sources": {name: source_digest(root / name) for name in files},
    }


def test_a_tree_as_built_is_not_stale(tmp_path: Path) -> None:
    recorded = _tree(tmp_path, {"shared/planner/a.py": "A = 1\n", "shared/planner/b.py": "B = 2\n"})
    assert stale_sources(recorded, tmp_path) == []


def test_a_changed_a_new_and_a_removed_source_are_each_stale(tmp_path: Path) -> None:
    recorded = _tree(
        tmp_path,
        {"shared/planner/a.py": "A = 1\n", "shared/planner/b.py": "B = 2\n", "shared/domain/c.py": ""},
    )
    (tmp_path / "shared/planner/a.py").write_text("A = 3\n")
    (tmp_path / "shared/planner/sub/new.py").parent.mkdir()
    (tmp_path / "shared/planner/sub/new.py").write_text("")
    (tmp_path / "shared/domain/c.py").unlink()
    assert sorted(stale_sources(recorded, tmp_path)) == [
        "shared/domain/c.py",
        "shared/planner/a.py",
        "shared/planner/sub/new.py",
    ]


def test_a_module_the_compiled_code_imports_is_stale_once_changed_or_gone(tmp_path: Path) -> None:
    # Given a build whose compiled module imports the config (mypyc builds its types in), beside a
    # module nothing compiled imports
    recorded = _tree(
        tmp_path, {"shared/planner/a.py": "from shared.config import X\n", "shared/config.py": "X = 1\n"}
    )
    (tmp_path / "shared/cli.py").write_text("")
    assert stale_sources(recorded, tmp_path) == []

    # When the config changes, Then the build is stale; and when it is gone, too
    (tmp_path / "shared/config.py").write_text("X: float = 1.5\n")
    assert stale_sources(recorded, tmp_path) == ["shared/config.py"]
    (tmp_path / "shared/config.py").unlink()
    assert stale_sources(recorded, tmp_path) == ["shared/config.py"]


def test_a_manifest_without_sources_trees_or_library_is_stale(tmp_path: Path) -> None:
    recorded = _tree(tmp_path, {"shared/planner/a.py": "A = 1\n"})
    assert stale_sources({**recorded, "sources": {}}, tmp_path)
    assert stale_sources({k: v for k, v in recorded.items() if k != "sources"}, tmp_path)
    assert stale_sources({k: v for k, v in recorded.items() if k != "trees"}, tmp_path)
    (tmp_path / "0123__mypyc.so").unlink()
    assert stale_sources(recorded, tmp_path) == ["(the compiled code's library 0123__mypyc.so)"]


def _python(
    code: str, *, path: Path | None, pure: bool = False, cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in (PURE_VARIABLE, "PYTHONPATH")}
    if path is not None:
        environment["PYTHONPATH"] = str(path)
    if pure:
        environment[PURE_VARIABLE] = "1"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=environment, cwd=cwd
    )


def test_the_compiled_planner_loads_from_anywhere_the_package_does(tmp_path: Path) -> None:
    # A console script puts neither the repository nor the working directory on sys.path: the
    # installed package alone must find the compiled code's library (the child runs in the same
    # mode as this test run: compiled, or sources when the pure variable is set)
    ran = _python(WHICH_PLAN, path=None, cwd=tmp_path, pure=os.environ.get(PURE_VARIABLE) == "1")
    assert ran.stdout.strip() == importlib.import_module("shared.planner.plan").__file__
    assert is_compiled(importlib.import_module("shared.planner.plan")) == PLANNER_COMPILED


def test_the_compiled_pass_runs_a_current_build() -> None:
    # `make test` builds, then runs the suite compiled with the pass's variable set: a build that the
    # guard refused, or that did not happen, must fail that pass rather than test the sources twice
    if os.environ.get(COMPILED_PASS_VARIABLE) != "1":
        pytest.skip(f"{COMPILED_PASS_VARIABLE} is not set: not the compiled pass of make test")
    assert current(), "the build on disk does not match the sources: `make native` did not run?"
    assert PLANNER_COMPILED


def test_the_pure_variable_imports_the_sources() -> None:
    ran = _python(WHICH_PLAN, path=ROOT, pure=True)
    assert ran.stdout.strip() == str(ROOT / "shared" / "planner" / "plan.py")


def test_a_source_changed_since_the_build_runs_every_module_from_source(tmp_path: Path) -> None:
    # Given a copy of the package with whatever the build left beside the sources, and a manifest
    # that records another content for one compiled source
    shutil.copytree(ROOT / "shared", tmp_path / "shared", ignore=shutil.ignore_patterns("__pycache__"))
    sources = {
        p.relative_to(tmp_path).as_posix(): source_digest(p)
        for p in (tmp_path / "shared" / "planner").rglob("*.py")
    }
    sources["shared/planner/plan.py"] = "0" * 64
    interpreter = _python(
        "from shared.native_guard import interpreter_tag; print(interpreter_tag())", path=ROOT
    )
    for library in ROOT.glob("*__mypyc.*.so"):
        shutil.copy2(library, tmp_path)
    library = next(tmp_path.glob("*__mypyc.*.so"), tmp_path / "0123__mypyc.so")
    if not library.exists():  # no build in this checkout: a stand-in, which a stale build never loads
        library.write_bytes(b"")
    manifest = {
        "interpreter": interpreter.stdout.strip(),
        "trees": ["shared/planner"],
        "library": library.relative_to(tmp_path).as_posix(),
        "sources": sources,
    }
    (tmp_path / "shared" / "_native.json").write_text(json.dumps(manifest))

    # When the planner is imported, Then it is the source, and the warning names the stale module
    ran = _python(WHICH_PLAN, path=tmp_path, cwd=tmp_path)
    assert ran.stdout.strip() == str(tmp_path / "shared" / "planner" / "plan.py")
    assert "shared/planner/plan.py" in ran.stderr and "make native" in ran.stderr


def test_the_build_records_the_modules_the_compiled_code_imports() -> None:
    # The compiled planner reads the config's models and the CLI's JSON helpers: both are recorded,
    # and nothing the build compiles is counted twice
    found = dependencies(compiled_sources())
    assert {"shared/config.py", "shared/local/json_io.py"} <= set(found)
    assert not [name for name in found if name.startswith(tuple(f"{tree}/" for tree in COMPILED_TREES))]
