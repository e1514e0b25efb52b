"""The keys every process on one store shares: a restarted gateway, and every replica, seal and open with
the same key whether or not one is configured.

Where `server.reasoning_key` is unset, the first process to start makes a key and keeps it here; the
others read it (the insert that loses the race changes nothing). The id of the key that seals now is kept
too, so that a process whose keys cannot open what the others sealed says so at start.
"""

from __future__ import annotations

from typing import Callable

from .database import Database

MADE_KEY = "reasoning_key"  # the key a gateway made (base64), where none is configured
SEALING_KEY_ID = "sealing_key_id"  # the id (hex) of the key that seals now


class KeyStore:
    def __init__(self, database: Database) -> None:
        self.database = database

    async def made_key(self, make: Callable[[], str]) -> str:
        """The store's own key, made (by `make`) by the first process that asks."""
        await self.database.execute("INSERT INTO gateway_keys (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING", MADE_KEY, make())
        return await self._get(MADE_KEY) or ""

    async def sealing_key_id(self) -> str | None:
        return await self._get(SEALING_KEY_ID)

    async def set_sealing_key_id(self, key_id: str) -> None:
        await self.database.execute(
            "INSERT INTO gateway_keys (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = excluded.value", SEALING_KEY_ID, key_id
        )

    async def _get(self, name: str) -> str | None:
        rows = await self.database.fetch("SELECT value FROM gateway_keys WHERE name = ?", name)
        return str(rows[0][0]) if rows else None
