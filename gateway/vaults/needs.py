"""What the vaults' routes use of the app: a part of gateway/services.py's `Services`."""

from __future__ import annotations

from typing import Protocol

from ..config import GatewayConfig
from ..core.requests import NeedsOf
from ..core.sealed import Sealer
from ..storage.vault_store import VaultStore


class VaultsNeeds(Protocol):
    config: GatewayConfig
    sealer: Sealer
    vaults: VaultStore


needs_of = NeedsOf[VaultsNeeds]()
