"""Which nodes a forced scale-down removes: pure, next to scale_down and attrition.

The controller's package (`shared.controller.force_scale_down`) validates the request, reads the group
and runs the drain; this module only decides: every live instance joined with its node and workload
(`candidates_of`), an order of preference (`rank`) and the choice that never takes the group below its
min size (`choose`). Like cluster-autoscaler's scale-down it prefers nodes with the least to move
(unregistered instances, then idle nodes, then the fewest pods and GPUs), newest first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from shared.domain.errors import MAX_ERRORS_SHOWN, InvalidRequestError
from shared.domain.model import AsgInstance, AsgState, Node, Pod
from shared.domain.operations import MAX_DRAIN_NODES
from shared.domain.safety import busy_pods, protection, removable_above_min, scale_in_protection


class ForcedAsk(Protocol):
    """What the choice reads of a request (the controller's ForceScaleDownRequest has these fields)."""

    @property
    def group(self) -> str: ...

    @property
    def target(self) -> int | None: ...

    @property
    def nodes(self) -> tuple[str, ...] | None: ...

    @property
    def force(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    """A live instance of the group, with its node (None while it has not registered) and workload."""

    instance: AsgInstance
    node: Node | None
    workload: tuple[Pod, ...] = ()  # pods that keep the node busy (safety.busy_pods)
    protection: str | None = None  # why an automatic choice must pass it over (safety.protection)

    @property
    def name(self) -> str:
        return self.node.name if self.node else self.instance.instance_id

    @property
    def idle(self) -> bool:
        return not self.workload

    @property
    def gpus(self) -> int:
        return sum(p.requests.gpus for p in self.workload)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node.name if self.node else None,
            "instance_id": self.instance.instance_id,
            "idle": self.idle,
            "pods": len(self.workload),
            "gpus": self.gpus,
        }


def candidates_of(
    asg: AsgState,
    nodes: Iterable[Node],
    pods: Iterable[Pod],
    priority_cutoff: int | None,
    *,
    now: datetime,
    force: bool = False,
) -> list[Candidate]:
    """Every live instance of the group joined with its node and the pods keeping that node busy.

    `priority_cutoff` is the policy's pod_priority_cutoff: pods below it do not keep a node busy.
    `force`: the request's; it waives the scale-in protection the operator set (safety.protection).
    """
    by_instance = {n.instance_id: n for n in nodes if n.instance_id}
    on_node: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.node_name and not pod.is_terminal:
            on_node.setdefault(pod.node_name, []).append(pod)
    out = []
    for instance in asg.live_instances:
        node = by_instance.get(instance.instance_id)
        if node is None:
            protected = scale_in_protection(instance.instance_id, asg, force=force)
            out.append(Candidate(instance, None, protection=protected))
            continue
        here = on_node.get(node.name, ())
        busy = tuple(busy_pods(here, priority_cutoff, now))
        out.append(Candidate(instance, node, busy, protection(node, here, asg, force=force)))
    return out


def _rank_key(candidate: Candidate) -> tuple[object, ...]:
    created = candidate.node.created_at if candidate.node else None
    newest_first = -created.timestamp() if created else 0.0
    return (
        candidate.node is not None,  # instances still booting have nothing to drain
        not candidate.idle,
        len(candidate.workload),
        candidate.gpus,
        newest_first,
        candidate.name,
    )


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Preferred first: unregistered instances, idle nodes, fewest pods, fewest GPUs, newest, by name."""
    return sorted(candidates, key=_rank_key)


@dataclass(frozen=True, slots=True)
class Refusal:
    target: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"target": self.target, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Choice:
    chosen: tuple[Candidate, ...]
    refused: tuple[Refusal, ...]


def check_against_group(ask: ForcedAsk, asg: AsgState, draining: frozenset[str]) -> None:
    """What only the group can tell (InvalidRequestError): a target above its max size, or more nodes
    than one drain holds with the one in progress. Called once the ASG is read, before any write."""
    if ask.target is not None and ask.target > asg.max_size:
        raise InvalidRequestError(
            f"request: target: {ask.target} is above the max size {asg.max_size} of group "
            f"{ask.group} (ASG {asg.name})",
            ("target",),
        )
    if ask.nodes is not None:
        total = len(draining | set(ask.nodes))
        if total > MAX_DRAIN_NODES:
            raise InvalidRequestError(
                f"request: nodes: with the {len(draining)} node(s) draining, {total} nodes would drain; "
                f"at most {MAX_DRAIN_NODES} at once",
                ("nodes",),
            )


def choose(
    ask: ForcedAsk,
    asg: AsgState,
    candidates: Sequence[Candidate],
    *,
    draining: frozenset[str] = frozenset(),
) -> Choice:
    """Which instances to remove, never taking the group below its min size.

    Nodes already `draining` (a drain in progress) count as leaving and are not chosen again; with
    them, at most MAX_DRAIN_NODES drain at once. Raises InvalidRequestError naming nodes that are not
    in the group, or a target or node list the group refuses (`check_against_group`); nothing is
    chosen then.
    """
    check_against_group(ask, asg, draining)
    pool = [c for c in candidates if c.name not in draining]
    removable = removable_above_min(len(pool), asg.min_size)
    refused: list[Refusal] = []
    if ask.nodes is not None:
        wanted, refused = _refuse_protected(ask, asg, _named(ask, asg, candidates, draining))
    else:
        wanted, refused = _by_target(ask, asg, pool, draining)
    chosen = wanted[:removable]
    for candidate in wanted[removable:]:
        refused.append(Refusal(candidate.name, f"would take the group below its min size {asg.min_size}"))
    return Choice(tuple(chosen), tuple(refused))


def _named(
    ask: ForcedAsk, asg: AsgState, candidates: Sequence[Candidate], draining: frozenset[str]
) -> list[Candidate]:
    """The nodes named by the request, ranked; InvalidRequestError for names outside the group."""
    assert ask.nodes is not None
    by_name = {c.node.name: c for c in candidates if c.node}
    unknown = [n for n in ask.nodes if n not in by_name]
    if unknown:
        named = ", ".join(unknown[:MAX_ERRORS_SHOWN])
        more = f" and {len(unknown) - MAX_ERRORS_SHOWN} more" if len(unknown) > MAX_ERRORS_SHOWN else ""
        raise InvalidRequestError(
            f"request: nodes: not nodes of group {ask.group} (ASG {asg.name}): {named}{more}",
            ("nodes",),
        )
    return rank(by_name[n] for n in ask.nodes if n not in draining)


def _refuse_protected(
    ask: ForcedAsk, asg: AsgState, named: list[Candidate]
) -> tuple[list[Candidate], list[Refusal]]:
    """Named nodes on instances the operator protected from scale-in are refused unless `force`."""
    wanted: list[Candidate] = []
    refused: list[Refusal] = []
    for candidate in named:
        protected = scale_in_protection(candidate.instance.instance_id, asg, force=ask.force)
        if protected:
            refused.append(Refusal(candidate.name, f"{protected}: say force to remove it"))
        else:
            wanted.append(candidate)
    return wanted, refused


def _by_target(
    ask: ForcedAsk, asg: AsgState, pool: Sequence[Candidate], draining: frozenset[str]
) -> tuple[list[Candidate], list[Refusal]]:
    """The best unprotected candidates down to the target, within the drain bound, and the refusals."""
    assert ask.target is not None
    wanted: list[Candidate] = []
    refused: list[Refusal] = []
    for candidate in rank(pool):
        if candidate.protection:
            refused.append(Refusal(candidate.name, candidate.protection))
        else:
            wanted.append(candidate)
    count = max(0, len(pool) - ask.target)
    if count > len(wanted):
        refused.append(
            Refusal(ask.group, f"only {len(wanted)} of {count} node(s) may be chosen automatically")
        )
    room = max(0, MAX_DRAIN_NODES - len(draining))
    if min(count, len(wanted)) > room:
        refused.append(
            Refusal(ask.group, f"at most {MAX_DRAIN_NODES} nodes drain at once; {len(draining)} are")
        )
    if ask.target < asg.min_size:
        refused.append(
            Refusal(ask.group, f"target {ask.target} is below the group's min size {asg.min_size}")
        )
    if count == 0 and ask.target >= asg.desired:
        refused.append(Refusal(ask.group, _nothing_to_do(ask.target, asg, len(pool), len(draining))))
    return wanted[: min(count, room)], refused


def _nothing_to_do(target: int, asg: AsgState, nodes: int, draining: int) -> str:
    """Why a target at or above the group's nodes and desired capacity removes nothing: said in the
    report, as a target above the max size is, rather than an empty report that looks like success."""
    besides = f" besides the {draining} draining" if draining else ""
    return (
        f"nothing to do: target {target} is not below the group's {nodes} node(s){besides} nor its "
        f"desired capacity {asg.desired}; a forced scale-down only removes nodes"
    )
