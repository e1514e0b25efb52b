"""Vaults and their credentials (gateway/vaults/). A credential's secrets are kept sealed for its tenant, apart
from what is shown of it; another tenant's vault or credential is as absent as one that never existed.

An OAuth credential's access token is refreshed by one replica at a time: it claims the refresh (`claim_refresh`,
a conditional update, so two replicas never both win it), calls the token endpoint outside any transaction,
and writes the new token (`refreshed`); the others wait for that token, or for the claim to lapse."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from . import Database, Tx
from .file_store import TooMany
from .paging import PageQuery, fetch_page


@dataclass
class Vault:
    id: str
    tenant: str
    created_at: int
    body: dict[str, Any]  # name, metadata


@dataclass
class Credential:
    id: str
    vault_id: str
    tenant: str
    created_at: int
    updated_at: int
    body: dict[str, Any]  # name, metadata, auth as shown
    secret: str  # sealed JSON of its secrets
    expires_at: float | None  # its OAuth access token's


_VAULT = "id, tenant, created_at, body"
_CREDENTIAL = "id, vault_id, tenant, created_at, updated_at, body, secret, expires_at"


def _vault(row: Any) -> Vault:
    return Vault(row[0], row[1], int(row[2]), json.loads(row[3]))


def _credential(row: Any) -> Credential:
    return Credential(row[0], row[1], row[2], int(row[3]), int(row[4]), json.loads(row[5]), row[6], float(row[7]) if row[7] is not None else None)


class VaultStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    # Vaults

    async def create(self, vault: Vault, limit: int) -> None:
        async def work(tx: Tx) -> None:
            await tx.lock(f"vaults:{vault.tenant}")
            rows = await tx.fetch("SELECT COUNT(*) FROM vaults WHERE tenant = ?", vault.tenant)
            if int(rows[0][0]) >= limit:
                raise TooMany("vaults", limit)
            await tx.execute(f"INSERT INTO vaults ({_VAULT}) VALUES (?,?,?,?)", vault.id, vault.tenant, vault.created_at, json.dumps(vault.body))

        await self._db.transaction(work)

    async def vault(self, vault_id: str, tenant: str) -> Vault | None:
        rows = await self._db.fetch(f"SELECT {_VAULT} FROM vaults WHERE id = ? AND tenant = ?", vault_id, tenant)
        return _vault(rows[0]) if rows else None

    async def vaults(self, tenant: str, page: PageQuery) -> tuple[list[Vault], bool] | None:
        rows = await fetch_page(self._db, "vaults", _VAULT, "tenant = ?", [tenant], page)
        return None if rows is None else ([_vault(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def update(self, vault_id: str, tenant: str, body: dict[str, Any]) -> Vault | None:
        if not await self._db.execute("UPDATE vaults SET body = ? WHERE id = ? AND tenant = ?", json.dumps(body), vault_id, tenant):
            return None
        return await self.vault(vault_id, tenant)

    async def delete(self, vault_id: str, tenant: str) -> bool:
        async def work(tx: Tx) -> bool:
            if not await tx.execute("DELETE FROM vaults WHERE id = ? AND tenant = ?", vault_id, tenant):
                return False
            await tx.execute("DELETE FROM vault_credentials WHERE vault_id = ?", vault_id)
            return True

        return await self._db.transaction(work)

    # Credentials

    async def add(self, credential: Credential, limit: int) -> None:
        async def work(tx: Tx) -> None:
            await tx.lock(f"vault_credentials:{credential.vault_id}")
            rows = await tx.fetch("SELECT COUNT(*) FROM vault_credentials WHERE vault_id = ?", credential.vault_id)
            if int(rows[0][0]) >= limit:
                raise TooMany("credentials in a vault", limit)
            await tx.execute(
                f"INSERT INTO vault_credentials ({_CREDENTIAL}) VALUES (?,?,?,?,?,?,?,?)",
                credential.id, credential.vault_id, credential.tenant, credential.created_at, credential.updated_at,
                json.dumps(credential.body), credential.secret, credential.expires_at,
            )  # fmt: skip

        await self._db.transaction(work)

    async def credential(self, vault_id: str, credential_id: str, tenant: str) -> Credential | None:
        query = f"SELECT {_CREDENTIAL} FROM vault_credentials WHERE id = ? AND vault_id = ? AND tenant = ?"
        rows = await self._db.fetch(query, credential_id, vault_id, tenant)
        return _credential(rows[0]) if rows else None

    async def credentials(self, vault_id: str, page: PageQuery) -> tuple[list[Credential], bool] | None:
        rows = await fetch_page(self._db, "vault_credentials", _CREDENTIAL, "vault_id = ?", [vault_id], page)
        return None if rows is None else ([_credential(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def in_vaults(self, vault_ids: list[str], tenant: str) -> list[Credential]:
        """Every credential of these vaults (a session's, at most ten), oldest first."""
        if not vault_ids:
            return []
        marks = ",".join("?" * len(vault_ids))
        rows = await self._db.fetch(
            f"SELECT {_CREDENTIAL} FROM vault_credentials WHERE tenant = ? AND vault_id IN ({marks}) ORDER BY created_at, id", tenant, *vault_ids
        )
        return [_credential(row) for row in rows]

    async def replace(self, credential: Credential) -> None:
        """Its shown body, secret and expiry written (an update or a rotation)."""
        await self._db.execute(
            "UPDATE vault_credentials SET body = ?, secret = ?, expires_at = ?, updated_at = ? WHERE id = ?",
            json.dumps(credential.body), credential.secret, credential.expires_at, credential.updated_at, credential.id,
        )  # fmt: skip

    async def remove(self, vault_id: str, credential_id: str, tenant: str) -> bool:
        return bool(
            await self._db.execute("DELETE FROM vault_credentials WHERE id = ? AND vault_id = ? AND tenant = ?", credential_id, vault_id, tenant)
        )

    # OAuth refresh

    async def claim_refresh(self, credential_id: str, replica: str, now: float, until: float, due_by: float) -> bool:
        """Whether `replica` now holds the refresh of this credential: its token expires by `due_by` and no
        live claim holds it."""
        claimed = await self._db.execute(
            "UPDATE vault_credentials SET refresh_claim = ?, refresh_until = ? "
            "WHERE id = ? AND expires_at <= ? AND (refresh_until IS NULL OR refresh_until < ?)",
            replica, until, credential_id, due_by, now,
        )  # fmt: skip
        return bool(claimed)

    async def refreshed(self, credential_id: str, replica: str, secret: str | None, expires_at: float | None, updated_at: int) -> None:
        """The refresh's end: its new token written (None: it failed), the claim let go."""
        if secret is None:
            await self._db.execute(
                "UPDATE vault_credentials SET refresh_claim = NULL, refresh_until = NULL WHERE id = ? AND refresh_claim = ?", credential_id, replica
            )
            return
        await self._db.execute(
            "UPDATE vault_credentials SET secret = ?, expires_at = ?, updated_at = ?, refresh_claim = NULL, refresh_until = NULL "
            "WHERE id = ? AND refresh_claim = ?",
            secret, expires_at, updated_at, credential_id, replica,
        )  # fmt: skip

    async def current(self, credential_id: str) -> Credential | None:
        rows = await self._db.fetch(f"SELECT {_CREDENTIAL} FROM vault_credentials WHERE id = ?", credential_id)
        return _credential(rows[0]) if rows else None
