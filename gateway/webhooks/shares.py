"""How one replica's delivery slots are shared: per tenant, per endpoint, and around receivers that fail.

A receiver that never answers holds each attempt for `timeout_s`; first come, first served, one tenant's
twenty such endpoints would take every slot and hold every other tenant's webhooks for as long. So a tenant
has at most `max_in_flight_per_tenant` attempts at once, an endpoint `max_in_flight_per_endpoint`, claims
deal the free slots to the tenants in turn (webhook_outbox.py), and an endpoint that failed
`breaker_failures` times in a row is left alone for `breaker_open_s`, then tried with one attempt (its
deliveries wait in the outbox meanwhile, and their retry window is not extended).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..config import WebhooksConfig
from ..storage.webhook_outbox import Due, Room


@dataclass
class _Breaker:
    failures: int = 0  # in a row
    open_until: float = 0.0


class DeliveryShares(Room):
    def __init__(self, config: WebhooksConfig) -> None:
        self._config = config
        self._tenants: dict[str, int] = {}  # attempts in flight
        self._endpoints: dict[str, int] = {}
        self._breakers: dict[str, _Breaker] = {}

    def tenant(self, tenant: str) -> int:
        return self._config.max_in_flight_per_tenant - self._tenants.get(tenant, 0)

    def endpoint(self, endpoint_id: str) -> int:
        in_flight = self._endpoints.get(endpoint_id, 0)
        breaker = self._breakers.get(endpoint_id)
        if breaker is not None and breaker.failures >= self._config.breaker_failures:
            if time.monotonic() < breaker.open_until:
                return 0
            return 1 - in_flight  # half open: one attempt tells whether it answers again
        return self._config.max_in_flight_per_endpoint - in_flight

    def blocked(self) -> list[str]:
        return [endpoint for endpoint in {*self._endpoints, *self._breakers} if self.endpoint(endpoint) <= 0]

    def is_open(self, endpoint_id: str) -> bool:
        breaker = self._breakers.get(endpoint_id)
        return breaker is not None and breaker.failures >= self._config.breaker_failures

    def started(self, due: Due) -> None:
        self._tenants[due.tenant] = self._tenants.get(due.tenant, 0) + 1
        self._endpoints[due.endpoint_id] = self._endpoints.get(due.endpoint_id, 0) + 1

    def ended(self, due: Due, answered: bool) -> None:
        """An attempt ended: `answered` with a 2xx, or not (no answer, another status)."""
        _decrement(self._tenants, due.tenant)
        _decrement(self._endpoints, due.endpoint_id)
        if answered:
            self._breakers.pop(due.endpoint_id, None)
            return
        breaker = self._breakers.setdefault(due.endpoint_id, _Breaker())
        breaker.failures += 1
        if breaker.failures >= self._config.breaker_failures:
            breaker.open_until = time.monotonic() + self._config.breaker_open_s


def _decrement(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
