"""A background response's end, as webhook deliveries written with its final record (storage/response_store.py
calls this within that transaction)."""

from __future__ import annotations

import time
from typing import Any, Mapping

from ..storage import Tx
from ..storage.webhook_outbox import WebhookOutbox
from .events import random_id, response_event


class ResponseEvents:
    def __init__(self, outbox: WebhookOutbox) -> None:
        self._outbox = outbox

    async def write(self, tx: Tx, response: Mapping[str, Any], tenant: str) -> bool:
        event = response_event(response)
        if event is None:
            return False
        event_type, payload = event
        return await self._outbox.enqueue(tx, tenant, event_type, payload, time.time(), lambda: random_id("wh")) > 0

    def committed(self) -> None:
        self._outbox.written()
