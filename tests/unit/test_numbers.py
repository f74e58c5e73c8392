"""`whole_number`: only plain ASCII digits, bounded, are a number."""

from __future__ import annotations

import pytest

from shared.domain.numbers import MAX_DIGITS, whole_number


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("0", 0),
        ("1800", 1800),
        ("007", 7),
        ("9" * MAX_DIGITS, int("9" * MAX_DIGITS)),
        ("9" * (MAX_DIGITS + 1), None),
        ("", None),
        ("-5", None),
        ("+5", None),
        (" 5", None),
        ("1.5", None),
        ("1e3", None),
        ("²", None),
        ("١٢٠٠", None),
    ],
)
def test_whole_number(raw: str, expected: int | None) -> None:
    assert whole_number(raw) == expected
