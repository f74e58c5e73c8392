"""The scheduler is the ground truth: what the planner counted and the scheduler did not do is a
model error, and a model error may cost one node once, never a node per run.

- A fit the planner has counted for a pending pod on the same registered node for longer than the
  scheduler's retry period (kube-scheduler re-queues unschedulable pods at least every 5 minutes,
  and at once on node and pod events) is refuted: that node is no longer counted for that pod and
  no longer kept busy by it.
- When capacity bought for a pod (a node of a group the scaler grew for it, created after the
  scale-up) has been usable for the retry period and the scheduler still refuses the pod there,
  the group is refused for the pod for a TTL: not bought again, and none of its nodes created since
  the purchase is counted for the pod (so it cannot take the room bought for another pod, which
  would then be bought again). "Refuses" is either a refuted fit on that node, or the node, even
  with nothing but its DaemonSets, cannot hold the pod by what it really advertises (the template
  promised more than the node has).
Memory is per pending pod (by key, checked against its uid) and forgotten once the pod is gone.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.domain.model import Node, Pod, PodMemory
from shared.domain.plan import ModelError


@dataclass
class Recall:
    """What the memory says before this run's placement."""

    memory: dict[str, PodMemory] = field(default_factory=dict)  # pending pods' memory, errors applied
    distrusted: dict[str, frozenset[str]] = field(default_factory=dict)  # pod -> nodes not to count
    refused: dict[str, frozenset[str]] = field(default_factory=dict)  # pod -> groups not to grow
    errors: list[ModelError] = field(default_factory=list)


def recall(pending: list[Pod], stored: Mapping[str, PodMemory], verdicts: Verdicts) -> Recall:
    """Apply the scheduler's verdicts (over this run's nodes) to the stored memory of the pending pods."""
    out = Recall()
    nodes, now = verdicts.nodes, verdicts.now
    for pod in pending:
        memory = stored.get(pod.key)
        if memory is None or (memory.uid and pod.uid and memory.uid != pod.uid):
            continue
        distrusted = {n for n in memory.distrusted if n in nodes}
        refused = {g: until for g, until in memory.refused.items() if until > now}
        counted = memory.counted_on
        if (
            counted
            and counted in nodes
            and memory.counted_since
            and now - memory.counted_since >= verdicts.retry
        ):
            distrusted.add(counted)
            out.errors.append(ModelError(pod.key, counted, memory.counted_since, pod.scheduler_message))
            verdicts.refute(memory, counted, refused)
            counted = ""
        verdicts.refuse_bought(pod, memory, refused)
        out.memory[pod.key] = memory.recalled(
            pod.uid or memory.uid,
            counted,
            memory.counted_since if counted else None,
            tuple(sorted(distrusted)),
            refused,
        )
        room = verdicts.refused_room(memory, refused)
        if distrusted or room:
            out.distrusted[pod.key] = frozenset(distrusted | room)
        if refused:
            out.refused[pod.key] = frozenset(refused)
    return out


