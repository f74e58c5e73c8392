"""docs/configuration.md is generated from the config models and says what the models enforce."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from shared.config import ScalerConfig
from shared.local.config_reference import DOC_PATH, _sections, render


def test_the_reference_is_the_one_generated_from_the_models() -> None:
    # Stale? Regenerate: python -m shared.local.config_reference --write
    assert DOC_PATH.read_text(encoding="utf-8") == render()


def _keys(model: type[BaseModel], path: str) -> list[str]:
    return [f"{path}.{name}" if path else name for name in model.model_fields]


def test_every_key_of_every_model_has_a_row() -> None:
    text = render()
    sections = list(_sections(ScalerConfig, ""))
    assert {path for path, _ in sections} >= {
        "",
        "node_groups[]",
        "node_groups[].taints[]",
        "policy",
        "deployment",
    }
    for path, model in sections:
        heading = f"## `{path}`" if path else "## Top level"
        body = text.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        for name in model.model_fields:
            assert f"| `{name}` |" in body, f"{path}.{name}"


def test_rows_carry_type_default_bounds_and_description() -> None:
    rows: dict[str, Any] = {
        line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
        for line in render().splitlines()
        if line.startswith("| `")
    }
    assert rows["`cluster_name`"][:2] == ["string", "required"]
    assert rows["`max_scale_in_fraction`"][:3] == ["number", "`0.1`", "<= 1, > 0"]
    assert rows["`max_size`"][:3] == ["integer or null", "`null`", "<= 5000, >= 0"]
    assert rows["`architecture`"][0] == '"arm64" or "x86_64"'
    assert "cordoned, then terminated" in rows["`idle_seconds`"][3]
    assert rows["`dry_run`"][3].startswith("Plan and report, change nothing")
