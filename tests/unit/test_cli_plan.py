"""`backlog-scaler plan` on the example dumps: both output formats and its input errors."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shared.domain.model import Snapshot
from shared.domain.plan import Plan
from shared.local import cli
from shared.local.cli import main
from tests.builders import asg, node, pod
from tests.builders_provisioning import pod_template, provisioning_request

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


def test_a_plan_process_prints_its_whole_plan_before_it_exits(capsys: pytest.CaptureFixture[str]) -> None:
    # Given the plan of the example as main() returns it to a caller
    assert main([*ARGS, "--format", "json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    # When the same plan runs as its own process (which leaves without the interpreter's teardown)
    done = subprocess.run(
        [sys.executable, "-m", "shared.local.cli", *ARGS, "--format", "json"],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    # Then it exits 0 and its output, flushed first, is the whole plan
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == expected


def test_a_plan_process_with_a_bad_input_exits_2_with_its_one_line_error(tmp_path: Path) -> None:
    # Given a pods file that is not JSON
    bad = tmp_path / "pods.json"
    bad.write_text("not json")
    args = list(ARGS)
    args[args.index("--pods") + 1] = str(bad)
    # When plan runs as its own process (which leaves without teardown, error or not)
    done = subprocess.run(
        [sys.executable, "-m", "shared.local.cli", *args],
        cwd=EXAMPLES.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    # Then the exit code and the error are those main() gives a caller
    assert done.returncode == 2
    assert done.stderr.startswith(f"backlog-scaler: error: {bad}: not JSON")
    assert done.stdout == ""


def test_a_plan_process_whose_reader_stops_reading_ends_quietly() -> None:
    # Given `plan ... | head`: the reader of its output is gone before it prints
    proc = subprocess.Popen(
        [sys.executable, "-m", "shared.local.cli", *ARGS],
        cwd=EXAMPLES.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    # Then it exits as CPython does when stdout cannot be flushed, without a traceback
    assert proc.wait() == cli.STDOUT_GONE == 120
    assert err == ""


def test_plan_in_process_leaves_the_collector_as_it_was_and_holds_no_document(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a caller with the collector on
    assert gc.isenabled()
    # When it runs plan twice in its own process
    assert main([*ARGS, "--format", "json"]) == 0
    assert main([*ARGS, "--format", "json"]) == 0
    capsys.readouterr()
    # Then the collector is on again and the documents read (kept only by a plan process) are let go
    assert gc.isenabled()
    assert cli._documents == []


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


@pytest.mark.parametrize(
    ("flag", "document", "expected"),
    [
        (
            "--pods",
            {"kind": "PodList", "items": [pod("huge", gpus=1)]},
            "items[0]: malformed Pod: spec.containers[0].resources.requests: nvidia.com/gpu: quantity",
        ),
        (
            "--nodes",
            {"kind": "NodeList", "items": [node("n1", "i-0abc")]},
            "items[0]: malformed Node: status.allocatable: nvidia.com/gpu: quantity '1e400' is out of range",
        ),
    ],
)
def test_a_quantity_beyond_what_kubernetes_holds_is_a_one_line_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, document: dict[str, Any], expected: str
) -> None:
    # Given a pod requesting (a node advertising) 1e400 GPUs, past the 2^63-1 Kubernetes holds
    item = document["items"][0]
    if flag == "--pods":
        item["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1e400"
    else:
        item["status"]["allocatable"]["nvidia.com/gpu"] = "1e400"
    bad = tmp_path / "dump.json"
    bad.write_text(json.dumps(document))
    args = list(ARGS)
    args[args.index(flag) + 1] = str(bad)
    # When planning (it crashed with an OverflowError in the scale-up estimate)
    code = main(args)
    # Then it exits 2 with one line naming the file, the item and the field
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1
    assert f"{bad}: {expected}" in err


def _kubectl_objects() -> list[dict[str, Any]]:
    """What `kubectl get daemonsets,pvc,pv,storageclasses,namespaces,services -A -o json` prints."""
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "dcgm-exporter", "namespace": "kube-system"},
            "spec": {
                "selector": {"matchLabels": {"app": "dcgm-exporter"}},
                "template": {
                    "metadata": {"labels": {"app": "dcgm-exporter"}},
                    "spec": {
                        "containers": [
                            {"name": "dcgm", "image": "dcgm:3", "resources": {"requests": {"cpu": "100m"}}}
                        ]
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "research"},
            "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"]},
            "status": {"phase": "Pending"},
        },
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"}, "spec": {}},
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "research", "labels": {"kubernetes.io/metadata.name": "research"}},
        },
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "db", "namespace": "shop"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "shop"}},
    ]


def _write(path: Path, document: object) -> str:
    path.write_text(json.dumps(document))
    return str(path)


def _without(args: list[str], *flags: str) -> list[str]:
    out = list(args)
    for flag in flags:
        index = out.index(flag)
        del out[index : index + 2]
    return out


class _RecordingPlanner:
    """Stands in for the planner: records the snapshot it is given and plans nothing."""

    def __init__(self) -> None:
        self.snapshots: list[Snapshot] = []

    def __call__(self, snapshot: Snapshot, config: object, now: object) -> Plan:
        self.snapshots.append(snapshot)
        return Plan(groups=())


def test_objects_files_are_merged_into_the_snapshot_and_unknown_kinds_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given pods and nodes in one --objects file (as `kubectl get pods,nodes -A -o json` prints them),
    # and the storage objects, a DaemonSet, a namespace and kinds the planner does not read in another
    planner = _RecordingPlanner()
    monkeypatch.setattr("shared.local.cli.plan", planner)
    pods = json.loads((EXAMPLES / "pods.json").read_text())["items"]
    nodes = json.loads((EXAMPLES / "nodes.json").read_text())["items"]
    workload = _write(tmp_path / "workload.json", {"apiVersion": "v1", "kind": "List", "items": pods + nodes})
    cluster = _write(
        tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": _kubectl_objects()}
    )
    args = [
        *_without(ARGS, "--pods", "--nodes"),
        "--objects",
        workload,
        "--objects",
        cluster,
        "--format",
        "json",
    ]
    # When planning
    assert main(args) == 0
    # Then one snapshot holds everything
    (snapshot,) = planner.snapshots
    assert len(snapshot.pods) == len(pods) and len(snapshot.nodes) == len(nodes)
    assert [d.key for d in snapshot.daemonsets] == ["kube-system/dcgm-exporter"]
    assert [c.key for c in snapshot.pvcs] == ["research/data"]
    assert [v.name for v in snapshot.pvs] == ["pv-1"]
    assert [c.name for c in snapshot.storage_classes] == ["gp3"]
    assert snapshot.namespaces == {"research": {"kubernetes.io/metadata.name": "research"}}
    # And one line on stderr for the file that held unknown kinds
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"backlog-scaler: {cluster}: skipped 3 object(s) of kind(s) ConfigMap, Service"]


def test_pods_given_twice_are_counted_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given --pods and an --objects file holding the same pods again
    planner = _RecordingPlanner()
    monkeypatch.setattr("shared.local.cli.plan", planner)
    again = _write(tmp_path / "again.json", json.loads((EXAMPLES / "pods.json").read_text()))
    # When planning
    assert main([*ARGS, "--objects", again]) == 0
    # Then each pod is in the snapshot once
    (snapshot,) = planner.snapshots
    keys = [p.key for p in snapshot.pods]
    assert len(keys) == len(set(keys)) == len(json.loads((EXAMPLES / "pods.json").read_text())["items"])
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    ("dropped", "expected"),
    [
        ("--nodes", "no nodes: pass --nodes (kubectl get nodes -o json"),
        ("--pods", "no pods: pass --pods (kubectl get pods -A -o json)"),
    ],
)
def test_plan_without_pods_or_nodes_anywhere_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], dropped: str, expected: str
) -> None:
    # Given an --objects file with neither pods nor nodes, and one of --pods / --nodes left out
    cluster = _write(
        tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": _kubectl_objects()}
    )
    # When planning
    assert main([*_without(ARGS, dropped), "--objects", cluster]) == 2
    # Then the error says where pods / nodes may come from
    err = capsys.readouterr().err
    assert f"backlog-scaler: error: {expected}" in err


def test_a_malformed_objects_file_names_the_file_and_the_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _write(tmp_path / "bad.json", {"kind": "List", "items": [{"kind": "StorageClass", "metadata": {}}]})
    assert main([*ARGS, "--objects", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"backlog-scaler: error: {bad}: items[0]: malformed StorageClass: missing field 'name'"


def test_objects_only_plan_gives_an_outcome_per_pending_pod(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the example pods and nodes in one --objects file, with a DaemonSet and storage objects
    pods = json.loads((EXAMPLES / "pods.json").read_text())["items"]
    nodes = json.loads((EXAMPLES / "nodes.json").read_text())["items"]
    everything = _write(
        tmp_path / "all.json",
        {"apiVersion": "v1", "kind": "List", "items": pods + nodes + _kubectl_objects()},
    )
    # When planning through the real planner
    assert main([*_without(ARGS, "--pods", "--nodes"), "--objects", everything, "--format", "json"]) == 0
    # Then the plan has an outcome for every pending pod of the example
    out = json.loads(capsys.readouterr().out)
    assert len(out["pods"]) == 16


def _plan_table(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    assert main([*ARGS, *extra]) == 0
    return capsys.readouterr().out


def test_table_names_every_pending_pod_grouped_by_outcome_and_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the example (16 pending pods), When printing the table with --all
    out = _plan_table(capsys, "--all")
    # Then every pending pod is named once, under a line with its outcome, group, reason and count
    pods = json.loads((EXAMPLES / "pods.json").read_text())["items"]
    assert main([*ARGS, "--format", "json"]) == 0
    pending = [p["pod"] for p in json.loads(capsys.readouterr().out)["pods"]]
    assert len(pending) == 16 and len(pods) > 16
    for key in pending:
        assert out.count(key + ",") + out.count(key + "\n") == 1, key
    assert "4 scale-up  group v100: needs a new v100 node" in out
    assert "1 unhelped  group -: 16 GPUs" in out
    assert "... and" not in out


def test_long_pod_lists_are_folded_unless_all(capsys: pytest.CaptureFixture[str]) -> None:
    # Given seven pods sharing one reason (they fit on the cordoned a100 node)
    # When printing the table without --all
    folded = _plan_table(capsys)
    # Then five are named and the rest counted
    line = next(line for line in folded.splitlines() if "research/sweep-0" in line)
    assert line.count("research/") == 5 and line.endswith("... and 2 more")
    # When printing it with --all, Then all seven are named
    full = _plan_table(capsys, "--all")
    line = next(line for line in full.splitlines() if "research/sweep-0" in line)
    assert line.count("research/") == 7 and "more" not in line


def test_group_lines_say_priority_price_per_gpu_backoff_and_max_size(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # When printing the table of the example (a100 $32.77/h and v100 $24.48/h, 8 GPUs each, tier 10)
    out = _plan_table(capsys).splitlines()
    # Then each group row has its tier, price per GPU, backoff and max size
    header = next(line for line in out if line.startswith("NAME"))
    assert header.split() == [
        "NAME", "ASG", "DESIRED", "MIN", "MAX", "PRIORITY", "$/GPU-H", "BACKOFF", "UNTIL", "REASON",
    ]  # fmt: skip
    a100 = next(line for line in out if line.startswith("a100")).split()
    assert a100[4:8] == ["16", "10", "$4.10", "-"]
    v100 = next(line for line in out if line.startswith("v100")).split()
    assert v100[6:10] == ["8", "10", "$3.06", "-"]  # desired "0 -> 4" takes three words
    # And the order groups are tried in is spelled out: the cheaper v100 first within tier 10
    order = next(line for line in out if line.startswith("Groups are tried"))
    assert order.index("v100 (tier 10, $3.06)") < order.index("a100 (tier 10, $4.10)")


def test_group_line_shows_backoff_until(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the v100 group in capacity backoff until 13:00
    state = json.loads((EXAMPLES / "state.json").read_text())
    state.setdefault("groups", {})["v100"] = {"backoff_until": "2026-12-02T13:00:00+00:00"}
    args = list(ARGS)
    args[args.index("--state") + 1] = _write(tmp_path / "state.json", state)
    # When printing the table
    assert main(args) == 0
    out = capsys.readouterr().out
    # Then the v100 row says until when
    row = next(line for line in out.splitlines() if line.startswith("v100"))
    assert "2026-12-02T13:00:00+00:00" in row


def _untainted_v100(tmp_path: Path) -> list[str]:
    """The example with v100 nodes untainted and a pending pod that tolerates no taint."""
    config = (EXAMPLES / "config.yaml").read_text()
    head, v100 = config.split("  - name: v100")
    v100 = v100.replace('    taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]\n', "")
    (tmp_path / "config.yaml").write_text(head + "  - name: v100" + v100)
    pods = json.loads((EXAMPLES / "pods.json").read_text())
    pod = json.loads(json.dumps(next(p for p in pods["items"] if p["metadata"]["name"] == "eval-0")))
    pod["metadata"]["name"] = "intolerant"
    pod["metadata"].pop("uid", None)
    pod["spec"].pop("tolerations", None)
    pods["items"].append(pod)
    args = list(ARGS)
    args[args.index("--config") + 1] = str(tmp_path / "config.yaml")
    args[args.index("--pods") + 1] = _write(tmp_path / "pods.json", pods)
    return args


def test_explain_lists_each_filter_verdict_per_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a pod without the GPU toleration, a tainted a100 group and an untainted v100 group
    args = _untainted_v100(tmp_path)
    # When explaining it
    assert main([*args, "--explain", "research/intolerant"]) == 0
    out = capsys.readouterr().out
    # Then its outcome comes first, and then each group with every filter named
    first = out.splitlines()[0]
    assert first.startswith("POD research/intolerant: ")
    sections = out.split("\nGROUP ")[1:]
    a100 = next(s for s in sections if s.startswith("a100"))
    v100 = next(s for s in sections if s.startswith("v100"))
    for section in (a100, v100):
        for name in ("node_unschedulable", "node_affinity", "taint_toleration", "node_resources_fit",
                     "node_ports", "inter_pod_affinity", "pod_topology_spread", "volume_binding",
                     "dynamic_resources"):  # fmt: skip
            assert name in section
    # And the tainted group refuses it in the scheduler's words, the other lets every filter pass
    assert "refused" in a100.splitlines()[0] and "priority 10" in a100.splitlines()[0]
    taint_line = next(line for line in a100.splitlines() if "taint_toleration" in line)
    assert "node(s) had untolerated taint {nvidia.com/gpu: true}" in taint_line
    assert v100.splitlines()[0].endswith(": fits") and "$3.06/GPU-hour" in v100.splitlines()[0]
    assert [line.split()[-1] for line in v100.splitlines()[2:]] == ["pass"] * 9


def test_explain_honours_format_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given the same pod, explained with --format json
    args = _untainted_v100(tmp_path)
    assert main([*args, "--explain", "research/intolerant", "--format", "json"]) == 0

    # Then the output is one JSON document carrying what the text says
    explained = json.loads(capsys.readouterr().out)
    assert explained["pod"] == "research/intolerant" and explained["pending"]
    groups = {g["name"]: g for g in explained["groups"]}
    assert not groups["a100"]["fits"] and groups["v100"]["fits"]
    taint = next(v for v in groups["a100"]["verdicts"] if v["filter"] == "taint_toleration")
    assert "node(s) had untolerated taint {nvidia.com/gpu: true}" in taint["reason"]
    assert all(v["reason"] is None for v in groups["v100"]["verdicts"])


def test_explain_an_unknown_pod_is_an_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*ARGS, "--explain", "research/nope"]) == 2
    assert "--explain: no pod 'research/nope'" in capsys.readouterr().err


def test_provisioning_requests_are_always_in_the_json_and_answered_from_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given no ProvisioningRequest: the list is there, empty
    assert main([*ARGS, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["provisioning_requests"] == []
    # Given an --objects file with a Kueue-style 2 x 8-GPU request and its PodTemplate
    objects = tmp_path / "queues.json"
    items = [pod_template("llm-main"), provisioning_request("llm", [("llm-main", 2)])]
    objects.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    # When planning in JSON and as a table
    assert main([*ARGS, "--objects", str(objects), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert main([*ARGS, "--objects", str(objects)]) == 0
    table = capsys.readouterr().out
    # Then the request is answered (two new nodes of the cheaper group) and the table lists it
    [answer] = out["provisioning_requests"]
    assert answer == {
        "name": "research/llm",
        "class": "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
        "outcome": "provisioned",
        "group": "v100",
        "nodes": 2,
        "reason": "2 pod(s) on 2 new v100 node(s)",
    }
    assert {g["name"]: g["desired"] for g in out["groups"]}["v100"] == 6
    assert "PROVISIONING REQUESTS (1)" in table
    row = next(line for line in table.splitlines() if line.startswith("research/llm"))
    assert "provisioned" in row and "v100" in row


# Capacity reservations (--reservations: `aws ec2 describe-capacity-reservations` output)

ODCR = {
    "CapacityReservationId": "cr-0a1b2c3d4e5f60718",
    "OwnerId": "123456789012",
    "CapacityReservationArn": "arn:aws:ec2:us-west-2:123456789012:capacity-reservation/cr-0a1b2c3d4e5f60718",
    "AvailabilityZoneId": "usw2-az1",
    "InstanceType": "p4d.24xlarge",
    "InstancePlatform": "Linux/UNIX",
    "AvailabilityZone": "us-west-2a",
    "Tenancy": "default",
    "TotalInstanceCount": 7,
    "AvailableInstanceCount": 4,
    "EbsOptimized": True,
    "EphemeralStorage": False,
    "State": "active",
    "StartDate": "2026-12-01T00:00:00+00:00",
    "EndDateType": "unlimited",
    "InstanceMatchCriteria": "targeted",
    "CreateDate": "2026-11-30T18:00:00+00:00",
    "Tags": [],
    "CapacityAllocations": [{"AllocationType": "used", "Count": 3}],
    "ReservationType": "default",
}


def _reserved_a100(tmp_path: Path, *, target: bool) -> list[str]:
    """The example with --reservations, and the a100 group launching only into the ODCR: named by
    its ASG's CapacityReservationTarget, or (launch-template target) by the config."""
    asgs = json.loads((EXAMPLES / "asgs.json").read_text())
    config = (EXAMPLES / "config.yaml").read_text()
    a100 = next(g for g in asgs["AutoScalingGroups"] if g["AutoScalingGroupName"] == "research-a100")
    spec: dict[str, Any] = {"CapacityReservationPreference": "capacity-reservations-only"}
    if target:
        spec["CapacityReservationTarget"] = {"CapacityReservationIds": [ODCR["CapacityReservationId"]]}
    else:
        config = config.replace(
            "    asg_name: research-a100\n",
            f"    asg_name: research-a100\n    capacity_reservation_ids: [{ODCR['CapacityReservationId']}]\n",
        )
    a100["CapacityReservationSpecification"] = spec
    (tmp_path / "config.yaml").write_text(config)
    args = list(ARGS)
    args[args.index("--asgs") + 1] = _write(tmp_path / "asgs.json", asgs)
    args[args.index("--config") + 1] = str(tmp_path / "config.yaml")
    reservations = _write(tmp_path / "reservations.json", {"CapacityReservations": [ODCR]})
    return [*args, "--reservations", reservations]


