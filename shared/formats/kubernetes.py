"""Kubernetes JSON (`kubectl get pods|nodes -o json`, or raw API list responses) to domain objects.

Kept lean: the adapter parses thousands of objects per run, so only the fields the planner reads
are touched, and quantities go through a cached parser.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from shared.domain.errors import InputError
from shared.domain.model import Node, Pod, Requirement, Scheduling, Taint, TaintEffect, Toleration
from shared.domain.resources import Resources
from shared.formats.quantity import quantity

_PROVIDER_ID = re.compile(r"^aws:///[^/]*/(i-[0-9a-f]+)$")
_EFFECTS = {e.value: e for e in TaintEffect}


def parse_time(raw: object) -> datetime | None:
    """RFC 3339 timestamp (`2026-12-02T11:00:00Z`) to an aware datetime; None when absent."""
    if not raw or not isinstance(raw, str):
        return None
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return None


def instance_id_from_provider_id(provider_id: str | None) -> str | None:
    """`aws:///us-west-2a/i-0abc` -> `i-0abc` (None for other providers)."""
    if not provider_id:
        return None
    match = _PROVIDER_ID.match(provider_id)
    return match.group(1) if match else None


def _add(total: dict[str, int], raw: Mapping[str, Any] | None) -> None:
    if raw:
        for name, value in raw.items():
            total[name] = total.get(name, 0) + quantity(name, value)


def _requests_uncached(spec: Mapping[str, Any]) -> Resources:
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add(total, (container.get("resources") or {}).get("requests"))
    for container in spec.get("initContainers") or ():
        init: dict[str, int] = {}
        _add(init, (container.get("resources") or {}).get("requests"))
        for name, value in init.items():
            if value > total.get(name, 0):
                total[name] = value
    _add(total, spec.get("overhead"))
    total["pods"] = total.get("pods", 0) + 1  # every pod takes one of the node's pod slots
    return Resources.of(total)


def _requests_key(containers: Any) -> tuple[Any, ...]:
    return tuple(tuple(((c.get("resources") or {}).get("requests") or {}).items()) for c in containers or ())


_requests_cache: dict[tuple[Any, ...], Resources] = {}
_CACHE_LIMIT = 4096


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """Sum over containers, max with each init container, plus spec.overhead."""
    # Thousands of pods share a handful of request shapes: key on the raw request items (cheap
    # tuples of the decoded JSON) and parse each shape once.
    try:
        key = (
            _requests_key(spec.get("containers")),
            _requests_key(spec.get("initContainers")),
            tuple((spec.get("overhead") or {}).items()),
        )
        cached = _requests_cache.get(key)
    except (TypeError, AttributeError):  # unhashable/malformed values: the slow path reports them
        return _requests_uncached(spec)
    if cached is None:
        cached = _requests_uncached(spec)
        # Only all-string shapes are kept: 1 == True == 1.0 as dict keys, and the API sends strings.
        if all(type(value) is str for part in key[:2] for items in part for _, value in items) and all(
            type(value) is str for _, value in key[2]
        ):
            if len(_requests_cache) >= _CACHE_LIMIT:
                _requests_cache.clear()
            _requests_cache[key] = cached
    return cached


def _requirements(raw: Iterable[Mapping[str, Any]] | None) -> tuple[Requirement, ...]:
    return tuple(
        Requirement(str(expr["key"]), str(expr["operator"]), tuple(str(v) for v in expr.get("values") or ()))
        for expr in raw or ()
    )


_scheduling_cache: dict[Scheduling, Scheduling] = {}


_raw_scheduling_cache: dict[tuple[Any, ...], Scheduling] = {}


def _scheduling(spec: Mapping[str, Any]) -> Scheduling:
    selector = spec.get("nodeSelector")
    tolerations = spec.get("tolerations")
    affinity = spec.get("affinity")
    if not selector and not tolerations and not affinity:
        return _EMPTY_SCHEDULING
    try:
        key = (
            tuple(selector.items()) if selector else (),
            tuple(tuple(t.items()) for t in tolerations) if tolerations else (),
            json.dumps(affinity.get("nodeAffinity"), sort_keys=True) if affinity else None,
        )
        cached = _raw_scheduling_cache.get(key)
    except (TypeError, AttributeError, ValueError):
        return _build_scheduling(spec)
    if cached is None:
        cached = _build_scheduling(spec)
        # Only string values are kept (tolerationSeconds aside, which the planner does not read).
        if all(type(v) is str for _, v in key[0]) and all(
            type(v) is str or k == "tolerationSeconds" for items in key[1] for k, v in items
        ):
            if len(_raw_scheduling_cache) >= _CACHE_LIMIT:
                _raw_scheduling_cache.clear()
            _raw_scheduling_cache[key] = cached
    return cached


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
            _requirements(term.get("matchExpressions")) for term in affinity if term.get("matchExpressions")
        ),
        tolerations=tuple(
            Toleration(
                key=str(t.get("key") or ""),
                operator=str(t.get("operator") or "Equal"),
                value=str(t.get("value") or ""),
                effect=str(t.get("effect") or ""),
            )
            for t in tolerations
        ),
    )
    # Intern: thousands of pods share a handful of specs, and the planner caches by identity.
    return _scheduling_cache.setdefault(scheduling, scheduling)


_EMPTY_SCHEDULING = Scheduling()


def pod_from_json(obj: Mapping[str, Any]) -> Pod:
    """One Pod object (as the API returns it) to a domain Pod; KeyError/TypeError on malformed input."""
    meta = obj["metadata"]
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owners = meta.get("ownerReferences") or ()
    owner_kind = next((o.get("kind") for o in owners if o.get("controller")), None) or (
        owners[0].get("kind") if owners else None
    )
    unschedulable = False
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled":
            unschedulable = cond.get("status") == "False" and cond.get("reason") == "Unschedulable"
            break
    return Pod(
        namespace=meta.get("namespace") or "default",
        name=meta["name"],
        uid=meta.get("uid") or "",
        requests=pod_requests(spec),
        phase=status.get("phase") or "Pending",
        node_name=spec.get("nodeName") or None,
        scheduling=_scheduling(spec),
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
        owner_kind=owner_kind,
        priority=int(spec.get("priority") or 0),
        created_at=parse_time(meta.get("creationTimestamp")),
        unschedulable=unschedulable,
    )


def node_from_json(obj: Mapping[str, Any]) -> Node:
    """One Node object to a domain Node."""
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
    allocatable = status.get("allocatable") or {}
    return Node(
        name=meta["name"],
        instance_id=instance_id_from_provider_id(spec.get("providerID")),
        allocatable=Resources.of({name: quantity(name, value) for name, value in allocatable.items()}),
        labels=meta.get("labels") or {},
        annotations=meta.get("annotations") or {},
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        ready_changed_at=ready_changed,
        created_at=parse_time(meta.get("creationTimestamp")),
        resource_version=str(meta.get("resourceVersion") or ""),
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
    return _parse_all(_items(document, "Pod", source), pod_from_json, "Pod", source)


def nodes_from_list(document: object, source: str = "nodes") -> tuple[Node, ...]:
    """A NodeList (kubectl get nodes -o json) to domain nodes; InputError naming the source."""
    return _parse_all(_items(document, "Node", source), node_from_json, "Node", source)
