"""Gangs: which pods must start together, how many of them, and what a group lacks to hold them all.

Markers, first match wins (a pod carries one in practice):
- Kueue plain-pod groups: label `kueue.x-k8s.io/pod-group-name`, size from the annotation
  `kueue.x-k8s.io/pod-group-total-count` (Kueue admits the group only once all its pods exist);
- Volcano: annotation `scheduling.k8s.io/group-name`, size from its PodGroup's `spec.minMember`;
- the coscheduling plugin: label `scheduling.x-k8s.io/pod-group`, size from its PodGroup's
  `spec.minMember` when the PodGroup is listed;
- the configured `policy.gang_label`: the pods present are the gang.

A gang is bought for its full size: members bound already count, members not created yet are
stood in for by copies of a pending member (stand-ins, never reported), so a gang whose pods are
created one by one is not bought a node at a time. A PodGroup's minMember is a minimum: when more
replicas exist, the gang is elastic and needs only that many placed (`minimum_pending`).

Operators are recognised by the markers they set, not by their kinds: mpi-operator (MPIJob) and
the training operator (PyTorchJob) create a coscheduling or Volcano PodGroup; KubeRay and
LeaderWorkerSet, configured for it, annotate their pods for Volcano or label them for Kueue's pod
groups. JobSet sets no marker (kubernetes-sigs/jobset issue 969): its pods are a gang through the
configured `gang_label` (jobset.sigs.k8s.io/jobset-name) or Kueue's ProvisioningRequest check.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from shared.config import PolicyConfig
from shared.domain.keys import namespaced_key
from shared.domain.model import Pod
from shared.domain.provisioning import (
    ANNOTATION_KUEUE_TOTAL_COUNT,
    ANNOTATION_VOLCANO_GROUP,
    LABEL_COSCHEDULING_GROUP,
    LABEL_KUEUE_POD_GROUP,
    PodGroup,
    PodGroupKind,
)
from shared.domain.resources import CPU, MEMORY
from shared.planner.context import Context, GroupView
from shared.planner.packing import Bins, Request

# A stand-in's name holds a character Kubernetes never allows in an object name (a DNS subdomain),
# so a stand-in can never be confused with a real pod.
STAND_IN_SEPARATOR = ":"
MAX_GANG_SIZE = 10_000  # a bound on stand-ins: a malformed total count must not cost unbounded work


# What follows the separator in a stand-in's name: gang members, or a request's pod set's pods.
GANG_MEMBER = "member-"
POD_SET = "podset"


def is_stand_in(pod: Pod) -> bool:
    """A pod the planner made up (a gang member not created yet, a ProvisioningRequest's pod)."""
    return STAND_IN_SEPARATOR in pod.name


def stand_ins(model: Pod, owner: str, kind: str, count: int, start: int = 0) -> list[Pod]:
    """`count` copies of `model` named `<owner>:<kind><i>` (owner: the gang's or request's name),
    pending and unschedulable like a backlog pod."""
    return [
        replace(
            model,
            name=f"{owner}{STAND_IN_SEPARATOR}{kind}{index}",
            uid="",
            node_name=None,
            phase="Pending",
            unschedulable=True,
            nominated_node=None,
        )
        for index in range(start, start + count)
    ]


@dataclass(frozen=True, slots=True)
class GangMark:
    key: str  # namespace/name
    size: int | None  # the gang's full size when declared (minMember, total count), else None
    # A PodGroup's minMember is a minimum, not the count of replicas: coscheduling's Permit lets the
    # pods bind once minMember of them have a node, Volcano's gang plugin once minAvailable are
    # allocated (JobReady), and mpi-operator sets minMember to its workers + launcher. Kueue's
    # total count and the configured label are every member.
    elastic: bool = False
    # Whether a member that Succeeded still counts toward the size: a Kueue pod group's total count
    # is every pod of the workload, and Volcano's gang counts Succeeded tasks as ready (JobInfo
    # ReadyTaskNum); coscheduling counts the pods the scheduler holds, which drops terminated ones.
    counts_finished: bool = False


def minimum_pending(mark: GangMark, bound: int, pending: int) -> int | None:
    """How many of the gang's `pending` members (stand-ins included) must have a place: the
    PodGroup's minimum less the members bound already for an elastic gang, else None (all)."""
    if not mark.elastic or mark.size is None:
        return None
    return min(pending, max(0, mark.size - bound))


class GangIndex:
    """Finds the gang of a pod from its markers and the listed PodGroups."""

    def __init__(self, policy: PolicyConfig, pod_groups: Iterable[PodGroup]) -> None:
        self._label = policy.gang_label
        groups = tuple(pod_groups)
        self._min_member = {(g.kind, g.key): g.min_member for g in groups}
        # Volcano gangs' finished members, as their PodGroup counts them (see bound_members).
        self.succeeded: dict[str, int] = {
            g.key: g.succeeded for g in groups if g.kind is PodGroupKind.VOLCANO and g.succeeded
        }

    def mark(self, pod: Pod) -> GangMark | None:
        """The pod's gang, or None."""
        labels, annotations = pod.labels, pod.annotations
        name = labels.get(LABEL_KUEUE_POD_GROUP)
        if name:
            key = namespaced_key(pod.namespace, name)
            return GangMark(key, _count(annotations.get(ANNOTATION_KUEUE_TOTAL_COUNT)), counts_finished=True)
        name = annotations.get(ANNOTATION_VOLCANO_GROUP)
        if name:
            key = namespaced_key(pod.namespace, name)
            size = self._min_member.get((PodGroupKind.VOLCANO, key))
            return GangMark(key, size, elastic=True, counts_finished=True)
        name = labels.get(LABEL_COSCHEDULING_GROUP)
        if name:
            key = namespaced_key(pod.namespace, name)
            return GangMark(key, self._min_member.get((PodGroupKind.COSCHEDULING, key)), elastic=True)
        name = labels.get(self._label) if self._label else None
        return GangMark(namespaced_key(pod.namespace, name), None) if name else None


def _count(raw: str | None) -> int | None:
    try:
        value = int(raw) if raw is not None else None
    except ValueError:
        return None
    return value if value is not None and 0 < value <= MAX_GANG_SIZE else None


def bound_members(ctx: Context, index: GangIndex, nominated: Iterable[Pod] = ()) -> dict[str, int]:
    """How many members of each gang need no new room (they count toward its size, and no stand-in
    is made for them): bound to a node, Succeeded where the gang counts finished members, or
    `nominated` by preemption to a node the scheduler is freeing for them."""
    counts: dict[str, int] = {}
    finished: dict[str, int] = {}  # Succeeded members listed, by gang
    for pod in ctx.snapshot.pods:
        if not pod.node_name or pod.phase == "Failed" or not (pod.labels or pod.annotations):
            continue  # a Failed member is replaced by a new pod, which is the member
        mark = index.mark(pod)
        if mark is not None and (pod.phase != "Succeeded" or mark.counts_finished):
            counts[mark.key] = counts.get(mark.key, 0) + 1
            if pod.phase == "Succeeded":
                finished[mark.key] = finished.get(mark.key, 0) + 1
    # A live read lists active pods only (Kueue's finished members are listed apart: the reads'
    # list_pods); a Volcano PodGroup's status counts its finished members, a dump lists them too.
    for key, succeeded in index.succeeded.items():
        listed = finished.get(key, 0)
        if succeeded > listed:
            counts[key] = counts.get(key, 0) + succeeded - listed
    for pod in nominated:
        mark = index.mark(pod)
        if mark is not None:
            counts[mark.key] = counts.get(mark.key, 0) + 1
    return counts


def largest_first(pods: list[Pod]) -> list[Pod]:
    """Largest member first, as First Fit Decreasing places pods (a replan packs the same way)."""
    return sorted(
        pods, key=lambda p: (-p.requests.gpus, -p.requests.get(CPU), -p.requests.get(MEMORY), p.key)
    )


def full_gang(members: list[Pod], size: int | None, bound: int, gang: str = "") -> list[Pod]:
    """The pending members plus stand-ins for those not created yet (named after the gang
    `namespace/name`), largest first."""
    ordered = largest_first(members)
    missing = (size or 0) - bound - len(members)
    if missing > 0:
        model = ordered[0]
        owner = gang.partition("/")[2] or model.name
        ordered += stand_ins(model, owner, GANG_MEMBER, missing, len(members))
    return ordered


def pending_subject(key: str) -> str:
    """How reasons name a pending pod: a stand-in by the gang or request it stands in for, never by
    its made-up name."""
    namespace, _, name = key.partition("/")
    owner, separator, part = name.partition(STAND_IN_SEPARATOR)
    if not separator:
        return f"pod {key}"
    if part.startswith(GANG_MEMBER):
        return f"gang {namespace}/{owner} (a member not created yet)"
    return f"provisioning request {namespace}/{owner}"


def gang_summary(gang: str, members: Iterable[str]) -> str:
    """A gang some new nodes are bought for, e.g. "gang research/llm (4 pods, 2 not created yet)"."""
    keys = list(members)
    missing = sum(1 for key in keys if STAND_IN_SEPARATOR in key.partition("/")[2])
    not_created = f", {missing} not created yet" if missing else ""
    return f"gang {gang} ({len(keys)} pods{not_created})"


def nodes_needed(ctx: Context, view: GroupView, requests: Iterable[Request]) -> int | None:
    """New nodes of the group the requests take, First Fit Decreasing into empty nodes (None when
    one of them does not fit an empty node at all)."""
    free = view.template.free
    if free is None:
        return None
    shape = tuple(ctx.vector(free))
    bins = Bins([], [], shape, max_new=MAX_GANG_SIZE)
    for request in requests:
        if bins.place(request) is None:
            return None
    return bins.opened


def gang_shortfall(ctx: Context, view: GroupView, requests: list[Request]) -> str:
    """What the group lacks for a whole gang that could start in it at its max size (one that never
    could says so: shared.planner.scale_up.at_max): "needs 4 a100 nodes, group can add 3 (max 16)"."""
    needed = nodes_needed(ctx, view, requests)
    can_add = max(0, view.max_size - view.current_desired)
    if needed is None:
        return f"a member does not fit an empty {view.name} node"
    nodes = f"{needed} {view.name} node{'s' if needed != 1 else ''}"
    if needed <= can_add:  # room enough by requests: the members' own rules keep them apart
        return (
            f"its members' own rules (anti-affinity, host ports, spread, devices) need more {view.name}"
            f" nodes than the group can add ({can_add}, max {view.max_size})"
        )
    return f"needs {nodes}, group can add {can_add} (max {view.max_size})"
