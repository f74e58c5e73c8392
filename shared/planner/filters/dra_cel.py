"""CEL device selectors of DRA, as kube-scheduler evaluates them (k8s.io/dynamic-resource-allocation
/cel compile.go): one variable `device` with `driver`, `attributes[domain][id]` and
`capacity[domain][id]`, and the Kubernetes CEL extensions drivers' selectors use: quantities
(k8s.io/apiserver/pkg/cel/library/quantity.go: `quantity()`, `isQuantity()`, `compareTo`,
`isGreaterThan`, `isLessThan`, `add`, `sub`, `asInteger`, `asApproximateFloat`, `sign`,
`isInteger`) and semantic versions (library/semver_test.go: `semver()`, `isSemver()`, `compareTo`,
`isGreaterThan`, `isLessThan`, `major`, `minor`, `patch`). Of the rest of kube-scheduler's
environment: `cel.bind` (compile.go adds ext.Bindings so a selector names a domain once), and from the
base environment (k8s.io/apiserver/pkg/cel/environment/base.go) the strings extension at version 2
(`lowerAscii`, `split`, `replace`, `indexOf`, `join`, ...), optional types (`.?model`, `orValue`) and
the regex library (library/regex.go: `find`, `findAll`, on RE2 as Go's regexp). Not yet: the sets,
lists, URL, IP/CIDR and format libraries; a selector using them does not compile, and its pod is
reported as one the planner cannot verify (nothing bought for it).

The runtime is cel-expr-python, the CEL project's own Python binding of cel-cpp: ~10 ms to import
and ~20 us per evaluation (a pure-Python CEL takes ~1.7 ms). It is imported on the first compile,
so a run without DRA claims never loads it. Quantities and versions travel through CEL as maps
tagged with one reserved key (the binding carries no opaque Python values); every extension
function checks the tag, so mixing them up is a runtime error, as in Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import cache
from typing import Any

from shared.domain.dra import Device, Semver
from shared.domain.quantity import exact_quantity

_Q = "__k8s_quantity__"  # value: [numerator, denominator]
_V = "__k8s_semver__"  # value: [major, minor, patch, pre-release]
_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$")


class CelError(Exception):
    """A selector that does not compile, fails at run time or yields no bool (message says which)."""


def _quantity(value: Fraction) -> dict[str, Any]:
    return {_Q: [value.numerator, value.denominator]}


def _parse_quantity(text: str) -> dict[str, Any]:
    return _quantity(exact_quantity(str(text)))  # ValueError naming the text and why


def _parse_semver(text: str) -> dict[str, Any]:
    found = _SEMVER.match(str(text))
    if found is None:
        raise ValueError(f"invalid semver {text!r}")
    return {_V: [int(found[1]), int(found[2]), int(found[3]), found[4] or ""]}


def _fraction(value: Any) -> Fraction:
    if not isinstance(value, Mapping) or _Q not in value:
        raise ValueError("not a quantity")
    num, den = value[_Q]
    return Fraction(int(num), int(den))


def _semver(value: Any) -> Any:
    """The (major, minor, patch, pre-release) of a semver value; ValueError for anything else."""
    if not isinstance(value, Mapping) or _V not in value:
        raise ValueError("not a semver")
    return value[_V]


def _version_key(value: Any) -> tuple[Any, ...]:
    major, minor, patch, pre = _semver(value)
    # semver 2.0.0 section 11: a pre-release sorts before its release; identifiers compared in turn.
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in str(pre).split(".")) if pre else ()
    return (int(major), int(minor), int(patch), 0 if pre else 1, parts)


def _compare(a: Any, b: Any) -> int:
    if isinstance(a, Mapping) and _V in a:
        va, vb = _version_key(a), _version_key(b)
        return (va > vb) - (va < vb)
    qa, qb = _fraction(a), _fraction(b)
    return (qa > qb) - (qa < qb)


def _is(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        try:
            parse(text)
        except ValueError:
            return False
        return True

    return check


def _version_part(index: int) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        return int(_semver(value)[index])

    return part


@cache
def _regex(pattern: str) -> Any:
    """A regex of the library, compiled by RE2 as Kubernetes' (Go's regexp) and CEL's own `matches`
    are: Python's re differs (POSIX classes, `\\pL`, `$` before a final newline)."""
    import re2  # google-re2: loaded by the first selector that uses find or findAll

    options = re2.Options()
    options.log_errors = False  # the error is raised, with the pattern: no line on stderr besides
    try:
        return re2.compile(pattern, options=options)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"invalid regex {pattern!r}: {detail}") from exc


def _find(text: str, pattern: str) -> str:
    """library/regex.go `find`: the first match, "" for none."""
    found = _regex(pattern).search(text)
    return found.group(0) if found else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """library/regex.go `findAll`: every match (at most `limit`; a negative limit is no limit), as Go's
    FindAllString counts them: an empty match abutting the previous match is ignored."""
    if limit == 0:
        return []
    found: list[str] = []
    end = -1
    for match in _regex(pattern).finditer(text):
        if match.start() == match.end() == end:
            continue
        found.append(match.group(0))
        end = match.end()
    return found if limit < 0 else found[:limit]


def _as_integer(value: Any) -> int:
    amount = _fraction(value)
    if amount.denominator != 1:
        raise ValueError("quantity is not an integer")
    return amount.numerator


