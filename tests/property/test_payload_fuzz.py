"""Fuzzing the operator and AWS payloads through the real handlers: whatever the JSON types and sizes,
a refused payload writes nothing and names its field, and an accepted one had the right types."""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "1")

from functions.aws_events import handler as aws_events
from functions.aws_events.events import MalformedEventError
from functions.force_scale_down import handler as force
from tests.builders import asg, node, pod
from tests.builders import config as make_config
from tests.fakes.memory import FakeCluster, FakeFleet, FakeLambdaContext, FakeWorld

A100 = "research-a100"
BUSY, IDLE = "ip-10-0-1-12.us-west-2.compute.internal", "ip-10-0-1-13.us-west-2.compute.internal"
INSTANCES = ["i-0a1b2c3d4e5f60001", "i-0a1b2c3d4e5f60002"]
LEASE = {"acquire_lease", "release_lease"}  # taken to read the group before the checks only it allows
EXAMPLES = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Every JSON type, small and large: what a hand-written `aws lambda invoke --payload` can carry.
big_text = st.integers(0, 300_000).map(lambda n: "x" * n)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    big_text,
    st.sampled_from(["false", "true", "0", "1", "600", "", "a100", IDLE]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=10,
) | st.integers(0, 3_000).map(lambda n: [f"n{i}" for i in range(n)])

FIELDS = ("group", "target", "nodes", "dry_run", "grace_seconds", "force", "requested_by")
TYPES: dict[str, tuple[type, ...]] = {
    "group": (str,),
    "target": (int,),
    "nodes": (list,),
    "dry_run": (bool, type(None)),
    "grace_seconds": (int,),
    "force": (bool,),
    "requested_by": (str,),
}


def world() -> FakeWorld:
    w = FakeWorld(
        config=make_config(),
        cluster=FakeCluster([pod("job", node=BUSY)], [node(BUSY, INSTANCES[0]), node(IDLE, INSTANCES[1])]),
        fleet=FakeFleet([asg(A100, desired=2, instances=INSTANCES)]),
    )
    return w


def invoke_force(payload: Any) -> tuple[FakeWorld, dict[str, Any]]:
    w = world()
    force.set_dependencies(w.controller())
    try:
        return w, force.handler(payload, FakeLambdaContext())
    finally:
        force.set_dependencies(None)


def assert_refused_without_writes(w: FakeWorld, response: dict[str, Any], field: str | None) -> None:
    assert response["ok"] is False, response
    assert response["field"] == field, response
    assert len(response["error"]) < 2_000 and len(json.dumps(response)) < 3_000
    assert set(w.write_calls()) <= LEASE and w.state.lease is None
    assert w.cluster.calls_of("cordon") == [] and w.fleet.desired(A100) == 2


@EXAMPLES
@given(field=st.sampled_from(FIELDS), value=json_values, base=st.sampled_from(["target", "nodes"]))
def test_a_bad_field_is_refused_by_name_and_writes_nothing(field: str, value: Any, base: str) -> None:
    # Given a valid payload with one field replaced by any JSON value
    payload: dict[str, Any] = {"group": "a100", "dry_run": True}
    payload.update({"target": 1} if base == "target" else {"nodes": [IDLE]})
    if field in ("target", "nodes"):
        payload.pop("nodes" if field == "target" else "target", None)  # the one replaced is the one given
    payload[field] = value
    # When it is invoked
    w, response = invoke_force(payload)
    # Then either it was accepted with the field of its JSON type, or it is refused naming the field
    if response["ok"]:
        wanted = TYPES[field]
        assert isinstance(value, wanted) and (bool in wanted or not isinstance(value, bool)), value
        return
    if field in ("target", "nodes") and value is None:
        field = response["field"]  # null is "not given": then neither is, and the pair is named
        assert "exactly one of target" in response["error"]
    assert_refused_without_writes(w, response, field)


@EXAMPLES
@given(
    key=st.text(min_size=1, max_size=2_000).filter(lambda k: k not in FIELDS),
    value=json_values,
    extra=st.integers(0, 50_000),
)
def test_unknown_fields_are_refused_and_write_nothing(key: str, value: Any, extra: int) -> None:
    # Given a valid payload with unknown fields (one of any name, and up to 50,000 more)
    payload = {"group": "a100", "target": 0, key: value, **{f"x{i}": i for i in range(extra)}}
    payload.pop("", None)
    # When it is invoked
    w, response = invoke_force(payload)
    # Then it is refused, naming an unknown field, and nothing is written
    assert response["ok"] is False and response["field"] not in (None, *FIELDS)
    assert_refused_without_writes(w, response, response["field"])


@EXAMPLES
@given(payload=json_values.filter(lambda v: not isinstance(v, dict)))
def test_a_payload_that_is_not_an_object_is_refused(payload: Any) -> None:
    w, response = invoke_force(payload)
    assert_refused_without_writes(w, response, None)


EVENT_FIELDS = [
    ("spot_interruption.json", ("detail", "instance-id")),
    ("spot_interruption.json", ("detail", "instance-action")),
    ("spot_interruption.json", ("detail",)),
    ("spot_interruption.json", ("time",)),
    ("spot_interruption.json", ("resources",)),
    ("spot_interruption.json", ("detail-type",)),
    ("launch_unsuccessful.json", ("detail", "AutoScalingGroupName")),
    ("launch_unsuccessful.json", ("detail", "StatusMessage")),
    ("launch_unsuccessful.json", ("detail", "StartTime")),
    ("rebalance_recommendation.json", ("detail", "instance-id")),
]


@EXAMPLES
@given(where=st.sampled_from(EVENT_FIELDS), value=json_values)
def test_aws_events_of_any_shape_are_handled_ignored_or_refused_by_field_and_bad_ones_write_nothing(
    where: tuple[str, tuple[str, ...]], value: Any
) -> None:
    # Given a real EventBridge event with one field replaced by any JSON value
    name, path = where
    from pathlib import Path

    bad = json.loads((Path(__file__).resolve().parents[1] / "events" / name).read_text())
    target = bad
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    w = world()
    aws_events.set_dependencies(w.controller())
    try:
        # When it arrives
        response = aws_events.handler(bad, FakeLambdaContext())
    except MalformedEventError as refused:
        # Then a refused event (raised, for the on-failure queue) names the field and did nothing
        assert refused.fields[0] == path[0] and len(str(refused)) < 3_000
        assert w.write_calls() == [] and w.cluster.calls == [] and w.fleet.calls == []
        return
    finally:
        aws_events.set_dependencies(None)
    # Then nothing else raises; an ignored event reads and writes nothing
    if response.get("status") == "ignored" and "trigger" not in response:
        assert w.write_calls() == [] and w.cluster.calls == [] and w.fleet.calls == []
        assert len(json.dumps(response)) < 3_000
