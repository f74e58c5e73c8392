"""Properties of the planner on groups that span zones, against the scheduler's answer in each zone.

Each example: a group in us-west-2a and us-west-2b (the cheapest, no node yet) and one group in
each zone, each with one full node; a database (app=db) and a guard that keeps pods labelled
app=trainer out of its zone run in random zones; DaemonSets of random size run everywhere or in one
zone; pending 8-GPU pods (one new node each) carry one zone rule each: none, a nodeSelector, node
affinity In / NotIn, pod anti-affinity or affinity to the database over the zone, the trainer
label, or a hard zone spread of the database. What a node in a zone would answer is computed here
from those rules directly (kube-scheduler's NodeAffinity, InterPodAffinity, PodTopologySpread and
NodeResourcesFit with the zone's DaemonSets), not with the planner's filters.

(a) a group grows for a pod only if a node of it admits the pod in every zone it may launch in;
(b) a pod that a node in some zone admits is not left unhelped: a group of that one zone takes it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from shared.domain.plan import Outcome
from shared.formats.kubernetes import daemonset_from_json
from shared.planner import plan
from tests.builders import NOW, asg, node, pod, snapshot
from tests.unit.test_aws_capacity import configured, group, zoned
from tests.unit.test_planner_scheduler_model import daemonset

ZONE = "topology.kubernetes.io/zone"
ZONES = ("us-west-2a", "us-west-2b")
GROUP_ZONES = {"multi": ZONES, "solo-a": ("us-west-2a",), "solo-b": ("us-west-2b",)}
ALLOCATABLE_CPU = 95  # test_aws_capacity's A100 shape
RULES = ("plain", "select", "in-both", "notin", "anti-db", "affinity-db", "trainer", "spread-db")


@dataclass(frozen=True)
class Pending:
    rule: str
    zone: str  # the zone a nodeSelector / NotIn names
    cpu: int


@dataclass(frozen=True)
class Example:
    db_zones: frozenset[str]
    guard_zones: frozenset[str]
    daemonsets: tuple[tuple[str | None, int], ...]  # (zone or None for everywhere, cpu)
    pending: tuple[Pending, ...]


examples = st.builds(
    Example,
    db_zones=st.frozensets(st.sampled_from(ZONES)),
    guard_zones=st.frozensets(st.sampled_from(ZONES)),
    daemonsets=st.lists(st.tuples(st.sampled_from((None, *ZONES)), st.integers(1, 3)), max_size=3).map(tuple),
    pending=st.lists(
        st.builds(
            Pending,
            rule=st.sampled_from(RULES),
            zone=st.sampled_from(ZONES),
            cpu=st.sampled_from((40, 90, 92, 93, 94)),
        ),
        min_size=1,
        max_size=5,
    ).map(tuple),
)


def _term(app: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": ZONE}


def _pending_pod(index: int, spec: Pending) -> dict[str, Any]:
    other = next(z for z in ZONES if z != spec.zone)
    obj = pod(
        f"p{index}",
        gpus=8,
        cpu=str(spec.cpu),
        labels={"app": "trainer" if spec.rule == "trainer" else f"job{index}"},
        node_selector={ZONE: spec.zone} if spec.rule == "select" else None,
        affinity=(
            [[{"key": ZONE, "operator": "In", "values": list(ZONES)}]]
            if spec.rule == "in-both"
            else [[{"key": ZONE, "operator": "NotIn", "values": [other]}]]
            if spec.rule == "notin"
            else None
        ),
    )
    rules = obj["spec"].setdefault("affinity", {})
    if spec.rule == "anti-db":
        rules["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term("db")]}
    if spec.rule == "affinity-db":
        rules["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [_term("db")]}
    if spec.rule == "spread-db":
        obj["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "db"}},
            }
        ]
    return obj


def admits(example: Example, spec: Pending, zone: str) -> bool:
    """Whether a new node in `zone` runs the pod: its own rule, the guard's anti-affinity, and the
    room the zone's DaemonSets leave (one pod of 8 GPUs a node)."""
    other = next(z for z in ZONES if z != spec.zone)
    db_count = {z: (1 if z in example.db_zones else 0) for z in ZONES}
    by_rule = {
        "plain": True,
        "select": zone == spec.zone,
        "in-both": True,
        "notin": zone != other,
        "anti-db": zone not in example.db_zones,
        # interpodaffinity: a pod that does not match its own term never starts a series
        "affinity-db": zone in example.db_zones,
        "trainer": zone not in example.guard_zones,
        # the pod does not match the selector: skew = count(zone) - min over both zones
        "spread-db": db_count[zone] - min(db_count.values()) <= 1,
    }
    overhead = sum(cpu for where, cpu in example.daemonsets if where in (None, zone))
    return by_rule[spec.rule] and spec.cpu + overhead <= ALLOCATABLE_CPU


def _world(example: Example) -> Any:
    """The snapshot: each one-zone group with a full node running the database / guard pods."""
    nodes, running, asgs = [], [], [zoned(asg("research-multi", desired=0), *ZONES)]
    for zone, name, instance in zip(ZONES, ("solo-a", "solo-b"), ("i-0a", "i-0b"), strict=True):
        nodes.append(node(f"n-{name}", instance, labels={"gpu": "a100", ZONE: zone}, zone=zone))
        asgs.append(zoned(asg(f"research-{name}", desired=1, instances=[instance]), zone))
        running.append(pod(f"fill-{name}", gpus=8, cpu="1", node=f"n-{name}", labels={"app": "fill"}))
        if zone in example.db_zones:
            running.append(pod(f"db-{name}", gpus=0, cpu="1", node=f"n-{name}", labels={"app": "db"}))
        if zone in example.guard_zones:
            guard = pod(f"guard-{name}", gpus=0, cpu="1", node=f"n-{name}", labels={"app": "guard"})
            guard["spec"]["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("trainer")]}
            }
            running.append(guard)
    pending = [_pending_pod(i, spec) for i, spec in enumerate(example.pending)]
    daemonsets = []
    for index, (where, cpu) in enumerate(example.daemonsets):
        obj = daemonset(f"agent{index}", cpu=str(cpu))
        if where is not None:
            obj["spec"]["template"]["spec"]["nodeSelector"] = {ZONE: where}
        daemonsets.append(daemonset_from_json(obj))
    return replace(snapshot([*running, *pending], nodes, asgs), daemonsets=tuple(daemonsets))


CONFIG = configured(group("multi", 10.0), group("solo-a", 20.0), group("solo-b", 20.0))


@settings(max_examples=300, deadline=None)
@given(examples)
def test_a_group_grows_for_a_pod_only_where_every_zone_it_may_launch_in_admits_it(example: Example) -> None:
    result = plan(_world(example), CONFIG, NOW)
    for index, spec in enumerate(example.pending):
        found = next(p for p in result.pods if p.pod == f"research/p{index}")
        if found.outcome is Outcome.SCALE_UP:
            assert found.group is not None
            refused = [z for z in GROUP_ZONES[found.group] if not admits(example, spec, z)]
            # (a) the node EC2 launches may land in any zone of the group
            assert not refused, (spec, found.group, refused, found.reason)
        elif any(admits(example, spec, zone) for zone in ZONES):
            # (b) a one-zone group could run it: it is not left waiting
            assert found.outcome is not Outcome.UNHELPED, (spec, found.reason)