@pytest.mark.parametrize("target", [True, False], ids=["asg-target", "config-ids"])
def test_reservations_file_makes_plan_decide_as_the_reconcile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: bool
) -> None:
    # Given the example, where the 4-pod gang goes to the cheaper v100, and an ODCR with 4 free
    # p4d instances the a100 group launches into
    args = _reserved_a100(tmp_path, target=target)
    # When planning
    assert main([*args, "--format", "json"]) == 0
    captured = capsys.readouterr()
    groups = {g["name"]: g for g in json.loads(captured.out)["groups"]}
    # Then the free reserved instances cost nothing: the gang goes to a100, v100 stays as it is
    assert (groups["a100"]["current_desired"], groups["a100"]["desired"]) == (3, 7)
    assert groups["v100"]["desired"] == 0
    assert "4 free reserved instance(s), launches only there" in groups["a100"]["reason"]
    assert captured.err == ""


def test_a_reservation_missing_from_the_file_is_reported_and_holds_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the a100 group launching into the ODCR, and a reservations file without it
    args = _reserved_a100(tmp_path, target=True)
    args[-1] = _write(tmp_path / "other.json", {"CapacityReservations": []})
    # When planning
    assert main([*args, "--format", "json"]) == 0
    captured = capsys.readouterr()
    # Then the reconcile's rule holds (an unknown reservation holds no capacity) and stderr says so
    groups = {g["name"]: g for g in json.loads(captured.out)["groups"]}
    assert groups["a100"]["desired"] == 3 and groups["v100"]["desired"] == 4
    assert f"{args[-1]}: research-a100 launches into cr-0a1b2c3d4e5f60718: not described" in captured.err


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        ({"AutoScalingGroups": []}, "expected the output of describe-capacity-reservations"),
        ({"CapacityReservations": [{"InstanceType": "p4d.24xlarge"}]}, "CapacityReservations[0]: malformed"),
    ],
)
def test_a_bad_reservations_file_gives_a_one_line_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], document: object, expected: str
) -> None:
    args = _reserved_a100(tmp_path, target=True)
    args[-1] = _write(tmp_path / "bad.json", document)
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert args[-1] in err and expected in err


