"""In-memory fakes of the ports: they keep real state, record every call and inject errors.

In the style of Karpenter's fake cloud provider: each fake behaves like the real thing for the
controller's purposes (a cordon marks the node, a termination with decrement lowers desired, a lease
is exclusive), records `calls`, and takes faults:

    fleet.fail_next("describe_groups", FleetReadError("throttled"))          # raise instead of acting
    cluster.fail_after_next("cordon", RuntimeError("crash"))                 # act, then raise
    cluster.before("get_node", lambda name: cluster.add_pod(pod(..., node=name)))  # race a change in

Pods and nodes are stored as Kubernetes JSON (build them with tests.builders) and parsed with the
real parsers on every read, so the controller sees exactly what the adapter would give it. DaemonSets,
PVCs, PVs and StorageClasses may be given as JSON (parsed the same way) or as domain objects.
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from shared.adapters.kubernetes.cluster import taints_with, taints_without
from shared.adapters.kubernetes.writes import TaintEdit, edited_taints
from shared.config import PolicyConfig
from shared.constants import PROVISIONING_API_GROUP
from shared.domain.checkpoint import MIGRATION_WINDOW, remember_moves
from shared.domain.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from shared.domain.errors import (
    ActionError,
    ClusterActionError,
    ConflictError,
    EvictionBlockedError,
    FleetActionError,
    LeaseHeldError,
    NotFoundError,
)
from shared.domain.model import (
    ANNOTATION_CORDONED_AT,
    AsgInstance,
    AsgState,
    DaemonSet,
    DisruptionBudget,
    GroupState,
    InstanceStatus,
    InstanceType,
    LaunchTemplateVersions,
    Node,
    NodeState,
    Pod,
    PodMemory,
    Taint,
)
from shared.domain.model import ScalerState as ScalerStateModel
from shared.domain.operations import ClusterEvent, DrainIntent, Lease, ScalingFailure
from shared.domain.provisioning import (
    COSCHEDULING_API_GROUP,
    VOLCANO_API_GROUP,
    ConditionUpdate,
    PodGroup,
    PodTemplate,
    ProvisioningRequest,
)
from shared.domain.resources import Resources
from shared.domain.safety import Backoff, draws_on, is_counted, next_backoff
from shared.domain.volumes import PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.formats.aws import asg_from_json
from shared.formats.dra import (
    device_class_from_json,
    resource_claim_from_json,
    resource_claim_template_from_json,
    resource_slice_from_json,
)
from shared.formats.kubernetes import (
    condition_to_json,
    daemonset_from_json,
    node_from_json,
    pod_disruption_budget_from_json,
    pod_from_json,
    pod_group_from_json,
    pod_template_from_json,
    provisioning_request_from_json,
    pv_from_json,
    pvc_from_json,
    storage_class_from_json,
)
from shared.reporting import ActionRecord, LogLevel, MetricUnit

Json = dict[str, Any]


_sequence = itertools.count()


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    sequence: int = field(default_factory=lambda: next(_sequence))  # order across every fake


@dataclass
class _Fault:
    error: BaseException
    times: int | None  # None: every call
    after: bool  # act first, then raise (the response was lost, or the process died)


class Faults:
    """Recorded calls, injected errors and before-hooks, shared by every fake."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self._faults: dict[str, list[_Fault]] = {}
        self._hooks: dict[str, list[Callable[..., object]]] = {}
        self._lock = threading.RLock()

    def fail_next(self, method: str, error: BaseException, *, times: int | None = 1) -> None:
        """The next `times` calls of `method` raise `error` without acting (None: every call)."""
        self._faults.setdefault(method, []).append(_Fault(error, times, after=False))

    def fail_after_next(self, method: str, error: BaseException, *, times: int | None = 1) -> None:
        """The next calls of `method` act, then raise `error` (a lost response or a crash)."""
        self._faults.setdefault(method, []).append(_Fault(error, times, after=True))

    def before(self, method: str, hook: Callable[..., object]) -> None:
        """Run `hook(*args)` before each call of `method` (e.g. to race a change in)."""
        self._hooks.setdefault(method, []).append(hook)

    def clear_faults(self) -> None:
        self._faults.clear()
        self._hooks.clear()

    def calls_of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def _enter(self, method: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> _Fault | None:
        with self._lock:
            self.calls.append(Call(method, args, dict(kwargs)))
            hooks = list(self._hooks.get(method, ()))
        for hook in hooks:
            hook(*args)
        with self._lock:
            queue = self._faults.get(method)
            if not queue:
                return None
            fault = queue[0]
            if fault.times is not None:
                fault.times -= 1
                if fault.times <= 0:
                    queue.pop(0)
        if not fault.after:
            raise fault.error
        return fault

    @staticmethod
    def _exit(fault: _Fault | None) -> None:
        if fault is not None:
            raise fault.error


def _recorded(method: Callable[..., Any]) -> Callable[..., Any]:
    """Record the call, apply faults and hooks around a fake's method."""

    def wrapper(self: Faults, *args: Any, **kwargs: Any) -> Any:
        fault = self._enter(method.__name__, args, kwargs)
        result = method(self, *args, **kwargs)
        self._exit(fault)
        return result

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_DRA_PARSERS: dict[str, Callable[[Json], Any]] = {
    "ResourceSlice": resource_slice_from_json,
    "DeviceClass": device_class_from_json,
    "ResourceClaim": resource_claim_from_json,
    "ResourceClaimTemplate": resource_claim_template_from_json,
}


def _json_key(obj: Json, *, namespaced: bool) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}" if namespaced else meta["name"]


