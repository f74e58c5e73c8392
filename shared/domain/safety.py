"""The safety rules of scale-down and capacity, each written once (pure; no I/O, `now` passed in).

Callers: the planner (scale_down), the re-validation before every destructive write (controller), the
forced scale-down's choice of nodes, the DynamoDB state store and the in-memory fake (backoff), the
simulator and the demo. A rule written twice drifts; these are the only copies.

- `busy_pods`: the pods that keep a node busy (`Pod.keeps_node_busy`: live, neither DaemonSet nor
  mirror pod, not below the priority cutoff, not stuck terminating).
- `protection`: why a node must not be scaled down automatically (annotation, do-not-disrupt node or
  pod, instance scale-in protection the operator set: `scale_in_protection`).
- `termination_blocker` / `cordon_blocker`: why a planned termination or cordon must not happen now,
  judged on fresh reads (`recovered`: a repair's health evidence no longer on the node).
- `desired_to_set`: the desired capacity to set for a target, never below the live instances
  (`desired_after`: the desired the group then has, as the plan reports it).
- `next_backoff`: exponential capacity backoff with its cap and its reset boundary.
- `overdrawn_budget`: the PodDisruptionBudget that evicting a move's pods one after another would run
  dry (`draws_on`: which evictions a budget judges), asked before a migration evicts anything; the
  in-memory fake's Eviction API draws on budgets by the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Protocol

from shared.domain.model import AsgState, DisruptionBudget, Node, Pod
from shared.domain.plan import HealthEvidence, Termination

# 2**32 x the initial backoff is far past any cap; bounding the exponent keeps the arithmetic small.
_MAX_DOUBLINGS = 32


def busy_pods(pods: Iterable[Pod], priority_cutoff: int | None, now: datetime) -> list[Pod]:
    """The pods that keep their node busy, by key. `priority_cutoff`: the policy's pod_priority_cutoff."""
    return sorted((p for p in pods if p.keeps_node_busy(priority_cutoff, now)), key=lambda p: p.key)


def scale_in_protection(
    instance_id: str | None, group: AsgState | None, *, force: bool = False
) -> str | None:
    """Why the operator's word on the instance forbids removing it (None: it does not).

    TerminateInstanceInAutoScalingGroup does not honour instance scale-in protection (it only stops
    the group's own scale-in: Auto Scaling user guide, "Use instance scale-in protection"), so the
    scaler honours it itself. Only protection the operator set on that instance counts: when the
    group protects every new instance (NewInstancesProtectedFromScaleIn), protection is the group's
    default and says nothing about one node, and scale-down goes on as for an unprotected group.
    `force`: the forced scale-down payload's `force`, the operator overriding their own word.
    """
    if force or group is None or instance_id is None or group.new_instances_protected:
        return None
    if instance_id in group.protected_instance_ids:
        return f"instance {instance_id} is protected from scale-in"
    return None


def protection(node: Node, pods: Iterable[Pod], group: AsgState | None, *, force: bool = False) -> str | None:
    """Why `node` must not be scaled down automatically (None: it may be).

    Protected: the scale-down-disabled annotation (ours or cluster-autoscaler's) on the node;
    karpenter.sh/do-not-disrupt on the node (Karpenter's node-level opt-out of voluntary disruption)
    or on a pod on it; scale-in protection the operator set on its instance in `group`
    (`scale_in_protection`; `force` waives only that one).
    """
    if node.scale_down_disabled:
        return "scale-down disabled by annotation"
    if node.do_not_disrupt:
        return "annotated karpenter.sh/do-not-disrupt"
    for pod in pods:  # a loop, not any(): asked of every node of every run; most pods carry no annotation
        if pod.annotations and pod.do_not_disrupt:
            return "runs a pod annotated karpenter.sh/do-not-disrupt"
    return scale_in_protection(node.instance_id, group, force=force)


