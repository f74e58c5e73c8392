"""The `--state` file of `backlog-scaler plan` (and its JSON form of ScalerState)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from shared.domain.errors import InputError
from shared.domain.model import GroupState, NodeState, PodMemory, ScalerState


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


def _moved_jobs(raw: object, where: str) -> dict[str, tuple[int, datetime]]:
    """`{"<job>": {"moves": n, "last": time}}` (the moves per job migration remembers)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected an object of jobs, got {type(raw).__name__}")
    found: dict[str, tuple[int, datetime]] = {}
    for job, entry in raw.items():
        moves = entry.get("moves") if isinstance(entry, Mapping) else None
        last = _time(entry.get("last"), f"{where}.{job}.last") if isinstance(entry, Mapping) else None
        if not isinstance(moves, int) or moves < 0 or last is None:
            raise InputError(f'{where}.{job}: expected {{"moves": n, "last": time}}, got {entry!r}')
        found[str(job)] = (moves, last)
    return found


def _times(raw: object, where: str) -> tuple[datetime, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(f"{where}: expected a list of ISO 8601 timestamps, got {type(raw).__name__}")
    return tuple(t for index, item in enumerate(raw) if (t := _time(item, f"{where}[{index}]")) is not None)


def _section(document: Mapping[str, Any], name: str, source: str) -> Mapping[str, Any]:
    section = document.get(name) or {}
    if not isinstance(section, Mapping) or not all(isinstance(v, Mapping) for v in section.values()):
        raise InputError(f"{source}: {name}: expected an object of objects")
    return section


def _string(raw: object, where: str) -> str:
    if raw is None:
        return ""
    if not isinstance(raw, str):
        raise InputError(f"{where}: expected a string, got {type(raw).__name__}")
    return raw


def _strings(raw: object, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
        raise InputError(f"{where}: expected a list of strings")
    return tuple(raw)


def _times_by_name(raw: object, where: str) -> dict[str, datetime]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(f"{where}: expected an object of group -> timestamp")
    out: dict[str, datetime] = {}
    for name, value in raw.items():
        when = _time(value, f"{where}.{name}")
        if when is None:
            raise InputError(f"{where}.{name}: expected an ISO 8601 timestamp string, got null")
        out[name] = when
    return out


_POD_FIELDS = frozenset({"uid", "counted_on", "counted_since", "distrusted", "bought", "refused"})


def _pod_memory(raw: Mapping[str, Any], where: str) -> PodMemory:
    unknown = set(raw) - _POD_FIELDS
    if unknown:
        raise InputError(
            f"{where}: unknown keys {sorted(unknown)}; expected {', '.join(sorted(_POD_FIELDS))}"
        )
    return PodMemory(
        uid=_string(raw.get("uid"), f"{where}.uid"),
        counted_on=_string(raw.get("counted_on"), f"{where}.counted_on"),
        counted_since=_time(raw.get("counted_since"), f"{where}.counted_since"),
        distrusted=_strings(raw.get("distrusted"), f"{where}.distrusted"),
        bought=_times_by_name(raw.get("bought"), f"{where}.bought"),
        refused=_times_by_name(raw.get("refused"), f"{where}.refused"),
    )


_SECTIONS = ("nodes", "groups", "instances", "pods")


def state_from_json(document: object, source: str = "state") -> ScalerState:
    """`{"nodes": {n: {"idle_since"}}, "groups": {g: {"backoff_until", "last_scale_up"}},
    "instances": {i: {"first_seen"}}, "pods": {"ns/name": {"uid", "counted_on", "counted_since",
    "distrusted", "bought", "refused"}}}` to a ScalerState; InputError naming the field."""
    if not isinstance(document, Mapping):
        raise InputError(f"{source}: expected an object with {'/'.join(_SECTIONS)}")
    unknown = set(document) - set(_SECTIONS)
    if unknown:
        raise InputError(f"{source}: unknown keys {sorted(unknown)}; expected {', '.join(_SECTIONS)}")
    nodes = {
        name: NodeState(idle_since=_time(v.get("idle_since"), f"{source}: nodes.{name}.idle_since"))
        for name, v in _section(document, "nodes", source).items()
    }
    groups = {
        name: GroupState(
            backoff_until=_time(v.get("backoff_until"), f"{source}: groups.{name}.backoff_until"),
            last_scale_up=_time(v.get("last_scale_up"), f"{source}: groups.{name}.last_scale_up"),
            last_scale_down=_time(v.get("last_scale_down"), f"{source}: groups.{name}.last_scale_down"),
            migrated_at=_times(v.get("migrated_at"), f"{source}: groups.{name}.migrated_at"),
            moved_jobs=_moved_jobs(v.get("moved_jobs"), f"{source}: groups.{name}.moved_jobs"),
        )
        for name, v in _section(document, "groups", source).items()
    }
    instances: dict[str, datetime] = {}
    for name, v in _section(document, "instances", source).items():
        seen = _time(v.get("first_seen"), f"{source}: instances.{name}.first_seen")
        if seen is not None:
            instances[name] = seen
    pods = {
        key: _pod_memory(v, f"{source}: pods.{key}") for key, v in _section(document, "pods", source).items()
    }
    return ScalerState(nodes=nodes, groups=groups, instances_first_seen=instances, pods=pods)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if value else None


def _pod_memory_to_json(memory: PodMemory) -> dict[str, Any]:
    return {
        "uid": memory.uid,
        "counted_on": memory.counted_on,
        "counted_since": _iso(memory.counted_since),
        "distrusted": list(memory.distrusted),
        "bought": {k: _iso(v) for k, v in sorted(memory.bought.items())},
        "refused": {k: _iso(v) for k, v in sorted(memory.refused.items())},
    }


def state_to_json(state: ScalerState) -> dict[str, Any]:
    """The inverse of `state_from_json` (no "pods" section when no pod is remembered)."""
    document: dict[str, Any] = {
        "nodes": {k: {"idle_since": _iso(v.idle_since)} for k, v in sorted(state.nodes.items())},
        "groups": {
            k: {
                "backoff_until": _iso(v.backoff_until),
                "last_scale_up": _iso(v.last_scale_up),
                "last_scale_down": _iso(v.last_scale_down),
                **({"migrated_at": [_iso(t) for t in v.migrated_at]} if v.migrated_at else {}),
                **(
                    {
                        "moved_jobs": {
                            j: {"moves": n, "last": _iso(t)} for j, (n, t) in sorted(v.moved_jobs.items())
                        }
                    }
                    if v.moved_jobs
                    else {}
                ),
            }
            for k, v in sorted(state.groups.items())
        },
        "instances": {k: {"first_seen": _iso(v)} for k, v in sorted(state.instances_first_seen.items())},
    }
    if state.pods:
        document["pods"] = {k: _pod_memory_to_json(v) for k, v in sorted(state.pods.items())}
    return document
