"""Kubernetes quantities ("500m", "16Gi", "8") to integer base units, within Kubernetes' own bounds."""

from __future__ import annotations

import importlib.util
import math
import re
import sys
from collections.abc import Callable, Mapping
from decimal import ROUND_UP, Decimal
from fractions import Fraction
from functools import lru_cache
from pathlib import Path
from typing import Any

from shared.domain.resources import CPU, PODS, Resources


def _load_parse_quantity() -> Callable[[Any], Any]:
    """kubernetes' own `parse_quantity`, without running `kubernetes/__init__`.

    `import kubernetes.utils.quantity` first executes `kubernetes/__init__`, which imports the whole
    API client, config loaders, requests and urllib3 (~0.2 s, most of the `plan` command's start-up)
    for a module that needs only `decimal`. So when the client is not loaded yet, the one file is
    loaded from the installed package, found without importing it; whenever that does not work
    (a zipped or unusual install), the ordinary import is the fallback.
    """
    loaded = sys.modules.get("kubernetes.utils.quantity")
    if loaded is not None:
        return loaded.parse_quantity  # type: ignore[no-any-return]
    try:
        package = importlib.util.find_spec("kubernetes")  # a top-level spec: nothing is executed
        locations = list(package.submodule_search_locations or ()) if package else []
        path = Path(locations[0], "utils", "quantity.py")
        spec = importlib.util.spec_from_file_location("_backlog_scaler_kubernetes_quantity", path)
        if spec is None or spec.loader is None or not path.is_file():
            raise ImportError(f"no {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.parse_quantity  # type: ignore[no-any-return]
    except (ImportError, IndexError, OSError, SyntaxError, AttributeError):
        from kubernetes.utils.quantity import parse_quantity

        return parse_quantity  # type: ignore[no-any-return]


parse_quantity = _load_parse_quantity()

# The largest magnitude a quantity may have. quantity.go (k8s.io/apimachinery/pkg/api/resource):
# "no quantity may represent a number greater than 2^63-1 in magnitude"; ParseQuantity caps a
# binary-suffixed value there (the API server stores the cap), and the scheduler reads requests and
# allocatable as int64 (Quantity.MilliValue for cpu, Value otherwise, which "could overflow an
# int64": a 1e20 request reads as 0). Past it Kubernetes' own arithmetic means nothing, so a larger
# value is refused rather than guessed at; in base units too (the scheduler's MilliCPU is an int64).
MAX_QUANTITY = 2**63 - 1
# 2^63-1 has 19 digits: a number whose first digit stands at 10^19 or higher is refused from its
# exponent alone, before any arithmetic builds it (`1E100000000` would be a 100-million-digit int).
_FIRST_DIGIT_TOO_HIGH = 19
_NANO = Decimal("1E-9")

# The grammar of quantity.go's parseQuantityString and suffix table (ParseQuantity): a signed
# number, then a binary suffix (Ki..Ei), a decimal exponent (e3, E-2) or a decimal suffix (n, u,
# m, k, M, G, T, P, E). Python's Decimal reads more ("NaN", "Infinity", "1_000", "1K", "1e5Ki"),
# which the API server refuses and so never writes.
_QUANTITY = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[eE][+-]?[0-9]+|[numkMGTPE])?")


