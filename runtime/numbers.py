"""Integers read from text a client controls: query parameters, form fields, headers, map keys.

`str.isdigit()` is no check: it accepts `²` and other digits `int()` refuses, and no length bound keeps
5,000 digits (slow to convert) or 20 (past a 64-bit column) out. Only ASCII digits are read here, and
only as many as a signed 64-bit integer holds.
"""

from __future__ import annotations

import re

_DECIMAL = re.compile(r"[0-9]{1,18}")  # 18 digits always fit in a signed 64-bit column


def decimal(text: str | None) -> int | None:
    """The non-negative integer `text` spells in plain ASCII digits, or None (also when it is too long)."""
    if text is None or not _DECIMAL.fullmatch(text):
        return None
    return int(text)
