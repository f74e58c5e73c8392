"""Consolidation by attrition: give fragmented GPUs back without evicting anything (pure).

Idle scale-down only reclaims empty nodes, and batch pods are never evicted. What the scaler can
do is steer where new pods land: when a group has more free GPUs than new pods need, the nodes
cheapest to empty get the scaler's own taint (`backlog-scaler/attrition`, PreferNoSchedule by
default), so the scheduler sends new pods elsewhere, those nodes empty as their jobs finish and idle
scale-down takes them as usual.

The rules, per group of GPU nodes, level-triggered (each run decides the whole marked set anew):
- Candidates: registered, Ready, schedulable nodes with free GPUs, not protected from scale-down,
  not receiving a pending pod in this plan and not being cordoned or terminated by it.
- Order (cheapest to empty first): nodes already marked (no churn), then the least expected
  remaining work, then fewest GPUs in use, then fewest busy pods, then the newest, then the name.
  A node's remaining work is its busy pods' latest expected end: a pod's
  `backlog-scaler/expected-runtime-seconds` where it has one, else as long again as it has run
  (on heavy-tailed batch traces a job's expected remaining time grows with its age, so a node
  whose jobs are old stays anyway and its free GPUs are the ones to fill). Measured on the Philly
  replay against ordering by GPUs in use first: 1.149 vs 1.163 x ideal GPU-hours under
  LeastAllocated, 1.123 vs 1.135 under MostAllocated (docs/benchmarks.md).
- Marks go to a prefix of that order: while the free GPUs left on unmarked nodes stay at least the
  spare the policy keeps for new pods (`attrition.spare_gpus`, default one node's GPUs, plus the
  group's headroom nodes' GPUs), and never on more nodes than the group can lose above its min size.
- Lifted in the same run the room is needed: a pending pod the plan counts on a marked node (so no
  pod waits for a node we drain by attrition; the planner judges marked nodes without the mark, the
  mark being ours to lift), a marked node whose room the spare needs, a node that became protected,
  or the policy switched off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from operator import itemgetter
from typing import NamedTuple

from shared.config import AttritionConfig
from shared.domain.durations import short_duration
from shared.domain.model import AsgState, Node, Pod, Snapshot, Taint, TaintEffect, carries_taint
from shared.domain.numbers import whole_number
from shared.domain.plan import NodeMark, PodOutcome
from shared.domain.safety import protection, removable_above_min
from shared.planner.context import Context, GroupView
from shared.planner.gangs import pending_subject
from shared.planner.memo import identity_memo

ATTRITION_TAINT_KEY = "backlog-scaler/attrition"
# A pod's expected run time in seconds, from its creation (a user's estimate, as Slurm's --time):
# where every busy pod of a node has one, the node's remaining work is known.
ANNOTATION_EXPECTED_RUNTIME = "backlog-scaler/expected-runtime-seconds"


def attrition_taint(policy: AttritionConfig) -> Taint:
    """The taint the scaler marks nodes with."""
    return Taint(ATTRITION_TAINT_KEY, "", TaintEffect(policy.effect))


def marked_nodes(snapshot: Snapshot) -> frozenset[str]:
    """Nodes carrying the scaler's attrition taint (any effect)."""
    # Judged once per taint list: nodes that share theirs (a group's, the simulator's marked ones)
    # are asked in every run, and the lists live as long as the snapshot's nodes, so ids are stable.
    verdicts: dict[int, bool] = {}
    found: list[str] = []
    for node in snapshot.nodes:
        carries = verdicts.get(id(node.taints))
        if carries is None:
            carries = verdicts[id(node.taints)] = carries_taint(node.taints, ATTRITION_TAINT_KEY)
        if carries:
            found.append(node.name)
    return frozenset(found)


def without_marks(snapshot: Snapshot, marked: frozenset[str]) -> Snapshot:
    """The snapshot as the placement rules judge it: marked nodes without the mark (ours to lift)."""
    if not marked:
        return snapshot
    # A list rather than a generator: every node of every run passes, and a generator resumes per node.
    nodes = tuple([_unmarked(n) if n.name in marked else n for n in snapshot.nodes])
    return replace(snapshot, nodes=nodes)


# Equal taint lists left once the mark is off, one tuple (interned by value: it cannot go stale), so
# the per-run memos keyed on a taint tuple's identity (`_Booting`) judge a group's marked nodes once.
_TAINT_LISTS: dict[tuple[Taint, ...], tuple[Taint, ...]] = {}


