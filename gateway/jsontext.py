"""JSON as the gateway writes it: UTF-8, compact, with U+2028, U+2029 and U+0085 escaped.

The three are valid raw inside JSON strings, but `str.splitlines()` breaks lines at them, and so do the
SSE readers built on it (httpx's `iter_lines`, many hand-written clients): a raw one cuts an event in
two. Escaped as `\\u2028` they read back the same in any JSON parser. Finding them is one regex scan of the
text, and the replacement runs only when one is there.

Every event of every stream is written here: by orjson (a fifth of the standard encoder's time), and by
the standard encoder for what orjson refuses (integers past 64 bits, which a client's JSON schema may
hold and gets back as it sent them).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
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
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, a type only the standard encoder takes
        text = _encode(value)
    return escape_line_separators(text)


class JSONResponse(_StarletteJSONResponse):
    """Starlette's JSON response, written by `dumps`."""

    def render(self, content: Any) -> bytes:
        return dumps(content).encode("utf-8")
