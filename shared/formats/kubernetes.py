"""Kubernetes JSON (`kubectl get pods|nodes -o json`, or raw API list responses) to domain objects.

Kept lean: the adapter parses thousands of objects per run, so only the fields the planner reads
are touched, and quantities go through a cached parser.
"""

from __future__ import annotations

import marshal
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from shared.domain.constraints import (
    NAMESPACE_NAME,
    NO_CONSTRAINTS,
    HostPort,
    PodAffinityTerm,
    PodConstraints,
    SpreadConstraint,
)
from shared.domain.dra import NO_DRA, DraObjects, PodResourceClaim
from shared.domain.errors import InputError
from shared.domain.labels import LabelSelector
from shared.domain.model import (
    DEFAULT_TERMINATION_GRACE_SECONDS,
    DaemonSet,
    DisruptionBudget,
    Node,
    NodeCondition,
    Pod,
    Requirement,
    Scheduling,
    Taint,
    TaintEffect,
    Toleration,
)
from shared.domain.provisioning import (
    COSCHEDULING_API_GROUP,
    PROVISIONING_API_VERSION,
    VOLCANO_API_GROUP,
    Condition,
    PodGroup,
    PodGroupKind,
    PodSet,
    PodTemplate,
    ProvisioningRequest,
)
from shared.domain.quantity import quantity
from shared.domain.resources import Resources
from shared.domain.volumes import NodeSelectorTerms, PersistentVolume, PersistentVolumeClaim, StorageClass
from shared.formats.dra import (
    device_class_from_json,
    resource_claim_from_json,
    resource_claim_template_from_json,
    resource_slice_from_json,
)

_PROVIDER_ID = re.compile(r"^aws:///[^/]*/(i-[0-9a-f]+)$")
_EFFECTS = {e.value: e for e in TaintEffect}
_CACHE_LIMIT = 4096  # entries per memo of parsed values: bounded, a pure function of its input


_times: dict[str, datetime] = {}


def parse_time(raw: object) -> datetime | None:
    """RFC 3339 timestamp (`2026-12-02T11:00:00Z`) to an aware datetime; None when absent."""
    if not raw or not isinstance(raw, str):
        return None
    # Timestamps have whole seconds: the pods of a Job or a Deployment scaled at once share theirs.
    found = _times.get(raw)
    if found is None:
        try:
            found = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            return None
        if len(_times) >= _CACHE_LIMIT:
            _times.clear()
        _times[raw] = found
    return found


def rfc3339(at: datetime) -> str:
    """An aware datetime as the API server writes timestamps (`2026-12-02T11:00:00Z`): the inverse of
    `parse_time`, to whole seconds."""
    if at.tzinfo is None:
        raise ValueError("timestamps sent to Kubernetes must be timezone-aware")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def instance_id_from_provider_id(provider_id: str | None) -> str | None:
    """`aws:///us-west-2a/i-0abc` -> `i-0abc` (None for other providers)."""
    if not provider_id:
        return None
    match = _PROVIDER_ID.match(provider_id)
    return match.group(1) if match else None


def _resource_list(raw: object, field: str) -> Mapping[str, Any]:
    """A resource list (`field` names it in errors); {} when absent."""
    if not raw:
        return {}
    if not isinstance(raw, Mapping):
        raise TypeError(f"{field}: expected an object, got {type(raw).__name__}")
    return raw


def _quantities(raw: object, field: str) -> dict[str, int]:
    """Each quantity of the resource list at `field`, in base units; errors name the field."""
    amounts: dict[str, int] = {}
    for name, value in _resource_list(raw, field).items():
        try:
            amounts[name] = quantity(name, value)
        except ValueError as exc:
            raise ValueError(f"{field}: {exc}") from exc
    return amounts


def _add(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) + amount


def _requests_of(owner: object, field: str) -> object:
    """`<field>.resources.requests` of a container (or of the pod's spec), None when absent."""
    if not isinstance(owner, Mapping):
        raise TypeError(f"{field}: expected an object, got {type(owner).__name__}")
    resources = owner.get("resources")
    if resources is None:
        return None
    return _resource_list(resources, f"{field}.resources").get("requests")


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """max(sum(containers) + sum(sidecars), effective init), replaced by pod-level requests where
    `spec.resources` names them, + spec.overhead: as the scheduler counts (component-helpers PodRequests)."""
    # PodRequests in kubernetes pkg/api/v1/resource/helpers.go: sidecars (restartable init
    # containers) run beside the containers, so they add up with them; a regular init container
    # runs beside the sidecars declared before it. Pod = max(containers + sidecars, init) + overhead.
    # Called once per distinct spec (SpecMemo): the field paths of its errors cost nothing per pod.
    total: dict[str, int] = {}
    for index, container in enumerate(spec.get("containers") or ()):
        field = f"spec.containers[{index}]"
        _add(total, _quantities(_requests_of(container, field), f"{field}.resources.requests"))
    sidecars: dict[str, int] = {}
    init: dict[str, int] = {}
    for index, container in enumerate(spec.get("initContainers") or ()):
        field = f"spec.initContainers[{index}]"
        requests = _quantities(_requests_of(container, field), f"{field}.resources.requests")
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            running = sidecars
        else:
            running = dict(sidecars)
            _add(running, requests)
        for name, value in running.items():
            if value > init.get(name, 0):
                init[name] = value
    for name, value in init.items():
        if value > total.get(name, 0):
            total[name] = value
    _apply_pod_level(total, _requests_of(spec, "spec"))
    _add(total, _quantities(spec.get("overhead"), "spec.overhead"))
    total["pods"] = total.get("pods", 0) + 1  # every pod takes one of the node's pod slots
    return Resources.of(total)


