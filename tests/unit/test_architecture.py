"""Import rules: boto3 and kubernetes only in the adapters; the core is pure; nothing at run time imports
the local entry points."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IO_LIBRARIES = ("boto3", "botocore", "kubernetes")
CORE_FORBIDDEN = (*IO_LIBRARIES, "aws_lambda_powertools", "os", "time", "random", "socket", "urllib", "http")


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def offenders(folder: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    bad = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if any(rel.startswith(prefix) for prefix in allowed):
            continue
        for module in imports(path):
            if module.split(".")[0] in forbidden:
                bad.append(f"{rel}: {module}")
    return bad


def test_boto3_and_kubernetes_are_imported_only_in_the_adapters() -> None:
    # The one sanctioned exception: kubernetes' pure quantity parser, in the domain.
    allowed = ("shared/adapters/", "shared/domain/quantity.py")
    assert offenders("shared", IO_LIBRARIES, allowed) == []
    assert offenders("functions", IO_LIBRARIES) == []


def test_planner_and_domain_do_no_io() -> None:
    assert offenders("shared/planner", CORE_FORBIDDEN) == []
    # kubernetes' quantity parser is pure code; quantity.py loads its one file without the client.
    assert offenders("shared/domain", CORE_FORBIDDEN, ("shared/domain/quantity.py",)) == []


def _top_level_modules(package: str) -> set[str]:
    folder = ROOT / package
    names = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    names |= {p.name for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return {f"{package}.{name}" for name in names}


def test_every_runtime_module_is_forbidden_to_import_the_local_entry_points() -> None:
    # import-linter has no "every module but one" form, so its contract lists the runtime modules:
    # this fails when a module joins shared/ without joining that list.
    with (ROOT / "pyproject.toml").open("rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c.get("forbidden_modules") == ["shared.local"]]
    runtime = (_top_level_modules("shared") - {"shared.local"}) | {"functions"}
    assert set(contract["source_modules"]) == runtime