class Verdicts:
    """The scheduler's verdicts on capacity bought for pods, over one run's nodes.

    `holds(pod, node)`: whether the node, running only its DaemonSet and mirror pods, can hold the
    pod by the scheduler's filters on what it advertises.
    """

    def __init__(
        self,
        nodes: Mapping[str, Node],
        group_of_node: Mapping[str, str],
        now: datetime,
        retry_seconds: int,
        refusal_ttl_seconds: int,
        holds: Callable[[Pod, Node], bool],
    ) -> None:
        self.nodes = nodes
        self._group_of_node = group_of_node
        self.now = now
        self.retry = timedelta(seconds=retry_seconds)
        self._until = now + timedelta(seconds=refusal_ttl_seconds)
        self._holds = holds
        self._in_group: dict[str, _ByCreation] = {}

    def _members(self, group: str) -> _ByCreation:
        members = self._in_group.get(group)
        if members is None:  # each group's nodes listed once per run, not once per pending pod
            nodes = self.nodes
            members = self._in_group[group] = _ByCreation.of(
                [nodes[name] for name, g in self._group_of_node.items() if g == group]
            )
        return members

    def refute(self, memory: PodMemory, node: str, refused: dict[str, datetime]) -> None:
        """A fit counted on `node` was refuted: its group is refused if the node was bought for the pod."""
        group = self._group_of_node.get(node)
        bought = memory.bought.get(group) if group else None
        created = self.nodes[node].created_at
        if group and bought is not None and created is not None and created >= bought:
            refused[group] = self._until

    def refuse_bought(self, pod: Pod, memory: PodMemory, refused: dict[str, datetime]) -> None:
        """Groups whose nodes bought for the pod are usable and none can hold it are refused."""
        for group, since in memory.bought.items():
            if group not in refused and self._none_holds(pod, self._members(group).since(since)):
                refused[group] = self._until

    def _none_holds(self, pod: Pod, bought: list[Node]) -> bool:
        """Some of the nodes is usable and no usable one can hold the pod. Read up to the first that
        can (`holds` is pure): an old pod's purchase is followed by every node bought since."""
        usable = False
        for node in bought:
            if _usable_since(node, self.now, self.retry):
                if self._holds(pod, node):
                    return False
                usable = True
        return usable

    def refused_room(self, memory: PodMemory, refused: Mapping[str, datetime]) -> set[str]:
        """While a group is refused, none of its nodes created since the purchase is counted for the
        pod either: they are the capacity the scheduler refused it on, and counted, one would take
        the room bought for another pod, which would then be bought again (a buy per run).
        Run-level only: the memory keeps the refuted nodes alone, and the TTL ends this as well."""
        return {
            n.name
            for group in refused
            if group in memory.bought
            for n in self._members(group).since(memory.bought[group])
        }


class _ByCreation:
    """A group's nodes in creation order (those without a creation time left out: never bought), so
    the ones created since a scale-up are a suffix, found by bisection: every pending pod with a
    purchase asks, and a group may have hundreds of nodes."""

    def __init__(self, nodes: list[Node], created: list[datetime]) -> None:
        self._nodes = nodes
        self._created = created

    @classmethod
    def of(cls, nodes: list[Node]) -> _ByCreation:
        dated = sorted(
            ((n.created_at, n.name, n) for n in nodes if n.created_at is not None), key=lambda t: t[:2]
        )
        return cls([n for _, _, n in dated], [at for at, _, _ in dated])

    def since(self, at: datetime) -> list[Node]:
        """The nodes created at or after `at`."""
        return self._nodes[bisect_left(self._created, at) :]


def _usable_since(node: Node, now: datetime, retry: timedelta) -> bool:
    """Ready (and schedulable) for at least the scheduler's retry period."""
    since = node.ready_changed_at or node.created_at
    return node.ready and not node.unschedulable and since is not None and now - since >= retry


def remember(
    pending: list[Pod],
    recalled: Recall,
    counted_on: Mapping[str, str],
    scaled_up_in: Mapping[str, str],
    now: datetime,
) -> dict[str, PodMemory]:
    """The memory to store after this run: where each pending pod is counted, what was bought."""
    out: dict[str, PodMemory] = {}
    for pod in pending:
        key = pod.key  # built on every read: once per pod here
        memory = recalled.memory.get(key)
        if memory is None:
            memory = PodMemory(uid=pod.uid)
        node = counted_on.get(key, "")
        bought = dict(memory.bought)
        group = scaled_up_in.get(key)
        if group and group not in bought:
            bought[group] = now
        if not (node or memory.distrusted or bought or memory.refused):
            continue  # nothing to remember of this pod: no memory to build
        since = memory.counted_since if node and node == memory.counted_on else (now if node else None)
        out[key] = memory.counted(node, since, bought)
    return dict(sorted(out.items()))
