"""docs/plan-output.md documents `backlog-scaler plan --format json` exactly as the real command prints it.

Its key table (`| key | value |` rows after "`--format json` prints one object") names every
key as a path: `groups` for a top-level key, `groups[].name` for a key of its entries. The real CLI
runs as a process on the example dumps, and once more on two variations of them that make the lists
the examples leave empty non-empty (a node to terminate, a model error), so every entry's keys are
seen in real output. Each documented key must be printed and each printed key documented. Its table
of reason codes is the ReasonCode enum, no more and no less.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from shared.domain.plan import ReasonCode

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PLAN_DOC = ROOT / "docs" / "plan-output.md"
TABLE_INTRO = "`--format json` prints one object"
KEY_ROW = re.compile(r"^\| `([a-z_]+(?:\[\]\.[a-z_]+)?)` \|")
CODE_ROW = re.compile(r"^\| `([A-Za-z]+)` \|")


def table_after(intro: str, row: re.Pattern[str]) -> set[str]:
    """The first cells of the first table after the line starting with `intro` in docs/plan-output.md."""
    lines = PLAN_DOC.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(intro))
    cells: set[str] = set()
    table_started = False
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            table_started = True
            match = row.match(line)
            if match:
                cells.add(match.group(1))
        elif table_started:
            break
    return cells


def documented_keys() -> set[str]:
    """The key paths of the table of the JSON output."""
    return table_after(TABLE_INTRO, KEY_ROW)


def printed_keys(output: dict[str, Any]) -> set[str]:
    """`key` for every top-level key, `key[].sub` for the keys of the entries of a list of objects."""
    keys: set[str] = set()
    for key, value in output.items():
        keys.add(key)
        if isinstance(value, list):
            for entry in value:
                if isinstance(entry, dict):
                    keys.update(f"{key}[].{sub}" for sub in entry)
    return keys


def run_plan(
    pods: Path, state: Path, nodes: Path = EXAMPLES / "nodes.json", config: Path = EXAMPLES / "config.yaml"
) -> dict[str, Any]:
    """The real command, as a process, on the example dumps (with the given pods, state, nodes, config)."""
    argv = [
        sys.executable, "-m", "shared.local.cli", "plan",
        "--pods", str(pods),
        "--nodes", str(nodes),
        "--objects", str(EXAMPLES / "objects.json"),
        "--asgs", str(EXAMPLES / "asgs.json"),
        "--config", str(config),
        "--state", str(state),
        "--now", "2026-12-02T12:00:00Z",
        "--format", "json",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def example_outputs(tmp_path: Path) -> list[dict[str, Any]]:
    """The examples as shipped; with a pod counted on a node for an hour (a model error); and with
    only the running pods (the idle cordoned node is terminated, an idle one cordoned)."""
    state = json.loads((EXAMPLES / "state.json").read_text(encoding="utf-8"))
    state["pods"] = {
        "research/eval-0": {
            "uid": "uid-research-eval-0",
            "counted_on": "ip-10-0-1-12.us-west-2.compute.internal",
            "counted_since": "2026-12-02T11:00:00Z",
        }
    }
    counted_state = tmp_path / "state.json"
    counted_state.write_text(json.dumps(state), encoding="utf-8")
    pods = json.loads((EXAMPLES / "pods.json").read_text(encoding="utf-8"))
    pods["items"] = [pod for pod in pods["items"] if pod["status"].get("phase") == "Running"]
    running_pods = tmp_path / "pods.json"
    running_pods.write_text(json.dumps(pods), encoding="utf-8")
    # Attrition: with no spare GPUs kept and no node idle for long yet, the idle node is marked; with
    # the nodes marked and attrition switched off, the marks are lifted.
    fresh = json.loads((EXAMPLES / "state.json").read_text(encoding="utf-8"))
    fresh["nodes"] = {}
    fresh_state = tmp_path / "fresh-state.json"
    fresh_state.write_text(json.dumps(fresh), encoding="utf-8")
    settings = yaml.safe_load((EXAMPLES / "config.yaml").read_text(encoding="utf-8"))
    settings.setdefault("policy", {})["attrition"] = {"spare_gpus": 0}
    marking = tmp_path / "marking.yaml"
    marking.write_text(yaml.safe_dump(settings), encoding="utf-8")
    settings["policy"]["attrition"] = {"enabled": False}
    switched_off = tmp_path / "switched-off.yaml"
    switched_off.write_text(yaml.safe_dump(settings), encoding="utf-8")
    nodes = json.loads((EXAMPLES / "nodes.json").read_text(encoding="utf-8"))
    for item in nodes["items"]:
        item["spec"].setdefault("taints", []).append(
            {"key": "backlog-scaler/attrition", "effect": "PreferNoSchedule"}
        )
    marked_nodes = tmp_path / "nodes.json"
    marked_nodes.write_text(json.dumps(nodes), encoding="utf-8")
    # Repair and rotation: one node's GPUs broken for an hour, every node past a one-hour lifetime.
    broken = json.loads((EXAMPLES / "nodes.json").read_text(encoding="utf-8"))
    broken["items"][0]["status"]["conditions"].append(
        {"type": "AcceleratedHardwareReady", "status": "False", "lastTransitionTime": "2026-12-02T11:00:00Z"}
    )
    broken_nodes = tmp_path / "broken-nodes.json"
    broken_nodes.write_text(json.dumps(broken), encoding="utf-8")
    settings["policy"]["max_node_lifetime_seconds"] = 3600
    aging = tmp_path / "aging.yaml"
    aging.write_text(yaml.safe_dump(settings), encoding="utf-8")
    # Migration: the running 8-GPU job checkpoints every 10 minutes (last a minute ago) and expects a
    # day's run, and the idle node has its room (none kept for new pods): its node is emptied.
    for item in pods["items"]:
        if item["metadata"]["name"] == "resnet-0":
            item["metadata"].setdefault("annotations", {}).update(
                {
                    "backlog-scaler/checkpoint-interval-seconds": "600",
                    "backlog-scaler/last-checkpoint": "2026-12-02T11:59:00Z",
                    "backlog-scaler/expected-runtime-seconds": "86400",
                }
            )
    checkpointing = tmp_path / "checkpointing-pods.json"
    checkpointing.write_text(json.dumps(pods), encoding="utf-8")
    settings["policy"]["attrition"] = {"enabled": False, "spare_gpus": 0}  # no room kept for new pods
    settings["policy"]["migration"] = {"enabled": True}
    settings["policy"].pop("max_node_lifetime_seconds")  # no rotation here: its nodes would be leaving
    migrating = tmp_path / "migrating.yaml"
    migrating.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return [
        run_plan(EXAMPLES / "pods.json", EXAMPLES / "state.json"),
        run_plan(EXAMPLES / "pods.json", counted_state),
        run_plan(running_pods, EXAMPLES / "state.json"),
        run_plan(running_pods, fresh_state, config=marking),
        run_plan(running_pods, EXAMPLES / "state.json", nodes=marked_nodes, config=switched_off),
        run_plan(EXAMPLES / "pods.json", EXAMPLES / "state.json", nodes=broken_nodes, config=aging),
        run_plan(checkpointing, fresh_state, config=migrating),
    ]


def test_the_docs_document_exactly_the_keys_plan_prints_as_json(tmp_path: Path) -> None:
    # Given the documented table and the real output on the examples and their variations
    documented = documented_keys()
    outputs = example_outputs(tmp_path)
    printed = set().union(*(printed_keys(output) for output in outputs))

    # Then every list the table describes had entries in some run (so its keys were really seen)
    lists = {
        key for key in documented if "[]" not in key and any(k.startswith(key + "[]") for k in documented)
    }
    for key in lists:
        assert any(output[key] for output in outputs), f"no run printed an entry of {key!r}"

    # And the documented keys and the printed keys are the same set
    assert documented, f"no key table found after {TABLE_INTRO!r} in {PLAN_DOC.name}"
    assert sorted(documented - printed) == [], f"documented in {PLAN_DOC.name} but not printed"
    assert sorted(printed - documented) == [], f"printed but not documented in {PLAN_DOC.name}"


def test_the_docs_list_exactly_the_reason_codes() -> None:
    # Given the table under "## Reason codes" and the enum the planner, Events and metrics use
    documented = table_after("## Reason codes", CODE_ROW)

    # Then they name the same codes
    assert sorted(documented) == sorted(code.value for code in ReasonCode)
