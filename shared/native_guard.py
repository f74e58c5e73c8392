"""Never run a stale compiled module: import every module of `shared` from its source unless the
extension modules beside them were built from exactly these sources (shared/local/native.py).

Imported by `shared/__init__.py` only when the build's manifest exists (never in Lambda: the function
package ships neither). mypyc's modules call each other directly, so one stale module would still be
reached from the others: the choice is all compiled or all source.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PURE_VARIABLE = "BACKLOG_SCALER_PURE"
PACKAGE_ROOT = Path(__file__).resolve().parent
MANIFEST = PACKAGE_ROOT / "_native.json"


class StaleNativeBuild(RuntimeWarning):
    """The compiled modules do not match the sources: the sources run (`make native` rebuilds)."""


class _SourceOnlyFinder(importlib.abc.MetaPathFinder):
    """Finds `shared.*` modules by their `.py` files (or byte code), never an extension module: a
    module whose source is gone is not found, even if a compiled one of an older build is."""

    def __init__(self) -> None:
        self._finders: dict[str, importlib.machinery.FileFinder] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("shared.") or path is None:
            return None
        for entry in path:
            finder = self._finders.get(entry)
            if finder is None:
                finder = self._finders[entry] = importlib.machinery.FileFinder(
                    entry,
                    (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES),
                    (importlib.machinery.SourcelessFileLoader, importlib.machinery.BYTECODE_SUFFIXES),
                )
            spec = finder.find_spec(fullname, target)
            if spec is not None:
                return spec
        raise ModuleNotFoundError(f"No module named {fullname!r} (as a source)", name=fullname)


def interpreter_tag() -> str:
    """Which interpreter the extension modules are built for (they load in no other)."""
    return f"{sys.implementation.cache_tag}-{sys.platform}"


def source_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_sources(trees: Sequence[str], root: Path = PACKAGE_ROOT.parent) -> list[str]:
    """The modules' sources under `trees` (folders relative to `root`), relative to `root`, sorted."""
    found = (p.relative_to(root).as_posix() for tree in trees for p in (root / tree).rglob("*.py"))
    return sorted(f for f in found if "__pycache__" not in f)


def stale_sources(recorded: dict[str, object], root: Path = PACKAGE_ROOT.parent) -> list[str]:
    """Sources that differ from the build's record, relative to `root`: a compiled module's source
    changed, new or gone, or a module they import from outside the compiled trees changed or gone
    (mypyc builds their types into the compiled code: `shared/config.py`'s models, say)."""
    sources, trees = recorded.get("sources"), recorded.get("trees")
    if not isinstance(sources, dict) or not sources:
        return ["(a manifest without sources)"]
    if not isinstance(trees, list) or not trees or not all(isinstance(t, str) for t in trees):
        return ["(a manifest of an older build, without its compiled trees)"]
    library = recorded.get("library")
    if not isinstance(library, str) or not (root / library).is_file():
        return [f"(the compiled code's library {library})"]
    compiled = {name for name in sources if name.startswith(tuple(f"{tree}/" for tree in trees))}
    changed = sorted(compiled.symmetric_difference(tree_sources(trees, root)))
    for name in sorted(sources):
        path = root / name
        if name not in changed and (not path.is_file() or source_digest(path) != sources[name]):
            changed.append(name)
    return changed


class _LibraryFinder(importlib.abc.MetaPathFinder):
    """Finds the library of the compiled code by the top-level name mypyc gives it, beside the package."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._name = path.name.split(".", 1)[0]

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(self._path))
        return importlib.util.spec_from_file_location(fullname, self._path, loader=loader)


def is_compiled(module: ModuleType) -> bool:
    """Whether `module` was loaded from an extension module (compiled) rather than its source."""
    return str(getattr(module, "__file__", "")).endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def use_sources() -> None:
    sys.meta_path.insert(0, _SourceOnlyFinder())


def guard() -> None:
    """Called once, when `shared` is imported and the manifest exists."""
    if os.environ.get(PURE_VARIABLE) == "1":
        use_sources()
        return
    try:
        recorded = json.loads(MANIFEST.read_text())
    except (OSError, ValueError) as exc:
        warnings.warn(f"{MANIFEST}: unreadable ({exc}); running the sources", StaleNativeBuild, stacklevel=2)
        use_sources()
        return
    if recorded.get("interpreter") != interpreter_tag():
        return  # this interpreter loads none of the extension modules: nothing stale can run
    stale = stale_sources(recorded)
    if stale:
        shown = ", ".join(stale[:3]) + (f" and {len(stale) - 3} more" if len(stale) > 3 else "")
        warnings.warn(
            f"compiled modules are older than {shown}: running the sources (`make native` rebuilds)",
            StaleNativeBuild,
            stacklevel=2,
        )
        use_sources()
        return
    sys.meta_path.append(_LibraryFinder(PACKAGE_ROOT.parent / str(recorded["library"])))
