"""Object ids as OpenAI's API writes them: a type prefix and a random part (`resp_…`, `file_…`, `conv_…`)."""

from __future__ import annotations

import secrets


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"
