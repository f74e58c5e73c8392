"""`whole_number`: a count or a number of seconds written by a user or another system (annotations,
launch template versions), read only when it is plainly one.

`str.isdigit` alone lets through what `int` refuses or misreads: superscripts ("²" is a digit to
`isdigit`, not to `int`), other scripts' digits ("١٢٠٠" reads as 1200), and more digits than Python
converts (4,300 by default). One such annotation on one pod raised out of every planner run.
"""

from __future__ import annotations

# Past any duration or count read here (10^12 seconds is ~31,700 years), and far below the limit of
# Python's int conversion.
MAX_DIGITS = 12


def whole_number(raw: str) -> int | None:
    """`raw` as a non-negative integer when it is only ASCII digits, at most MAX_DIGITS of them;
    None otherwise (the caller says why the value is ignored)."""
    if len(raw) > MAX_DIGITS or not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)
