"""The Kubernetes CEL extensions DRA selectors use (k8s.io/apiserver/pkg/cel/library quantity.go and
the semver library; their tests' cases), evaluated on a device as compile.go presents it."""

from __future__ import annotations

from fractions import Fraction

import pytest

from shared.domain.dra import Device, Semver
from shared.planner.filters.dra_cel import CelError, Selector, device_input

DEVICE = device_input(
    "gpu.nvidia.com",
    Device(
        "gpu-0",
        {"gpu.nvidia.com/driverVersion": Semver("550.54.15"), "gpu.nvidia.com/index": 0},
        {"gpu.nvidia.com/memory": Fraction(80 * 2**30)},
    ),
)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('quantity("1Gi").compareTo(quantity("1024Mi")) == 0', True),
        ('quantity("1Gi").isGreaterThan(quantity("1G"))', True),
        ('quantity("500m").isLessThan(quantity("1"))', True),
        ('quantity("1.5").isInteger()', False),
        ('quantity("2k").asInteger() == 2000', True),
        ('quantity("1").add(quantity("500m")).compareTo(quantity("1500m")) == 0', True),
        ('quantity("1").sub(quantity("2")).sign() == -1', True),
        ('isQuantity("20Mi") && !isQuantity("twenty")', True),
        ('semver("1.2.3").isLessThan(semver("1.10.0"))', True),
        ('semver("1.0.0-alpha").isLessThan(semver("1.0.0"))', True),
        ('semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))', True),
        ('isSemver("1.2.3") && !isSemver("1.2")', True),
        ('device.attributes["gpu.nvidia.com"].driverVersion.major() == 550', True),
        ('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
        # cel.bind: compile.go adds ext.Bindings so that a selector names its domain once
        (
            'cel.bind(gpu, device.attributes["gpu.nvidia.com"],'
            " gpu.index == 0 && gpu.driverVersion.major() > 500)",
            True,
        ),
        # the strings extension at version 2 (base.go): lowerAscii, split, replace, join, indexOf
        ('device.driver.upperAscii().lowerAscii() == "gpu.nvidia.com"', True),
        ('device.driver.split(".").size() == 3 && device.driver.split(".")[0] == "gpu"', True),
        ('device.driver.replace("nvidia", "amd") == "gpu.amd.com"', True),
        ('["a", "b"].join("-") == "a-b" && device.driver.indexOf("nvidia") == 4', True),
        # optional types (base.go, 1.28): a missing attribute read with a default
        ('device.attributes["gpu.nvidia.com"].?model.orValue("none") == "none"', True),
        # the regex library (library/regex.go): find, findAll with and without a limit
        ('"H100-80GB".find("[0-9]+") == "100"', True),
        ('"abc".find("x") == ""', True),
        ('"a1b22c333".findAll("[0-9]+") == ["1", "22", "333"]', True),
        ('"a1b22c333".findAll("[0-9]+", 2) == ["1", "22"] && "a1".findAll("[0-9]", 0) == []', True),
        # RE2's syntax and meaning, as Go's regexp (Python's re differs on each of these)
        ('"12ab3".find("[[:alpha:]]+") == "ab"', True),
        ('"1é2".find("\\\\pL+") == "é"', True),
        ('"ab\\n".find("b$") == ""', True),
        ('"xABC".find("x(?i)abc") == "xABC"', True),
        # Go's FindAllString ignores an empty match abutting the previous one
        ('"baaa".findAll("a*") == ["", "aaa"]', True),
    ],
)
def test_extension_functions(expression: str, expected: bool) -> None:
    assert Selector(expression).matches(DEVICE) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("device.driver ==", "CEL compile error"),
        ('device.attributes["gpu.nvidia.com"].missing', "CEL runtime error"),
        ('device.attributes["gpu.nvidia.com"].index', "CEL runtime error: evaluates to INT"),
        ('quantity("lots").sign() == 1', "CEL runtime error"),
        # past 2^63-1 (ParseQuantity's bound): refused at once, never built as a 100-million-digit int
        ('quantity("1E100000000").sign() == 1', "CEL runtime error: .*'1E100000000' is out of range"),
        ('semver("1.0.0").compareTo(quantity("1")) == 0', "CEL runtime error"),
        ('"abc".find("(") == ""', "CEL runtime error: .*invalid regex"),
    ],
)
def test_errors_say_whether_compile_or_run_time(expression: str, message: str) -> None:
    with pytest.raises(CelError, match=message):
        Selector(expression).matches(DEVICE)


def test_a_domain_the_device_has_nothing_in_reads_as_empty_for_its_driver() -> None:
    assert Selector('device.attributes["gpu.nvidia.com"].size() == 2').matches(DEVICE)


def test_a_domain_the_device_has_nothing_in_reads_as_an_empty_map() -> None:
    # Given a selector asking about another vendor's domain, and a device with none of its attributes
    selector = Selector(
        "!('model' in device.attributes['other.example.com']) && device.driver == 'gpu.nvidia.com'"
    )
    device = {
        "driver": "gpu.nvidia.com",
        "attributes": {"gpu.nvidia.com": {}},
        "capacity": {"gpu.nvidia.com": {}},
    }
    # Then the domain is an empty map, as in kube-scheduler's CEL environment (not a missing key)
    assert selector.matches(device) is True
