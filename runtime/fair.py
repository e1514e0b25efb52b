"""A capacity limiter that grants its slots to tenants in turn.

A FIFO limiter serves whoever queued first: a tenant that queues a hundred pieces of work ahead of
another's one makes the other wait for all hundred. Here each tenant has its own queue, and a slot that
frees goes to the next tenant in the round that has work waiting, so a tenant waits behind at most one
piece of work of each other tenant, however much they queued (the slot goes to the waiting tenant served
longest ago). A tenant may also be capped below the
whole capacity (`per_tenant`), so that what it runs never takes every slot.

A waiter that is cancelled (its client went away) leaves its queue: its work is never started.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from contextlib import asynccontextmanager
from typing import AsyncIterator

MAX_REMEMBERED = 10_000  # tenants whose last turn is remembered; those with nothing here are forgotten past it


class FairLimiter:
    def __init__(self, capacity: int, per_tenant: int | None = None) -> None:
        self.capacity = capacity
        self.per_tenant = min(per_tenant or capacity, capacity)
        self._busy = 0
        self._busy_by_tenant: dict[str, int] = {}
        # Tenants with work waiting, each with its queue.
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        # When each tenant last got a slot (a count of grants): a free slot goes to the waiting tenant
        # served longest ago, so one that was just served waits for every other tenant's turn.
        self._served_at: dict[str, int] = {}
        self._grants = 0

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def waiting(self) -> int:
        return sum(len(queue) for queue in self._waiting.values())

    @asynccontextmanager
    async def slot(self, tenant: str) -> AsyncIterator[None]:
        """Hold one slot for `tenant`'s work, waiting for its turn if none is free."""
        await self._acquire(tenant)
        try:
            yield
        finally:
            self._release(tenant)

    async def _acquire(self, tenant: str) -> None:
        if not self._waiting and self._may_run(tenant):
            self._take(tenant)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(granted)
        self._grant()
        try:
            await granted
        except BaseException:
            if granted.done() and not granted.cancelled():  # granted as it was cancelled: pass the slot on
                self._release(tenant)
            else:
                self._forget(tenant, granted)
            raise

    def _may_run(self, tenant: str) -> bool:
        return self._busy < self.capacity and self._busy_by_tenant.get(tenant, 0) < self.per_tenant

    def _take(self, tenant: str) -> None:
        self._busy += 1
        self._busy_by_tenant[tenant] = self._busy_by_tenant.get(tenant, 0) + 1
        self._grants += 1
        self._served_at[tenant] = self._grants
        if len(self._served_at) > MAX_REMEMBERED:  # only tenants with work here matter for the order
            self._served_at = {name: at for name, at in self._served_at.items() if name in self._waiting or name in self._busy_by_tenant}

    def _release(self, tenant: str) -> None:
        self._busy -= 1
        left = self._busy_by_tenant[tenant] - 1
        if left:
            self._busy_by_tenant[tenant] = left
        else:
            del self._busy_by_tenant[tenant]
        self._grant()

    def _forget(self, tenant: str, waiter: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[tenant]

    def _grant(self) -> None:
        """Free slots to waiting tenants in turn: the one served longest ago first."""
        while self._busy < self.capacity:
            ready = [name for name in self._waiting if self._busy_by_tenant.get(name, 0) < self.per_tenant]
            if not ready:
                return
            tenant = min(ready, key=lambda name: self._served_at.get(name, 0))
            queue = self._waiting[tenant]
            waiter = queue.popleft()
            if not queue:
                del self._waiting[tenant]
            self._take(tenant)
            waiter.set_result(None)
