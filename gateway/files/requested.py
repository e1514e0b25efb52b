"""What a tool's request asks of a container: `{"type": "auto", ...}`, the conversation's container, made
when it is first used (the code interpreter's `container`)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from ..core.models import StrictModel
from .network import NetworkAllowlist, NetworkPolicy


class AutoContainer(StrictModel):
    type: Literal["auto"]
    file_ids: list[Annotated[str, Field(max_length=100)]] = Field([], max_length=100)  # uploads copied into /mnt/data
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None
    network_policy: NetworkPolicy | None = None  # checked by the tool that asks (network.py `checked_policy`)

    @property
    def network(self) -> NetworkAllowlist | None:
        """Its network policy, where it allows a network (checked by then: the tools' prepare)."""
        return self.network_policy if isinstance(self.network_policy, NetworkAllowlist) else None
