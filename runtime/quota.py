"""Caps on what tenants hold (sandbox sessions, request-level MCP sessions), in all and per tenant.

At a cap, room is made by evicting the least recently used idle holding: the tenant's own when it is
the tenant's cap that is reached, anyone's when it is the total. Only when every candidate is busy is
the new one refused.
"""

from __future__ import annotations

from typing import Mapping, Protocol, TypeVar

Key = TypeVar("Key")


class Held(Protocol):
    tenant: str
    last_used: float

    @property
    def idle(self) -> bool: ...


class AllBusy(Exception):
    """A cap is reached and nothing under it is idle."""

    def __init__(self, cap: int, per_tenant: bool) -> None:
        super().__init__(f"{'tenant' if per_tenant else 'total'} cap of {cap} reached, all busy")
        self.cap, self.per_tenant = cap, per_tenant


def to_evict(held: Mapping[Key, Held], tenant: str, per_tenant: int, total: int) -> Key | None:
    """What to evict before `tenant` may hold one more, or None if there is room; AllBusy if nothing can go."""
    mine = [(key, item) for key, item in held.items() if item.tenant == tenant]
    if len(mine) >= per_tenant:
        candidates, cap, is_tenants = mine, per_tenant, True
    elif len(held) >= total:
        candidates, cap, is_tenants = list(held.items()), total, False
    else:
        return None
    idle = [(item.last_used, key) for key, item in candidates if item.idle]
    if not idle:
        raise AllBusy(cap, is_tenants)
    return min(idle, key=lambda entry: entry[0])[1]