def _is_pod_level_resource(name: str) -> bool:
    """cpu, memory and hugepages-*: what pod-level resources may name (component-helpers
    resource.IsSupportedPodLevelResource); any other name there is ignored by the scheduler."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _apply_pod_level(total: dict[str, int], raw: object) -> None:
    # PodLevelResources (beta, on by default since Kubernetes 1.34): k8s.io/component-helpers
    # resource.PodRequests replaces the containers' aggregate by spec.resources.requests for each
    # supported resource it names (applyPodLevelResources); the others (GPUs, ephemeral-storage)
    # stay the containers' sum, and overhead is added after. The API server defaults pod-level
    # requests from pod-level limits, so the objects we read already carry them.
    for name, amount in _quantities(raw, "spec.resources.requests").items():
        if _is_pod_level_resource(name):
            total[name] = amount


def _json_key(value: Any) -> bytes:
    """An exact cache key of decoded JSON, cheaper than repr: marshal writes each value with its
    type, so 1, 1.0 and True, or a list and a tuple, never share a key (as dict keys they would:
    1 == True). Dict order is kept: a key differing only in field order is a miss, never a wrong
    hit. ValueError on a value marshal cannot write (the caller then parses without caching)."""
    return marshal.dumps(value, 2)  # version 2: no back-references, so equal values, equal bytes


# The operators the API server admits (pkg/apis/core/validation/validation.go): a node selector's
# matchExpressions (ValidateNodeSelectorRequirement) and matchFields
# (ValidateNodeFieldSelectorRequirement), a label selector's (metav1 LabelSelectorRequirement).
_NODE_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_NODE_FIELD_OPERATORS = frozenset({"In", "NotIn"})
_LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
# ValidateTolerations: "" (Equal), Equal, Exists; and Lt / Gt, which Kubernetes 1.35 admits with the
# TaintTolerationComparisonOperators gate (component-helpers / k8s.io/api Toleration.ToleratesTaint).
_TOLERATION_OPERATORS = frozenset({"Equal", "Exists", "Lt", "Gt"})


def _requirements(
    raw: Iterable[Mapping[str, Any]] | None, field: str, operators: frozenset[str]
) -> tuple[Requirement, ...]:
    """The requirements at `field`; ValueError naming the operator the API server would refuse (an
    unknown one matched nothing here: the pod looked unplaceable instead of malformed)."""
    requirements = tuple(
        Requirement(str(expr["key"]), str(expr["operator"]), tuple(str(v) for v in expr.get("values") or ()))
        for expr in raw or ()
    )
    for index, req in enumerate(requirements):
        if req.operator not in operators:
            raise ValueError(
                f"{field}[{index}].operator: expected one of {sorted(operators)}, got {req.operator!r}"
            )
    return requirements


# A term with no expressions matches no node (component-helpers nodeaffinity: "an empty or nil
# NodeSelectorTerm matches no objects"); "a value in the empty set" says that as a Requirement.
_MATCHES_NOTHING = Requirement("", "In", ())
# matchFields select on metadata.name, which no label carries: a key no label can have keeps the
# answer conservative (In never holds on a template or a node; NotIn always does).
FIELD_PREFIX = "field:"


def _node_selector_term(term: Mapping[str, Any], field: str) -> tuple[Requirement, ...]:
    requirements = _requirements(
        term.get("matchExpressions"), f"{field}.matchExpressions", _NODE_SELECTOR_OPERATORS
    )
    fields = tuple(
        Requirement(FIELD_PREFIX + req.key, req.operator, req.values)
        for req in _requirements(term.get("matchFields"), f"{field}.matchFields", _NODE_FIELD_OPERATORS)
    )
    return (requirements + fields) or (_MATCHES_NOTHING,)


_REQUIRED_NODE_AFFINITY = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"


def _toleration(raw: object, field: str) -> Toleration:
    if not isinstance(raw, Mapping):
        raise TypeError(f"{field}: expected an object, got {type(raw).__name__}")
    operator = str(raw.get("operator") or "Equal")
    if operator not in _TOLERATION_OPERATORS:
        raise ValueError(
            f"{field}.operator: expected one of {sorted(_TOLERATION_OPERATORS)}, got {raw.get('operator')!r}"
        )
    return Toleration(
        key=str(raw.get("key") or ""),
        operator=operator,
        value=str(raw.get("value") or ""),
        effect=str(raw.get("effect") or ""),
    )


_scheduling_cache: dict[Scheduling, Scheduling] = {}


def _build_scheduling(spec: Mapping[str, Any]) -> Scheduling:
    selector = spec.get("nodeSelector") or {}
    affinity = (
        ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or ()
    tolerations = spec.get("tolerations") or ()
    if not selector and not affinity and not tolerations:
        return _EMPTY_SCHEDULING
    scheduling = Scheduling(
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        affinity_terms=tuple(
            _node_selector_term(term, f"{_REQUIRED_NODE_AFFINITY}.nodeSelectorTerms[{index}]")
            for index, term in enumerate(affinity)
        ),
        tolerations=tuple(
            _toleration(t, f"spec.tolerations[{index}]") for index, t in enumerate(tolerations)
        ),
    )
    # Intern: thousands of pods share a handful of specs, and the planner caches by identity.
    return _scheduling_cache.setdefault(scheduling, scheduling)


_EMPTY_SCHEDULING = Scheduling()


_WHEN_UNSATISFIABLE = frozenset({"DoNotSchedule", "ScheduleAnyway"})
_POLICIES = frozenset({"Honor", "Ignore"})


def _int(raw: object, field: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"{field}: expected an integer, got {raw!r}")
    return raw


def _one_of(raw: object, field: str, allowed: frozenset[str], default: str) -> str:
    if raw is None:
        return default
    if raw not in allowed:
        raise ValueError(f"{field}: expected one of {sorted(allowed)}, got {raw!r}")
    return str(raw)


def _label_selector(raw: object, field: str) -> LabelSelector | None:
    """A metav1.LabelSelector; null stays None (matches nothing), {} matches everything."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise TypeError(f"{field}: expected an object, got {type(raw).__name__}")
    expressions = _requirements(
        raw.get("matchExpressions"), f"{field}.matchExpressions", _LABEL_SELECTOR_OPERATORS
    )
    match_labels = raw.get("matchLabels") or {}
    return LabelSelector(tuple(sorted((str(k), str(v)) for k, v in match_labels.items())), expressions)


