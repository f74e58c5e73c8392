"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902) for the fake Kubernetes API server."""

from __future__ import annotations

import re
from typing import Any

from shared.local.kube_api_resources import ApiError, bad_request, clone

# --------------------------------------------------------------------------- patches


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; builds new dicts along patched paths and never mutates ``target``."""
    if not isinstance(patch, dict):
        return clone(patch) if isinstance(patch, list) else patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def has_directive(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k.startswith("$") or has_directive(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_directive(v) for v in value)
    return False


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ApiError(422, f"JSON pointer must start with '/': {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve(doc: Any, tokens: list[str], path: str) -> Any:
    for token in tokens:
        doc = _child(doc, token, path)
    return doc


def _child(container: Any, token: str, path: str) -> Any:
    if isinstance(container, dict):
        if token not in container:
            raise ApiError(422, f"doc is missing path: {path!r}")
        return container[token]
    if isinstance(container, list):
        index = _list_index(container, token, path, allow_end=False)
        return container[index]
    raise ApiError(422, f"doc is missing path: {path!r}")


def _list_index(container: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not re.fullmatch(r"0|[1-9]\d*", token):
        raise ApiError(422, f"invalid array index in path: {path!r}")
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise ApiError(422, f"array index out of bounds in path: {path!r}")
    return index


def json_patch(doc: Any, ops: Any) -> Any:
    """RFC 6902 JSON patch applied to a copy of ``doc``; errors are 422 like the real server."""
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise bad_request("json patch must be a JSON array of operation objects")
    doc = clone(doc)

    def add(doc: Any, tokens: list[str], value: Any, path: str) -> Any:
        if not tokens:
            return value
        parent = _resolve(doc, tokens[:-1], path)
        if isinstance(parent, dict):
            parent[tokens[-1]] = value
        elif isinstance(parent, list):
            parent.insert(_list_index(parent, tokens[-1], path, allow_end=True), value)
        else:
            raise ApiError(422, f"doc is missing path: {path!r}")
        return doc

    def remove(doc: Any, tokens: list[str], path: str) -> tuple[Any, Any]:
        if not tokens:
            return None, doc
        parent = _resolve(doc, tokens[:-1], path)
        old = _child(parent, tokens[-1], path)
        if isinstance(parent, dict):
            del parent[tokens[-1]]
        else:
            del parent[int(tokens[-1])]
        return doc, old

    for op in ops:
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise bad_request(f"json patch operation is missing 'path': {op}")
        tokens = _pointer(path)
        if kind == "add":
            doc = add(doc, tokens, clone(op.get("value")), path)
        elif kind == "remove":
            doc, _ = remove(doc, tokens, path)
        elif kind == "replace":
            _resolve(doc, tokens, path)  # must exist
            doc, _ = remove(doc, tokens, path)
            doc = add(doc, tokens, clone(op.get("value")), path)
        elif kind == "test":
            if _resolve(doc, tokens, path) != op.get("value"):
                raise ApiError(422, f"testing value {path} failed: test failed")
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise bad_request(f"json patch operation is missing 'from': {op}")
            from_tokens = _pointer(source)
            if kind == "move":
                doc, value = remove(doc, from_tokens, source)
            else:
                value = clone(_resolve(doc, from_tokens, source))
            doc = add(doc, tokens, value, path)
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc
