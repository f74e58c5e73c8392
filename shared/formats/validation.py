"""One line per problem of a pydantic ValidationError: `source: node_groups[1].taints[0].effect: message`.

Every boundary that validates a document with pydantic (the config, the functions' environments, the
webhook's payloads, the reconcile's triggers) reports its problems this way. An unknown key is named
with the closest keys of its own mapping when the caller says which model the document is (`root`).
Lives apart from shared.config so that the webhook and the triggers do not load the config's models.
"""

from __future__ import annotations

import difflib
from typing import Any, get_args

from pydantic import BaseModel, ValidationError


def format_validation_error(
    exc: ValidationError, source: str = "config", root: type[BaseModel] | None = None
) -> str:
    """One line per problem, each naming its place in the document; `root`: the document's model."""
    lines = []
    errors = exc.errors()
    located = {err["loc"][:1] for err in errors if len(err["loc"]) > 1}
    for err in errors:
        if err["type"] == "too_short" and err["loc"][:1] in located:
            continue  # pydantic also reports the list as empty once its items failed
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = _unknown_key(err["loc"], root)
        lines.append(f"{source}: {path or '(root)'}: {message}")
    return "\n".join(lines)


def _unknown_key(loc: tuple[int | str, ...], root: type[BaseModel] | None) -> str:
    """ "unknown key", with the closest keys of its mapping (a typo's likely meaning)."""
    if root is None:
        return "unknown key"
    known = sorted(_model_at(root, loc[:-1]).model_fields)
    close = difflib.get_close_matches(str(loc[-1]), known, n=3, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {' or '.join(repr(k) for k in close)}?"
    return f"unknown key; known keys here: {', '.join(known)}"


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel]:
    """The model whose fields the mapping at `loc` (a pydantic error location) holds."""
    model = root
    for part in loc:
        if isinstance(part, int) or part not in model.model_fields:
            continue  # an item of a tuple of models: same model
        nested = _models_in(model.model_fields[part].annotation)
        if nested:
            model = nested[0]
    return model


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]