def test_plan_reads_instance_types_so_an_amd64_pod_skips_the_graviton_group(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given dumps of a cluster with a cheaper g5g (arm64) group and a g5 (amd64) group, both shaped by
    # the config, a pod that runs on amd64 only, and `aws ec2 describe-instance-types` output
    shape = {"cpu": "3", "memory": "7Gi", "nvidia.com/gpu": "1", "pods": "58"}
    groups = [
        {
            "name": n,
            "asg_name": f"research-{n}",
            "instance_type": t,
            "allocatable": shape,
            "price_per_hour": p,
        }
        for n, t, p in (("t4g", "g5g.xlarge", 0.42), ("a10g", "g5.xlarge", 1.006))
    ]
    cfg = {"cluster_name": "research", "region": "us-west-2", "node_groups": groups}
    x86 = pod("x86-only", gpus=1, cpu="2", memory="4Gi", node_selector={"kubernetes.io/arch": "amd64"})
    files = {
        "config.json": cfg,
        "pods.json": {"kind": "PodList", "items": [x86]},
        "nodes.json": {"kind": "NodeList", "items": []},
        "asgs.json": {"AutoScalingGroups": [asg("research-t4g", desired=0), asg("research-a10g", desired=0)]},
    }
    for name, document in files.items():
        (tmp_path / name).write_text(json.dumps(document))
    types = Path(__file__).resolve().parents[1] / "fixtures" / "aws" / "describe-instance-types.json"
    args = ["plan", "--format", "json", "--now", "2026-12-02T12:00:00Z"]
    for flag in ("config", "pods", "nodes", "asgs"):
        args += [f"--{flag}", str(tmp_path / f"{flag}.json")]
    # When it is planned with --instance-types
    assert main([*args, "--instance-types", str(types)]) == 0
    # Then the pod buys the g5 node, as the reconcile (which reads EC2) would
    groups_out = {g["name"]: g["desired"] for g in json.loads(capsys.readouterr().out)["groups"]}
    assert groups_out == {"t4g": 0, "a10g": 1}


def test_instance_status_makes_an_impaired_node_a_repair_entry_and_other_groups_instances_are_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Given `aws ec2 describe-instance-status --include-all-instances`: the first a100 instance
    # impaired for an hour, and an instance of no managed group
    status = {
        "InstanceStatuses": [
            {
                "InstanceId": "i-0a1100000000001",
                "AvailabilityZone": "us-west-2a",
                "InstanceState": {"Code": 16, "Name": "running"},
                "SystemStatus": {
                    "Status": "impaired",
                    "Details": [
                        {"Name": "reachability", "Status": "failed", "ImpairedSince": "2026-12-02T11:00:00Z"}
                    ],
                },
                "InstanceStatus": {"Status": "ok", "Details": [{"Name": "reachability", "Status": "passed"}]},
                "Events": [],
            },
            {
                "InstanceId": "i-0ffffffffffffff01",
                "InstanceState": {"Code": 16, "Name": "running"},
                "SystemStatus": {"Status": "ok"},
                "InstanceStatus": {"Status": "ok"},
            },
        ]
    }
    path = tmp_path / "instance-status.json"
    path.write_text(json.dumps(status))

    # When planning with it, in JSON and as a table
    assert main([*ARGS, "--instance-status", str(path), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert main([*ARGS, "--instance-status", str(path)]) == 0
    table = capsys.readouterr().out

    # Then the node has a repair entry with the documented keys, and the other instance is ignored
    repair = {r["node"]: r for r in out["repair"]}
    node = repair["ip-10-0-1-11.us-west-2.compute.internal"]
    assert set(node) == {"node", "group", "instance_id", "condition", "action", "reason"}
    assert (node["condition"], node["instance_id"]) == ("InstanceStatusImpaired", "i-0a1100000000001")
    assert node["action"] in {"replace", "cordon", "wait", "paused"}
    assert repair[""]["action"] == "ignored" and "i-0ffffffffffffff01" in repair[""]["reason"]
    assert out["rotate"] == [] and out["repair_paused"] == []
    assert "REPAIR" in table and "InstanceStatusImpaired" in table


def test_a_file_that_is_not_describe_instance_status_is_a_one_line_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"Reservations": []}))

    assert main([*ARGS, "--instance-status", str(path)]) == 2

    err = capsys.readouterr().err
    assert (
        err.strip()
        == f"backlog-scaler: error: {path}: expected the output of aws ec2 describe-instance-status"
    )


def test_a_mistyped_option_is_refused_by_the_command_with_the_closest_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a plan command whose --format is mistyped
    examples = Path(__file__).resolve().parents[2] / "examples"
    argv = ["plan", "--pods", str(examples / "pods.json"), "--nodes", str(examples / "nodes.json")]
    argv += [
        "--asgs",
        str(examples / "asgs.json"),
        "--config",
        str(examples / "config.yaml"),
        "--fromat",
        "json",
    ]
    # When it runs
    with pytest.raises(SystemExit) as exited:
        main(argv)
    # Then the plan command's own usage says which option it means (exit 2, as argparse exits)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "backlog-scaler plan: error: unrecognized arguments: --fromat json (did you mean --format?)" in err