def _without_mark(node: Node) -> Node:
    taints = tuple(t for t in node.taints if t.key != ATTRITION_TAINT_KEY)
    if len(_TAINT_LISTS) >= 1024:
        _TAINT_LISTS.clear()
    return replace(node, taints=_TAINT_LISTS.setdefault(taints, taints))


# The same marked node yields the same copy: built once while the node stays as it is, so the copy
# keeps its identity from run to run (and the rules' memos keyed on nodes find it).
_unmarked = identity_memo(_without_mark)


@dataclass(frozen=True)
class AttritionResult:
    mark: tuple[NodeMark, ...] = ()
    unmark: tuple[NodeMark, ...] = ()


# A node attrition may mark (or keep marked) as the pass over its group finds it, before it is ranked:
# (its free GPUs, the node). A plain pair: one is built for many nodes of every run. A candidate has
# no pod arriving (_why_not), so its GPUs in use are its GPUs less the free ones.
_Found = tuple[int, Node]
_FREE = itemgetter(0)


class _Candidate(NamedTuple):
    """A candidate ranked within its set (the marked ones, or the others; `_Prefix` walks the marked
    first, so marks do not churn).

    Its first fields are the order within the set, cheapest to empty first: least expected remaining
    work, fewest GPUs in use and busy pods, newest, then the name. The sort reads them off in C
    (`_ORDER`), with no key function called per candidate.
    """

    remaining: float  # seconds until its last busy pod is expected to end (see expected_remaining_seconds)
    used: int
    busy: int
    newest: float  # minus its creation time (0.0 without one): the newest first
    name: str
    node: Node
    gpus: int
    free: int


# The order's fields, not the node: names are unique, but a Node has no order to fall back on.
_ORDER = itemgetter(0, 1, 2, 3, 4)


class _Prefix:
    """The walk down the candidates in their order: marks go to a prefix of it, while the free GPUs
    left on unmarked nodes (`pool`) stay at least the `spare` and the marked nodes (`kept`) below what
    the group can lose (`removable`). The first candidate that cannot join ends the prefix (`full`)."""

    __slots__ = ("full", "kept", "pool", "removable", "spare")

    def __init__(self, pool: int, kept: int, removable: int, spare: int) -> None:
        self.pool, self.kept, self.removable, self.spare = pool, kept, removable, spare
        self.full = False

    def take(self, free: int) -> bool:
        """Whether the next candidate, with `free` GPUs, joins the prefix."""
        self.full = self.full or self.kept >= self.removable or self.pool - free < self.spare
        if self.full:
            return False
        self.pool -= free
        self.kept += 1
        return True

    def room(self) -> str:
        return f"{self.pool} free GPU(s) unmarked, {self.spare} kept for new pods"

    def order_matters(self, found: Sequence[_Found], marked: bool) -> bool:
        """Whether the order within `found` (the marked candidates, or the others, next in the walk)
        can change what the walk decides. Not when the prefix ends at the first of them, whichever it
        is: none joins, and each marked one is lifted with the same pool. Nor, for marked ones, when
        all of them join, in whichever order: `kept` grows by their count, `pool` shrinks by their sum,
        and no reason is written (they stay marked). Most runs, where marks stand, rank nothing."""
        if not found or self.full or self.kept >= self.removable:
            return False
        if self.pool - min(map(_FREE, found)) < self.spare:
            return False
        fits_all = self.kept + len(found) <= self.removable
        return not (marked and fits_all and self.pool - sum(map(_FREE, found)) >= self.spare)


def plan_attrition(
    ctx: Context,
    marked: frozenset[str],
    counted_on: Mapping[str, str],
    outcomes: Mapping[str, PodOutcome],
    leaving: frozenset[str],
) -> AttritionResult:
    """Marks to put on and lift this run (see the module docstring).

    `marked`: nodes that carry the mark now; `counted_on`: pending pod -> registered node the plan
    counts it on; `outcomes`: the pods' outcomes (their GPUs); `leaving`: nodes this plan cordons or
    terminates.
    """
    policy = ctx.config.policy.attrition
    taint = attrition_taint(policy)
    incoming: dict[str, list[str]] = {}
    for pod, node in sorted(counted_on.items()):
        incoming.setdefault(node, []).append(pod)
    marks: list[NodeMark] = []
    unmarks: list[NodeMark] = []
    for view in ctx.groups:
        chosen, lifted = _plan_group(ctx, view, policy, marked, incoming, outcomes, leaving)
        marks.extend(NodeMark(n, view.name, why, taint.key, taint.effect) for n, why in chosen)
        unmarks.extend(NodeMark(n, view.name, why, taint.key, taint.effect) for n, why in lifted)
    # A node left its group's ASG: nothing to steer there (group_of_node holds every group's nodes).
    for name in sorted(marked.difference(ctx.group_of_node)):
        if any(n.name == name for n in ctx.snapshot.nodes):
            unmarks.append(NodeMark(name, "", "not a node of a managed group", taint.key, taint.effect))
    return AttritionResult(
        tuple(sorted(marks, key=lambda m: m.node)), tuple(sorted(unmarks, key=lambda m: m.node))
    )


