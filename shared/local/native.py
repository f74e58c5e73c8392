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

The build records the interpreter and a hash of every compiled source in `shared/_native.json`.
Importing `shared` compares them (shared/native_guard.py): if a source changed, appeared or went
away since the build, or BACKLOG_SCALER_PURE=1 is set, every module of `shared` is imported from its
source, so a stale compiled module never runs.

    python -m shared.local.native          # build (make native)
    python -m shared.local.native --clean  # remove what the build wrote
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from shared.native_guard import MANIFEST, interpreter_tag, source_digest

ROOT = Path(__file__).resolve().parents[2]
# What is compiled: every module under these packages. Not the config (pydantic models), the
# adapters, the controller or the handlers: they wait on I/O, and Lambda runs none of this build.
COMPILED_TREES = ("shared/domain", "shared/planner", "shared/formats", "shared/local/sim")
MANIFEST_NAME = MANIFEST.relative_to(ROOT).as_posix()
# mypyc's C sources and object files.
BUILD_DIR = "build/native"


def compiled_sources(root: Path = ROOT) -> list[str]:
    """The compiled modules' sources, relative to `root`, sorted."""
    found = (p.relative_to(root).as_posix() for tree in COMPILED_TREES for p in (root / tree).rglob("*.py"))
    return sorted(f for f in found if "__pycache__" not in f)


def manifest(root: Path = ROOT, library: str = "") -> dict[str, object]:
    return {
        "interpreter": interpreter_tag(),
        "library": library,
        "sources": {name: source_digest(root / name) for name in compiled_sources(root)},
    }


def _extension_modules(root: Path) -> list[Path]:
    """Extension modules the build wrote: beside each compiled source, and the library of their code."""
    beside = [p for tree in COMPILED_TREES for p in (root / tree).rglob("*.so")]
    return beside + list(root.glob("*__mypyc.*.so"))


def clean(root: Path = ROOT) -> None:
    """Remove the manifest first (the sources are then imported), then the extension modules."""
    (root / MANIFEST_NAME).unlink(missing_ok=True)
    for path in _extension_modules(root):
        path.unlink()
    shutil.rmtree(root / BUILD_DIR, ignore_errors=True)


def build(root: Path = ROOT) -> None:
    """Compile COMPILED_TREES in place and write the manifest of what was compiled."""
    from mypyc.build import mypycify  # a development dependency: only this build needs it
    from setuptools import setup

    clean(root)  # a module renamed or removed since the last build must not leave its .so behind
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
    args = parser.parse_args(argv)
    if args.clean:
        clean()
    else:
        build()
    return 0


if __name__ == "__main__":
    sys.exit(main())