def termination_blocker(
    termination: Termination,
    priority_cutoff: int | None,
    now: datetime,
    group: AsgState | None,
    node: Node | None,
    pods: Sequence[Pod],
) -> str | None:
    """Why a planned termination must not happen now (None: go ahead), from fresh reads."""
    if node is None:
        return "the node is gone"
    if node.instance_id != termination.instance_id:
        return f"the node now belongs to instance {node.instance_id}"
    busy = busy_pods(pods, priority_cutoff, now)
    if busy:
        return f"it now runs {busy[0].key}"
    protected = protection(node, pods, group)
    if protected:
        return protected
    if termination.cause:
        # Repair and rotation replace a node for what it is (broken, outdated), not because it is
        # idle-cordoned or NotReady: emptiness, protection and (repair) the health evidence still
        # standing are what the fresh read decides.
        return recovered(termination.evidence, node)
    if termination.decrement and not node.cordoned_by_scaler:
        return "it is no longer cordoned by the scaler"
    if not termination.decrement and node.ready:
        return "it became Ready"
    return None


def recovered(evidence: HealthEvidence, node: Node) -> str | None:
    """Why a repair termination must not happen: the fresh node shows none of the evidence it was
    planned on any more (None: some of it still stands, or there was none on the Node to re-check).

    One standing signal is enough: the planner judged the node past its toleration, and a node with
    some of its faults cleared is still broken. A condition that flapped (False, True, False again)
    still stands here; its new lastTransitionTime restarts the toleration at the next plan."""
    if not evidence:
        return None
    statuses = {c.type: c.status for c in node.conditions}
    if any(statuses.get(kind) == status for kind, status in evidence.conditions):
        return None
    if evidence.lost_devices and node.lost_devices:
        return None
    now = [f"{kind}={statuses.get(kind, 'absent')}" for kind, _ in evidence.conditions]
    if evidence.lost_devices:
        now.append("its devices allocatable again")
    return f"it recovered since the plan: {', '.join(now)}"


def cordon_blocker(
    priority_cutoff: int | None, now: datetime, group: AsgState | None, node: Node | None, pods: Sequence[Pod]
) -> str | None:
    """Why a planned cordon must not happen now (None: go ahead), from fresh reads."""
    if node is None:
        return "the node is gone"
    if node.unschedulable:
        return "it is already cordoned"
    busy = busy_pods(pods, priority_cutoff, now)
    if busy:
        return f"it now runs {busy[0].key}"
    return protection(node, pods, group)


# Evicting a pod in these phases, or one being deleted, deletes it without asking any budget
# (pkg/registry/core/pod/storage/eviction.go, canIgnorePDB).
_PHASES_NO_BUDGET_JUDGES = ("Pending", "Succeeded", "Failed")


def draws_on(budget: DisruptionBudget, pod: Pod) -> bool:
    """Whether evicting `pod` uses one of `budget`'s disruptions, as the Eviction API decides it
    (eviction.go): the budget is of the pod's namespace, its selector matches the pod's labels (a null
    selector no pod, the empty one every pod), and the pod is running, not being deleted.

    A running pod that is not Ready may be evicted without using one (a budget whose
    unhealthyPodEvictionPolicy is AlwaysAllow, or whose currentHealthy is at least desiredHealthy);
    readiness is not read here, so it counts: a move may be called off that would have passed, never
    one let through that splits.
    """
    return (
        budget.selector is not None
        and pod.namespace == budget.namespace
        and pod.phase not in _PHASES_NO_BUDGET_JUDGES
        and pod.deleted_at is None
        and budget.selector.matches(pod.labels)
    )


