"""Parsing of the real wire formats into the domain model."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from shared.domain.errors import InputError
from shared.domain.model import PodMemory, ScalerState
from shared.formats.aws import asgs_from_describe
from shared.formats.kubernetes import (
    instance_id_from_provider_id,
    node_from_json,
    nodes_from_list,
    pod_from_json,
    pods_from_list,
)
from shared.formats.state import state_from_json, state_to_json
from tests.builders import GPU_TOLERATION, asg, node, pod


def test_pod_requests_sum_containers_max_init_containers_plus_overhead() -> None:
    # Given two containers (1 + 2 cpu), an init container asking 4 cpu, and 250m overhead
    raw = pod(
        "p",
        gpus=1,
        cpu="1",
        memory="1Gi",
        init_requests=[{"cpu": "4", "memory": "512Mi"}],
        overhead={"cpu": "250m"},
    )
    raw["spec"]["containers"].append(
        {"name": "side", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}
    )
    # When parsed
    (parsed,) = pods_from_list({"kind": "PodList", "items": [raw]})
    # Then cpu = max(1 + 2, 4) + 0.25 cores, memory = 2Gi (the init container asks less), one pod slot
    assert parsed.requests.get("cpu") == 4250
    assert parsed.requests.get("memory") == 2 * 2**30
    assert parsed.requests.gpus == 1
    assert parsed.requests.get("pods") == 1


def test_pod_scheduling_fields_are_parsed() -> None:
    raw = pod(
        "p", node_selector={"gpu": "a100"}, affinity=[[{"key": "zone", "operator": "In", "values": ["a"]}]]
    )
    (parsed,) = pods_from_list({"kind": "List", "items": [raw]})
    assert parsed.unschedulable and parsed.is_pending_unschedulable
    assert parsed.scheduling.node_selector == (("gpu", "a100"),)
    assert parsed.scheduling.affinity_terms[0][0].values == ("a",)
    assert parsed.owner_kind == "Job"


def test_equal_scheduling_specs_are_interned() -> None:
    a, b = pods_from_list({"kind": "PodList", "items": [pod("a"), pod("b")]})
    assert a.scheduling is b.scheduling


def test_node_instance_id_comes_from_the_provider_id() -> None:
    (parsed,) = nodes_from_list({"kind": "NodeList", "items": [node("n1", "i-0abc123")]})
    assert parsed.instance_id == "i-0abc123"
    assert parsed.allocatable.gpus == 8
    assert parsed.ready
    assert instance_id_from_provider_id("gce://project/zone/name") is None


def test_malformed_items_name_the_file_and_the_item() -> None:
    bad = pod("p")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(
        InputError,
        match=r"pods.json: items\[1\]: malformed Pod: spec.containers\[0\].resources.requests: cpu: "
        "unparsable quantity 'lots'",
    ):
        pods_from_list({"kind": "PodList", "items": [pod("ok"), bad]}, "pods.json")
    with pytest.raises(InputError, match=r"nodes.json: items\[0\]: malformed Node: missing field 'metadata'"):
        nodes_from_list({"kind": "NodeList", "items": [{"kind": "Node"}]}, "nodes.json")


def _pod_with(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    """A pending pod (an init container and a sidecar beside its container) with `value` at `path`."""
    raw = pod("p", init_requests=[{"cpu": "1"}, {"cpu": "1"}], overhead={"cpu": "250m"})
    raw["spec"]["initContainers"][1]["restartPolicy"] = "Always"
    raw["spec"]["resources"] = {"requests": {"cpu": "8"}}
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return raw


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("spec", "priority"), "high", "spec.priority: expected an integer, got 'high'"),
        (("spec", "priority"), 1.5, "spec.priority: expected an integer, got 1.5"),
        (
            ("spec", "containers", 0, "resources", "requests"),
            [{"cpu": "1"}],
            "spec.containers[0].resources.requests: expected an object, got list",
        ),
        (
            ("spec", "containers", 0, "resources"),
            "lots",
            "spec.containers[0].resources: expected an object, got str",
        ),
        (("spec", "containers", 0), "main", "spec.containers[0]: expected an object, got str"),
        (
            ("spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"),
            "1e400",
            "spec.containers[0].resources.requests: nvidia.com/gpu: quantity '1e400' is out of range",
        ),
        (
            ("spec", "initContainers", 1, "resources", "requests", "cpu"),
            "-1",
            "spec.initContainers[1].resources.requests: cpu: negative quantity '-1'",
        ),
        (
            ("spec", "containers", 0, "resources", "requests", "nvidia.com/gpu"),
            1.5,
            "spec.containers[0].resources.requests: nvidia.com/gpu: quantity '1.5' must be an integer",
        ),
        (("spec", "overhead", "cpu"), "lots", "spec.overhead: cpu: unparsable quantity 'lots'"),
        (("spec", "resources", "requests"), ["cpu"], "spec.resources.requests: expected an object, got list"),
        (("spec", "resources", "requests", "memory"), "1e400", "spec.resources.requests: memory: quantity"),
    ],
)
def test_a_malformed_pod_names_the_field(path: tuple[str | int, ...], value: object, expected: str) -> None:
    # Given a pod with a wrong value at `path` (the API server would have refused it)
    bad = _pod_with(path, value)
    # When parsed / Then the error names the file, the item and the field
    with pytest.raises(InputError) as raised:
        pods_from_list({"kind": "PodList", "items": [pod("ok"), bad]}, "pods.json")
    assert str(raised.value).startswith(f"pods.json: items[1]: malformed Pod: {expected}")


_AFFINITY = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"tolerations": [GPU_TOLERATION, {"key": "a", "operator": "Foo"}]},
            "spec.tolerations[1].operator: expected one of ['Equal', 'Exists', 'Gt', 'Lt'], got 'Foo'",
        ),
        (
            {"affinity": [[{"key": "a", "operator": "Foo", "values": ["x"]}]]},
            f"{_AFFINITY}.matchExpressions[0].operator: expected one of ['DoesNotExist', 'Exists', 'Gt', "
            "'In', 'Lt', 'NotIn'], got 'Foo'",
        ),
    ],
)
def test_an_operator_the_api_server_refuses_is_named(change: dict[str, Any], expected: str) -> None:
    # Given a pod with a toleration or a node affinity operator validation.go refuses (it matched
    # nothing here: the pod looked unplaceable rather than malformed)
    bad = pod("p", **change)
    # When parsed / Then the error names the file, the item and the field
    with pytest.raises(InputError) as raised:
        pods_from_list({"kind": "PodList", "items": [bad]}, "pods.json")
    assert str(raised.value) == f"pods.json: items[0]: malformed Pod: {expected}"


def test_a_node_field_selector_takes_in_and_not_in_only() -> None:
    # Given a node affinity term whose matchFields uses Exists (ValidateNodeFieldSelectorRequirement)
    bad = pod("p")
    bad["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}]
            }
        }
    }
    # When parsed / Then it is refused, naming the field
    with pytest.raises(InputError, match=r"matchFields\[0\]\.operator: expected one of \['In', 'NotIn'\]"):
        pods_from_list({"kind": "PodList", "items": [bad]}, "pods.json")


def test_lt_and_gt_tolerations_are_read() -> None:
    # Given a pod tolerating a numeric taint with Gt (admitted by Kubernetes 1.35 with its gate on)
    raw = pod("p", tolerations=[{"key": "sla", "operator": "Gt", "value": "750", "effect": "NoSchedule"}])
    # When parsed / Then the toleration keeps its operator
    (parsed,) = pods_from_list({"kind": "PodList", "items": [raw]})
    assert parsed.scheduling.tolerations[0].operator == "Gt"


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("allocatable", ["cpu"], "status.allocatable: expected an object, got list"),
        ("allocatable", {"memory": "lots"}, "status.allocatable: memory: unparsable quantity 'lots'"),
        ("capacity", {"nvidia.com/gpu": "1E100000000"}, "status.capacity: nvidia.com/gpu: quantity"),
        (
            "allocatable",
            {"nvidia.com/gpu": 7.5},
            "status.allocatable: nvidia.com/gpu: quantity '7.5' must be",
        ),
    ],
)
def test_a_malformed_node_names_the_field(field: str, value: object, expected: str) -> None:
    # Given a node whose resource list is wrong
    bad = node("n1", "i-0abc")
    bad["status"][field] = value
    # When parsed / Then the error names the file, the item and the field
    with pytest.raises(InputError) as raised:
        nodes_from_list({"kind": "NodeList", "items": [bad]}, "nodes.json")
    assert str(raised.value).startswith(f"nodes.json: items[0]: malformed Node: {expected}")


def test_wrong_kind_of_document_is_rejected() -> None:
    with pytest.raises(InputError, match=r"pods\.json: expected kind PodList"):
        pods_from_list({"kind": "NodeList", "items": []}, "pods.json")
    with pytest.raises(InputError, match="describe-auto-scaling-groups"):
        asgs_from_describe({"Groups": []})


def test_asg_output_is_parsed_with_lifecycle_states() -> None:
    doc = {
        "AutoScalingGroups": [asg("g", desired=2, instances=["i-1", "i-2"], lifecycle={"i-2": "Terminating"})]
    }
    parsed = asgs_from_describe(doc)["g"]
    assert parsed.region == "us-west-2"
    assert [i.instance_id for i in parsed.live_instances] == ["i-1"]
    assert parsed.tags == {"backlog-scaler/cluster": "research"}


def test_state_file_errors_name_the_field() -> None:
    with pytest.raises(InputError, match=r"state.json: nodes.n1.idle_since: not an ISO 8601 timestamp"):
        state_from_json({"nodes": {"n1": {"idle_since": "yesterday"}}}, "state.json")
    with pytest.raises(InputError, match="needs a timezone"):
        state_from_json({"groups": {"a": {"backoff_until": "2026-01-01T00:00:00"}}})


@pytest.mark.parametrize(
    ("field", "value"),
    [("DesiredCapacity", "3"), ("DesiredCapacity", 3.5), ("MaxSize", True), ("MinSize", None)],
)
def test_an_asg_size_that_is_no_integer_is_named(field: str, value: object) -> None:
    # Given a group whose size is not the API model's Integer ("3" was read as 3, 3.5 truncated)
    group = {**asg("research-a100", desired=1), field: value}
    # When the describe output is parsed / Then the error names the file, the group and the field
    with pytest.raises(InputError) as raised:
        asgs_from_describe({"AutoScalingGroups": [group]}, "asgs.json")
    assert str(raised.value) == (
        f"asgs.json: AutoScalingGroups[0]: malformed group: {field}: expected an integer, got {value!r}"
    )


def test_an_asg_listed_twice_is_refused() -> None:
    # Given a describe output listing the same group twice, with different sizes (the last one won)
    doc = {"AutoScalingGroups": [asg("research-a100", desired=1), asg("research-a100", desired=5)]}
    # When it is parsed / Then it is refused, naming both entries
    with pytest.raises(InputError) as raised:
        asgs_from_describe(doc, "asgs.json")
    assert str(raised.value) == (
        "asgs.json: AutoScalingGroups[1] (research-a100): listed twice (AutoScalingGroups[0] too)"
    )


def test_asg_availability_zones_are_sorted_and_deduplicated() -> None:
    # Given a group whose AvailabilityZones list is out of order with a repeat
    doc = {
        "AutoScalingGroups": [
            {**asg("g", desired=0), "AvailabilityZones": ["us-west-2c", "us-west-2a", "us-west-2c"]}
        ]
    }

    # When it is parsed
    parsed = asgs_from_describe(doc)["g"]

    # Then its zones are sorted, each once
    assert parsed.availability_zones == ("us-west-2a", "us-west-2c")


def test_asg_without_availability_zones_has_none() -> None:
    # Given a group output without AvailabilityZones / When it is parsed / Then it has no zones
    assert asgs_from_describe({"AutoScalingGroups": [asg("g", desired=0)]})["g"].availability_zones == ()


def _sidecar_pod(
    containers: list[str], init: list[tuple[str, bool]], overhead: str | None = None
) -> dict[str, Any]:
    """A pod with app containers asking `containers` cpu and init containers (cpu, is_sidecar) in order."""
    raw = pod("p", gpus=0, cpu=containers[0], memory="1Gi", overhead={"cpu": overhead} if overhead else None)
    raw["spec"]["containers"] += [
        {"name": f"app{i}", "image": "app:1", "resources": {"requests": {"cpu": cpu}}}
        for i, cpu in enumerate(containers[1:], start=1)
    ]
    raw["spec"]["initContainers"] = [
        {
            "name": f"init{i}",
            "image": "init:1",
            "resources": {"requests": {"cpu": cpu}},
            **({"restartPolicy": "Always"} if sidecar else {}),
        }
        for i, (cpu, sidecar) in enumerate(init)
    ]
    return raw


@pytest.mark.parametrize(
    ("containers", "init", "overhead", "cpu"),
    [
        # A sidecar (restartPolicy Always) runs beside the app: 1 + 0.5
        (["1"], [("500m", True)], None, 1500),
        # A regular init container after the sidecar runs beside it: max(1 + 0.5, 3 + 0.5) = 3.5
        (["1"], [("500m", True), ("3", False)], None, 3500),
        # Before the sidecar it runs alone: max(1 + 0.5, 3) = 3
        (["1"], [("3", False), ("500m", True)], None, 3000),
        # The docs' rule: max(sum of app and sidecar containers, effective init) + overhead:
        # init-a (2) alone, then sidecars 0.5 and 0.25, then migrate 3 + 0.75 -> max(2 + 0.75, 3.75) + 0.1
        (["1", "1"], [("2", False), ("500m", True), ("250m", True), ("3", False)], "100m", 3850),
        # The app containers and sidecars outweigh every init container: 4 + 1 > 2 + 1
        (["4"], [("1", True), ("2", False)], None, 5000),
    ],
)
def test_sidecar_requests_add_to_the_containers_and_to_later_init_containers(
    containers: list[str], init: list[tuple[str, bool]], overhead: str | None, cpu: int
) -> None:
    # Given a pod with sidecars and regular init containers in this order
    raw = _sidecar_pod(containers, init, overhead)
    # When parsed
    (parsed,) = pods_from_list({"kind": "PodList", "items": [raw]})
    # Then its request is the one the scheduler counts (kubernetes PodRequests)
    assert parsed.requests.get("cpu") == cpu


def test_the_spec_memo_tells_a_sidecar_from_a_regular_init_container() -> None:
    # Given two pods with the same requests, one with its init container a sidecar
    regular, sidecar = _sidecar_pod(["1"], [("2", False)]), _sidecar_pod(["1"], [("2", True)])
    # When parsed, one after the other
    a, b = pods_from_list({"kind": "PodList", "items": [regular, sidecar]})
    # Then each gets its own shape: max(1, 2) and 1 + 2
    assert (a.requests.get("cpu"), b.requests.get("cpu")) == (2000, 3000)


def _spread(raw: dict[str, Any], *, max_skew: int = 1, label_keys: bool = False) -> dict[str, Any]:
    constraint: dict[str, Any] = {
        "maxSkew": max_skew,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"team": "a"}},
    }
    if label_keys:
        constraint["matchLabelKeys"] = ["app"]
    raw["spec"]["topologySpreadConstraints"] = [constraint]
    return raw


def _with(raw: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of `raw` with spec fields set, and `namespace` / `labels` in its metadata."""
    out = copy.deepcopy(raw)
    for key, value in changes.items():
        if key in ("namespace", "labels"):
            out["metadata"][key] = value
        else:
            out["spec"][key] = value
    return out


