"""Label and field selectors, parsed and matched as the real API server does."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from shared.local.kube_api_resources import ApiError, JsonObj, ServedResource, bad_request

# --------------------------------------------------------------------------- selectors


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if not present or value is None or not re.fullmatch(r"-?\d+", value):
            return False
        bound = int(self.values[0])
        return int(value) > bound if self.op == ">" else int(value) < bound


_LABEL_TOKEN = re.compile(r"\s*(?:(!=|==|=|!|\(|\)|,|<|>)|([^\s!=(),<>]+))")
_Token = tuple[str, str]  # ("op" | "id", text)


def _tokenize_label_selector(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _LABEL_TOKEN.match(text, pos)
        if m is None:
            raise bad_request(f"unable to parse requirement: invalid character in {text!r}")
        tokens.append(("op", m.group(1)) if m.group(1) else ("id", m.group(2)))
        pos = m.end()
    return tokens


class _LabelSelectorParser:
    """Recursive-descent parser for the ``labelSelector`` query syntax (comma = AND)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize_label_selector(text)
        self.i = 0

    def _peek(self) -> _Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _next(self) -> _Token | None:
        tok = self._peek()
        self.i += 1
        return tok

    def _fail(self, found: _Token | None, expected: str) -> ApiError:
        what = f"'{found[1]}'" if found else "end of input"
        return bad_request(
            f"unable to parse requirement: found {what}, expected: {expected} (in {self.text!r})"
        )

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        if not self.tokens:
            return requirements
        while True:
            requirements.append(self._requirement())
            tok = self._next()
            if tok is None:
                return requirements
            if tok != ("op", ","):
                raise self._fail(tok, "','")

    def _requirement(self) -> Requirement:
        tok = self._next()
        if tok == ("op", "!"):
            key_tok = self._next()
            if key_tok is None or key_tok[0] != "id":
                raise self._fail(key_tok, "identifier")
            return Requirement(key_tok[1], "!")
        if tok is None or tok[0] != "id":
            raise self._fail(tok, "!, identifier")
        key = tok[1]
        op = self._peek()
        if op is None or op == ("op", ","):
            return Requirement(key, "exists")
        self.i += 1
        if op in (("op", "="), ("op", "=="), ("op", "!=")):
            value_tok = self._peek()
            value = ""
            if value_tok is not None and value_tok[0] == "id":
                value = value_tok[1]
                self.i += 1
            return Requirement(key, "!=" if op[1] == "!=" else "=", (value,))
        if op in (("op", ">"), ("op", "<")):
            value_tok = self._next()
            if value_tok is None or value_tok[0] != "id" or not re.fullmatch(r"-?\d+", value_tok[1]):
                raise self._fail(value_tok, "integer")
            return Requirement(key, op[1], (value_tok[1],))
        if op in (("id", "in"), ("id", "notin")):
            return Requirement(key, op[1], self._value_set())
        raise self._fail(op, "in, notin, =, ==, !=, gt, lt")

    def _value_set(self) -> tuple[str, ...]:
        tok = self._next()
        if tok != ("op", "("):
            raise self._fail(tok, "'('")
        values: list[str] = []
        while True:
            tok = self._next()
            if tok is not None and tok[0] == "id":
                values.append(tok[1])
                tok = self._next()
            if tok == ("op", ","):
                continue
            if tok == ("op", ")"):
                break
            raise self._fail(tok, "',' or ')'")
        if not values:
            raise bad_request(f"unable to parse requirement: values set can't be empty (in {self.text!r})")
        return tuple(values)


def parse_label_selector(text: str) -> list[Requirement]:
    """Parse the ``labelSelector`` query syntax; raises ApiError(400) when malformed."""
    return _LabelSelectorParser(text).parse()


def label_selector_from_object(selector: JsonObj | None) -> list[Requirement] | None:
    """Requirements of a ``metav1.LabelSelector``; None means "selects nothing" (a null selector)."""
    if selector is None:
        return None
    requirements = [Requirement(k, "=", (str(v),)) for k, v in (selector.get("matchLabels") or {}).items()]
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expr in selector.get("matchExpressions") or []:
        op = ops.get(expr.get("operator", ""))
        if op is None:
            raise ValueError(f"unsupported matchExpressions operator: {expr.get('operator')!r}")
        requirements.append(Requirement(expr["key"], op, tuple(expr.get("values") or ())))
    return requirements


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on ``sep`` not preceded by a backslash, keeping escapes for a later unescape."""
    parts, current, escaped = [], [], False
    for ch in text:
        if escaped:
            current.append("\\" + ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == sep:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    if escaped:
        current.append("\\")
    parts.append("".join(current))
    return parts


def _unescape_field_value(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def parse_field_selector(
    res: ServedResource, text: str, label_text: str
) -> list[tuple[tuple[str, ...], str, str]]:
    """Parse ``fieldSelector`` into (path, op, value) triples for the fields ``res`` supports."""
    terms: list[tuple[tuple[str, ...], str, str]] = []
    if not text.strip():
        return terms
    for raw in _split_unescaped(text, ","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(!=|==|=)(.*)", raw)
        if m is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{raw}'")
        key, op, value = m.group(1), m.group(2), _unescape_field_value(m.group(3))
        path = res.fields.get(key)
        if path is None:
            gv = f"{res.group}/{res.version}"
            raise bad_request(
                f'Unable to find "{gv}, Resource={res.plural}" that match label selector "{label_text}", '
                f'field selector "{text}": field label not supported: {key}'
            )
        terms.append((path, "!=" if op == "!=" else "=", value))
    return terms


def field_value(obj: JsonObj, path: tuple[str, ...]) -> str:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "false" if path in (("spec", "unschedulable"), ("spec", "hostNetwork")) else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def labels_of(obj: JsonObj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def selector_matches(requirements: list[Requirement] | None, obj: JsonObj) -> bool:
    if requirements is None:
        return False
    labels = labels_of(obj)
    return all(r.matches(labels) for r in requirements)
