"""The Responses WebSockets open per tenant, bounded (`server.websocket.max_per_tenant`)."""

from __future__ import annotations

from collections import Counter


class TenantSockets:
    """Open sockets per tenant, bounded."""

    def __init__(self) -> None:
        self.open: Counter[str] = Counter()

    def take(self, tenant: str, limit: int) -> bool:
        if self.open[tenant] >= limit:
            return False
        self.open[tenant] += 1
        return True

    def give_back(self, tenant: str) -> None:
        self.open[tenant] -= 1
        if self.open[tenant] <= 0:
            del self.open[tenant]
