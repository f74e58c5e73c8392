"""Bounded error messages for rejected input: a preview of a bad value, the first few problems.

Used by every boundary that validates a document with pydantic (the forced scale-down payload, AWS
events): an error names the fields and echoes at most PREVIEW_CHARS of a value, never a 1 MB one.
"""

from __future__ import annotations

import reprlib

from pydantic import ValidationError

from shared.domain.errors import MAX_ERRORS_SHOWN

# Errors echo this much of a bad value (and name MAX_ERRORS_SHOWN problems): a 1 MB value is never repeated.
PREVIEW_CHARS = 200
_PREVIEW = reprlib.Repr()
_PREVIEW.maxlevel, _PREVIEW.maxdict, _PREVIEW.maxlist, _PREVIEW.maxtuple = 2, 4, 4, 4
_PREVIEW.maxstring = _PREVIEW.maxother = PREVIEW_CHARS


def preview(value: object, limit: int = PREVIEW_CHARS) -> str:
    """At most about `limit` characters of a value for an error or a log line, never all of a big one."""
    try:
        text = _PREVIEW.repr(value)
    except ValueError:  # an integer past the digits str() converts
        text = f"<{type(value).__name__}>"
    if len(text) > limit:
        text = text[:limit] + "..."
    if isinstance(value, str) and len(value) > limit:
        text += f" ({len(value)} characters)"
    elif isinstance(value, list | tuple | dict) and len(value) > _PREVIEW.maxlist:
        text += f" ({len(value)} items)"
    return text


def describe_validation_error(exc: ValidationError, source: str) -> tuple[str, tuple[str, ...]]:
    """`source: field: message (got <preview>)` for the first few problems, and the fields named."""
    errors = exc.errors()
    located = {err["loc"][:1] for err in errors if len(err["loc"]) > 1}
    lines: list[str] = []
    fields: dict[str, None] = {}
    for err in errors:
        if err["type"] == "too_short" and err["loc"][:1] in located:
            continue  # pydantic also reports the list as empty once its items failed
        loc = [p if isinstance(p, int) else preview(p, 64).strip("'") for p in err["loc"]]
        if loc:
            fields[str(loc[0])] = None
        if len(lines) == MAX_ERRORS_SHOWN:
            continue
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        message = err["msg"].removeprefix("Value error, ")
        got = "" if err["type"] in ("missing", "too_long") else f" (got {preview(err['input'])})"
        lines.append(f"{source}: {path or '(root)'}: {message}{got}")
    if len(errors) > len(lines):
        lines.append(f"{source}: ... {len(errors)} problems in all")
    return "\n".join(lines), tuple(fields)