def _merge_label_keys(
    selector: LabelSelector, labels: Mapping[str, str], keys: object, operator: str
) -> LabelSelector:
    """matchLabelKeys (In) / mismatchLabelKeys (NotIn): the pod's own values, for keys it has."""
    if not keys:
        return selector
    if not isinstance(keys, list):
        raise TypeError(f"label keys: expected a list, got {type(keys).__name__}")
    added = list(selector.match_expressions)
    for key in keys:
        if key in labels:
            req = Requirement(str(key), operator, (str(labels[key]),))
            # The API server merges them at creation already (MatchLabelKeysInPodAffinity): once is enough.
            if req not in added:
                added.append(req)
    if len(added) == len(selector.match_expressions):
        return selector
    return LabelSelector(selector.match_labels, tuple(added))


def _affinity_term(raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodAffinityTerm:
    topology_key = raw["topologyKey"]
    if not topology_key or not isinstance(topology_key, str):
        raise ValueError(f"topologyKey: expected a label key, got {topology_key!r}")
    selector = _label_selector(raw.get("labelSelector"), "labelSelector")
    if selector is not None:  # a nil selector matches no pod, whatever the label keys say
        selector = _merge_label_keys(selector, labels, raw.get("matchLabelKeys"), "In")
        selector = _merge_label_keys(selector, labels, raw.get("mismatchLabelKeys"), "NotIn")
    namespaces = raw.get("namespaces") or ()
    namespace_selector = _label_selector(raw.get("namespaceSelector"), "namespaceSelector")
    if not namespaces and namespace_selector is None:
        namespaces = (namespace,)  # neither given: the pod's own namespace
    return PodAffinityTerm(selector, topology_key, frozenset(str(n) for n in namespaces), namespace_selector)


def _spread_constraint(raw: Mapping[str, Any], labels: Mapping[str, str]) -> SpreadConstraint:
    topology_key = raw["topologyKey"]
    if not topology_key or not isinstance(topology_key, str):
        raise ValueError(f"topologyKey: expected a label key, got {topology_key!r}")
    when = raw["whenUnsatisfiable"]
    if when not in _WHEN_UNSATISFIABLE:
        raise ValueError(f"whenUnsatisfiable: expected DoNotSchedule or ScheduleAnyway, got {when!r}")
    selector = _label_selector(raw.get("labelSelector"), "labelSelector")
    if selector is not None:  # as the scheduler's mergeLabelSetWithSelector: nothing stays nothing
        selector = _merge_label_keys(selector, labels, raw.get("matchLabelKeys"), "In")
    min_domains = raw.get("minDomains")
    return SpreadConstraint(
        max_skew=_int(raw["maxSkew"], "maxSkew"),
        topology_key=topology_key,
        when_unsatisfiable=when,
        selector=selector,
        min_domains=None if min_domains is None else _int(min_domains, "minDomains"),
        node_affinity_policy=_one_of(raw.get("nodeAffinityPolicy"), "nodeAffinityPolicy", _POLICIES, "Honor"),
        node_taints_policy=_one_of(raw.get("nodeTaintsPolicy"), "nodeTaintsPolicy", _POLICIES, "Ignore"),
    )


def _build_inter_pod(raw: tuple[Any, Any, Any], namespace: str, labels: Mapping[str, str]) -> PodConstraints:
    affinity, anti_affinity, spread = raw
    return PodConstraints(
        affinity=tuple(_affinity_term(t, namespace, labels) for t in affinity or ()),
        anti_affinity=tuple(_affinity_term(t, namespace, labels) for t in anti_affinity or ()),
        spread=tuple(_spread_constraint(c, labels) for c in spread or ()),
    )


_constraints_cache: dict[PodConstraints, PodConstraints] = {}


def _intern_constraints(constraints: PodConstraints) -> PodConstraints:
    if len(_constraints_cache) >= _CACHE_LIMIT:
        _constraints_cache.clear()
    return _constraints_cache.setdefault(constraints, constraints)


def _inter_pod(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> PodConstraints:
    """Required pod (anti-)affinity and topology spread."""
    affinity = spec.get("affinity") or {}
    raw = (
        (affinity.get("podAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"),
        (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"),
        spec.get("topologySpreadConstraints"),
    )
    if not any(raw):
        return NO_CONSTRAINTS
    return _intern_constraints(_build_inter_pod(raw, namespace, labels))


def _container_host_ports(container: Mapping[str, Any], out: list[HostPort]) -> None:
    for port in container.get("ports") or ():
        host_port = port.get("hostPort")
        if host_port is None or host_port == 0:  # 0 / unset: no host port (nodeports plugin)
            continue
        out.append(
            HostPort(
                _int(host_port, "hostPort"), str(port.get("protocol") or "TCP"), str(port.get("hostIP") or "")
            )
        )


def _host_ports(spec: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """Host ports of the containers and of the sidecars (restartable init containers)."""
    ports: list[HostPort] = []
    for container in spec.get("containers") or ():
        _container_host_ports(container, ports)
    for container in spec.get("initContainers") or ():
        if container.get("restartPolicy") == "Always":
            _container_host_ports(container, ports)
    return tuple(ports)


def _claims(spec: Mapping[str, Any], pod_name: str) -> tuple[str, ...]:
    """PVC names: persistentVolumeClaim volumes, and generic ephemeral ones (`<pod>-<volume>`)."""
    claims: list[str] = []
    for volume in spec.get("volumes") or ():
        pvc = volume.get("persistentVolumeClaim")
        if pvc is not None:
            claims.append(str(pvc["claimName"]))
        elif volume.get("ephemeral") is not None:
            claims.append(f"{pod_name}-{volume['name']}")
    return tuple(claims)


def _workload_constraints(
    spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]
) -> PodConstraints:
    """Inter-pod rules and host ports: the constraints the pods of one workload share, interned."""
    constraints = _inter_pod(spec, namespace, labels)
    host_ports = _host_ports(spec)
    if not host_ports:
        return constraints
    return _intern_constraints(replace(constraints, host_ports=host_ports))


def pod_constraints(
    spec: Mapping[str, Any],
    namespace: str,
    name: str,
    labels: Mapping[str, str],
    shared: PodConstraints | None = None,
) -> PodConstraints:
    """The pod's PodConstraints, interned: equal constraint sets are one object. `shared`: its
    `_workload_constraints`, when already parsed."""
    if shared is None:
        shared = _workload_constraints(spec, namespace, labels)
    volumes, raw_claims = spec.get("volumes"), spec.get("resourceClaims")
    if not volumes and not raw_claims:  # most pods: no claim of their own to add
        return shared
    claims = _claims(spec, name) if volumes else ()
    resource_claims = tuple(str(c["name"]) for c in raw_claims) if raw_claims else ()
    if not claims and not resource_claims:
        return shared
    return _intern_constraints(
        replace(
            shared,
            claims=claims,
            resource_claims=resource_claims,
            resource_claim_sources=_pod_resource_claims(spec) if raw_claims else (),
        )
    )


@dataclass(frozen=True, slots=True)
class SharedSpec:
    """What a pod's spec says that every pod of its workload says alike (frozen: pods share it)."""

    requests: Resources
    scheduling: Scheduling
    constraints: PodConstraints  # inter-pod rules and host ports; volumes and DRA claims are the pod's own


# One parse run's SharedSpec by the exact content of what it was parsed from (see _shared_key).
SpecMemo = dict[tuple[bytes, tuple[tuple[str, str], ...]], SharedSpec]


def _shared_spec(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> SharedSpec:
    return SharedSpec(
        pod_requests(spec), _build_scheduling(spec), _workload_constraints(spec, namespace, labels)
    )


def _container_parts(containers: Any) -> Any:
    # What is read of each container: name, image and env differ between workloads of one shape
    # (and a volume mount's name between the pods of one: kube-api-access-<random>). One container,
    # as most pods have, is its tuple; several a list of them (marshal tells a tuple from a list).
    if not containers:
        return None
    if len(containers) == 1:
        c = containers[0]
        return c.get("restartPolicy"), (c.get("resources") or {}).get("requests"), c.get("ports")
    return [
        (c.get("restartPolicy"), (c.get("resources") or {}).get("requests"), c.get("ports"))
        for c in containers
    ]


def _shared_key(
    spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]
) -> tuple[bytes, tuple[tuple[str, str], ...]]:
    """Every input of _shared_spec, exactly: equal keys, equal parses."""
    text = _json_key(
        (
            namespace,  # a pod affinity term without namespaces means the pod's own
            _container_parts(spec.get("containers")),
            _container_parts(spec.get("initContainers")),
            spec.get("overhead"),
            spec.get("resources"),
            spec.get("nodeSelector"),
            spec.get("tolerations"),
            spec.get("affinity"),
            spec.get("topologySpreadConstraints"),
        )
    )
    # Only (mis)matchLabelKeys read the pod's labels: without them the pods of a workload share a key.
    return text, tuple(sorted(labels.items())) if b"LabelKeys" in text else ()


def _shared_of(
    spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str], memo: SpecMemo | None
) -> SharedSpec:
    if memo is None:
        return _shared_spec(spec, namespace, labels)
    try:
        key = _shared_key(spec, namespace, labels)
    except (TypeError, ValueError, AttributeError):  # malformed: the parse itself names the problem
        return _shared_spec(spec, namespace, labels)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _shared_spec(spec, namespace, labels)
    return found


def _pod_resource_claims(spec: Mapping[str, Any]) -> tuple[PodResourceClaim, ...]:
    """spec.resourceClaims (DRA): each by resourceClaimName or resourceClaimTemplateName."""
    return tuple(
        PodResourceClaim(
            str(c["name"]),
            str(c.get("resourceClaimName") or ""),
            str(c.get("resourceClaimTemplateName") or ""),
        )
        for c in spec.get("resourceClaims") or ()
    )


def _pod_claim_statuses(status: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """status.resourceClaimStatuses: (pod claim name, the ResourceClaim generated for it), "" for an
    entry without resourceClaimName: the claim controller found none was needed."""
    statuses = status.get("resourceClaimStatuses")
    if not statuses:  # most pods claim no DRA device: no generator to run
        return ()
    return tuple((str(s["name"]), str(s.get("resourceClaimName") or "")) for s in statuses)


def _controller(owners: Any) -> Mapping[str, Any] | None:
    if not owners:
        return None
    for owner in owners:
        if owner.get("controller"):
            return owner  # type: ignore[no-any-return]
    return owners[0]  # type: ignore[no-any-return]


def pod_parser() -> Callable[[Mapping[str, Any]], Pod]:
    """`pod_from_json` with a memo of its own, for the pods of one list: thousands of pods share a
    handful of workload specs, each parsed once. A memo per list, never kept across runs."""
    memo: SpecMemo = {}
    return lambda obj: pod_from_json(obj, memo)


def pod_from_json(obj: Mapping[str, Any], memo: SpecMemo | None = None) -> Pod:
    """One Pod object (as the API returns it) to a domain Pod; KeyError/TypeError on malformed input.
    `memo`: the SharedSpec of the pods parsed before it in the same run (see pod_parser)."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owner = _controller(meta.get("ownerReferences"))
    unschedulable = False
    message = ""
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            unschedulable = cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
            message = str(cond.get("message") or "")
            break
    namespace = meta.get("namespace") or "default"
    name = meta["name"]
    labels = meta.get("labels") or {}
    shared = _shared_of(spec, namespace, labels, memo)
    return Pod(
        namespace=namespace,
        name=name,
        uid=meta.get("uid") or "",
        requests=shared.requests,
        phase=status.get("phase") or "Pending",
        node_name=spec.get("nodeName") or None,
        scheduling=shared.scheduling,
        labels=labels,
        annotations=meta.get("annotations") or {},
        owner_kind=owner.get("kind") if owner else None,
        owner_name=owner.get("name") if owner else None,
        priority=_priority(spec.get("priority")),
        created_at=parse_time(meta.get("creationTimestamp")),
        unschedulable=unschedulable,
        constraints=pod_constraints(spec, namespace, name, labels, shared.constraints),
        nominated_node=status.get("nominatedNodeName") or None,
        scheduler_message=message,
        deleted_at=parse_time(meta.get("deletionTimestamp")),
        termination_grace_seconds=_grace_seconds(spec.get("terminationGracePeriodSeconds")),
        resource_claim_statuses=_pod_claim_statuses(status),
    )


def _priority(raw: object) -> int:
    """spec.priority (int32; the admission controller fills it in from priorityClassName)."""
    if type(raw) is int:  # the common case first (and a bool is no priority)
        return raw
    if raw is None:
        return 0
    raise ValueError(f"spec.priority: expected an integer, got {raw!r}")


def _grace_seconds(raw: object) -> int:
    """spec.terminationGracePeriodSeconds; absent: the API default (30 s)."""
    if raw is None:
        return DEFAULT_TERMINATION_GRACE_SECONDS
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"spec.terminationGracePeriodSeconds: expected an integer, got {raw!r}")
    return max(0, raw)


# One parse run's node resource lists (allocatable, capacity) by the exact content they were parsed from.
ResourcesMemo = dict[bytes, Resources]


def node_parser() -> Callable[[Mapping[str, Any]], Node]:
    """`node_from_json` with a memo of its own, for the nodes of one list: the nodes of a group
    advertise the same allocatable and capacity, each parsed once. Never kept across runs."""
    memo: ResourcesMemo = {}
    return lambda obj: node_from_json(obj, memo)


def _node_resources(raw: object, field: str, memo: ResourcesMemo | None) -> Resources:
    if memo is None:
        return Resources.of(_quantities(raw, field))
    try:
        key = _json_key(raw)
    except ValueError:  # not decoded JSON: parsed as it is
        return _node_resources(raw, field, None)
    found = memo.get(key)
    if found is None:
        found = memo[key] = _node_resources(raw, field, None)
    return found


def node_from_json(obj: Mapping[str, Any], memo: ResourcesMemo | None = None) -> Node:
    """One Node object to a domain Node. `memo`: the resource lists of the nodes parsed before it
    in the same run (see node_parser)."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready, ready_changed = False, None
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            ready_changed = parse_time(cond.get("lastTransitionTime"))
            break
    taints = []
    for taint in spec.get("taints") or ():
        effect = _EFFECTS.get(taint.get("effect"))
        if effect is None:
            raise ValueError(f"node {meta.get('name')}: unknown taint effect {taint.get('effect')!r}")
        taints.append(Taint(str(taint["key"]), str(taint.get("value") or ""), effect))
    capacity = status.get("capacity")  # None when absent: the planner then cannot tell lost devices
    return Node(
        name=meta["name"],
        instance_id=instance_id_from_provider_id(spec.get("providerID")),
        allocatable=_node_resources(status.get("allocatable"), "status.allocatable", memo),
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        ready_changed_at=ready_changed,
        created_at=parse_time(meta.get("creationTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
        deleting=meta.get("deletionTimestamp") is not None,
        conditions=tuple(_node_condition(c) for c in status.get("conditions") or () if isinstance(c, dict)),
        capacity=_node_resources(capacity, "status.capacity", memo)
        if isinstance(capacity, Mapping)
        else None,
    )


def _node_condition(raw: Mapping[str, Any]) -> NodeCondition:
    """One status.conditions entry, as written: the planner judges its status and time."""
    return NodeCondition(
        type=str(raw.get("type") or ""),
        status=str(raw.get("status") or ""),
        changed_at=parse_time(raw.get("lastTransitionTime")),
        reason=str(raw.get("reason") or ""),
        message=str(raw.get("message") or ""),
    )


def _items(document: object, kind: str, source: str) -> list[Mapping[str, Any]]:
    if not isinstance(document, Mapping):
        raise InputError(f"{source}: expected a {kind}List object, got {type(document).__name__}")
    doc_kind = document.get("kind")
    if doc_kind not in (f"{kind}List", "List") or not isinstance(document.get("items"), list):
        raise InputError(f"{source}: expected kind {kind}List with items, got kind {doc_kind!r}")
    return document["items"]


def _parse_all(items: list[Mapping[str, Any]], parse: Any, kind: str, source: str) -> tuple[Any, ...]:
    out = []
    for index, item in enumerate(items):
        try:
            if item.get("kind", kind) != kind:
                raise ValueError(f"kind is {item.get('kind')!r}")
            out.append(parse(item))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
            raise InputError(f"{source}: items[{index}]: malformed {kind}: {detail}") from exc
    return tuple(out)


def pods_from_list(document: object, source: str = "pods") -> tuple[Pod, ...]:
    """A PodList (kubectl get pods -A -o json) to domain pods; InputError naming the source."""
    return _parse_all(_items(document, "Pod", source), pod_parser(), "Pod", source)


def nodes_from_list(document: object, source: str = "nodes") -> tuple[Node, ...]:
    """A NodeList (kubectl get nodes -o json) to domain nodes; InputError naming the source."""
    return _parse_all(_items(document, "Node", source), node_parser(), "Node", source)


# The tolerations the DaemonSet controller adds to every daemon pod
# (pkg/controller/daemon/util/daemonset_util.go, AddOrUpdateDaemonPodTolerations).
_DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
_HOST_NETWORK_DAEMON_TOLERATION = ("node.kubernetes.io/network-unavailable", "NoSchedule")


def _daemon_tolerations(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    tolerations: list[Mapping[str, Any]] = list(spec.get("tolerations") or ())
    wanted = list(_DAEMON_TOLERATIONS)
    if spec.get("hostNetwork"):
        wanted.append(_HOST_NETWORK_DAEMON_TOLERATION)
    for key, effect in wanted:
        # MatchToleration: same key, operator, value and effect is the same toleration.
        if not any(
            t.get("key") == key
            and t.get("operator") == "Exists"
            and not t.get("value")
            and t.get("effect") == effect
            for t in tolerations
        ):
            tolerations.append({"key": key, "operator": "Exists", "effect": effect})
    return tolerations


def _template_pod(obj: Mapping[str, Any], template: str) -> Pod:
    """The pod a template stands for; its errors name their field under `template` (the pod's
    `spec.containers[0]...` is the DaemonSet's `spec.template: spec.containers[0]...`)."""
    try:
        return pod_from_json(obj)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{template}: {exc}") from exc


def daemonset_from_json(obj: Mapping[str, Any]) -> DaemonSet:
    """An apps/v1 DaemonSet to the pending pod it would put on each node its template admits."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    name = meta["name"]
    template = obj["spec"]["template"]
    template_meta = template.get("metadata") or {}
    spec = {key: value for key, value in (template.get("spec") or {}).items() if key != "nodeName"}
    spec["tolerations"] = _daemon_tolerations(spec)
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "controller": True}
    pod = _template_pod(
        {
            "metadata": {
                "name": name,  # daemon pods are named <ds>-<suffix>; the suffix is not known yet
                "namespace": namespace,
                "labels": template_meta.get("labels") or {},
                "annotations": template_meta.get("annotations") or {},
                "ownerReferences": [owner],
            },
            "spec": spec,
            "status": {"phase": "Pending"},
        },
        "spec.template",
    )
    containers = [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]
    images = tuple(str(c["image"]) for c in containers if isinstance(c, Mapping) and c.get("image"))
    return DaemonSet(namespace=namespace, name=name, pod=pod, images=images)


_LEGACY_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"


def pvc_from_json(obj: Mapping[str, Any]) -> PersistentVolumeClaim:
    """A PersistentVolumeClaim; its class read as GetPersistentVolumeClaimClass does (annotation first)."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    storage_class = annotations.get(_LEGACY_CLASS_ANNOTATION, spec.get("storageClassName"))
    return PersistentVolumeClaim(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        volume_name=str(spec.get("volumeName") or ""),
        storage_class=None if storage_class is None else str(storage_class),
        phase=str((obj.get("status") or {}).get("phase") or "Pending"),
    )


def _node_selector_terms(terms: Iterable[Mapping[str, Any]] | None) -> NodeSelectorTerms:
    # matchFields (only metadata.name exists) is ignored, as in a pod's node affinity here: a term
    # with matchFields alone is dropped.
    return tuple(
        _requirements(
            term.get("matchExpressions"),
            f"spec.nodeAffinity.required.nodeSelectorTerms[{index}].matchExpressions",
            _NODE_SELECTOR_OPERATORS,
        )
        for index, term in enumerate(terms or ())
        if term.get("matchExpressions")
    )


def pv_from_json(obj: Mapping[str, Any]) -> PersistentVolume:
    """A PersistentVolume: its required node affinity and its (legacy zone) labels."""
    meta = obj["metadata"]
    required = ((obj.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    return PersistentVolume(
        name=meta["name"],
        node_affinity=_node_selector_terms(required.get("nodeSelectorTerms")),
        labels=meta.get("labels") or {},
    )


_DEFAULT_CLASS_ANNOTATIONS = (
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",  # still honoured by the API server
)
_BINDING_MODES = frozenset({"Immediate", "WaitForFirstConsumer"})


def storage_class_from_json(obj: Mapping[str, Any]) -> StorageClass:
    """A storage.k8s.io/v1 StorageClass: binding mode, allowed topologies, default flag."""
    meta = obj["metadata"]
    annotations = meta.get("annotations") or {}
    return StorageClass(
        name=meta["name"],
        provisioner=str(obj.get("provisioner") or ""),
        binding_mode=_one_of(obj.get("volumeBindingMode"), "volumeBindingMode", _BINDING_MODES, "Immediate"),
        allowed_topologies=tuple(
            tuple(
                Requirement(str(expr["key"]), "In", tuple(str(v) for v in expr["values"]))
                for expr in term.get("matchLabelExpressions") or ()
            )
            for term in obj.get("allowedTopologies") or ()
        ),
        is_default=any(annotations.get(a) == "true" for a in _DEFAULT_CLASS_ANNOTATIONS),
    )


def namespace_from_json(obj: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
    """A Namespace to (name, labels), with the kubernetes.io/metadata.name label the API server sets."""
    meta = obj["metadata"]
    name = str(meta["name"])
    labels = dict(meta.get("labels") or {})
    labels.setdefault(NAMESPACE_NAME, name)
    return name, labels


def pod_disruption_budget_from_json(obj: Mapping[str, Any]) -> DisruptionBudget:
    """A policy/v1 PodDisruptionBudget: its selector and status.disruptionsAllowed, what the Eviction API
    judges. A budget without a status yet (its controller has not seen it) allows nothing, as the Go
    zero value the API server reads then."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return DisruptionBudget(
        namespace=meta.get("namespace") or "default",
        name=str(meta["name"]),
        selector=_label_selector(spec.get("selector"), "spec.selector"),
        disruptions_allowed=_int(status.get("disruptionsAllowed", 0), "status.disruptionsAllowed"),
    )


def pod_disruption_budgets_from_list(
    document: object, source: str = "poddisruptionbudgets"
) -> tuple[DisruptionBudget, ...]:
    """A PodDisruptionBudgetList (kubectl get pdb -A -o json) to domain budgets; InputError naming the
    source and the item."""
    kind = "PodDisruptionBudget"
    return _parse_all(_items(document, kind, source), pod_disruption_budget_from_json, kind, source)


_POD_GROUP_KINDS = {
    COSCHEDULING_API_GROUP: PodGroupKind.COSCHEDULING,
    VOLCANO_API_GROUP: PodGroupKind.VOLCANO,
}


def pod_group_from_json(obj: Mapping[str, Any]) -> PodGroup:
    """A coscheduling (scheduling.x-k8s.io) or Volcano (scheduling.volcano.sh) PodGroup."""
    meta = obj["metadata"]
    api_group = str(obj.get("apiVersion") or "").partition("/")[0]
    kind = _POD_GROUP_KINDS.get(api_group)
    if kind is None:
        raise ValueError(f"PodGroup of an unknown API group {api_group!r}")
    min_member = _int((obj.get("spec") or {}).get("minMember") or 0, "spec.minMember")
    if min_member < 0:
        raise ValueError("spec.minMember must not be negative")
    succeeded = 0
    if kind is PodGroupKind.VOLCANO:
        succeeded = _int((obj.get("status") or {}).get("succeeded") or 0, "status.succeeded")
        if succeeded < 0:
            raise ValueError("status.succeeded must not be negative")
    return PodGroup(meta.get("namespace") or "default", str(meta["name"]), kind, min_member, succeeded)


def pod_template_from_json(obj: Mapping[str, Any]) -> PodTemplate:
    """A core/v1 PodTemplate: its template as the pending pod each consumer would be."""
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    name = str(meta["name"])
    template = obj.get("template") or {}
    template_meta = template.get("metadata") or {}
    pod = _template_pod(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": template_meta.get("labels") or {},
                "annotations": template_meta.get("annotations") or {},
            },
            "spec": template.get("spec") or {},
            "status": {"phase": "Pending"},
        },
        "template",
    )
    return PodTemplate(namespace, name, pod)


def condition_from_json(raw: Mapping[str, Any]) -> Condition:
    """One metav1.Condition."""
    return Condition(
        type=str(raw["type"]),
        status=str(raw.get("status") or "Unknown"),
        reason=str(raw.get("reason") or ""),
        message=str(raw.get("message") or ""),
        observed_generation=_int(raw.get("observedGeneration") or 0, "observedGeneration"),
        last_transition_time=parse_time(raw.get("lastTransitionTime")),
    )


def condition_to_json(condition: Condition) -> dict[str, Any]:
    """A metav1.Condition as the API server stores it (lastTransitionTime in RFC 3339, seconds)."""
    at = condition.last_transition_time
    return {
        "type": condition.type,
        "status": condition.status,
        "reason": condition.reason,
        "message": condition.message,
        "observedGeneration": condition.observed_generation,
        "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ") if at else None,
    }


def provisioning_request_from_json(obj: Mapping[str, Any]) -> ProvisioningRequest:
    """An autoscaling.x-k8s.io ProvisioningRequest (v1; v1beta1 has the same shape)."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    pod_sets = tuple(
        PodSet(str(item["podTemplateRef"]["name"]), _int(item.get("count") or 0, "spec.podSets[].count"))
        for item in spec.get("podSets") or ()
    )
    if any(p.count < 0 for p in pod_sets):
        raise ValueError("spec.podSets[].count must not be negative")
    parameters = spec.get("parameters") or {}
    return ProvisioningRequest(
        namespace=meta.get("namespace") or "default",
        name=str(meta["name"]),
        class_name=str(spec.get("provisioningClassName") or ""),
        pod_sets=pod_sets,
        uid=str(meta.get("uid") or ""),
        generation=_int(meta.get("generation") or 0, "metadata.generation"),
        created_at=parse_time(meta.get("creationTimestamp")),
        parameters={str(k): str(v) for k, v in parameters.items()},
        conditions=tuple(condition_from_json(c) for c in (obj.get("status") or {}).get("conditions") or ()),
        version=str(obj.get("apiVersion") or "").rpartition("/")[2] or PROVISIONING_API_VERSION,
    )


_PARSERS: Mapping[str, Callable[[Mapping[str, Any]], Any]] = {
    "Pod": pod_from_json,
    "Node": node_from_json,
    "DaemonSet": daemonset_from_json,
    "PersistentVolumeClaim": pvc_from_json,
    "PersistentVolume": pv_from_json,
    "StorageClass": storage_class_from_json,
    "Namespace": namespace_from_json,
    "PodGroup": pod_group_from_json,
    "PodTemplate": pod_template_from_json,
    "ProvisioningRequest": provisioning_request_from_json,
    "ResourceSlice": resource_slice_from_json,
    "DeviceClass": device_class_from_json,
    "ResourceClaim": resource_claim_from_json,
    "ResourceClaimTemplate": resource_claim_template_from_json,
}


@dataclass(frozen=True, slots=True)
class KubeObjects:
    """What `objects_from_documents` found, by kind, in the order the documents hold them."""

    pods: tuple[Pod, ...] = ()
    nodes: tuple[Node, ...] = ()
    daemonsets: tuple[DaemonSet, ...] = ()
    pvcs: tuple[PersistentVolumeClaim, ...] = ()
    pvs: tuple[PersistentVolume, ...] = ()
    storage_classes: tuple[StorageClass, ...] = ()
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    pod_groups: tuple[PodGroup, ...] = ()
    pod_templates: tuple[PodTemplate, ...] = ()
    provisioning_requests: tuple[ProvisioningRequest, ...] = ()
    dra: DraObjects = NO_DRA  # resource.k8s.io/v1 ResourceSlices, DeviceClasses, claims, templates
    skipped: tuple[str, ...] = ()  # the kind of each object skipped (one entry per object)
    kinds: frozenset[str] = frozenset()  # kinds present, incl. that of an empty <Kind>List


def _document_items(document: object, source: str) -> list[tuple[str, Mapping[str, Any], str]]:
    """(kind, object, where) for each object of a List / <Kind>List, or for a single object."""
    if not isinstance(document, Mapping):
        raise InputError(f"{source}: expected a Kubernetes object or List, got {type(document).__name__}")
    doc_kind = document.get("kind")
    if not isinstance(doc_kind, str) or not doc_kind:
        raise InputError(f"{source}: expected a Kubernetes object or List with a kind")
    items = document.get("items")
    if not (doc_kind.endswith("List") and "items" in document):
        return [(doc_kind, document, source)]
    if not isinstance(items, list):
        raise InputError(f"{source}: expected items to be a list in {doc_kind}")
    # Raw API lists (PodList, ...) leave out each item's kind; kubectl's List spells it out.
    default_kind = doc_kind[: -len("List")] or None
    out: list[tuple[str, Mapping[str, Any], str]] = []
    for index, item in enumerate(items):
        where = f"{source}: items[{index}]"
        if not isinstance(item, Mapping):
            raise InputError(f"{where}: expected a Kubernetes object, got {type(item).__name__}")
        kind = item.get("kind") or default_kind
        if not isinstance(kind, str):
            raise InputError(f"{where}: expected a Kubernetes object with a kind")
        out.append((kind, item, where))
    return out


def objects_from_documents(documents: Iterable[tuple[object, str]]) -> KubeObjects:
    """Any `kubectl get ... -o json` output ((document, source) pairs) to domain objects by kind.

    A List of mixed kinds, a `<Kind>List` or one object; kinds the planner does not read are
    skipped and listed in `skipped`. InputError naming the source and the item on malformed input.
    """
    found: dict[str, list[Any]] = {kind: [] for kind in _PARSERS}
    skipped: list[str] = []
    kinds: set[str] = set()
    parsers = {**_PARSERS, "Pod": pod_parser(), "Node": node_parser()}  # memos for this call's documents
    for document, source in documents:
        if isinstance(document, Mapping) and isinstance(document.get("kind"), str):
            list_kind = document["kind"][: -len("List")]
            if document["kind"].endswith("List") and list_kind in _PARSERS:
                kinds.add(list_kind)
        for kind, item, where in _document_items(document, source):
            parse = parsers.get(kind)
            if parse is None:
                skipped.append(kind)
                continue
            kinds.add(kind)
            try:
                found[kind].append(parse(item))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                detail = f"missing field {exc}" if isinstance(exc, KeyError) else str(exc)
                raise InputError(f"{where}: malformed {kind}: {detail}") from exc
    return KubeObjects(
        pods=tuple(found["Pod"]),
        nodes=tuple(found["Node"]),
        daemonsets=tuple(found["DaemonSet"]),
        pvcs=tuple(found["PersistentVolumeClaim"]),
        pvs=tuple(found["PersistentVolume"]),
        storage_classes=tuple(found["StorageClass"]),
        namespaces=dict(found["Namespace"]),
        pod_groups=tuple(found["PodGroup"]),
        pod_templates=tuple(found["PodTemplate"]),
        provisioning_requests=tuple(found["ProvisioningRequest"]),
        dra=DraObjects(
            tuple(found["ResourceSlice"]),
            tuple(found["DeviceClass"]),
            tuple(found["ResourceClaim"]),
            tuple(found["ResourceClaimTemplate"]),
        ),
        skipped=tuple(skipped),
        kinds=frozenset(kinds),
    )