class FakeCluster(Faults):
    """The Kubernetes API in memory: pods and nodes as JSON, cordons, evictions, PDB blocks, events,
    and the objects the scheduler's filters read (DaemonSets, PVCs, PVs, StorageClasses, namespaces).

    Evictions honour PodDisruptionBudgets (`add_pdb`) as the API server does: one that a budget draws
    on (`shared.domain.safety.draws_on`) needs its status.disruptionsAllowed above 0 and uses one, a
    dry run (`can_evict`) uses none, and a pod under two budgets cannot be evicted."""

    def __init__(self, pods: Iterable[Json] = (), nodes: Iterable[Json] = ()) -> None:
        super().__init__()
        self.pods: dict[str, Json] = {}
        self.nodes: dict[str, Json] = {}
        self.daemonsets: dict[str, Json | DaemonSet] = {}  # by namespace/name
        self.pvcs: dict[str, Json | PersistentVolumeClaim] = {}  # by namespace/name
        self.pvs: dict[str, Json | PersistentVolume] = {}  # by name
        self.storage_classes: dict[str, Json | StorageClass] = {}  # by name
        self.namespaces: dict[str, dict[str, str]] = {}  # name -> labels
        self.pdbs: dict[str, Json] = {}  # PodDisruptionBudgets by namespace/name
        self.events: list[ClusterEvent] = []
        self.evicted: list[str] = []
        self.deleted_pods: list[str] = []
        self._blocked: dict[str, int | None] = {}  # pod key -> evictions still refused (None: always)
        self._version = 0
        # Custom resources and PodTemplates as JSON, by (API group, namespace/name).
        self.custom: dict[tuple[str, str], Json] = {}
        self.pod_templates: dict[str, Json] = {}
        # resource.k8s.io/v1 objects as JSON, by kind, then (namespace/)name.
        self.dra: dict[str, dict[str, Json]] = {kind: {} for kind in _DRA_PARSERS}
        self.config_maps: dict[str, dict[str, str]] = {}  # namespace/name -> data
        for obj in pods:
            self.add_pod(obj)
        for obj in nodes:
            self.add_node(obj)

    # Test set-up

    def add_pod(self, obj: Json) -> None:
        with self._lock:
            meta = obj["metadata"]
            self.pods[f"{meta.get('namespace', 'default')}/{meta['name']}"] = copy.deepcopy(obj)

    def add_node(self, obj: Json) -> None:
        with self._lock:
            self.nodes[obj["metadata"]["name"]] = copy.deepcopy(obj)
            self._touch(self.nodes[obj["metadata"]["name"]])

    def add_daemonset(self, obj: Json | DaemonSet) -> None:
        with self._lock:
            key = obj.key if isinstance(obj, DaemonSet) else _json_key(obj, namespaced=True)
            self.daemonsets[key] = copy.deepcopy(obj) if isinstance(obj, dict) else obj

    def add_pvc(self, obj: Json | PersistentVolumeClaim) -> None:
        with self._lock:
            key = obj.key if isinstance(obj, PersistentVolumeClaim) else _json_key(obj, namespaced=True)
            self.pvcs[key] = copy.deepcopy(obj) if isinstance(obj, dict) else obj

    def add_pv(self, obj: Json | PersistentVolume) -> None:
        with self._lock:
            key = obj.name if isinstance(obj, PersistentVolume) else _json_key(obj, namespaced=False)
            self.pvs[key] = copy.deepcopy(obj) if isinstance(obj, dict) else obj

    def add_storage_class(self, obj: Json | StorageClass) -> None:
        with self._lock:
            key = obj.name if isinstance(obj, StorageClass) else _json_key(obj, namespaced=False)
            self.storage_classes[key] = copy.deepcopy(obj) if isinstance(obj, dict) else obj

    def add_dra_object(self, obj: Json) -> None:
        """A ResourceSlice, DeviceClass, ResourceClaim or ResourceClaimTemplate."""
        kind = obj["kind"]
        with self._lock:
            key = _json_key(obj, namespaced=kind in ("ResourceClaim", "ResourceClaimTemplate"))
            self.dra[kind][key] = copy.deepcopy(obj)

    def add_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        """A namespace, labelled kubernetes.io/metadata.name as the API server does."""
        with self._lock:
            self.namespaces[name] = {**(labels or {}), "kubernetes.io/metadata.name": name}

    def add_pdb(self, obj: Json) -> None:
        """A policy/v1 PodDisruptionBudget as JSON, with the status.disruptionsAllowed to start from."""
        with self._lock:
            self.pdbs[_json_key(obj, namespaced=True)] = copy.deepcopy(obj)

    def add_custom(self, obj: Json) -> None:
        """A ProvisioningRequest or PodGroup (JSON, by its apiVersion's group)."""
        with self._lock:
            group = str(obj["apiVersion"]).partition("/")[0]
            stored = copy.deepcopy(obj)
            stored["metadata"].setdefault("generation", 1)
            self.custom[(group, _json_key(obj, namespaced=True))] = stored

    def add_pod_template(self, obj: Json) -> None:
        with self._lock:
            self.pod_templates[_json_key(obj, namespaced=True)] = copy.deepcopy(obj)

    def provisioning_request(self, key: str) -> Json:
        return self.custom[(PROVISIONING_API_GROUP, key)]

    def remove_pod(self, key: str) -> None:
        with self._lock:
            self.pods.pop(key, None)

    def block_evictions(self, pod_key: str, times: int | None = None) -> None:
        """A PodDisruptionBudget refuses to evict `pod_key` (the next `times` attempts; None: always)."""
        self._blocked[pod_key] = times

    def unblock_evictions(self, pod_key: str) -> None:
        self._blocked.pop(pod_key, None)

    def node_obj(self, name: str) -> Json:
        return self.nodes[name]

    def is_cordoned(self, name: str) -> bool:
        return bool(self.nodes[name]["spec"].get("unschedulable"))

    def _touch(self, obj: Json) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    # Reads

    @_recorded
    def list_pods(self) -> tuple[Pod, ...]:
        with self._lock:
            items = [copy.deepcopy(p) for p in self.pods.values()]
        return tuple(
            pod_from_json(p) for p in items if p["status"].get("phase") not in ("Succeeded", "Failed")
        )

    @_recorded
    def list_nodes(self) -> tuple[Node, ...]:
        return self._listed(self.nodes, node_from_json)

    @_recorded
    def list_daemonsets(self) -> tuple[DaemonSet, ...]:
        return self._listed(self.daemonsets, daemonset_from_json)

    @_recorded
    def list_persistent_volume_claims(self) -> tuple[PersistentVolumeClaim, ...]:
        return self._listed(self.pvcs, pvc_from_json)

    @_recorded
    def list_persistent_volumes(self) -> tuple[PersistentVolume, ...]:
        return self._listed(self.pvs, pv_from_json)

    @_recorded
    def list_storage_classes(self) -> tuple[StorageClass, ...]:
        return self._listed(self.storage_classes, storage_class_from_json)

    @_recorded
    def list_namespaces(self) -> Mapping[str, Mapping[str, str]]:
        with self._lock:
            return {name: dict(labels) for name, labels in self.namespaces.items()}

    @_recorded
    def list_pod_disruption_budgets(self) -> tuple[DisruptionBudget, ...]:
        return self._listed(self.pdbs, pod_disruption_budget_from_json)

    @_recorded
    def list_provisioning_requests(self) -> tuple[ProvisioningRequest, ...]:
        return self._custom_objects((PROVISIONING_API_GROUP,), provisioning_request_from_json)

    @_recorded
    def list_pod_templates(self) -> tuple[PodTemplate, ...]:
        return self._listed(self.pod_templates, pod_template_from_json)

    @_recorded
    def list_resource_slices(self) -> tuple[ResourceSlice, ...]:
        return self._listed(self.dra["ResourceSlice"], _DRA_PARSERS["ResourceSlice"])

    @_recorded
    def list_device_classes(self) -> tuple[DeviceClass, ...]:
        return self._listed(self.dra["DeviceClass"], _DRA_PARSERS["DeviceClass"])

    @_recorded
    def list_resource_claims(self) -> tuple[ResourceClaim, ...]:
        return self._listed(self.dra["ResourceClaim"], _DRA_PARSERS["ResourceClaim"])

    @_recorded
    def list_resource_claim_templates(self) -> tuple[ResourceClaimTemplate, ...]:
        return self._listed(self.dra["ResourceClaimTemplate"], _DRA_PARSERS["ResourceClaimTemplate"])

    @_recorded
    def list_pod_groups(self) -> tuple[PodGroup, ...]:
        return self._custom_objects((COSCHEDULING_API_GROUP, VOLCANO_API_GROUP), pod_group_from_json)

    def _listed(self, store: Mapping[str, Any], parse: Callable[[Json], Any]) -> tuple[Any, ...]:
        """Every object of `store`, JSON through the real parser (domain objects as stored), copied
        under the lock: callers cannot alias it, nor see a write half done."""
        with self._lock:
            items = [copy.deepcopy(o) if isinstance(o, dict) else o for o in store.values()]
        return tuple(parse(o) if isinstance(o, dict) else o for o in items)

    def _custom_objects(self, groups: tuple[str, ...], parse: Callable[[Json], Any]) -> tuple[Any, ...]:
        with self._lock:
            items = [copy.deepcopy(o) for (group, _), o in sorted(self.custom.items()) if group in groups]
        return tuple(parse(o) for o in items)

    @_recorded
    def get_node(self, name: str) -> Node | None:
        with self._lock:
            obj = copy.deepcopy(self.nodes.get(name))
        return node_from_json(obj) if obj else None

    @_recorded
    def list_pods_on_node(self, name: str) -> tuple[Pod, ...]:
        return tuple(p for p in self._pods() if p.node_name == name and not p.is_terminal)

    def _pods(self) -> tuple[Pod, ...]:
        with self._lock:
            items = [copy.deepcopy(p) for p in self.pods.values()]
        return tuple(pod_from_json(p) for p in items)

    # Writes

    @_recorded
    def cordon(self, name: str, at: datetime, *, resource_version: str | None = None) -> None:
        with self._lock:
            obj = self.nodes.get(name)
            if obj is None:
                raise NotFoundError(f"cordon node {name}: HTTP 404")
            if resource_version and obj["metadata"]["resourceVersion"] != resource_version:
                raise ConflictError(f"cordon node {name}: HTTP 409")
            obj["spec"]["unschedulable"] = True
            obj["metadata"].setdefault("annotations", {})[ANNOTATION_CORDONED_AT] = _iso(at)
            self._touch(obj)

    @_recorded
    def uncordon(self, name: str) -> None:
        with self._lock:
            obj = self.nodes.get(name)
            if obj is None:
                raise NotFoundError(f"uncordon node {name}: HTTP 404")
            obj["spec"]["unschedulable"] = False
            (obj["metadata"].get("annotations") or {}).pop(ANNOTATION_CORDONED_AT, None)
            self._touch(obj)

    @_recorded
    def taint_node(self, name: str, taint: Taint, *, resource_version: str | None = None) -> None:
        self._edit_taints(f"taint node {name}", name, resource_version, lambda t: taints_with(t, taint))

    @_recorded
    def untaint_node(self, name: str, key: str, *, resource_version: str | None = None) -> None:
        self._edit_taints(f"untaint node {name}", name, resource_version, lambda t: taints_without(t, key))

    def _edit_taints(
        self,
        what: str,
        name: str,
        resource_version: str | None,
        edit: TaintEdit,
    ) -> None:
        with self._lock:
            obj = self.nodes.get(name)
            if obj is None:
                raise NotFoundError(f"{what}: HTTP 404")
            taints = edited_taints(obj, resource_version, edit, what)
            if taints is not None:
                obj["spec"]["taints"] = taints
                self._touch(obj)

    @_recorded
    def can_evict(self, namespace: str, name: str) -> bool:
        """A dry run: what `evict` would do now, with nothing evicted, no refusal and no budget used up."""
        key = f"{namespace}/{name}"
        with self._lock:
            remaining = self._blocked.get(key, 0)
            budget = self._budget_of(key)
            allowed = budget is None or budget["status"]["disruptionsAllowed"] > 0
            return remaining is not None and remaining <= 0 and allowed

    @_recorded
    def evict(self, namespace: str, name: str) -> None:
        key = f"{namespace}/{name}"
        with self._lock:
            if key in self._blocked:
                remaining = self._blocked[key]
                if remaining is None or remaining > 0:
                    if remaining is not None:
                        self._blocked[key] = remaining - 1
                    raise EvictionBlockedError(f"evict pod {key}: HTTP 429: disruption budget")
            budget = self._budget_of(key)
            if budget is not None:
                if budget["status"]["disruptionsAllowed"] <= 0:
                    refusing = budget["metadata"]["name"]
                    raise EvictionBlockedError(f"evict pod {key}: HTTP 429: disruption budget {refusing}")
                budget["status"]["disruptionsAllowed"] -= 1
            if self.pods.pop(key, None) is not None:
                self.evicted.append(key)

    def _budget_of(self, key: str) -> Json | None:
        """The PodDisruptionBudget (JSON) the eviction of pod `key` draws on, if any (lock held)."""
        obj = self.pods.get(key)
        if obj is None:
            return None
        pod = pod_from_json(copy.deepcopy(obj))
        drawn = [b for b in self.pdbs.values() if draws_on(pod_disruption_budget_from_json(b), pod)]
        if len(drawn) > 1:  # eviction.go: HTTP 500
            raise ClusterActionError(f"evict pod {key}: HTTP 500: more than one PodDisruptionBudget")
        return drawn[0] if drawn else None

    @_recorded
    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        key = f"{namespace}/{name}"
        with self._lock:
            if self.pods.pop(key, None) is not None:
                self.deleted_pods.append(key)

    @_recorded
    def delete_node(self, name: str) -> None:
        with self._lock:
            self.nodes.pop(name, None)

    @_recorded
    def record_events(self, events: Sequence[ClusterEvent]) -> int:
        with self._lock:
            self.events.extend(events)
        return len(events)

    @_recorded
    def get_config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        with self._lock:
            data = self.config_maps.get(f"{namespace}/{name}")
            return None if data is None else dict(data)

    @_recorded
    def patch_config_map(self, namespace: str, name: str, data: Mapping[str, str]) -> None:
        with self._lock:
            stored = self.config_maps.get(f"{namespace}/{name}")
            if stored is None:
                raise NotFoundError(f"patch configmap {namespace}/{name}: HTTP 404")
            stored.update(data)

    @_recorded
    def set_provisioning_request_conditions(self, update: ConditionUpdate) -> None:
        with self._lock:
            obj = self.custom.get((PROVISIONING_API_GROUP, update.key))
            if obj is None:
                raise NotFoundError(f"set conditions of provisioning request {update.key}: HTTP 404")
            if update.uid and obj["metadata"].get("uid") not in (None, update.uid):
                raise ConflictError(f"set conditions of provisioning request {update.key}: HTTP 409")
            obj.setdefault("status", {})["conditions"] = [condition_to_json(c) for c in update.conditions]
            self._touch(obj)


