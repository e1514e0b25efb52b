"""What a tool's request asks of a container: `{"type": "auto", ...}`, the conversation's container, made
when it is first used (the code interpreter's `container`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..core.models import StrictModel


class AutoContainer(StrictModel):
    type: Literal["auto"]
    file_ids: list[Annotated[str, Field(max_length=100)]] = Field([], max_length=100)  # uploads copied into /mnt/data
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None
    network_policy: dict[str, Literal["disabled"]] | None = Field(None, description="sandboxes have no network")
