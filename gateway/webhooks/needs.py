"""What the webhook routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from ..config import GatewayConfig
from ..core.requests import NeedsOf
from ..core.sealed import Sealer
from ..storage.webhook_store import WebhookStore
from .sender import Sender


class WebhooksNeeds(Protocol):
    config: GatewayConfig
    sealer: Sealer
    webhooks: WebhookStore
    webhook_sender: Sender


needs_of = NeedsOf[WebhooksNeeds]()
