"""The `--state` file of `backlog-scaler plan` (and its JSON form of ScalerState)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared.domain.errors import InputError
from shared.domain.model import GroupState, NodeState, ScalerState


def _time(raw: object, where: str) -> datetime | None:
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise InputError(f"{where}: expected an ISO 8601 timestamp string, got {type(raw).__name__}")
    try:
        value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"{where}: not an ISO 8601 timestamp: {raw!r}") from exc
    if value.tzinfo is None:
        raise InputError(f"{where}: timestamp needs a timezone (e.g. a trailing Z): {raw!r}")
    return value


def _section(document: Mapping[str, Any], name: str, source: str) -> Mapping[str, Any]:
    section = document.get(name) or {}
    if not isinstance(section, Mapping) or not all(isinstance(v, Mapping) for v in section.values()):
        raise InputError(f"{source}: {name}: expected an object of objects")
    return section


def state_from_json(document: object, source: str = "state") -> ScalerState:
    """`{"nodes": {n: {"idle_since"}}, "groups": {g: {"backoff_until", "last_scale_up"}},
    "instances": {i: {"first_seen"}}}` to a ScalerState; InputError naming the field."""
    if not isinstance(document, Mapping):
        raise InputError(f"{source}: expected an object with nodes/groups/instances")
    unknown = set(document) - {"nodes", "groups", "instances"}
    if unknown:
        raise InputError(f"{source}: unknown keys {sorted(unknown)}; expected nodes, groups, instances")
    nodes = {
        name: NodeState(idle_since=_time(v.get("idle_since"), f"{source}: nodes.{name}.idle_since"))
        for name, v in _section(document, "nodes", source).items()
    }
    groups = {
        name: GroupState(
            backoff_until=_time(v.get("backoff_until"), f"{source}: groups.{name}.backoff_until"),
            last_scale_up=_time(v.get("last_scale_up"), f"{source}: groups.{name}.last_scale_up"),
            last_scale_down=_time(v.get("last_scale_down"), f"{source}: groups.{name}.last_scale_down"),
        )
        for name, v in _section(document, "groups", source).items()
    }
    instances: dict[str, datetime] = {}
    for name, v in _section(document, "instances", source).items():
        seen = _time(v.get("first_seen"), f"{source}: instances.{name}.first_seen")
        if seen is not None:
            instances[name] = seen
    return ScalerState(nodes=nodes, groups=groups, instances_first_seen=instances)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def state_to_json(state: ScalerState) -> dict[str, Any]:
    """The inverse of `state_from_json`."""
    return {
        "nodes": {k: {"idle_since": _iso(v.idle_since)} for k, v in sorted(state.nodes.items())},
        "groups": {
            k: {
                "backoff_until": _iso(v.backoff_until),
                "last_scale_up": _iso(v.last_scale_up),
                "last_scale_down": _iso(v.last_scale_down),
            }
            for k, v in sorted(state.groups.items())
        },
        "instances": {k: {"first_seen": _iso(v)} for k, v in sorted(state.instances_first_seen.items())},
    }
