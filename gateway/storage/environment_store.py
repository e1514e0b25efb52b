"""The Agents API's hosted environments (each one of the Containers API's containers, by the same id, with
the configuration the agent's sandbox is given) and environment templates (configurations kept to make
environments from). Another tenant's is as absent as one that never existed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import Database, Tx
from .file_store import TooMany
from .paging import PageQuery, fetch_page


@dataclass
class Kept:
    """An environment or a template: its id, tenant, times and configuration."""

    id: str
    tenant: str
    created_at: int
    updated_at: int
    body: dict[str, Any]


_COLUMNS = "id, tenant, created_at, updated_at, body"


def _kept(row: Any) -> Kept:
    return Kept(row[0], row[1], int(row[2]), int(row[3]), json.loads(row[4]))


class EnvironmentStore:
    """`table` is `agent_environments` or `agent_environment_templates`: the same record, two kinds."""

    def __init__(self, db: Database, table: str) -> None:
        self._db, self._table = db, table

    async def create(self, kept: Kept, limit: int) -> None:
        async def work(tx: Tx) -> None:
            await tx.lock(f"{self._table}:{kept.tenant}")
            rows = await tx.fetch(f"SELECT COUNT(*) FROM {self._table} WHERE tenant = ?", kept.tenant)
            if int(rows[0][0]) >= limit:
                raise TooMany(self._table.removeprefix("agent_").replace("_", " "), limit)
            await tx.execute(
                f"INSERT INTO {self._table} ({_COLUMNS}) VALUES (?,?,?,?,?)",
                kept.id,
                kept.tenant,
                kept.created_at,
                kept.updated_at,
                json.dumps(kept.body),
            )

        await self._db.transaction(work)

    async def get(self, kept_id: str, tenant: str) -> Kept | None:
        rows = await self._db.fetch(f"SELECT {_COLUMNS} FROM {self._table} WHERE id = ? AND tenant = ?", kept_id, tenant)
        return _kept(rows[0]) if rows else None

    async def page(self, tenant: str, page: PageQuery) -> tuple[list[Kept], bool] | None:
        rows = await fetch_page(self._db, self._table, _COLUMNS, "tenant = ?", [tenant], page)
        return None if rows is None else ([_kept(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def update(self, kept_id: str, tenant: str, body: dict[str, Any], now: int) -> Kept | None:
        async def work(tx: Tx) -> Kept | None:
            rows = await tx.fetch(f"SELECT {_COLUMNS} FROM {self._table} WHERE id = ? AND tenant = ?", kept_id, tenant)
            if not rows:
                return None
            before = _kept(rows[0])
            updated = max(now, before.updated_at + 1)
            await tx.execute(f"UPDATE {self._table} SET body = ?, updated_at = ? WHERE id = ?", json.dumps(body), updated, kept_id)
            return Kept(kept_id, tenant, before.created_at, updated, body)

        return await self._db.transaction(work)

    async def delete(self, kept_id: str, tenant: str) -> bool:
        return bool(await self._db.execute(f"DELETE FROM {self._table} WHERE id = ? AND tenant = ?", kept_id, tenant))
