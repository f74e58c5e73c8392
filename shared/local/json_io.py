"""The CLI's JSON documents, read and written with orjson (README, Dependencies).

`plan` reads dumps of tens of MB and prints its plan indented: the standard library's encoder falls
back to pure Python whenever `indent` is set (~0.15 s for the 20,000-pod plan of bench/plan_bench.py,
against ~0.01 s here) and its parser is ~15 % slower. orjson writes UTF-8 rather than `\\u` escapes and
refuses what JSON does not allow (NaN, Infinity, integers beyond 64 bits), each with a clear message.
"""

from __future__ import annotations

from typing import Any

import orjson

# A subclass of json.JSONDecodeError: `msg`, `lineno` and `colno` say where the document is broken.
JSONDecodeError = orjson.JSONDecodeError


def loads(data: bytes | str) -> Any:
    """The document in `data`; JSONDecodeError when it is not JSON."""
    return orjson.loads(data)


def dumps_indented(document: Any) -> str:
    """`document` as JSON indented by two spaces, as `json.dumps(document, indent=2)` writes it."""
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