def overdrawn_budget(pods: Iterable[Pod], budgets: Iterable[DisruptionBudget]) -> str | None:
    """Why evicting every one of `pods`, one after another, would run a PodDisruptionBudget dry on the
    way (None: each budget allows at least as many disruptions as `pods` draw on it).

    Each eviction a budget judges needs status.disruptionsAllowed above 0 and uses one (eviction.go,
    checkAndDecrement), but a dry run (dryRun=All) uses none: the dry runs of a move's pods each pass
    against the same count, and the real evictions would stop at the first the budget no longer allows,
    the pods before it evicted. The first such budget by namespace and name is named.
    """
    moved = tuple(pods)
    for budget in sorted(budgets, key=lambda b: (b.namespace, b.name)):
        drawn = sorted(p.key for p in moved if draws_on(budget, p))
        if drawn and len(drawn) > budget.disruptions_allowed:
            allowed = budget.disruptions_allowed
            return (
                f"PodDisruptionBudget {budget.key} allows {allowed} disruption{'' if allowed == 1 else 's'}"
                f" now and the move would evict {len(drawn)} of its pods ({', '.join(drawn)})"
            )
    return None


def removable_above_min(count: int, min_size: int) -> int:
    """How many of `count` may go without taking the group below its min size (never negative).

    `count` is what the caller holds the group to be: its desired capacity (less decrements already
    planned), its registered nodes, or its live instances; the rule is the same for each.
    """
    return max(0, count - min_size)


def desired_to_set(target: int, asg: AsgState) -> int | None:
    """The desired capacity to set for `target` on the group as it is now, or None to leave it.

    Raised freely (within min/max); lowered only to cancel launches that have not happened, and
    never below the live instances: SetDesiredCapacity below them lets the ASG terminate instances
    of its own choice, possibly busy ones.
    """
    target = max(asg.min_size, min(target, asg.max_size))
    if target > asg.desired:
        return target
    live = len(asg.live_instances)
    if target < asg.desired and asg.desired > live:
        lowered = max(target, live, asg.min_size)
        return lowered if lowered < asg.desired else None
    return None


def desired_after(target: int, asg: AsgState) -> int:
    """The desired capacity the group has once `target` is asked for: `desired_to_set`'s answer, or
    the desired it has when that leaves it (what a plan reports is what the controller sets)."""
    found = desired_to_set(target, asg)
    return asg.desired if found is None else found


class BackoffPolicy(Protocol):
    """The three settings the backoff reads (the config's PolicyConfig has them): the domain names
    what it needs instead of importing the config above it."""

    @property
    def backoff_initial_seconds(self) -> int: ...

    @property
    def backoff_max_seconds(self) -> int: ...

    @property
    def backoff_reset_seconds(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """The capacity backoff of one group: failures in the current episode, the last one, its end."""

    failures: int = 0
    last_failure: datetime | None = None
    until: datetime | None = None


def backoff_seconds(failures: int, policy: BackoffPolicy) -> int:
    """The backoff after the `failures`-th failure in a row: initial, doubling, capped at the max."""
    doublings = min(max(failures, 1) - 1, _MAX_DOUBLINGS)
    return min(policy.backoff_initial_seconds * 2**doublings, policy.backoff_max_seconds)


def next_backoff(previous: Backoff, at: datetime, policy: BackoffPolicy) -> Backoff:
    """The backoff after a capacity failure at `at`.

    A failure at or before the last one counted is the same failure (a retry, a late event): the
    previous backoff is returned with the same `last_failure` (callers store nothing then). A
    failure within `backoff_reset_seconds` of the last one doubles the backoff; a later one starts
    again at the initial value. The boundary is cluster-autoscaler's: its backoff data is dropped
    only once lastFailedExecution + backoffResetTimeout is before now, so a failure exactly at the
    reset boundary still doubles (cluster-autoscaler/utils/backoff/exponential_backoff.go).
    """
    if previous.last_failure is not None and at <= previous.last_failure:
        until = previous.until or at + timedelta(seconds=backoff_seconds(1, policy))
        return replace(previous, until=until)
    reset = timedelta(seconds=policy.backoff_reset_seconds)
    recent = previous.last_failure is not None and at - previous.last_failure <= reset
    failures = previous.failures + 1 if recent else 1
    return Backoff(failures, at, at + timedelta(seconds=backoff_seconds(failures, policy)))


def is_counted(previous: Backoff, at: datetime) -> bool:
    """Whether a failure at `at` was already counted in `previous` (see `next_backoff`)."""
    return previous.last_failure is not None and at <= previous.last_failure
