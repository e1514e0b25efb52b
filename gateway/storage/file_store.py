"""Uploaded files, containers and containers' files: whose they are and where their bytes are (a blob).

Each record belongs to one tenant; another tenant's is as absent as one that never existed. A tenant's
quota covers its uploads and its containers' files together, and is checked in the transaction that
adds a file, so two uploads at once cannot both slip under it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from . import Database, Tx
from .paging import PageQuery, fetch_page

DATA_DIR = "/mnt/data"


class QuotaExceeded(Exception):
    """The tenant's files would pass its quota."""


class ContainerFull(Exception):
    """The container's files would pass its size or count limit."""


class ContainerGone(Exception):
    """The container was deleted (or expired) meanwhile: its file has nowhere to go."""


class TooMany(Exception):
    """The tenant holds as many of these (files, containers) as it may."""

    def __init__(self, what: str, limit: int) -> None:
        super().__init__(what)
        self.what, self.limit = what, limit


@dataclass
class StoredFile:
    id: str
    tenant: str
    filename: str
    purpose: str
    bytes: int
    created_at: int
    expires_at: int | None
    blob: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "file", "bytes": self.bytes, "created_at": self.created_at, "filename": self.filename,
            "purpose": self.purpose, "status": "processed", "expires_at": self.expires_at, "status_details": None,
        }  # fmt: skip


@dataclass
class Container:
    id: str
    tenant: str
    name: str
    created_at: int
    last_active_at: float
    idle_minutes: int
    memory_limit: str | None
    status: str = "running"
    network_policy: str | None = None  # JSON, its secrets sealed (files/network.py); None: no network

    @property
    def expires_at(self) -> float:
        return self.last_active_at + self.idle_minutes * 60

    def expired(self, now: float | None = None) -> bool:
        return self.status == "expired" or (now or time.time()) >= self.expires_at

    def shown_network_policy(self) -> dict[str, Any]:
        """Its type and domains, never a secret (a secret's value is sealed here anyway)."""
        if self.network_policy is None:
            return {"type": "disabled"}
        return {"type": "allowlist", "allowed_domains": json.loads(self.network_policy)["allowed_domains"]}

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "container", "created_at": self.created_at, "name": self.name,
            "status": "expired" if self.expired() else "running",
            "expires_after": {"anchor": "last_active_at", "minutes": self.idle_minutes},
            "last_active_at": int(self.last_active_at), "memory_limit": self.memory_limit,
            "network_policy": self.shown_network_policy(),
        }  # fmt: skip


@dataclass
class ContainerFile:
    id: str
    container_id: str
    tenant: str
    path: str  # relative to /mnt/data
    bytes: int
    source: str  # user | assistant
    created_at: int
    blob: str
    file_id: str | None = None  # the upload it was copied from

    @property
    def filename(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "container.file", "bytes": self.bytes, "container_id": self.container_id,
            "created_at": self.created_at, "path": f"{DATA_DIR}/{self.path}", "source": self.source,
        }  # fmt: skip


_FILE_COLUMNS = "id, tenant, filename, purpose, bytes, created_at, expires_at, blob"
_CONTAINER_COLUMNS = "id, tenant, name, created_at, last_active_at, idle_minutes, memory_limit, status, network_policy"
_CFILE_COLUMNS = "id, container_id, tenant, path, bytes, source, created_at, blob, file_id"


class FileStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    # -- uploads --------------------------------------------------------------------------------------------

    async def add_file(self, file: StoredFile, quota_bytes: int, max_files: int) -> None:
        async def work(tx: Tx) -> None:
            await _lock_tenant(tx, file.tenant)
            await self._check_quota(tx, file.tenant, file.bytes, quota_bytes)
            rows = await tx.fetch("SELECT COUNT(*) FROM files WHERE tenant = ?", file.tenant)
            if int(rows[0][0]) >= max_files:
                raise TooMany("files", max_files)
            await tx.execute(f"INSERT INTO files ({_FILE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)", *_values(file))

        await self._db.transaction(work)

    async def get_file(self, file_id: str, tenant: str) -> StoredFile | None:
        rows = await self._db.fetch(
            f"SELECT {_FILE_COLUMNS} FROM files WHERE id = ? AND tenant = ? AND (expires_at IS NULL OR expires_at > ?)",
            file_id, tenant, int(time.time()),
        )  # fmt: skip
        return StoredFile(*rows[0]) if rows else None

    async def list_files(self, tenant: str, page: PageQuery, purpose: str | None) -> tuple[list[StoredFile], bool] | None:
        where, params = "tenant = ? AND (expires_at IS NULL OR expires_at > ?)", [tenant, int(time.time())]
        if purpose is not None:
            where, params = where + " AND purpose = ?", params + [purpose]
        rows = await fetch_page(self._db, "files", _FILE_COLUMNS, where, params, page)
        return None if rows is None else ([StoredFile(*row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def delete_file(self, file_id: str, tenant: str) -> StoredFile | None:
        async def work(tx: Tx) -> StoredFile | None:
            rows = await tx.fetch(f"SELECT {_FILE_COLUMNS} FROM files WHERE id = ? AND tenant = ?", file_id, tenant)
            if not rows:
                return None
            await tx.execute("DELETE FROM files WHERE id = ?", file_id)
            return StoredFile(*rows[0])

        return await self._db.transaction(work)

    async def expire_files(self, now: float) -> list[str]:
        """Remove uploads past their expires_at; their blobs."""

        async def work(tx: Tx) -> list[str]:
            rows = await tx.fetch("SELECT blob FROM files WHERE expires_at IS NOT NULL AND expires_at <= ?", int(now))
            await tx.execute("DELETE FROM files WHERE expires_at IS NOT NULL AND expires_at <= ?", int(now))
            return [row[0] for row in rows]

        return await self._db.transaction(work)

    async def usage(self, tenant: str) -> int:
        rows = await self._db.fetch(_USAGE, tenant, tenant)
        return int(rows[0][0] or 0)

    @staticmethod
    async def _check_quota(tx: Tx, tenant: str, adding: int, quota_bytes: int) -> None:
        rows = await tx.fetch(_USAGE, tenant, tenant)
        if int(rows[0][0] or 0) + adding > quota_bytes:
            raise QuotaExceeded()

    # -- containers -----------------------------------------------------------------------------------------

    async def create_container(self, container: Container, max_containers: int) -> None:
        """Add a container; TooMany when the tenant holds `max_containers` that have not expired."""

        async def work(tx: Tx) -> None:
            await _lock_tenant(tx, container.tenant)
            rows = await tx.fetch(
                "SELECT COUNT(*) FROM containers WHERE tenant = ? AND status = 'running' AND last_active_at + idle_minutes * 60 > ?",
                container.tenant, time.time(),
            )  # fmt: skip
            if int(rows[0][0]) >= max_containers:
                raise TooMany("containers", max_containers)
            await tx.execute(f"INSERT INTO containers ({_CONTAINER_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", *_values(container))

        await self._db.transaction(work)

    async def get_container(self, container_id: str, tenant: str) -> Container | None:
        rows = await self._db.fetch(f"SELECT {_CONTAINER_COLUMNS} FROM containers WHERE id = ? AND tenant = ?", container_id, tenant)
        return Container(*rows[0]) if rows else None

    async def list_containers(self, tenant: str, page: PageQuery) -> tuple[list[Container], bool] | None:
        rows = await fetch_page(self._db, "containers", _CONTAINER_COLUMNS, "tenant = ?", [tenant], page)
        return None if rows is None else ([Container(*row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def touch_container(self, container_id: str) -> None:
        """The container was used: its idle time starts again (an expired one stays expired)."""
        await self._db.execute("UPDATE containers SET last_active_at = ? WHERE id = ? AND status = 'running'", time.time(), container_id)

    async def delete_container(self, container_id: str, tenant: str) -> list[str] | None:
        """Remove the container and its files; their blobs (None if there was no such container)."""

        async def work(tx: Tx) -> list[str] | None:
            await _lock_tenant(tx, tenant)  # a file being added to it waits, then finds it gone
            if not await tx.fetch("SELECT 1 FROM containers WHERE id = ? AND tenant = ?", container_id, tenant):
                return None
            blobs = await tx.fetch("SELECT blob FROM container_files WHERE container_id = ?", container_id)
            await tx.execute("DELETE FROM container_files WHERE container_id = ?", container_id)
            await tx.execute("DELETE FROM containers WHERE id = ?", container_id)
            return [row[0] for row in blobs]

        return await self._db.transaction(work)

    async def expire_containers(self, now: float) -> tuple[list[Container], list[str]]:
        """Mark containers idle past their time as expired and remove their files: the containers, and the
        blobs to remove. An expired container is still listed (status `expired`), as OpenAI's are."""

        async def work(tx: Tx) -> tuple[list[Container], list[str]]:
            rows = await tx.fetch(
                f"SELECT {_CONTAINER_COLUMNS} FROM containers WHERE status = 'running' AND last_active_at + idle_minutes * 60 <= ?", now
            )
            blobs: list[str] = []
            for row in rows:
                found = await tx.fetch("SELECT blob FROM container_files WHERE container_id = ?", row[0])
                blobs += [blob for (blob,) in found]
                await tx.execute("DELETE FROM container_files WHERE container_id = ?", row[0])
                await tx.execute("UPDATE containers SET status = 'expired' WHERE id = ?", row[0])
            return [Container(*row) for row in rows], blobs

        return await self._db.transaction(work)

    # -- containers' files ----------------------------------------------------------------------------------

    async def put_container_file(self, file: ContainerFile, quota_bytes: int, max_bytes: int, max_files: int) -> str | None:
        """Add a file to a container, replacing the one at the same path: the replaced file's blob.
        Raises QuotaExceeded, ContainerFull or ContainerGone (nothing changed then)."""

        async def work(tx: Tx) -> str | None:
            # One writer per tenant at a time: the quota's sum, the container's count and the replaced
            # path are read and written as one step, and the container cannot go away in between.
            await _lock_tenant(tx, file.tenant)
            if not await tx.fetch("SELECT 1 FROM containers WHERE id = ? AND status = 'running'", file.container_id):
                raise ContainerGone()
            rows = await tx.fetch("SELECT blob, bytes FROM container_files WHERE container_id = ? AND path = ?", file.container_id, file.path)
            replaced, replaced_bytes = (rows[0][0], int(rows[0][1])) if rows else (None, 0)
            totals = await tx.fetch("SELECT COUNT(*), SUM(bytes) FROM container_files WHERE container_id = ?", file.container_id)
            count, total = int(totals[0][0]), int(totals[0][1] or 0)
            if total - replaced_bytes + file.bytes > max_bytes or count + (0 if rows else 1) > max_files:
                raise ContainerFull()
            await self._check_quota(tx, file.tenant, file.bytes - replaced_bytes, quota_bytes)
            if rows:
                await tx.execute("DELETE FROM container_files WHERE container_id = ? AND path = ?", file.container_id, file.path)
            await tx.execute(f"INSERT INTO container_files ({_CFILE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", *_values(file))
            return replaced

        return await self._db.transaction(work)

    async def container_files(self, container_id: str) -> list[ContainerFile]:
        rows = await self._db.fetch(f"SELECT {_CFILE_COLUMNS} FROM container_files WHERE container_id = ? ORDER BY path", container_id)
        return [ContainerFile(*row) for row in rows]

    async def get_container_file(self, container_id: str, file_id: str, tenant: str) -> ContainerFile | None:
        rows = await self._db.fetch(
            f"SELECT {_CFILE_COLUMNS} FROM container_files WHERE id = ? AND container_id = ? AND tenant = ?", file_id, container_id, tenant
        )
        return ContainerFile(*rows[0]) if rows else None

    async def list_container_files(self, container_id: str, page: PageQuery) -> tuple[list[ContainerFile], bool] | None:
        rows = await fetch_page(self._db, "container_files", _CFILE_COLUMNS, "container_id = ?", [container_id], page)
        return None if rows is None else ([ContainerFile(*row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def delete_container_file(self, container_id: str, file_id: str, tenant: str) -> ContainerFile | None:
        async def work(tx: Tx) -> ContainerFile | None:
            rows = await tx.fetch(
                f"SELECT {_CFILE_COLUMNS} FROM container_files WHERE id = ? AND container_id = ? AND tenant = ?", file_id, container_id, tenant
            )
            if rows:
                await tx.execute("DELETE FROM container_files WHERE id = ?", file_id)
            return ContainerFile(*rows[0]) if rows else None

        return await self._db.transaction(work)


async def _lock_tenant(tx: Tx, tenant: str) -> None:
    await tx.lock(f"files:{tenant}")


_USAGE = (
    "SELECT (SELECT COALESCE(SUM(bytes), 0) FROM files WHERE tenant = ?) + (SELECT COALESCE(SUM(bytes), 0) FROM container_files WHERE tenant = ?)"
)


def _values(record: Any) -> tuple[Any, ...]:
    return tuple(record.__dict__.values())