class FakeFleet(Faults):
    """Auto Scaling groups in memory. Instances launch only when the test says so (`launch`)."""

    def __init__(self, groups: Iterable[Json | AsgState] = ()) -> None:
        super().__init__()
        self.groups: dict[str, AsgState] = {}
        self.failures: dict[str, list[ScalingFailure]] = {}
        self.known_types: dict[str, InstanceType] = {}  # what `instance_types` answers, by name
        self.terminated: list[str] = []
        self.statuses: dict[str, InstanceStatus] = {}  # what `instance_statuses` answers, by instance id
        self.templates: dict[str, LaunchTemplateVersions] = {}  # what `launch_templates` answers, by id
        for group in groups:
            self.add_group(group)

    def add_group(self, group: Json | AsgState) -> None:
        asg = group if isinstance(group, AsgState) else asg_from_json(group)
        with self._lock:
            self.groups[asg.name] = asg

    def add_failure(self, failure: ScalingFailure) -> None:
        self.failures.setdefault(failure.asg_name, []).append(failure)

    def launch(self, asg_name: str, *instance_ids: str, instance_type: str = "p4d.24xlarge") -> None:
        """Instances come up (what the ASG does after desired grew)."""
        with self._lock:
            asg = self.groups[asg_name]
            # A new instance takes the group's NewInstancesProtectedFromScaleIn, as in AWS.
            new = tuple(
                AsgInstance(
                    i, instance_type=instance_type, protected_from_scale_in=asg.new_instances_protected
                )
                for i in instance_ids
            )
            self.groups[asg_name] = replace(asg, instances=asg.instances + new)

    def desired(self, asg_name: str) -> int:
        return self.groups[asg_name].desired

    def instance_ids(self, asg_name: str) -> list[str]:
        return [i.instance_id for i in self.groups[asg_name].live_instances]

    @_recorded
    def describe_groups(self, asg_names: Iterable[str]) -> Mapping[str, AsgState]:
        with self._lock:
            return {name: self.groups[name] for name in asg_names if name in self.groups}

    @_recorded
    def set_desired_capacity(self, asg: AsgState, desired: int) -> None:
        if not asg.min_size <= desired <= asg.max_size:
            raise ValueError(f"{asg.name}: desired {desired} outside [{asg.min_size}, {asg.max_size}]")
        with self._lock:
            self.groups[asg.name] = replace(self.groups[asg.name], desired=desired)

    @_recorded
    def terminate_instance(self, instance_id: str, *, decrement: bool, region: str = "") -> None:
        with self._lock:
            for name, asg in self.groups.items():
                if not any(i.instance_id == instance_id for i in asg.instances):
                    continue
                desired = asg.desired - 1 if decrement else asg.desired
                if desired < asg.min_size:
                    raise FleetActionError(f"terminate {instance_id}: ValidationError: below min size")
                instances = tuple(i for i in asg.instances if i.instance_id != instance_id)
                self.groups[name] = replace(asg, desired=desired, instances=instances)
                self.terminated.append(instance_id)
                return

    @_recorded
    def failed_activities(self, asg: AsgState, since: datetime) -> tuple[ScalingFailure, ...]:
        return tuple(f for f in self.failures.get(asg.name, ()) if f.at >= since)

    def add_instance_type(self, name: str, capacity: Resources, architecture: str = "amd64") -> InstanceType:
        """Make EC2 know one instance type (raw capacity, before any kubelet reservation)."""
        instance_type = InstanceType(name=name, capacity=capacity, architecture=architecture)
        with self._lock:
            self.known_types[name] = instance_type
        return instance_type

    @_recorded
    def instance_types(self, instance_types: Iterable[str], region: str = "") -> Mapping[str, InstanceType]:
        with self._lock:
            return {t: self.known_types[t] for t in instance_types if t in self.known_types}

    @_recorded
    def instance_statuses(
        self, instance_ids: Iterable[str], region: str = ""
    ) -> Mapping[str, InstanceStatus]:
        with self._lock:
            return {i: self.statuses[i] for i in instance_ids if i in self.statuses}

    @_recorded
    def launch_templates(
        self, template_ids: Iterable[str], region: str = ""
    ) -> Mapping[str, LaunchTemplateVersions]:
        with self._lock:
            return {t: self.templates[t] for t in template_ids if t in self.templates}


