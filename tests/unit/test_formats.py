"""Parsing of the real wire formats into the domain model."""

from __future__ import annotations

import pytest

from shared.domain.errors import InputError
from shared.formats.aws import asgs_from_describe
from shared.formats.kubernetes import instance_id_from_provider_id, nodes_from_list, pods_from_list
from shared.formats.state import state_from_json
from tests.builders import asg, node, pod


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
        InputError, match=r"pods.json: items\[1\]: malformed Pod: cpu: unparsable quantity 'lots'"
    ):
        pods_from_list({"kind": "PodList", "items": [pod("ok"), bad]}, "pods.json")
    with pytest.raises(InputError, match=r"nodes.json: items\[0\]: malformed Node: missing field 'metadata'"):
        nodes_from_list({"kind": "NodeList", "items": [{"kind": "Node"}]}, "nodes.json")


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
