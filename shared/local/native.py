"""Compile the planner and the replay to C extension modules with mypyc, for the local tools.

`backlog-scaler simulate` and `plan` spend their time in the planner (shared/planner, shared/domain),
in reading kubectl and AWS dumps (shared/formats) and in the replay's own loop (shared/local/sim).
mypyc, the compiler that ships with mypy (https://mypyc.readthedocs.io/), turns those modules, as
they are typed, into C extension modules that Python imports in place of their sources: the same
code, run faster, and stricter (a value whose type contradicts its annotation raises TypeError
where the interpreter would carry it on).

Only this machine's interpreter loads them: an extension module's file name carries the Python
version and platform (`plan.cpython-311-x86_64-linux-gnu.so`, PEP 3149), so another Python imports
the source, and the function package never ships them (cdk/packaging.py): Lambda runs the sources.

The build records in `shared/_native.json` the interpreter, the mypy that compiled, and a hash of
every compiled source and of every module of `shared` they import from outside the compiled trees
(mypyc builds those modules' types into the compiled code: the config's models, say). Importing
`shared` compares them (shared/native_guard.py): if one of those sources changed, or a compiled one
appeared or went away since the build, or BACKLOG_SCALER_PURE=1 is set, every module of `shared` is
imported from its source, so a stale compiled module never runs. The build itself does nothing while
what it built is current (same sources, interpreter and mypy), and one build at a time runs.

    python -m shared.local.native          # build unless current (make native)
    python -m shared.local.native --force  # build anyway
    python -m shared.local.native --clean  # remove what the build wrote
"""

from __future__ import annotations

import argparse
import ast
import fcntl
import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.native_guard import MANIFEST, interpreter_tag, source_digest, stale_sources, tree_sources

ROOT = Path(__file__).resolve().parents[2]
# What is compiled: every module under these packages. Not the config (pydantic models), the
# adapters, the controller or the handlers: they wait on I/O, and Lambda runs none of this build.
COMPILED_TREES = ("shared/domain", "shared/planner", "shared/formats", "shared/local/sim")
MANIFEST_NAME = MANIFEST.relative_to(ROOT).as_posix()
# mypyc's C sources and object files.
BUILD_DIR = "build/native"


def compiled_sources(root: Path = ROOT) -> list[str]:
    """The compiled modules' sources, relative to `root`, sorted."""
    return tree_sources(COMPILED_TREES, root)


def _imported(path: Path) -> set[str]:
    """The modules of `shared` that the source at `path` imports (and the names it imports from them,
    which may be modules too), wherever the import stands: under TYPE_CHECKING or in a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "shared" or name.startswith("shared.")}


def _module_file(root: Path, module: str) -> str | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(root).as_posix()
    return None


def dependencies(sources: Iterable[str], root: Path = ROOT) -> list[str]:
    """The modules of `shared` outside the compiled trees that the compiled ones import, and those
    these import in turn (their types reach the compiled code through them), relative to `root`."""
    seen = set(sources)
    todo, found = list(seen), []
    while todo:
        for module in _imported(root / todo.pop()):
            name = _module_file(root, module)
            if name is not None and name not in seen:
                seen.add(name)
                found.append(name)
                todo.append(name)
    return sorted(found)


def _mypy_version() -> str:
    from mypy.version import __version__  # a development dependency: only this build needs it

    return str(__version__)


def manifest(root: Path = ROOT, library: str = "") -> dict[str, object]:
    sources = compiled_sources(root)
    return {
        "interpreter": interpreter_tag(),
        "mypy": _mypy_version(),
        "trees": list(COMPILED_TREES),
        "library": library,
        "sources": {name: source_digest(root / name) for name in [*sources, *dependencies(sources, root)]},
    }


def current(root: Path = ROOT) -> bool:
    """Whether the build on disk was made from these sources by this interpreter and mypy."""
    try:
        recorded = json.loads((root / MANIFEST_NAME).read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(recorded, dict)
        and recorded.get("interpreter") == interpreter_tag()
        and recorded.get("mypy") == _mypy_version()
        and not stale_sources(recorded, root)
    )


def _extension_modules(root: Path) -> list[Path]:
    """Extension modules the build wrote: beside each compiled source, and the library of their code."""
    beside = [p for tree in COMPILED_TREES for p in (root / tree).rglob("*.so")]
    return beside + list(root.glob("*__mypyc.*.so"))


def clean(root: Path = ROOT) -> None:
    """Remove the manifest first (the sources are then imported), then the extension modules."""
    (root / MANIFEST_NAME).unlink(missing_ok=True)
    for path in _extension_modules(root):
        path.unlink()
    # mypyc's C files and objects: a build starts from none (distutils would keep an object whose
    # C file is unchanged although a header it includes changed).
    shutil.rmtree(root / BUILD_DIR, ignore_errors=True)


@contextmanager
def _one_build_at_a_time(root: Path) -> Iterator[None]:
    """Two builds at once (two `make test` in one checkout) would delete each other's output."""
    lock = root / f"{BUILD_DIR}.lock"  # beside the build's folder, which every build starts by removing
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def build(root: Path = ROOT, *, force: bool = False) -> None:
    """Compile COMPILED_TREES in place and write the manifest of what was compiled, unless what is
    there is current (and not `force`)."""
    with _one_build_at_a_time(root):
        if not force and current(root):
            print(f"the compiled modules of {', '.join(COMPILED_TREES)} are current", file=sys.stderr)
            return
        _build(root)


def _build(root: Path) -> None:
    from mypyc.build import mypycify  # a development dependency: only this build needs it
    from setuptools import setup

    clean(root)  # a module renamed or removed must not leave its .so behind
    sources = compiled_sources(root)
    before = manifest(root)
    previous = Path.cwd()
    os.chdir(root)
    try:
        setup(
            name="backlog-scaler-native",
            packages=[],
            py_modules=[],
            ext_modules=mypycify(list(COMPILED_TREES), opt_level="3", multi_file=True, target_dir=BUILD_DIR),
            script_args=["--quiet", "build_ext", "--inplace", "--build-temp", f"{BUILD_DIR}/temp"],
        )
    finally:
        os.chdir(previous)
    # The library of the compiled code (every module beside a source forwards to it) has a top-level
    # name and must sit beside the package (mypyc derives each compiled package's __path__ from its
    # place); the guard finds it there by name wherever `shared` is imported from (a console script
    # does not put the repository on sys.path).
    (library,) = root.glob("*__mypyc.*.so")
    if manifest(root) != before:  # edited while compiling: what was built matches no source
        clean(root)
        raise SystemExit("sources changed during the build; run it again")
    recorded = {**before, "library": library.relative_to(root).as_posix()}
    (root / MANIFEST_NAME).write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"compiled {len(sources)} modules of {', '.join(COMPILED_TREES)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.local.native", description=__doc__.split("\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules and the manifest")
    parser.add_argument("--force", action="store_true", help="build even if the compiled modules are current")
    args = parser.parse_args(argv)
    if args.clean:
        clean()
    else:
        build(force=args.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
