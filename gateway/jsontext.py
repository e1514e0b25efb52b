"""JSON as the gateway writes it: UTF-8, compact, with U+2028, U+2029 and U+0085 escaped.

The three are valid raw inside JSON strings, but `str.splitlines()` breaks lines at them, and so do the
SSE readers built on it (httpx's `iter_lines`, many hand-written clients): a raw one cuts an event in
two. Escaped as `\\u2028` they read back the same in any JSON parser. Finding them is one regex scan of the
text, and the replacement runs only when one is there.
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.responses import JSONResponse as _StarletteJSONResponse

_LINE_SEPARATORS = re.compile("[\u2028\u2029\x85]")
# One encoder made once: `json.dumps` with any option builds a new JSONEncoder on every call, and this runs
# for every streamed delta.
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_ESCAPES = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}


def escape_line_separators(text: str) -> str:
    """JSON text with the three separators escaped (they can only be inside strings there)."""
    if _LINE_SEPARATORS.search(text) is None:
        return text
    return _LINE_SEPARATORS.sub(lambda match: _ESCAPES[match.group()], text)


def dumps(value: Any) -> str:
    return escape_line_separators(_encode(value))


class JSONResponse(_StarletteJSONResponse):
    """Starlette's JSON response, written by `dumps`."""

    def render(self, content: Any) -> bytes:
        return dumps(content).encode("utf-8")
