"""Small helpers the tests share."""

from __future__ import annotations

from typing import Any, Mapping


def items_of(response: Any, kind: str) -> list[Any]:
    """The output items of one type, in order: of a Response as the SDK reads it, as a dict, or of an
    output list (either kind of item)."""
    output = response if isinstance(response, list) else response["output"] if isinstance(response, Mapping) else response.output
    return [item for item in output if (item["type"] if isinstance(item, Mapping) else item.type) == kind]
