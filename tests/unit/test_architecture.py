"""Import rules: boto3 and kubernetes only in the adapters; the core is pure."""

from __future__ import annotations

import ast
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
    # The one sanctioned exception: kubernetes' pure quantity parser in the format parsers.
    allowed = ("shared/adapters/", "shared/formats/quantity.py")
    assert offenders("shared", IO_LIBRARIES, allowed) == []
    assert offenders("functions", IO_LIBRARIES) == []


def test_planner_and_domain_do_no_io() -> None:
    assert offenders("shared/planner", CORE_FORBIDDEN) == []
    assert offenders("shared/domain", CORE_FORBIDDEN) == []
