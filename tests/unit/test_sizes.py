"""The size rule as a test: no function over 60 lines and no class over 400, in shared/, functions/ and
cdk/ (STYLE.md: functions over ~60 lines hide their steps; CDK constructs are built by `_build_*` steps).

A size counts every line from the `def`/`class` line to the last line of the body, docstrings and
comments included (`ast`'s lineno / end_lineno); decorators are not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("shared", "functions", "cdk")
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 400

# Allowed to be longer, each with the reason it cannot be split (path::qualified name -> lines allowed).
# Keep it empty: split the function into named steps instead of adding to it.
EXEMPT: dict[str, int] = {}


def _sizes(path: Path) -> list[tuple[str, str, int]]:
    """(kind, qualified name, lines) of every function and class in a module, nested ones included."""
    found: list[tuple[str, str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                kind = "class" if isinstance(child, ast.ClassDef) else "function"
                assert child.end_lineno is not None
                found.append((kind, name, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), "")
    return found


def oversized() -> list[str]:
    """Every function and class over its limit, as `path::name: N lines (limit L)`, not exempted."""
    out = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for kind, name, lines in _sizes(path):
                limit = MAX_CLASS_LINES if kind == "class" else MAX_FUNCTION_LINES
                key = f"{rel}::{name}"
                if lines > max(limit, EXEMPT.get(key, 0)):
                    out.append(f"{key}: {lines} lines (limit {limit})")
    return out


def test_no_function_over_60_lines_and_no_class_over_400() -> None:
    assert oversized() == []


def test_the_rule_sees_a_long_function_and_a_nested_one(tmp_path: Path) -> None:
    # Given a module with a 62-line function nested in a class method
    body = "\n".join(f"            x{i} = {i}" for i in range(60))
    module = tmp_path / "long.py"
    module.write_text(f"class A:\n    def f(self):\n        def g():\n{body}\n            return 0\n")
    # When measured / Then the method and its nested function are both seen, with their full names
    sizes = {name: lines for _, name, lines in _sizes(module)}
    assert sizes == {"A": 64, "A.f": 63, "A.f.g": 62}


def test_every_exemption_is_still_needed() -> None:
    # An exemption whose function shrank (or was renamed) must go, so the list only ever gets shorter.
    measured = {
        f"{path.relative_to(ROOT).as_posix()}::{name}": lines
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for _, name, lines in _sizes(path)
    }
    stale = [key for key in EXEMPT if measured.get(key, 0) <= MAX_FUNCTION_LINES]
    assert stale == []