def _variants() -> list[dict[str, Any]]:
    """Pods of one shape, each differing from the first in one input of the shared part of a parse."""
    base = _spread(pod("p0", gpus=1))
    port = copy.deepcopy(base)
    port["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    sidecar = pod("p1", gpus=1, init_requests=[{"cpu": "8"}])  # max(6, 8) or, a sidecar, 6 + 8
    always = copy.deepcopy(sidecar)
    always["spec"]["initContainers"][0]["restartPolicy"] = "Always"
    term = {"labelSelector": {"matchLabels": {"team": "a"}}, "topologyKey": "kubernetes.io/hostname"}
    anti = _with(
        base, affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    )
    return [
        base,
        _spread(pod("p2", gpus=2)),
        _spread(pod("p3", gpus=1, tolerations=[{"key": "x", "operator": "Exists"}])),
        _spread(pod("p4", gpus=1, node_selector={"gpu": "a100"})),
        _spread(pod("p5", gpus=1), max_skew=2),
        _with(base, overhead={"cpu": "250m"}),
        anti,
        _with(anti, namespace="other"),  # a term without namespaces means the pod's own
        port,
        sidecar,
        always,
        pod("p6", gpus=1),  # the same pod without the spread constraint
    ]


def test_pods_of_one_list_with_different_specs_never_share_a_parse() -> None:
    # Given pods that differ in one input each of what the pods of a workload share
    raws = _variants()
    # When parsed in one list (one memo) and each on its own (no memo)
    listed = pods_from_list({"kind": "PodList", "items": raws})
    alone = [pod_from_json(raw) for raw in raws]
    # Then the list gives each pod the parse it gets alone
    for a, b in zip(listed, alone, strict=True):
        assert (a.requests, a.scheduling, a.constraints) == (b.requests, b.scheduling, b.constraints)
    # And no two of them share one
    shared = {(a.requests, a.scheduling, a.constraints) for a in alone}
    assert len(shared) == len(raws)


def test_pods_of_one_workload_share_one_parse() -> None:
    # Given two replicas of one workload, one of them running
    first, second = _spread(pod("r0", gpus=1)), _spread(pod("r1", gpus=1, node="n1"))
    # When parsed in one list
    a, b = pods_from_list({"kind": "PodList", "items": [first, second]})
    # Then they share the very same parsed parts (frozen, so sharing is safe)
    assert a.requests is b.requests and a.scheduling is b.scheduling and a.constraints is b.constraints


def test_match_label_keys_keep_pods_with_other_labels_apart() -> None:
    # Given two pods alike but for their app label, whose spread reads it through matchLabelKeys
    first = _spread(pod("a", gpus=1), label_keys=True)
    first["metadata"]["labels"] = {"team": "a", "app": "x"}
    second = _with(first, labels={"team": "a", "app": "y"})
    # When parsed in one list
    a, b = pods_from_list({"kind": "PodList", "items": [first, second]})
    # Then each spreads among the pods of its own app
    assert a.constraints.spread != b.constraints.spread
    assert a.constraints == pod_from_json(first).constraints
    assert b.constraints == pod_from_json(second).constraints


def test_nodes_of_one_list_share_resource_lists_only_when_equal() -> None:
    # Given two nodes of one shape, one with fewer GPUs, and one whose capacity is absent
    raws = [node("a", "i-1"), node("b", "i-2"), node("c", "i-3", gpus=4), node("d", "i-4")]
    del raws[3]["status"]["capacity"]
    # When parsed in one list (one memo) and each on its own (no memo)
    listed = nodes_from_list({"kind": "NodeList", "items": raws})
    alone = [node_from_json(raw) for raw in raws]
    # Then the list gives each node what it gets alone
    assert [(n.allocatable, n.capacity) for n in listed] == [(n.allocatable, n.capacity) for n in alone]
    # And the nodes of one shape share the very object, the smaller one has its own
    assert listed[0].allocatable is listed[1].allocatable
    assert listed[2].allocatable != listed[0].allocatable and listed[2].allocatable.get("nvidia.com/gpu") == 4
    assert listed[3].capacity is None


def test_state_pods_section_round_trips() -> None:
    # Given a state file remembering one pending pod
    document = {
        "nodes": {"n1": {"idle_since": "2026-12-02T11:00:00Z"}},
        "groups": {},
        "instances": {},
        "pods": {
            "research/train-0": {
                "uid": "uid-research-train-0",
                "counted_on": "ip-10-0-1-5",
                "counted_since": "2026-12-02T11:50:00Z",
                "distrusted": ["ip-10-0-1-4"],
                "bought": {"a100": "2026-12-02T11:40:00Z"},
                "refused": {"v100": "2026-12-02T12:30:00Z"},
            }
        },
    }
    # When read and written back
    state = state_from_json(document, "state.json")
    # Then the pod's memory is there, and writing gives the same document
    memory = state.pods["research/train-0"]
    assert memory.counted_on == "ip-10-0-1-5" and memory.distrusted == ("ip-10-0-1-4",)
    assert memory.counted_since == datetime(2026, 12, 2, 11, 50, tzinfo=UTC)
    assert memory.bought == {"a100": datetime(2026, 12, 2, 11, 40, tzinfo=UTC)}
    assert memory.refused == {"v100": datetime(2026, 12, 2, 12, 30, tzinfo=UTC)}
    assert state_to_json(state) == document


def test_state_without_remembered_pods_writes_no_pods_section() -> None:
    document = {
        "nodes": {},
        "groups": {"a100": {"backoff_until": None, "last_scale_up": None, "last_scale_down": None}},
        "instances": {},
    }
    state = state_from_json(document)
    assert state.pods == {}
    assert state_to_json(state) == document
    assert state_to_json(ScalerState(pods={"a/b": PodMemory(uid="u")}))["pods"]["a/b"] == {
        "uid": "u",
        "counted_on": "",
        "counted_since": None,
        "distrusted": [],
        "bought": {},
        "refused": {},
    }


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"counted_since": "soon"}, r"state.json: pods.a/p.counted_since: not an ISO 8601 timestamp"),
        ({"distrusted": "n1"}, r"state.json: pods.a/p.distrusted: expected a list of strings"),
        ({"bought": ["a100"]}, r"state.json: pods.a/p.bought: expected an object of group -> timestamp"),
        ({"refused": {"v100": None}}, r"state.json: pods.a/p.refused.v100: expected an ISO 8601 timestamp"),
        ({"bought": {"a100": "2026-01-01T00:00:00"}}, r"pods.a/p.bought.a100: timestamp needs a timezone"),
        ({"uid": 7}, r"state.json: pods.a/p.uid: expected a string, got int"),
        ({"counted_at": "n1"}, r"state.json: pods.a/p: unknown keys \['counted_at'\]"),
    ],
)
def test_state_pods_section_errors_name_the_field(entry: dict[str, Any], expected: str) -> None:
    with pytest.raises(InputError, match=expected):
        state_from_json({"pods": {"a/p": entry}}, "state.json")
    with pytest.raises(InputError, match=r"state.json: pods: expected an object of objects"):
        state_from_json({"pods": {"a/p": "n1"}}, "state.json")


def test_state_round_trips_the_migrations_of_a_group() -> None:
    # Given a group that emptied a node by migration at 11:30
    document = {
        "nodes": {},
        "groups": {
            "a100": {
                "backoff_until": None,
                "last_scale_up": None,
                "last_scale_down": None,
                "migrated_at": ["2026-12-02T11:30:00Z"],
                "moved_jobs": {"research/Job/train": {"moves": 2, "last": "2026-12-02T11:30:00Z"}},
            }
        },
        "instances": {},
    }
    # When read and written back: the time is there, and writing gives the same document
    state = state_from_json(document)
    assert state.groups["a100"].migrated_at == (datetime(2026, 12, 2, 11, 30, tzinfo=UTC),)
    assert state.groups["a100"].moved_jobs == {
        "research/Job/train": (2, datetime(2026, 12, 2, 11, 30, tzinfo=UTC))
    }
    assert state_to_json(state) == document


def test_a_migration_time_that_is_no_timestamp_is_named() -> None:
    document = {"groups": {"a100": {"migrated_at": ["soon"]}}}
    with pytest.raises(InputError, match=r"groups\.a100\.migrated_at\[0\]"):
        state_from_json(document, "state.json")
