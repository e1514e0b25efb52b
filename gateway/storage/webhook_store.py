"""Webhook endpoints: whose they are, where they point, which events they want, and their signing secrets
(sealed: this store never sees one in the clear). Another tenant's endpoint is as absent as one that never
existed."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from . import Database, Tx
from .file_store import TooMany
from .paging import PageQuery, fetch_page


@dataclass(frozen=True)
class SigningSecrets:
    """An endpoint's secrets, sealed: the current one, and the one a rotation keeps valid until `previous_until`."""

    current: str
    hint: str
    previous: str | None = None
    previous_until: float | None = None

    def valid(self, now: float) -> list[str]:
        """The sealed secrets that sign an attempt made at `now`."""
        if self.previous is not None and self.previous_until is not None and self.previous_until > now:
            return [self.current, self.previous]
        return [self.current]


@dataclass(frozen=True)
class Endpoint:
    id: str
    tenant: str
    name: str
    url: str
    event_types: list[str]
    secrets: SigningSecrets
    created_at: int
    updated_at: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "webhook_endpoint", "name": self.name, "url": self.url, "event_types": self.event_types,
            "created_at": self.created_at, "updated_at": self.updated_at, "signing_secret_hint": self.secrets.hint,
        }  # fmt: skip


_COLUMNS = "id, tenant, name, url, event_types, secret, secret_hint, previous_secret, previous_until, created_at, updated_at"


def _endpoint(row: tuple[Any, ...]) -> Endpoint:
    id, tenant, name, url, event_types, secret, secret_hint, previous, previous_until, created_at, updated_at = row
    secrets = SigningSecrets(secret, secret_hint, previous, previous_until)
    return Endpoint(id, tenant, name, url, json.loads(event_types), secrets, int(created_at), int(updated_at))


class WebhookStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, endpoint: Endpoint, max_endpoints: int) -> None:
        """Raises TooMany when the tenant has `max_endpoints` already."""

        async def work(tx: Tx) -> None:
            await tx.lock(f"webhooks:{endpoint.tenant}")
            rows = await tx.fetch("SELECT COUNT(*) FROM webhook_endpoints WHERE tenant = ?", endpoint.tenant)
            if int(rows[0][0]) >= max_endpoints:
                raise TooMany("webhook endpoints", max_endpoints)
            secrets = endpoint.secrets
            await tx.execute(
                f"INSERT INTO webhook_endpoints ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                endpoint.id, endpoint.tenant, endpoint.name, endpoint.url, json.dumps(endpoint.event_types), secrets.current,
                secrets.hint, secrets.previous, secrets.previous_until, endpoint.created_at, endpoint.updated_at,
            )  # fmt: skip

        await self._db.transaction(work)

    async def get(self, endpoint_id: str, tenant: str) -> Endpoint | None:
        rows = await self._db.fetch(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE id = ? AND tenant = ?", endpoint_id, tenant)
        return _endpoint(rows[0]) if rows else None

    async def page(self, tenant: str, page: PageQuery) -> tuple[list[Endpoint], bool] | None:
        rows = await fetch_page(self._db, "webhook_endpoints", _COLUMNS, "tenant = ?", [tenant], page)
        return None if rows is None else ([_endpoint(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def update(self, endpoint_id: str, tenant: str, name: str | None, url: str | None, event_types: list[str] | None) -> Endpoint | None:
        """The endpoint with what was given changed; `updated_at` moves only if something did."""

        async def work(tx: Tx) -> Endpoint | None:
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE id = ? AND tenant = ?{self._db.for_update()}", endpoint_id, tenant)
            if not rows:
                return None
            before = _endpoint(rows[0])
            after = replace(
                before, name=before.name if name is None else name, url=before.url if url is None else url,
                event_types=before.event_types if event_types is None else event_types,
            )  # fmt: skip
            if after == before:
                return before
            after = replace(after, updated_at=max(int(time.time()), before.updated_at))
            await tx.execute(
                "UPDATE webhook_endpoints SET name = ?, url = ?, event_types = ?, updated_at = ? WHERE id = ?",
                after.name, after.url, json.dumps(after.event_types), after.updated_at, endpoint_id,
            )  # fmt: skip
            return after

        return await self._db.transaction(work)

    async def rotate(self, endpoint_id: str, tenant: str, rotated: Callable[[SigningSecrets], SigningSecrets]) -> Endpoint | None:
        """The endpoint signing with `rotated(its secrets)` from now on, its pending deliveries included."""

        async def work(tx: Tx) -> Endpoint | None:
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM webhook_endpoints WHERE id = ? AND tenant = ?{self._db.for_update()}", endpoint_id, tenant)
            if not rows:
                return None
            before = _endpoint(rows[0])
            after = replace(before, secrets=rotated(before.secrets), updated_at=max(int(time.time()), before.updated_at))
            secrets = after.secrets
            await tx.execute(
                "UPDATE webhook_endpoints SET secret = ?, secret_hint = ?, previous_secret = ?, previous_until = ?, updated_at = ? WHERE id = ?",
                secrets.current, secrets.hint, secrets.previous, secrets.previous_until, after.updated_at, endpoint_id,
            )  # fmt: skip
            return after

        return await self._db.transaction(work)

    async def delete(self, endpoint_id: str, tenant: str) -> bool:
        """Remove the endpoint; its deliveries not made yet go with it (nothing more is sent to it)."""
        return bool(await self._db.execute("DELETE FROM webhook_endpoints WHERE id = ? AND tenant = ?", endpoint_id, tenant))