def spare_gpus(view: GroupView, policy: AttritionConfig, gpus_per_node: int) -> int:
    """Free GPUs the group keeps on unmarked nodes for new pods (migration keeps them too)."""
    spare = policy.spare_gpus if policy.spare_gpus is not None else gpus_per_node
    return spare + view.config.headroom_nodes * gpus_per_node


def _plan_group(
    ctx: Context,
    view: GroupView,
    policy: AttritionConfig,
    marked: frozenset[str],
    incoming: Mapping[str, list[str]],
    outcomes: Mapping[str, PodOutcome],
    leaving: frozenset[str],
) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(node, reason) to mark and to unmark in one group."""
    cutoff, now = ctx.config.policy.pod_priority_cutoff, ctx.now
    lifted: list[tuple[str, str]] = []
    held: list[_Found] = []  # candidates marked now
    others: list[_Found] = []
    kept = 0  # marked nodes that are cordoned: still marked, they count against what the group can lose
    pool = 0  # free GPUs of schedulable nodes: what new pods may use once marks are placed
    gpus_per_node = 0
    pods_on_node = ctx.pods_on_node
    for node in view.nodes:
        gpus = node.allocatable.gpus
        if gpus > gpus_per_node:
            gpus_per_node = gpus
        if node.unschedulable and node.name in marked:
            kept += 1
        pods = pods_on_node.get(node.name, ())
        used = 0  # live pods only (pods_on_node); a loop rather than sum(): every node of every run
        for pod in pods:
            used += pod.requests.gpus
        arriving = incoming.get(node.name, ())
        free = gpus - used - (sum(outcomes[p].gpus for p in arriving if p in outcomes) if arriving else 0)
        schedulable = node.ready and not node.unschedulable and node.name not in leaving
        if schedulable and free > 0:
            pool += free
        if (free <= 0 or not schedulable or arriving) and node.name not in marked:
            continue  # never a candidate, and why not is read only to lift a mark: no protection test
        why_not = _why_not(node, pods, view.asg, arriving, schedulable, gpus, free, leaving, policy)
        if why_not is None:
            (held if node.name in marked else others).append((free, node))
        elif node.name in marked and why_not not in (_LEAVING, _NOT_SCHEDULABLE, _FULL):
            lifted.append((node.name, why_not))
    if not policy.enabled or not (held or others):
        return [], lifted
    spare = spare_gpus(view, policy, gpus_per_node)
    prefix = _Prefix(pool, kept, removable_above_min(len(view.nodes), view.min_size), spare)
    return _walk(prefix, held, others, lifted, _Ranking(pods_on_node, cutoff, now)), lifted


class _Ranking(NamedTuple):
    """What ranking candidates reads besides the nodes: their pods, the priority cutoff, the clock."""

    pods_on_node: Mapping[str, Sequence[Pod]]
    cutoff: int | None
    now: datetime

    def ranked(self, found: list[_Found]) -> list[_Candidate]:
        """`found` in the order they are marked in, cheapest to empty first (see _Candidate)."""
        ranked: list[_Candidate] = []
        cutoff, now = self.cutoff, self.now
        for free, node in found:
            # Counted and their latest end taken: busy_pods' order by key is not needed here.
            busy = [p for p in self.pods_on_node.get(node.name, ()) if p.keeps_node_busy(cutoff, now)]
            remaining = expected_remaining_seconds(now, busy)
            newest = -node.created_at.timestamp() if node.created_at else -0.0
            gpus = node.allocatable.gpus
            ranked.append(_Candidate(remaining, gpus - free, len(busy), newest, node.name, node, gpus, free))
        ranked.sort(key=_ORDER)
        return ranked


def _walk(
    prefix: _Prefix,
    held: list[_Found],
    others: list[_Found],
    lifted: list[tuple[str, str]],
    ranking: _Ranking,
) -> list[tuple[str, str]]:
    """(node, reason) to mark: the prefix of the candidates in their order, the marked ones (`held`)
    first; the marked ones past it join `lifted`. Each set is ranked only when its order matters."""
    if prefix.order_matters(held, marked=True):
        walk = [(cand.free, cand.name) for cand in ranking.ranked(held)]
    else:
        walk = [(free, node.name) for free, node in held]
    for free, name in walk:
        if not prefix.take(free):
            lifted.append((name, f"its room is needed: {prefix.room()}"))
    chosen: list[tuple[str, str]] = []
    if prefix.order_matters(others, marked=False):
        for cand in ranking.ranked(others):
            if not prefix.take(cand.free):
                break  # the prefix ended: the rest stay unmarked
            chosen.append((cand.name, _mark_reason(cand, prefix.pool, prefix.spare)))
    return chosen


def mark_blocker(node: Node | None, pods: Sequence[Pod]) -> str | None:
    """Why a planned mark must not be put on now (None: go ahead), judged on a fresh read like a cordon.

    Lifting a mark is always safe and needs no such check.
    """
    if node is None:
        return "the node is gone"
    if node.unschedulable:
        return "it is cordoned"
    if not node.ready:
        return "it is not Ready"
    # The plan judged the instance's scale-in protection on the group it read; the fresh read
    # re-judges what can change on the node itself (annotations, pods).
    return protection(node, pods, None)


_LEAVING = "cordoned or terminated by this plan"
_NOT_SCHEDULABLE = "not Ready and schedulable"
_FULL = "no free GPU"


def _why_not(
    node: Node,
    pods: Sequence[Pod],
    asg: AsgState | None,
    arriving: Sequence[str],
    schedulable: bool,
    gpus: int,
    free: int,
    leaving: frozenset[str],
    policy: AttritionConfig,
) -> str | None:
    """Why the node cannot be (or stay) marked; None when it is a candidate."""
    if not policy.enabled:
        return "consolidation by attrition is switched off"
    if arriving:
        return f"pending {pending_subject(arriving[0])} fits only here: the room is needed"
    if node.name in leaving:
        return _LEAVING
    if not schedulable:
        return _NOT_SCHEDULABLE
    if gpus <= 0:
        return "not a GPU node"
    protected = protection(node, pods, asg)  # asked last: the node's pods are read only when it matters
    if protected:
        return f"{protected}: it is never scaled down"
    if free <= 0:
        return _FULL
    return None


def _mark_reason(cand: _Candidate, pool: int, spare: int) -> str:
    room = f"({pool} free GPU(s) stay on unmarked nodes, {spare} kept for new pods)"
    if not cand.busy:
        return f"runs no job: new pods go elsewhere so idle scale-down can take it {room}"
    ends = short_duration(cand.remaining)
    return (
        f"{cand.used}/{cand.gpus} GPUs in use, its jobs expected to end within {ends}: new pods go"
        f" elsewhere so it empties as its jobs finish {room}"
    )


def expected_remaining_seconds(now: datetime, pods: Sequence[Pod]) -> float:
    """Seconds until the last of `pods` is expected to end (0 for none).

    A pod with a valid `backlog-scaler/expected-runtime-seconds` is expected to end that long after
    its creation (not before now); any other is expected to run as long again as it has run so far,
    the estimate for a heavy-tailed run time when nothing else is known. A pod without a creation
    time counts as just started.
    """
    latest = 0.0
    # The pods without an estimate are expected to run as long again as they ran: the oldest of them
    # is the latest end, and the one time difference taken (every busy pod of every candidate of every
    # run passes here; `now - created_at` only shrinks as `created_at` grows, so its maximum is the same).
    oldest: datetime | None = None
    for pod in pods:
        created = pod.created_at
        raw = pod.annotations.get(ANNOTATION_EXPECTED_RUNTIME) if pod.annotations else None
        expected = whole_number(raw) if raw is not None else None
        if expected is not None:
            elapsed = (now - created).total_seconds() if created is not None else 0.0
            remaining = expected - elapsed
            if remaining > latest:
                latest = remaining
        elif created is not None and (oldest is None or created < oldest):
            oldest = created  # one without a creation time counts as just started: 0, never the latest
    if oldest is not None:
        # As long again as it ran: 2 * elapsed - elapsed, which is `elapsed` exactly in floating point.
        elapsed = (now - oldest).total_seconds()
        if elapsed > latest:
            latest = elapsed
    return latest
