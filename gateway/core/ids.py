"""Object ids as OpenAI's API writes them: a type prefix and a random part (`resp_…`, `file_…`, `conv_…`)."""

from __future__ import annotations

import hashlib
import itertools
import secrets
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Iterator

# Set while a response's output item is made: its ids then follow from the item's place (`derived_ids`).
_derived: ContextVar[Callable[[str], str] | None] = ContextVar("derived_ids", default=None)


def new_id(prefix: str) -> str:
    derive = _derived.get()
    return derive(prefix) if derive is not None else f"{prefix}_{secrets.token_hex(16)}"


@contextmanager
def derived_ids(seed: str) -> Iterator[None]:
    """Within: ids made from `seed`, the same ones in the same order each time. A response's output items
    get theirs from the response's id and their index, so the replica that adopts a run (adoption.py)
    makes the items it parses again with the ids the client was shown."""
    counter = itertools.count()

    def derive(prefix: str) -> str:
        digest = hashlib.blake2b(f"{seed}/{next(counter)}".encode(), digest_size=16).hexdigest()
        return f"{prefix}_{digest}"

    token = _derived.set(derive)
    try:
        yield
    finally:
        _derived.reset(token)
