"""Multi-zone groups: EC2 picks the zone of each launch, so a group takes a pod only when a new node
in every zone it may launch into admits it (zone and zone-id labels alike), whatever path places
the pod (plain or through the inter-pod filters); diagnosis and `plan --explain` say the same. A
new node of such a group has no zone until it launches: it runs the DaemonSets of whichever zone it
lands in, and a pod bound to a zone by pod (anti-)affinity goes only to a group of one zone."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from shared.domain.model import NodeState, ScalerState
from shared.domain.plan import ReasonCode
from shared.formats.kubernetes import daemonset_from_json
from shared.local.explain import explain_pod
from shared.planner import plan
from tests.builders import NOW, asg, node, pod, snapshot
from tests.unit.test_aws_capacity import configured, group, outcome, zone_affinity, zoned
from tests.unit.test_planner_scheduler_model import daemonset

ZONE = "topology.kubernetes.io/zone"
ZONE_ID = "topology.k8s.aws/zone-id"


def with_anti_affinity(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod with a required anti-affinity (to pods it does not select): it is placed through the
    inter-pod filters instead of the plain-pod fast path."""
    obj["spec"].setdefault("affinity", {})["podAntiAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "other"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
    return obj


def as_plain(obj: dict[str, Any]) -> dict[str, Any]:
    return obj


PATHS = pytest.mark.parametrize("path", [as_plain, with_anti_affinity], ids=["plain", "inter-pod"])


def code_of(result: Any, name: str) -> ReasonCode:
    return next(p for p in result.pods if p.pod.endswith(f"/{name}")).code


def multi(**fields: Any) -> dict[str, Any]:
    return zoned(asg("research-multi", **{"desired": 0, **fields}), "us-west-2a", "us-west-2b")


# A pod every zone admits


@PATHS
def test_a_pod_every_zone_admits_gets_a_node_with_or_without_inter_pod_rules(path: Any) -> None:
    # Given a group in us-west-2a and us-west-2b, and a pod that requires zone In [both]
    zoned_pod = path(pod("zoned", gpus=4, affinity=zone_affinity("In", "us-west-2a", "us-west-2b")))
    # When the planner runs
    result = plan(snapshot([zoned_pod], [], [multi()]), configured(group("multi", 10.0)), NOW)
    # Then the group grows for it, whether the plain path or the inter-pod filters place it
    assert outcome(result, "zoned")[:2] == ("scale-up", "multi")
    assert result.group("multi").desired == 1


def test_pods_every_zone_admits_share_a_new_node_on_the_inter_pod_path() -> None:
    # Given two 4-GPU pods with an inter-pod rule, each admitted by both zones of the group
    pods = [
        with_anti_affinity(pod(f"p{i}", gpus=4, affinity=zone_affinity("In", "us-west-2a", "us-west-2b")))
        for i in range(2)
    ]
    # When the planner runs
    result = plan(snapshot(pods, [], [multi()]), configured(group("multi", 10.0)), NOW)
    # Then one 8-GPU node is bought for both, as for plain pods: the node opened for the first one
    # admits the second in every zone too
    assert result.group("multi").desired == 1


def test_a_pod_every_zone_admits_waits_for_a_group_at_max_which_keeps_its_nodes() -> None:
    # Given a group in both zones at its max (one busy node), and a pod every zone admits
    full = zoned(asg("research-multi", desired=1, max_size=1, instances=["i-0"]), "us-west-2a", "us-west-2b")
    busy = pod("busy", gpus=8, node="n0")
    n0 = node("n0", "i-0", labels={"gpu": "a100", ZONE: "us-west-2a"})
    waiting = pod("zoned", gpus=8, affinity=zone_affinity("In", "us-west-2a", "us-west-2b"))
    # When the planner runs
    result = plan(snapshot([busy, waiting], [n0], [full]), configured(group("multi", 10.0, max_size=1)), NOW)
    # Then the reason is the group's max size, not the zone: the group could take the pod
    state, _, reason = outcome(result, "zoned")
    assert state == "unhelped"
    assert reason == "8 GPUs: multi: at max size 1"
    assert code_of(result, "zoned") is ReasonCode.AT_MAX


def test_explain_shows_no_zone_refusal_for_a_pod_every_zone_admits() -> None:
    # Given a pod that requires zone In [both zones of the group]
    snap = snapshot(
        [pod("zoned", gpus=8, affinity=zone_affinity("In", "us-west-2a", "us-west-2b"))], [], [multi()]
    )
    # When `plan --explain` looks at it
    explanation = explain_pod(snap, configured(group("multi", 10.0)), NOW, "research/zoned")
    # Then every verdict passes, as the plan that scales up for it says
    (verdicts,) = explanation.groups
    assert verdicts.fits, verdicts.verdicts
    assert [v.filter for v in verdicts.verdicts if v.filter == "zone_guarantee"] == []
    assert explanation.outcome is not None and explanation.outcome.group == "multi"


# A pod one zone refuses


def _idle_world(pending: list[dict[str, Any]]) -> Any:
    """The group in both zones with one idle node in us-west-2a (idle for an hour), and `pending`."""
    group_asg = multi(desired=1, instances=["i-0"])
    idle = node("n0", "i-0", labels={"gpu": "a100", ZONE: "us-west-2a"}, created=NOW - timedelta(hours=3))
    snap = snapshot(pending, [idle], [group_asg])
    return replace(snap, state=ScalerState(nodes={"n0": NodeState(idle_since=NOW - timedelta(hours=1))}))


def test_a_pod_one_zone_refuses_by_ored_terms_is_told_the_zone_and_the_idle_node_is_given_back() -> None:
    # Given a pod that may run outside us-west-2a or on h100 nodes (ORed terms; the group is a100),
    # and the group in us-west-2a and us-west-2b with an idle node
    either = [
        [{"key": ZONE, "operator": "NotIn", "values": ["us-west-2a"]}],
        [{"key": "gpu", "operator": "In", "values": ["h100"]}],
    ]
    cfg = configured(group("multi", 10.0))
    # When the planner runs with and without the pod
    result = plan(_idle_world([pod("either", gpus=8, affinity=either)]), cfg, NOW)
    without = plan(_idle_world([]), cfg, NOW)
    # Then the pod is refused for the zone (the filters' words kept), not for a max size the group
    # is far from: the group is not saturated and its idle node goes as it would without the pod
    state, _, reason = outcome(result, "either")
    assert state == "unhelped"
    assert reason == (
        "8 GPUs: multi: the group spans us-west-2a, us-west-2b and may launch into us-west-2a, where the"
        " pod cannot run: use one group per zone (node(s) didn't match Pod's node affinity/selector)"
    )
    assert code_of(result, "either") is ReasonCode.FILTERED
    assert [a.node for a in without.cordon] == ["n0"]
    assert [a.node for a in result.cordon] == ["n0"]


# Zone ids


def _zone_id_affinity(operator: str, *ids: str) -> list[list[dict[str, Any]]]:
    return [[{"key": ZONE_ID, "operator": operator, "values": list(ids)}]]


@PATHS
def test_a_pod_that_excludes_a_zone_id_no_node_shows_is_refused_naming_the_zone_id(path: Any) -> None:
    # Given a group in both zones with no registered node (the zone ids are unknown), and a pod that
    # must not run in usw2-az1 (a node without the label would satisfy NotIn)
    not_az1 = path(pod("not-az1", gpus=8, affinity=_zone_id_affinity("NotIn", "usw2-az1")))
    # When the planner runs
    result = plan(snapshot([not_az1], [], [multi()]), configured(group("multi", 10.0)), NOW)
    # Then nothing is bought, and the reason names the zone id nobody knows
    assert result.group("multi").desired == 0
    state, _, reason = outcome(result, "not-az1")
    assert state == "unhelped"
    assert f"reads {ZONE_ID}, which no registered node in us-west-2a shows" in reason
    assert "use one group per zone" in reason
    assert code_of(result, "not-az1") is ReasonCode.FILTERED


def _nodes_in_both_zones() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """A busy node of the group in each zone, each showing its zone and zone id."""
    nodes = [
        node("n-a", "i-a", labels={"gpu": "a100", ZONE: "us-west-2a", ZONE_ID: "usw2-az1"}),
        node("n-b", "i-b", labels={"gpu": "a100", ZONE: "us-west-2b", ZONE_ID: "usw2-az2"}),
    ]
    busy = [pod("busy-a", gpus=8, node="n-a"), pod("busy-b", gpus=8, node="n-b")]
    return nodes, busy, multi(desired=2, instances=["i-a", "i-b"])


@PATHS
def test_zone_ids_registered_nodes_show_are_judged_in_every_zone(path: Any) -> None:
    # Given the group's nodes show us-west-2a is usw2-az1 and us-west-2b is usw2-az2, a pod that must
    # not run in usw2-az1 and one that may run in either id
    nodes, busy, group_asg = _nodes_in_both_zones()
    not_az1 = path(pod("not-az1", gpus=8, affinity=_zone_id_affinity("NotIn", "usw2-az1")))
    either = path(pod("either", gpus=8, affinity=_zone_id_affinity("In", "usw2-az1", "usw2-az2")))
    # When the planner runs
    result = plan(
        snapshot([*busy, not_az1, either], nodes, [group_asg]), configured(group("multi", 10.0)), NOW
    )
    # Then the first is refused for the zone it may land in, the second gets a node
    state, _, reason = outcome(result, "not-az1")
    assert state == "unhelped"
    assert "may launch into us-west-2a, where the pod cannot run: use one group per zone" in reason
    assert outcome(result, "either")[:2] == ("scale-up", "multi")
    assert result.group("multi").desired == 3


def _spread_over_hosts(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {})["app"] = "train"
    obj["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    return obj


@pytest.mark.parametrize(
    "zones", [("us-west-2a",), ("us-west-2a", "us-west-2b")], ids=["one-zone", "two-zones"]
)
def test_new_nodes_every_zone_admits_the_pod_on_count_in_its_hostname_spread(zones: tuple[str, ...]) -> None:
    # Given two registered nodes with one GPU free each, and six 1-GPU pods spread over hostnames
    # (maxSkew 1) that require zone In [us-west-2a, us-west-2b]
    group_asg = zoned(asg("research-multi", desired=2, instances=["i-0", "i-1"]), *zones)
    nodes = [
        node("n0", "i-0", labels={"gpu": "a100", ZONE: "us-west-2a"}),
        node("n1", "i-1", labels={"gpu": "a100", ZONE: zones[-1]}),
    ]
    busy = [pod("b0", gpus=7, node="n0"), pod("b1", gpus=7, node="n1")]
    pending = [
        _spread_over_hosts(pod(f"p{i}", gpus=1, affinity=zone_affinity("In", "us-west-2a", "us-west-2b")))
        for i in range(6)
    ]
    # When the planner runs
    result = plan(snapshot([*busy, *pending], nodes, [group_asg]), configured(group("multi", 10.0)), NOW)
    # Then a new node of the group counts as a domain of the spread (its node affinity holds in every
    # zone, as the scheduler will find on the node that launches): with the registered nodes at one
    # pod each, a new node takes two of the four pods left (skew 1), so two are bought, whether the
    # group spans one zone or two (not one new node for all four)
    assert result.group("multi").desired == 4


def test_a_pod_the_groups_taint_refuses_is_told_the_taint_not_the_zone() -> None:
    # Given a pod that reads the zone id (unknown in one zone) and does not tolerate the group's taint
    reader = pod("reader", gpus=8, affinity=_zone_id_affinity("NotIn", "usw2-az1"), tolerations=[])
    # When the planner runs
    result = plan(snapshot([reader], [], [multi()]), configured(group("multi", 10.0)), NOW)
    # Then the reason is the taint, in the scheduler's words, and no group matches: one group per zone
    # would not help it
    _, _, reason = outcome(result, "reader")
    assert "untolerated taint" in reason and "one group per zone" not in reason
    assert code_of(result, "reader") is ReasonCode.NO_MATCHING_GROUP


# DaemonSets pinned to a zone


def _zone_daemonset(name: str, zone: str, cpu: str) -> Any:
    """A DaemonSet (as `kubectl get ds -o json` shows it) whose pods run only in `zone`."""
    obj = daemonset(name, cpu=cpu)
    obj["spec"]["template"]["spec"]["nodeSelector"] = {ZONE: zone}
    return daemonset_from_json(obj)


def _with_daemonsets(snap: Any, *daemonsets: Any) -> Any:
    return replace(snap, daemonsets=daemonsets)


def test_a_daemonset_of_one_zone_takes_its_room_on_a_new_node_of_a_group_that_may_launch_there() -> None:
    # Given a group in us-west-2a and us-west-2b (95 cpu a node), a cheaper one than a group in
    # us-west-2b only, a DaemonSet of 2 cpu running only in us-west-2a, and a pod of 8 GPUs and 94 cpu
    solo = zoned(asg("research-solo", desired=0), "us-west-2b")
    snap = _with_daemonsets(
        snapshot([pod("wide", gpus=8, cpu="94")], [], [multi(), solo]),
        _zone_daemonset("zonal-agent", "us-west-2a", "2"),
    )
    # When the planner runs
    result = plan(snap, configured(group("multi", 10.0), group("solo", 20.0)), NOW)
    # Then the multi-zone group is not bought (a node of it may land in us-west-2a, where the
    # DaemonSet leaves 93 cpu); the group in us-west-2b, where the DaemonSet does not run, is
    assert outcome(result, "wide")[:2] == ("scale-up", "solo")
    assert (result.group("multi").desired, result.group("solo").desired) == (0, 1)


@pytest.mark.parametrize(("cpu", "bought"), [("92", 1), ("93", 0)])
def test_the_room_of_a_multi_zone_node_is_the_smallest_its_zones_daemonsets_leave(
    cpu: str, bought: int
) -> None:
    # Given DaemonSets of 2 cpu in us-west-2a and of 3 cpu in us-west-2b (one runs on each node,
    # never both), and a pod of 8 GPUs
    snap = _with_daemonsets(
        snapshot([pod("wide", gpus=8, cpu=cpu)], [], [multi()]),
        _zone_daemonset("agent-a", "us-west-2a", "2"),
        _zone_daemonset("agent-b", "us-west-2b", "3"),
    )
    # When the planner runs
    result = plan(snap, configured(group("multi", 10.0)), NOW)
    # Then a node holds 92 cpu in either zone (95 - 3), not 90 (both counted) nor 93 (us-west-2a's)
    assert result.group("multi").desired == bought
    if not bought:
        _, _, reason = outcome(result, "wide")
        assert code_of(result, "wide") is ReasonCode.DAEMONSET_OVERHEAD
        assert "2 DaemonSet(s) need" in reason


# Pod affinity and anti-affinity over a zone


def _zone_term(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": ZONE}


def _with_pod_rule(obj: dict[str, Any], kind: str, app: str) -> dict[str, Any]:
    """The pod with a required podAffinity or podAntiAffinity term over the zone, selecting `app`."""
    rule = {"requiredDuringSchedulingIgnoredDuringExecution": [_zone_term(app)]}
    obj["spec"].setdefault("affinity", {})[kind] = rule
    return obj


def _database_in_zone_a(**extra: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A busy node of the multi-zone group in us-west-2a running a database pod (app=db), the group."""
    db = pod("db", gpus=8, node="n-a", labels={"app": "db"}, **extra)
    n_a = node("n-a", "i-a", labels={"gpu": "a100", ZONE: "us-west-2a"})
    return db, n_a, multi(desired=1, instances=["i-a"])


@pytest.mark.parametrize(
    ("kind", "words"),
    [("podAntiAffinity", "required pod anti-affinity"), ("podAffinity", "required pod affinity")],
    ids=["anti-affinity", "affinity"],
)
def test_a_pod_with_zone_pod_affinity_is_placed_only_where_the_zone_is_known(kind: str, words: str) -> None:
    # Given the database in us-west-2a on a node of the multi-zone group, a group in us-west-2b only,
    # and a pod that must run away from it (anti-affinity over the zone) or beside it (affinity)
    db, n_a, group_asg = _database_in_zone_a()
    solo = zoned(asg("research-solo", desired=0), "us-west-2b")
    trainer = _with_pod_rule(pod("trainer", gpus=8), kind, "db")
    cfg = configured(group("multi", 10.0), group("solo", 20.0))
    # When the planner runs
    result = plan(snapshot([db, trainer], [n_a], [group_asg, solo]), cfg, NOW)
    # Then the multi-zone group never takes it (EC2 picks the zone of its next node): away from the
    # database, the group in us-west-2b does; beside it, no group can
    assert result.group("multi").desired == 1
    state, where, reason = outcome(result, "trainer")
    if kind == "podAntiAffinity":
        assert (state, where) == ("scale-up", "solo")
        assert result.group("solo").desired == 1
    else:
        assert state == "unhelped" and result.group("solo").desired == 0
        assert (
            "multi: the group spans us-west-2a, us-west-2b and cannot guarantee the zone of a pod"
            f" bound by {words} over {ZONE}: use one group per zone"
        ) in reason


def test_a_pod_a_running_pods_zone_anti_affinity_selects_is_placed_only_where_the_zone_is_known() -> None:
    # Given the database in us-west-2a keeping pods labelled app=trainer out of its zone, and a pod
    # labelled so, with no rule of its own; the multi-zone group is the only one
    db, n_a, group_asg = _database_in_zone_a()
    db = _with_pod_rule(db, "podAntiAffinity", "trainer")
    trainer = pod("trainer", gpus=8, labels={"app": "trainer"})
    # When the planner runs
    result = plan(snapshot([db, trainer], [n_a], [group_asg]), configured(group("multi", 10.0)), NOW)
    # Then nothing is bought (a new node may land in us-west-2a), and the reason says why
    assert result.group("multi").desired == 1
    state, _, reason = outcome(result, "trainer")
    assert state == "unhelped"
    assert f"a pod bound by a running pod's anti-affinity over {ZONE}: use one group per zone" in reason


def test_explain_gives_the_zone_guarantee_verdict_for_zone_anti_affinity() -> None:
    # Given a pod with anti-affinity over the zone to the database in us-west-2a
    db, n_a, group_asg = _database_in_zone_a()
    trainer = _with_pod_rule(pod("trainer", gpus=8), "podAntiAffinity", "db")
    snap = snapshot([db, trainer], [n_a], [group_asg])
    # When `plan --explain` looks at it
    explanation = explain_pod(snap, configured(group("multi", 10.0)), NOW, "research/trainer")
    # Then the multi-zone group's verdict is the zone guarantee, as the plan says
    (verdicts,) = explanation.groups
    assert not verdicts.fits
    zone = [v for v in verdicts.verdicts if v.filter == "zone_guarantee"]
    assert zone and "required pod anti-affinity" in zone[0].reason, verdicts.verdicts


def _zone_id_daemonset(name: str, zone_id: str, cpu: str) -> Any:
    obj = daemonset(name, cpu=cpu)
    obj["spec"]["template"]["spec"]["nodeSelector"] = {ZONE_ID: zone_id}
    return daemonset_from_json(obj)


@pytest.mark.parametrize(
    ("zone_id", "ids_known", "bought"),
    [("usw2-az1", True, 0), ("usw2-az9", True, 1), ("usw2-az9", False, 0)],
    ids=["id-of-a-zone", "id-of-no-zone", "ids-unknown"],
)
def test_a_daemonset_pinned_to_a_zone_id_counts_where_that_id_may_be(
    zone_id: str, ids_known: bool, bought: int
) -> None:
    # Given a multi-zone group whose two busy nodes show (or not) the ids of both zones, a DaemonSet
    # of 2 cpu pinned to a zone id, and a pod of 8 GPUs and 94 cpu (it fits only beside no DaemonSet)
    nodes, busy, group_asg = _nodes_in_both_zones()
    if not ids_known:
        for obj in nodes:
            del obj["metadata"]["labels"][ZONE_ID]
    snap = _with_daemonsets(
        snapshot([*busy, pod("wide", gpus=8, cpu="94")], nodes, [group_asg]),
        _zone_id_daemonset("zonal-agent", zone_id, "2"),
    )
    # When the planner runs
    result = plan(snap, configured(group("multi", 10.0)), NOW)
    # Then the DaemonSet takes its room where a new node may carry its id: in us-west-2a (usw2-az1),
    # nowhere for an id no zone has, and anywhere while the zones' ids are unknown
    assert result.group("multi").desired == 2 + bought
