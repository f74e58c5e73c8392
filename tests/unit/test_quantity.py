"""Quantities as Kubernetes holds them: its grammar, its 2^63-1 bound, its rounding up to nanos."""

from __future__ import annotations

from fractions import Fraction

import pytest

from shared.domain.quantity import MAX_QUANTITY, exact_quantity, is_integer_resource, quantity


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("nvidia.com/gpu", "1e400"),  # crashed the planner (OverflowError in the scale-up estimate)
        ("memory", "1E100000000"),  # hung the parser, building a 100-million-digit int
        ("nvidia.com/gpu", "1E100000000"),
        ("memory", "1e19"),
        ("memory", 2**63),  # a JSON integer
        ("memory", "8Ei"),  # 2^63
        ("cpu", "9223372036854775.808"),  # one millicore past the scheduler's int64 MilliCPU
        ("cpu", "-1e400"),
    ],
)
def test_a_quantity_beyond_what_kubernetes_holds_is_refused_naming_the_resource(
    name: str, raw: object
) -> None:
    # Given a quantity past 2^63-1 in its base units (millicores for cpu)
    # When it is parsed / Then it is refused at once, the resource and the value named
    with pytest.raises(
        ValueError, match=rf"^{name}: quantity '{raw}' is out of range \(at most 9223372036854775807"
    ):
        quantity(name, raw)


def test_the_largest_quantity_kubernetes_holds_is_read_exactly() -> None:
    # Given 2^63-1 bytes and 2^63-1 millicores
    # When parsed / Then both are kept to the unit
    assert quantity("memory", "9223372036854775807") == MAX_QUANTITY
    assert quantity("cpu", "9223372036854775.807") == MAX_QUANTITY
    assert quantity("cpu", "9223372036854775807m") == MAX_QUANTITY


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "inf", "1_000", "1K", "1e5Ki", "1e", "", "0x10"])
def test_a_form_the_api_server_refuses_is_unparsable(raw: str) -> None:
    # Given a string Python's Decimal reads but quantity.go's ParseQuantity does not
    # When parsed / Then it is refused as unparsable
    with pytest.raises(ValueError, match=r"^cpu: unparsable quantity"):
        quantity("cpu", raw)


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", 0.1, 100),
        ("cpu", "1e-3", 1),
        ("memory", "16Gi", 16 * 2**30),
        ("memory", "1E", 10**18),
        ("memory", "1e3", 1000),
        ("memory", "1e-100000000", 1),  # ParseQuantity rounds any positive amount up to 1n
        ("memory", "0e100000000", 0),
        ("memory", " 1Ki ", 1024),
        ("nvidia.com/gpu", 8, 8),
    ],
)
def test_quantities_are_read_in_base_units_rounded_up(name: str, raw: object, expected: int) -> None:
    # Given a quantity in any of the grammar's forms / When parsed / Then its base units, rounded up
    assert quantity(name, raw) == expected


def test_exact_quantities_are_bounded_and_rounded_to_nanos_as_requests_are() -> None:
    # Given DRA capacities and CEL quantities (exact values, not base units)
    # When parsed / Then a huge exponent is refused at once and a tiny one rounds up to 1n
    with pytest.raises(ValueError, match="out of range"):
        exact_quantity("1E100000000")
    assert exact_quantity("1e-100000000") == Fraction(1, 10**9)
    assert exact_quantity("-5") == -5
    assert exact_quantity("40Gi") == 40 * 2**30


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("nvidia.com/gpu", 1.5),  # a JSON float
        ("nvidia.com/gpu", "1500m"),
        ("nvidia.com/gpu", "1.0001"),
        ("vpc.amazonaws.com/efa", "0.5"),
        ("pods", "110.5"),
    ],
)
def test_a_fraction_of_an_integer_resource_is_refused_as_the_api_server_refuses_it(
    name: str, raw: object
) -> None:
    # Given a fraction of `pods` or of an extended resource (validation.go's
    # ValidateResourceQuantityValue: "must be an integer")
    # When parsed from a pod, a node or a config shape / Then it is refused
    with pytest.raises(ValueError, match=rf"^{name}: quantity '{raw}' must be an integer$"):
        quantity(name, raw)


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("nvidia.com/gpu", "1.9999999", 2),  # MilliValue() rounds it up to 2000m: the API takes it
        ("nvidia.com/gpu", "2000m", 2),
        ("cpu", 1.5, 1500),
        ("memory", "1.5", 2),
        ("hugepages-2Mi", "1.5", 2),  # native: not an integer resource
        ("kubernetes.io/batch-cpu", "1.5", 2),  # kubernetes.io-prefixed names are native too
    ],
)
def test_whole_amounts_and_native_resources_pass_the_integer_rule(
    name: str, raw: object, expected: int
) -> None:
    # Given a whole amount of an integer resource, or a fraction of a native one
    # When parsed / Then it is read, rounded up
    assert quantity(name, raw) == expected


def test_a_node_template_tag_is_read_without_the_api_servers_integer_rule() -> None:
    # Given cluster-autoscaler's node-template tag of 1.5 GPUs, which no API server validates
    # When read as cluster-autoscaler reads it (ParseQuantity, then the scheduler's Value())
    # Then it counts 2 GPUs
    assert quantity("nvidia.com/gpu", "1.5", validated=False) == 2


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pods", True),
        ("nvidia.com/gpu", True),
        ("aws.amazon.com/neuron", True),
        ("cpu", False),
        ("ephemeral-storage", False),
        ("hugepages-1Gi", False),
        ("kubernetes.io/batch-cpu", False),
        ("requests.nvidia.com/gpu", False),
        ("Bad_Domain/gpu", False),  # not a qualified name: not an extended resource
    ],
)
def test_integer_resources_are_those_kubernetes_names(name: str, expected: bool) -> None:
    # Given a resource name / When asked whether it must be whole / Then helper.IsIntegerResourceName's answer
    assert is_integer_resource(name) is expected
