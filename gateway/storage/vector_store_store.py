"""Vector stores, their files and file batches: whose they are, and where each file's ingestion stands.

A store belongs to one tenant; another tenant's is as absent as one that never existed. Its files'
chunks and their search live in chunk_index.py; this module keeps the records the API shows. A store's
`file_counts` and `usage_bytes` are counted from its files when it is read, never kept twice.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from ..protocol import IngestStatus
from . import Database, Tx
from .file_store import TooMany
from .paging import PageQuery, fetch_page

Attributes = dict[str, str | float | bool]
# One attribute as a row (vector_store_attributes): key, a string's value, a number's (a boolean's 1 or 0), whether boolean.
AttributeRow = tuple[str, str | None, float | None, bool]
STATUSES = tuple(status.value for status in IngestStatus)


@dataclass
class FileCounts:
    in_progress: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0

    @property
    def total(self) -> int:
        return self.in_progress + self.completed + self.failed + self.cancelled

    def as_dict(self) -> dict[str, int]:
        return {**{status.value: getattr(self, status.value) for status in IngestStatus}, "total": self.total}


@dataclass
class VectorStore:
    id: str
    tenant: str
    name: str
    description: str | None
    created_at: int
    last_active_at: int
    metadata: dict[str, str]
    expires_days: int | None
    counts: FileCounts = field(default_factory=FileCounts)
    usage_bytes: int = 0

    @property
    def expires_at(self) -> int | None:
        return None if self.expires_days is None else self.last_active_at + self.expires_days * 86400

    def expired(self, now: float | None = None) -> bool:
        return self.expires_at is not None and (now or time.time()) >= self.expires_at

    @property
    def status(self) -> str:
        if self.expired():
            return "expired"
        return IngestStatus.IN_PROGRESS if self.counts.in_progress else IngestStatus.COMPLETED

    def as_dict(self) -> dict[str, Any]:
        expires = None if self.expires_days is None else {"anchor": "last_active_at", "days": self.expires_days}
        return {
            "id": self.id, "object": "vector_store", "created_at": self.created_at, "name": self.name,
            "description": self.description, "usage_bytes": self.usage_bytes, "file_counts": self.counts.as_dict(),
            "status": self.status, "expires_after": expires, "expires_at": self.expires_at,
            "last_active_at": self.last_active_at, "metadata": self.metadata,
        }  # fmt: skip


@dataclass
class StoreFile:
    """A file of a vector store (`vector_store.file`): the file, and where its ingestion stands."""

    seq: int | None  # its row's handle (None before it is stored)
    vector_store_id: str
    id: str
    tenant: str
    filename: str
    batch_id: str | None
    created_at: int
    status: str
    last_error: dict[str, str] | None
    usage_bytes: int
    chunking: dict[str, Any]
    attributes: Attributes

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> StoreFile:
        seq, store, file_id, tenant, filename, batch, created, status, error, usage, chunking, attributes = row
        return cls(
            seq, store, file_id, tenant, filename, batch, created, status,
            json.loads(error) if error else None, usage, json.loads(chunking), json.loads(attributes),
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "vector_store.file", "created_at": self.created_at, "vector_store_id": self.vector_store_id,
            "status": self.status, "last_error": self.last_error, "usage_bytes": self.usage_bytes,
            "chunking_strategy": self.chunking, "attributes": self.attributes,
        }  # fmt: skip


@dataclass
class FileBatch:
    id: str
    vector_store_id: str
    tenant: str
    created_at: int
    cancelled: bool
    counts: FileCounts = field(default_factory=FileCounts)

    @property
    def status(self) -> str:
        if self.counts.in_progress:
            return IngestStatus.IN_PROGRESS
        if self.cancelled:
            return IngestStatus.CANCELLED
        return IngestStatus.FAILED if self.counts.total and self.counts.failed == self.counts.total else IngestStatus.COMPLETED

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "vector_store.files_batch", "created_at": self.created_at,
            "vector_store_id": self.vector_store_id, "status": self.status, "file_counts": self.counts.as_dict(),
        }  # fmt: skip


_STORE_COLUMNS = "id, tenant, name, description, created_at, last_active_at, metadata, expires_days"
FILE_COLUMNS = "seq, vector_store_id, id, tenant, filename, batch_id, created_at, status, last_error, usage_bytes, chunking, attributes"
_COUNTS = "SELECT {key}, status, COUNT(*), COALESCE(SUM(usage_bytes), 0) FROM vector_store_files WHERE {key} IN ({marks}) GROUP BY {key}, status"
INGEST_CHANNEL = "gateway_vector_store_ingest"  # files are waiting: the replicas' ingestors look now


class VectorStoreStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- stores ---------------------------------------------------------------------------------------------

    async def create(self, store: VectorStore, max_stores: int) -> None:
        async def work(tx: Tx) -> None:
            await tx.lock(f"vector_stores:{store.tenant}")
            rows = await tx.fetch("SELECT COUNT(*) FROM vector_stores WHERE tenant = ?", store.tenant)
            if int(rows[0][0]) >= max_stores:
                raise TooMany("vector stores", max_stores)
            await tx.execute(
                f"INSERT INTO vector_stores ({_STORE_COLUMNS}) VALUES (?,?,?,?,?,?,?,?)",
                store.id, store.tenant, store.name, store.description, store.created_at, store.last_active_at,
                json.dumps(store.metadata), store.expires_days,
            )  # fmt: skip

        await self.db.transaction(work)

    async def get(self, store_id: str, tenant: str) -> VectorStore | None:
        rows = await self.db.fetch(f"SELECT {_STORE_COLUMNS} FROM vector_stores WHERE id = ? AND tenant = ?", store_id, tenant)
        if not rows:
            return None
        store = _store(rows[0])
        store.counts, store.usage_bytes = (await self._counts("vector_store_id", [store.id]))[store.id]
        return store

    async def list_stores(self, tenant: str, page: PageQuery) -> tuple[list[VectorStore], bool] | None:
        rows = await fetch_page(self.db, "vector_stores", _STORE_COLUMNS, "tenant = ?", [tenant], page)
        if rows is None:
            return None
        stores = [_store(row) for row in rows[: page.limit]]
        counted = await self._counts("vector_store_id", [store.id for store in stores])  # the page's stores in one query
        for store in stores:
            store.counts, store.usage_bytes = counted[store.id]
        return stores, len(rows) > page.limit

    async def update(self, store_id: str, tenant: str, changes: dict[str, Any]) -> bool:
        """Set the given columns (name, metadata, expires_days); False when there is no such store."""
        values = {key: json.dumps(value) if key == "metadata" else value for key, value in changes.items()}
        assignments = "".join(f", {column} = ?" for column in values)
        count = await self.db.execute(
            f"UPDATE vector_stores SET last_active_at = ?{assignments} WHERE id = ? AND tenant = ?",
            int(time.time()), *values.values(), store_id, tenant,
        )  # fmt: skip
        return count > 0

    async def touch(self, store_ids: list[str]) -> None:
        """The stores were searched: their expiry counts from now."""
        marks = ",".join("?" * len(store_ids))
        await self.db.execute(f"UPDATE vector_stores SET last_active_at = ? WHERE id IN ({marks})", int(time.time()), *store_ids)

    async def delete(self, store_id: str, tenant: str) -> bool:
        """Remove the store with its files, their chunks and batches (cascades)."""
        return await self.db.execute("DELETE FROM vector_stores WHERE id = ? AND tenant = ?", store_id, tenant) > 0

    async def _counts(self, key: str, values: list[str]) -> dict[str, tuple[FileCounts, int]]:
        """The file counts and usage of each store (`key` vector_store_id) or batch (`batch_id`) named."""
        counted = {value: (FileCounts(), 0) for value in values}
        if not values:
            return counted
        rows = await self.db.fetch(_COUNTS.format(key=key, marks=",".join("?" * len(values))), *values)
        for value, status, count, usage_bytes in rows:
            counts, usage = counted[value]
            if status in STATUSES:
                setattr(counts, status, int(count))
            counted[value] = counts, usage + int(usage_bytes)
        return counted

    # -- files ----------------------------------------------------------------------------------------------

    async def attach(self, files: list[StoreFile], attributes: list[list[AttributeRow]], max_files: int) -> None:
        """Add files to a store for ingestion (a file already there is ingested anew, as it is now), with
        their attribute rows; TooMany past the store's count."""

        async def work(tx: Tx) -> None:
            store_id = files[0].vector_store_id
            await tx.lock(f"vector_store:{store_id}")
            for file, rows in zip(files, attributes):
                await tx.execute("DELETE FROM vector_store_files WHERE vector_store_id = ? AND id = ?", store_id, file.id)
                await _insert_file(tx, file, rows)
            count = await tx.fetch("SELECT COUNT(*) FROM vector_store_files WHERE vector_store_id = ?", store_id)
            if int(count[0][0]) > max_files:
                raise TooMany("files in this vector store", max_files)

        await self.db.transaction(work)
        await self.db.notify(INGEST_CHANNEL, files[0].vector_store_id)

    async def file(self, store_id: str, file_id: str, tenant: str) -> StoreFile | None:
        rows = await self.db.fetch(
            f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE vector_store_id = ? AND id = ? AND tenant = ?", store_id, file_id, tenant
        )
        return StoreFile.from_row(rows[0]) if rows else None

    async def files(
        self, store_id: str, page: PageQuery, status: str | None = None, batch_id: str | None = None
    ) -> tuple[list[StoreFile], bool] | None:
        where, params = "vector_store_id = ?", [store_id]
        if status is not None:
            where, params = where + " AND status = ?", params + [status]
        if batch_id is not None:
            where, params = where + " AND batch_id = ?", params + [batch_id]
        rows = await fetch_page(self.db, "vector_store_files", FILE_COLUMNS, where, params, page)
        return None if rows is None else ([StoreFile.from_row(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def set_attributes(self, file: StoreFile, rows: list[AttributeRow]) -> None:
        async def work(tx: Tx) -> None:
            await tx.execute("UPDATE vector_store_files SET attributes = ? WHERE seq = ?", json.dumps(file.attributes), file.seq)
            await tx.execute("DELETE FROM vector_store_attributes WHERE file_seq = ?", file.seq)
            await _insert_attributes(tx, file.seq, rows)

        await self.db.transaction(work)

    async def sweep_expired(self, now: float, limit: int) -> int:
        """Up to `limit` files of expired stores taken out, their chunks with them (the store stays, shown
        expired, with nothing left to search or bill); how many."""
        rows = await self.db.fetch(
            "SELECT f.seq FROM vector_store_files f JOIN vector_stores s ON s.id = f.vector_store_id "
            "WHERE s.expires_days IS NOT NULL AND s.last_active_at + s.expires_days * 86400 <= ? LIMIT ?",
            int(now), limit,
        )  # fmt: skip
        seqs = [row[0] for row in rows]
        if seqs:
            await self.db.execute(f"DELETE FROM vector_store_files WHERE seq IN ({','.join('?' * len(seqs))})", *seqs)
        return len(seqs)

    async def remove_file(self, store_id: str, file_id: str, tenant: str) -> bool:
        """Take a file out of the store, with its chunks (the file itself stays in the Files API)."""
        return (
            await self.db.execute("DELETE FROM vector_store_files WHERE vector_store_id = ? AND id = ? AND tenant = ?", store_id, file_id, tenant) > 0
        )

    # -- batches --------------------------------------------------------------------------------------------

    async def create_batch(self, batch: FileBatch) -> None:
        await self.db.execute(
            "INSERT INTO vector_store_batches (id, vector_store_id, tenant, created_at) VALUES (?,?,?,?)",
            batch.id, batch.vector_store_id, batch.tenant, batch.created_at,
        )  # fmt: skip

    async def delete_batch(self, batch_id: str) -> None:
        """A batch whose files were refused: it never was."""
        await self.db.execute("DELETE FROM vector_store_batches WHERE id = ?", batch_id)

    async def batch(self, store_id: str, batch_id: str, tenant: str) -> FileBatch | None:
        rows = await self.db.fetch(
            "SELECT id, vector_store_id, tenant, created_at, cancelled FROM vector_store_batches WHERE id = ? AND vector_store_id = ? AND tenant = ?",
            batch_id, store_id, tenant,
        )  # fmt: skip
        if not rows:
            return None
        batch_id, store, owner, created_at, cancelled = rows[0]
        batch = FileBatch(batch_id, store, owner, int(created_at), bool(cancelled))
        batch.counts, _ = (await self._counts("batch_id", [batch_id]))[batch_id]
        return batch

    async def cancel_batch(self, batch_id: str) -> None:
        """Files of the batch not ingested yet are cancelled (an ingestion under way writes nothing then)."""

        async def work(tx: Tx) -> None:
            await tx.execute("UPDATE vector_store_batches SET cancelled = 1 WHERE id = ?", batch_id)
            await tx.execute(
                "UPDATE vector_store_files SET status = 'cancelled', owner = NULL WHERE batch_id = ? AND status = 'in_progress'", batch_id
            )

        await self.db.transaction(work)


def _store(row: tuple[Any, ...]) -> VectorStore:
    store_id, tenant, name, description, created_at, last_active_at, metadata, expires_days = row
    return VectorStore(store_id, tenant, name, description, int(created_at), int(last_active_at), json.loads(metadata), expires_days)


async def _insert_file(tx: Tx, file: StoreFile, rows: list[AttributeRow]) -> None:
    columns = FILE_COLUMNS.removeprefix("seq, ")
    found = await tx.fetch(
        f"INSERT INTO vector_store_files ({columns}) VALUES (?,?,?,?,?,?,?,?,?,?,?) RETURNING seq",
        file.vector_store_id, file.id, file.tenant, file.filename, file.batch_id, file.created_at, file.status,
        json.dumps(file.last_error) if file.last_error else None, file.usage_bytes, json.dumps(file.chunking), json.dumps(file.attributes),
    )  # fmt: skip
    file.seq = int(found[0][0])
    await _insert_attributes(tx, file.seq, rows)


async def _insert_attributes(tx: Tx, seq: int | None, rows: list[AttributeRow]) -> None:
    if rows:
        await tx.executemany(
            "INSERT INTO vector_store_attributes (file_seq, key, text_value, number_value, is_boolean) VALUES (?,?,?,?,?)",
            [(seq, key, text, number, int(boolean)) for key, text, number, boolean in rows],
        )