@dataclass
class _GroupRecord:
    backoff_until: datetime | None = None
    failures: int = 0
    last_failure: datetime | None = None
    last_scale_up: datetime | None = None
    last_scale_down: datetime | None = None
    migrated_at: tuple[datetime, ...] = ()
    moved_jobs: dict[str, tuple[int, datetime]] = field(default_factory=dict)


class MemoryStateStore(Faults):
    """The StateStore with real lease semantics (exclusive, expiring, fenced) and backoff doubling."""

    def __init__(self, cluster: str = "research", policy: PolicyConfig | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.policy = policy or PolicyConfig()
        self.lease: Lease | None = None
        self.idle_since: dict[str, datetime] = {}
        self.first_seen: dict[str, datetime] = {}
        self.pod_memory: dict[str, PodMemory] = {}
        self.groups: dict[str, _GroupRecord] = {}
        self.intents: dict[str, DrainIntent] = {}
        self._fence = 0
        self.acquisitions = 0

    # Lease

    @_recorded
    def acquire_lease(self, owner: str, now: datetime, ttl_seconds: int) -> Lease:
        with self._lock:
            held = self.lease
            if held is not None and held.owner != owner and held.expires_at > now:
                raise LeaseHeldError(f"lease held by {held.owner} until {held.expires_at.isoformat()}")
            self._fence += 1
            self.acquisitions += 1
            self.lease = Lease(self.cluster, owner, now + timedelta(seconds=ttl_seconds), self._fence)
            return self.lease

    @_recorded
    def renew_lease(self, lease: Lease, now: datetime, ttl_seconds: int) -> Lease:
        with self._lock:
            self._fenced(lease)
            self.lease = replace(lease, expires_at=now + timedelta(seconds=ttl_seconds))
            return self.lease

    def take_over(self, owner: str = "thief") -> Lease:
        """Another run takes the lease now (as after ours expired): the fencing token moves on."""
        with self._lock:
            self._fence += 1
            self.lease = Lease(self.cluster, owner, datetime.max.replace(tzinfo=UTC), self._fence)
            return self.lease

    @_recorded
    def release_lease(self, lease: Lease) -> None:
        with self._lock:
            if self.lease is not None and self.lease.fencing_token == lease.fencing_token:
                self.lease = None

    def _fenced(self, lease: Lease | None) -> None:
        if lease is None:
            return
        if self.lease is None or self.lease.fencing_token != lease.fencing_token:
            raise LeaseHeldError(f"lease of {lease.owner} (fence {lease.fencing_token}) was lost")

    # State

    @_recorded
    def load(self) -> ScalerStateModel:
        with self._lock:
            return ScalerStateModel(
                nodes={k: NodeState(v) for k, v in self.idle_since.items()},
                groups={
                    k: GroupState(
                        v.backoff_until, v.last_scale_up, v.last_scale_down, v.migrated_at, dict(v.moved_jobs)
                    )
                    for k, v in self.groups.items()
                },
                instances_first_seen=dict(self.first_seen),
                pods=dict(self.pod_memory),
            )

    @_recorded
    def save_node_idle_since(self, lease: Lease, idle_since: Mapping[str, datetime], now: datetime) -> None:
        with self._lock:
            self._fenced(lease)
            self.idle_since = dict(idle_since)

    @_recorded
    def save_instances_first_seen(self, lease: Lease, first_seen: Mapping[str, datetime]) -> None:
        with self._lock:
            self._fenced(lease)
            self.first_seen = dict(first_seen)

    @_recorded
    def save_pod_memory(self, lease: Lease, memory: Mapping[str, PodMemory]) -> None:
        with self._lock:
            self._fenced(lease)
            self.pod_memory = dict(memory)

    @_recorded
    def record_scale_up(self, lease: Lease, group: str, at: datetime) -> None:
        with self._lock:
            self._fenced(lease)
            self.groups.setdefault(group, _GroupRecord()).last_scale_up = at

    @_recorded
    def record_scale_down(self, lease: Lease, group: str, at: datetime) -> None:
        with self._lock:
            self._fenced(lease)
            self.groups.setdefault(group, _GroupRecord()).last_scale_down = at

    @_recorded
    def record_migration(
        self,
        lease: Lease,
        group: str,
        at: datetime,
        jobs: Sequence[str] = (),
        present: Collection[str] = (),
    ) -> None:
        with self._lock:
            self._fenced(lease)
            record = self.groups.setdefault(group, _GroupRecord())
            kept = tuple(t for t in record.migrated_at if at - t < MIGRATION_WINDOW)
            record.migrated_at = (*kept, at)
            record.moved_jobs = remember_moves(record.moved_jobs, jobs, at, present)

    @_recorded
    def record_capacity_failure(self, lease: Lease | None, group: str, at: datetime) -> datetime:
        with self._lock:
            self._fenced(lease)
            record = self.groups.setdefault(group, _GroupRecord())
            previous = Backoff(record.failures, record.last_failure, record.backoff_until)
            after = next_backoff(previous, at, self.policy)
            assert after.until is not None
            if not is_counted(previous, at):  # idempotent per failure time
                record.failures, record.last_failure, record.backoff_until = (
                    after.failures,
                    after.last_failure,
                    after.until,
                )
            return after.until

    @_recorded
    def put_drain_intent(self, lease: Lease, intent: DrainIntent) -> DrainIntent:
        if intent.oversize:
            raise ActionError(f"store drain intent of {intent.group}: {intent.oversize}")
        with self._lock:
            self._fenced(lease)
            self._check_revision(intent)
            stored = replace(intent, revision=intent.revision + 1)
            self.intents[intent.group] = stored
            return stored

    def _check_revision(self, intent: DrainIntent) -> None:
        stored = self.intents.get(intent.group)
        if (stored.revision if stored else 0) != intent.revision:
            raise ConflictError(f"drain intent of {intent.group}: changed since revision {intent.revision}")

    @_recorded
    def drain_intents(self) -> tuple[DrainIntent, ...]:
        with self._lock:
            return tuple(self.intents[g] for g in sorted(self.intents))

    @_recorded
    def delete_drain_intent(self, lease: Lease, intent: DrainIntent) -> None:
        with self._lock:
            self._fenced(lease)
            if intent.group in self.intents:
                self._check_revision(intent)
            self.intents.pop(intent.group, None)

    def backoff_until(self, group: str) -> datetime | None:
        record = self.groups.get(group)
        return record.backoff_until if record else None


class FakeClock:
    """A settable clock; `sleep` advances it instead of waiting."""

    def __init__(self, now: datetime) -> None:
        self._now = now
        self._lock = threading.Lock()
        self.slept: list[float] = []

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(seconds)

    def advance(self, seconds: float) -> datetime:
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now

    def set(self, now: datetime) -> None:
        with self._lock:
            self._now = now


@dataclass
class RecordingNotifier:
    messages: list[tuple[str, list[str]]] = field(default_factory=list)
    fail: bool = False

    def notify(self, subject: str, lines: Sequence[str]) -> bool:
        self.messages.append((subject, list(lines)))
        return not self.fail


@dataclass(frozen=True)
class MetricPoint:
    name: str
    value: float
    unit: str
    group: str | None


class RecordingReporter:
    """Keeps every log line, action and metric."""

    def __init__(self) -> None:
        self.logs: list[tuple[LogLevel, str, dict[str, Any]]] = []
        self.actions: list[ActionRecord] = []
        self.metrics: list[MetricPoint] = []
        self.flushes = 0

    def log(self, level: LogLevel, message: str, **fields: Any) -> None:
        self.logs.append((level, message, fields))

    def log_action(self, action: ActionRecord) -> None:
        self.actions.append(action)

    def metric(
        self, name: str, value: float, *, unit: MetricUnit = "Count", group: str | None = None
    ) -> None:
        self.metrics.append(MetricPoint(name, value, unit, group))

    def flush(self) -> None:
        self.flushes += 1

    def metric_values(self, name: str, group: str | None = None) -> list[float]:
        return [m.value for m in self.metrics if m.name == name and m.group == group]

    def messages(self, level: LogLevel | None = None) -> list[str]:
        return [m for lvl, m, _ in self.logs if level is None or lvl == level]


@dataclass
class FakeWorld:
    """Every fake of one cluster, and controllers built on them."""

    config: Any  # ScalerConfig
    cluster: FakeCluster = field(default_factory=FakeCluster)
    fleet: FakeFleet = field(default_factory=FakeFleet)
    state: MemoryStateStore = field(default_factory=MemoryStateStore)
    clock: FakeClock = field(default_factory=lambda: FakeClock(datetime(2026, 12, 2, 12, 0, tzinfo=UTC)))
    notifier: RecordingNotifier = field(default_factory=RecordingNotifier)
    reporter: RecordingReporter = field(default_factory=RecordingReporter)

    def __post_init__(self) -> None:
        self.state.policy = self.config.policy
        self.state.cluster = self.config.cluster_name

    def controller(self, *, dry_run: bool = False, owner: str = "test", planner: Any = None) -> Any:
        """The Controller on this world's ports; `planner` replaces the pure planner (a recording one)."""
        from shared.controller import Controller

        extra = {"planner": planner} if planner is not None else {}
        return Controller(
            config=self.config,
            cluster=self.cluster,
            fleet=self.fleet,
            state=self.state,
            clock=self.clock,
            notifier=self.notifier,
            reporter=self.reporter,
            owner=owner,
            dry_run=dry_run,
            **extra,
        )

    def calls_in_order(self) -> list[Call]:
        """Every call to the cluster, the fleet and the state, in the order they were made."""
        calls = [*self.cluster.calls, *self.fleet.calls, *self.state.calls]
        return sorted(calls, key=lambda c: c.sequence)

    def write_calls(self) -> list[str]:
        """Every call that changes the cluster, the fleet or the state."""
        reads = {
            "list_pods",
            "list_nodes",
            "list_daemonsets",
            "list_persistent_volume_claims",
            "list_persistent_volumes",
            "list_storage_classes",
            "list_namespaces",
            "list_pod_groups",
            "list_provisioning_requests",
            "list_pod_templates",
            "list_resource_slices",
            "list_device_classes",
            "list_resource_claims",
            "list_resource_claim_templates",
            "get_node",
            "list_pods_on_node",
            "get_config_map",
            "describe_groups",
            "failed_activities",
            "instance_types",
            "instance_statuses",
            "launch_templates",
            "load",
            "drain_intents",
        }
        calls = [*self.cluster.calls, *self.fleet.calls, *self.state.calls]
        return [c.method for c in calls if c.method not in reads]


@dataclass
class FakeLambdaContext:
    """The parts of a Lambda context object Powertools reads."""

    function_name: str = "backlog-scaler-reconcile"
    memory_limit_in_mb: int = 1024
    invoked_function_arn: str = "arn:aws:lambda:us-west-2:123456789012:function:backlog-scaler-reconcile"
    aws_request_id: str = "52fdfc07-2182-454f-963f-5f0f9a621d72"
    log_group_name: str = "/aws/lambda/backlog-scaler-reconcile"
    log_stream_name: str = "2026/12/02/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000