# pkg/apis/core/helper/helpers.go `integerResources`; with the extended resources
# (IsIntegerResourceName), what ValidateResourceQuantityValue requires to be whole.
_INTEGER_RESOURCES = frozenset(
    {
        PODS,
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_NAME_PART = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


@lru_cache(maxsize=256)
def is_integer_resource(name: str) -> bool:
    """Whether Kubernetes requires whole amounts of `name`: `pods` and the quota counts, and every
    extended resource (nvidia.com/gpu, vpc.amazonaws.com/efa): helper.IsIntegerResourceName."""
    if name in _INTEGER_RESOURCES:
        return True
    # IsExtendedResourceName: not native (a name with a domain outside kubernetes.io), not
    # "requests."-prefixed, and "requests.<name>" a qualified name (IsQualifiedName).
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _, short = f"requests.{name}".partition("/")
    return bool(
        len(prefix) <= 253
        and _DNS_SUBDOMAIN.fullmatch(prefix)
        and len(short) <= 63
        and _NAME_PART.fullmatch(short)
    )


def _bounded(raw: str) -> Decimal:
    """The exact value of a quantity string, rounded up to whole nanos as ParseQuantity rounds it;
    ValueError when Kubernetes would not parse it or its magnitude passes MAX_QUANTITY."""
    if not _QUANTITY.fullmatch(raw):
        raise ValueError(f"unparsable quantity {raw!r}")
    value: Decimal = parse_quantity(raw)
    if value and (value.adjusted() >= _FIRST_DIGIT_TOO_HIGH or abs(value) > MAX_QUANTITY):
        raise ValueError(f"quantity {raw!r} is out of range (at most {MAX_QUANTITY} in magnitude)")
    # At most 19 digits before the point and 9 after: within Decimal's 28 digits, exact.
    return value.quantize(_NANO, rounding=ROUND_UP)


def _scaled(value: Decimal, digits: int) -> Decimal:
    """value x 10^digits, exactly (Decimal's `*` rounds to 28 digits)."""
    sign, coefficient, exponent = value.as_tuple()
    return Decimal((sign, coefficient, int(exponent) + digits))


@lru_cache(maxsize=4096)
def _base_units(name: str, raw: str) -> tuple[int, bool]:
    """(base units, whether a whole number): the second for ValidateResourceQuantityValue."""
    value = _bounded(raw)
    if value < 0:
        raise ValueError(f"negative quantity {raw!r}")
    # Requests are rounded up, as Value() and MilliValue() round them: a fraction of a unit still
    # needs the whole unit.
    milli = math.ceil(_scaled(value, 3))
    amount = milli if name == CPU else math.ceil(value)
    if amount > MAX_QUANTITY:  # cpu in millicores: the scheduler's MilliCPU is an int64 too
        raise ValueError(f"quantity {raw!r} is out of range (at most {MAX_QUANTITY}m)")
    return amount, milli % 1000 == 0


def quantity(name: str, raw: object, *, validated: bool = True) -> int:
    """One quantity in base units (millicores for cpu); ValueError, naming `name`, when Kubernetes
    would refuse it: unparsable, negative, beyond 2^63-1, or (`validated`: what the API server
    validates, pods, nodes and the config's node shapes) a fraction of an integer resource."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ValueError(f"{name}: quantity must be a string or number, got {type(raw).__name__}")
    try:
        amount, whole = _base_units(name, str(raw).strip())
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from exc
    except ArithmeticError as exc:  # a decimal error the grammar did not foresee
        raise ValueError(f"{name}: unparsable quantity {raw!r}") from exc
    # ValidateResourceQuantityValue (pkg/apis/core/validation/validation.go) refuses a pod or a node
    # whose integer resource has `MilliValue() % 1000 != 0`: "must be an integer".
    if validated and not whole and is_integer_resource(name):
        raise ValueError(f"{name}: quantity {str(raw).strip()!r} must be an integer")
    return amount


def exact_quantity(raw: object) -> Fraction:
    """A quantity's exact value (DRA capacities and CEL's quantity()), as ParseQuantity holds it:
    rounded up to whole nanos, ValueError past 2^63-1 in magnitude or when unparsable."""
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise ValueError(f"quantity must be a string or number, got {type(raw).__name__}")
    try:
        return Fraction(_bounded(str(raw).strip()))
    except ArithmeticError as exc:
        raise ValueError(f"unparsable quantity {raw!r}") from exc


def resources(raw: Mapping[str, object] | None) -> Resources:
    """A resource list (`{"cpu": "2", "nvidia.com/gpu": 1}`) as a Resources vector."""
    if not raw:
        return Resources()
    return Resources.of({str(name): quantity(str(name), value) for name, value in raw.items()})
