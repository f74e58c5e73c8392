"""`backlog-scaler plan --objects` with resource.k8s.io/v1 objects, and `--explain` of a pod that
claims a GPU through DRA: the DynamicResources verdict per group in the plugin's words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from shared.local.cli import main
from tests.builders_dra import claim_template, device_class, dra_pod, from_template, gpu_device, slice_spec
from tests.unit.test_cli_plan import ARGS, EXAMPLES


def _args(tmp_path: Path, *, slices_on: str | None) -> list[str]:
    """The example plus a List of DRA objects and one pending pod claiming a GPU; the group
    `slices_on` declares the slices its driver publishes per node."""
    config = yaml.safe_load((EXAMPLES / "config.yaml").read_text())
    for group in config["node_groups"]:
        if group["name"] == slices_on:
            group["resource_slices"] = [slice_spec([gpu_device(i) for i in range(8)], pool="gpus")]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    pod = dra_pod("dra-train", [from_template()], namespace="research")
    objects = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [pod, device_class(), claim_template(namespace="research")],
    }
    (tmp_path / "dra.json").write_text(json.dumps(objects))
    args = list(ARGS)
    args[args.index("--config") + 1] = str(tmp_path / "config.yaml")
    return [*args, "--objects", str(tmp_path / "dra.json")]


def test_plan_objects_reads_the_dra_kinds_and_buys_a_node_that_has_the_devices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the DRA objects in an --objects List and v100 declaring its slices
    assert main([*_args(tmp_path, slices_on="v100"), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    # Then no kind was skipped and the pod goes to the group whose nodes have devices
    pods = {p["pod"]: p for p in out["pods"]}
    assert pods["research/dra-train"]["outcome"] == "scale-up"
    assert pods["research/dra-train"]["group"] == "v100"


def test_explain_shows_the_dynamic_resources_verdict_per_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given only v100 declaring its slices
    assert main([*_args(tmp_path, slices_on="v100"), "--explain", "research/dra-train"]) == 0
    out = capsys.readouterr().out
    sections = {s.split()[0]: s for s in out.split("\nGROUP ")[1:]}
    line = next(x for x in sections["a100"].splitlines() if "dynamic_resources" in x)
    # Then a100 fails it in the plugin's words, saying how to fix it, and v100 passes
    assert "cannot allocate all claims" in line and "node_groups[].resource_slices" in line
    assert next(x for x in sections["v100"].splitlines() if "dynamic_resources" in x).split()[-1] == "pass"


def test_without_declared_slices_the_pod_is_unhelped_and_says_how_to_fix_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_args(tmp_path, slices_on=None), "--format", "json"]) == 0
    pods = {p["pod"]: p for p in json.loads(capsys.readouterr().out)["pods"]}
    assert pods["research/dra-train"]["outcome"] == "unhelped"
    assert "resource_slices" in pods["research/dra-train"]["reason"]
