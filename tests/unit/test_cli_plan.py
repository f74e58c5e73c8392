"""`backlog-scaler plan` on the example dumps: both output formats and its input errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
ARGS = [
    "plan",
    "--pods", str(EXAMPLES / "pods.json"),
    "--nodes", str(EXAMPLES / "nodes.json"),
    "--asgs", str(EXAMPLES / "asgs.json"),
    "--config", str(EXAMPLES / "config.yaml"),
    "--state", str(EXAMPLES / "state.json"),
    "--now", "2026-12-02T12:00:00Z",
]  # fmt: skip


def test_json_output_has_one_entry_per_group_and_an_outcome_per_pending_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # When planning the example in JSON
    assert main([*ARGS, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Then the documented keys are there, every group appears, and the gang went to the cheaper v100
    assert set(out) >= {"groups", "cordon", "uncordon", "terminate", "pods"}
    groups = {g["name"]: g for g in out["groups"]}
    assert set(groups) == {"a100", "v100"}
    assert set(groups["v100"]) >= {"asg_name", "current_desired", "desired", "min_size", "max_size", "reason"}
    assert groups["v100"]["desired"] == 4
    pods = {p["pod"]: p for p in out["pods"]}
    assert len(pods) == 16
    assert {p["outcome"] for p in pods.values()} <= {"existing", "in-flight", "scale-up", "unhelped"}
    assert pods["research/too-big"]["outcome"] == "unhelped"
    assert "larger than a node" in pods["research/too-big"]["reason"]


def test_table_output_is_aligned_and_summarises_pods(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(ARGS) == 0
    out = capsys.readouterr().out
    assert "GROUPS" in out and "ACTIONS" in out and "PENDING PODS (16" in out
    header = next(line for line in out.splitlines() if line.startswith("NAME"))
    row = next(line for line in out.splitlines() if line.startswith("v100"))
    assert row.index("research-v100") == header.index("ASG")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("not json", "not JSON"),
        ('{"kind": "NodeList", "items": []}', "expected kind PodList"),
        (
            '{"kind": "PodList", "items": [{"kind": "Pod"}]}',
            "items[0]: malformed Pod: missing field 'metadata'",
        ),
    ],
)
def test_bad_input_file_gives_a_one_line_error_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    bad = tmp_path / "pods.json"
    bad.write_text(content)
    args = list(ARGS)
    args[args.index("--pods") + 1] = str(bad)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert str(bad) in err and expected in err