# (name, is_member, parameter kinds, return kind, implementation): one overload each
_EXTENSIONS: tuple[tuple[str, bool, tuple[str, ...], str, Callable[..., Any]], ...] = (
    ("quantity", False, ("string",), "map", _parse_quantity),
    ("isQuantity", False, ("string",), "bool", _is(_parse_quantity)),
    ("semver", False, ("string",), "map", _parse_semver),
    ("isSemver", False, ("string",), "bool", _is(_parse_semver)),
    ("compareTo", True, ("map", "map"), "int", _compare),
    ("isGreaterThan", True, ("map", "map"), "bool", lambda a, b: _compare(a, b) > 0),
    ("isLessThan", True, ("map", "map"), "bool", lambda a, b: _compare(a, b) < 0),
    ("add", True, ("map", "map"), "map", lambda a, b: _quantity(_fraction(a) + _fraction(b))),
    ("sub", True, ("map", "map"), "map", lambda a, b: _quantity(_fraction(a) - _fraction(b))),
    ("sign", True, ("map",), "int", lambda a: (_fraction(a) > 0) - (_fraction(a) < 0)),
    ("isInteger", True, ("map",), "bool", lambda a: _fraction(a).denominator == 1),
    ("asInteger", True, ("map",), "int", _as_integer),
    ("asApproximateFloat", True, ("map",), "double", lambda a: float(_fraction(a))),
    ("major", True, ("map",), "int", _version_part(0)),
    ("minor", True, ("map",), "int", _version_part(1)),
    ("patch", True, ("map",), "int", _version_part(2)),
    ("find", True, ("string", "string"), "string", _find),
    ("findAll", True, ("string", "string"), "strings", _find_all),
    ("findAll", True, ("string", "string", "int"), "strings", _find_all),
)


@cache
def _environment() -> Any:
    """The CEL environment, built on first use (the import is what pods without claims skip)."""
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

    kinds = {"string": cel.Type.STRING, "map": cel.Type.MAP, "int": cel.Type.INT}
    kinds.update(bool=cel.Type.BOOL, double=cel.Type.DOUBLE, strings=cel.Type.List(cel.Type.STRING))
    overloads: dict[str, list[Any]] = {}
    for name, member, params, ret, impl in _EXTENSIONS:
        overloads.setdefault(name, []).append(
            cel.Overload(
                f"k8s_{name}_{len(params)}",
                kinds[ret],
                [kinds[p] for p in params],
                is_member=member,
                impl=impl,
            )
        )
    functions = [cel.FunctionDecl(name, found) for name, found in overloads.items()]
    extensions = [ext_bindings.ExtBindings(), ext_strings.ExtStrings(2), ext_optional.ExtOptional()]
    return cel.NewEnv(variables={"device": cel.Type.DYN}, functions=functions, extensions=extensions)


# `device.attributes['<domain>']` / `device.capacity['<domain>']` in a selector: the domains it reads.
_DOMAIN_READ = re.compile(r"""device\.(attributes|capacity)\[\s*(?:'([^']*)'|"([^"]*)")\s*\]""")


class Selector:
    """One compiled CEL selector; `matches` answers for one device (CelError at run time)."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self._program = _environment().compile(expression)
        except RuntimeError as exc:
            raise CelError(f"CEL compile error: {exc}") from exc
        # kube-scheduler's CEL environment reads any domain a device has nothing in as an empty map
        # (dynamic-resource-allocation cel/compile.go, newStringInterfaceMapWithDefault), so
        # `'x' in device.attributes['other.example.com']` is false rather than an error: the
        # domains the expression names are given an empty map where the device has none.
        self._domains = tuple(
            sorted({(field, single or double) for field, single, double in _DOMAIN_READ.findall(expression)})
        )

    def _with_domains(self, device: Mapping[str, Any]) -> Mapping[str, Any]:
        missing = [(f, d) for f, d in self._domains if d not in device.get(f, {})]
        if not missing:
            return device
        widened = {**device, "attributes": dict(device["attributes"]), "capacity": dict(device["capacity"])}
        for field, domain in missing:
            widened[field][domain] = {}
        return widened

    def matches(self, device: Mapping[str, Any]) -> bool:
        device = self._with_domains(device)
        try:
            value = self._program.eval(data={"device": device})
        except RuntimeError as exc:  # raised by the binding for errors outside the expression
            raise CelError(f"CEL runtime error: {exc}") from exc
        result = value.value()
        if value.type().name() == "ERROR" or not isinstance(result, bool):
            detail = result if value.type().name() == "ERROR" else f"evaluates to {value.type().name()}"
            raise CelError(f"CEL runtime error: {detail}")
        return result


def device_input(driver: str, device: Device) -> dict[str, Any]:
    """The `device` variable for one device: attributes and capacity by domain, then id."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in device.attributes.items():
        domain, _, ident = name.rpartition("/")
        attributes.setdefault(domain, {})[ident] = (
            _parse_semver(value.text) if isinstance(value, Semver) else value
        )
    capacity: dict[str, dict[str, Any]] = {}
    for name, amount in device.capacity.items():
        domain, _, ident = name.rpartition("/")
        capacity.setdefault(domain, {})[ident] = _quantity(amount)
    # compile.go: a domain the device has nothing in reads as an empty map, not as an error.
    attributes.setdefault(driver, {})
    capacity.setdefault(driver, {})
    return {"driver": driver, "attributes": attributes, "capacity": capacity}
