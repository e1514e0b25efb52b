"""The chunks of vector stores' files: written by ingestion (a file claimed, then its chunks written in
one fenced step), found by search (words, and vectors where an embeddings endpoint is configured).

The two dialects search differently, and not here: by words through FTS5's BM25 or PostgreSQL's `ts_rank`
(chunk_words.py, rarest words first: word_ranking.py), by meaning through sqlite-vec or pgvector, whose HNSW
index is read by iterative scans and an answer it leaves short searched again exactly (chunk_vectors.py).
Every query takes the stores and the `filters` as SQL (`Scope`), so a filter narrows what is ranked
rather than what is returned.
"""

from __future__ import annotations

import array
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from runtime.cpu import run_cpu

from . import Database, StorageError, Tx
from .chunk_vectors import drop_vectors, keep_index, make_vectors, postgres_nearest, sqlite_nearest
from .chunk_words import PostgresWords, SQLiteWords
from .database import Dialect, Row
from .vector_store_store import FILE_COLUMNS, StoreFile

T = TypeVar("T")
log = logging.getLogger("gateway.vector_stores")
EMBEDDINGS_KEY = "embeddings"  # gateway_keys: the model and dimensions the stored vectors were made with


class VectorsUnavailable(Exception):
    """The database cannot hold or search vectors (no sqlite-vec, no pgvector)."""


@dataclass(frozen=True)
class Scope:
    """What a search ranks: the chunks of these stores' files that pass the filter (SQL over the file row
    `f`, from vector_stores/filters.py)."""

    store_ids: list[str]
    filter_sql: str = ""
    filter_params: list[Any] = field(default_factory=list)

    def where(self) -> tuple[str, str, list[Any]]:
        """The join to the file rows (only a filter needs them: chunks are written with their file's
        completion, in one step, and removed with it), the condition on the chunk `c`, its parameters."""
        marks = ",".join("?" * len(self.store_ids))
        sql = f"c.vector_store_id IN ({marks})"
        if not self.filter_sql:
            return "", sql, list(self.store_ids)
        return " JOIN vector_store_files f ON f.seq = c.file_seq", f"{sql} AND ({self.filter_sql})", [*self.store_ids, *self.filter_params]


@dataclass(frozen=True)
class Chunk:
    seq: int
    file_id: str
    filename: str
    attributes: dict[str, Any]
    text: str


@dataclass(frozen=True)
class Written:
    """A file's chunks as ingestion made them: their texts, their vectors (None without embeddings)."""

    texts: list[str]
    vectors: list[list[float]] | None
    usage_bytes: int


class ChunkIndex:
    def __init__(self, db: Database, search_timeout_s: float = 5.0, exact_search_below: int = 10_000) -> None:
        self.db = db
        self.dialect = db.dialect
        self.vectors = False  # chunks are written with their vectors (prepare_vectors was called)
        self.indexable = False  # PostgreSQL with pgvector 0.8+: an HNSW index can search the vectors
        self.approximate = False  # searched by meaning through that index (once it is built: `keep_index`)
        # Each search statement's limit (TooSlow past it): on SQLite a search holds every tenant's one
        # connection, and a filter's cost is the client's choice.
        self.search_timeout_s = search_timeout_s
        self.exact_search_below = exact_search_below  # chunks: smaller scopes are searched by meaning exactly

    async def _searched(self, search: Callable[[Tx], Awaitable[T]]) -> T:
        """A search's statements in one transaction, each stopped past the time limit."""

        async def work(tx: Tx) -> T:
            await tx.limit_time(self.search_timeout_s)
            return await search(tx)

        return await self.db.transaction(work)

    async def prepare_vectors(self, model: str, dimensions: int) -> None:
        """Make the database ready for vectors of `dimensions` (pgvector's column and HNSW index on PostgreSQL).
        Vectors another model made mean nothing to this one: they are dropped, and the chunks embedded anew in
        the background (`unembedded`, `add_vectors`), found by words meanwhile."""
        if self.dialect is Dialect.SQLITE and not getattr(self.db, "vectors", False):
            raise VectorsUnavailable("this Python's sqlite3 cannot load extensions, so sqlite-vec cannot be loaded")
        made = f"{model}:{dimensions}"

        async def work(tx: Tx) -> None:
            if self.dialect is Dialect.POSTGRESQL:
                await tx.lock("vector_store_chunks:vectors")  # replicas starting together make the index once
                await tx.execute("CREATE EXTENSION IF NOT EXISTS vector")
            rows = await tx.fetch("SELECT value FROM gateway_keys WHERE name = ?", EMBEDDINGS_KEY)
            if rows and rows[0][0] != made:
                log.warning("the stored vectors were made by %s, not %s: dropped, and made anew in the background", rows[0][0], made)
                await drop_vectors(tx, self.dialect)  # the HNSW index with them: made again in the background
                await tx.execute("DELETE FROM gateway_keys WHERE name = ?", EMBEDDINGS_KEY)
            self.indexable = await make_vectors(tx, self.dialect, dimensions)
            if not rows or rows[0][0] != made:
                await tx.execute("INSERT INTO gateway_keys (name, value) VALUES (?, ?)", EMBEDDINGS_KEY, made)

        try:
            await self.db.transaction(work)
        except StorageError as exc:
            raise VectorsUnavailable(f"PostgreSQL has no pgvector extension to load ({exc})") from None
        self.vectors = True

    async def keep_index(self) -> None:
        """Run in the background where `indexable`: the HNSW index built if missing; searched once valid."""
        await keep_index(self.db, lambda: setattr(self, "approximate", True))

    async def unembedded(self, after: int, count: int) -> list[tuple[int, str]]:
        """Up to `count` chunks past seq `after` that have no vector (ingested before embeddings were configured,
        or their vectors dropped with another model's), in seq order: their seqs and texts."""
        if self.dialect is Dialect.POSTGRESQL:
            sql = "SELECT seq, text FROM vector_store_chunks WHERE embedding IS NULL AND seq > ? ORDER BY seq LIMIT ?"
        else:
            sql = (
                "SELECT c.seq, c.text FROM vector_store_chunks c WHERE c.seq > ? "
                "AND NOT EXISTS (SELECT 1 FROM vector_store_vectors v WHERE v.rowid = c.seq) ORDER BY c.seq LIMIT ?"
            )
        rows = await self.db.fetch(sql, after, count)
        return [(int(seq), text) for seq, text in rows]

    async def add_vectors(self, vectors: list[tuple[int, list[float]]]) -> None:
        """Write the vectors of chunks that still have none (another replica may have written them meanwhile,
        or the chunk been removed: then nothing is written)."""
        encoded = await run_cpu(self._vectors, [vector for _, vector in vectors])
        rows = [(vector, seq) for (seq, _), vector in zip(vectors, encoded)]
        if self.dialect is Dialect.POSTGRESQL:
            sql = "UPDATE vector_store_chunks SET embedding = ?::vector WHERE seq = ? AND embedding IS NULL"
        else:
            sql = (
                "INSERT INTO vector_store_vectors (rowid, vector_store_id, embedding) SELECT c.seq, c.vector_store_id, ? "
                "FROM vector_store_chunks c WHERE c.seq = ? AND NOT EXISTS (SELECT 1 FROM vector_store_vectors v WHERE v.rowid = c.seq)"
            )

        async def work(tx: Tx) -> None:
            await tx.executemany(sql, rows)

        await self.db.transaction(work)

    # -- ingestion ------------------------------------------------------------------------------------------

    async def claim(self, owner: str, live: set[str]) -> tuple[StoreFile, str | None] | None:
        """Take a file waiting for ingestion, nobody's or a replica's that is gone: the file, and its blob
        (None when the upload was deleted meanwhile). Tenants take turns: the oldest file of the tenant with
        the fewest files being ingested now, so one tenant's thousand files never hold another's one."""
        marks = ",".join("?" * len(live))
        waiting = f"status = 'in_progress' AND (owner IS NULL OR owner NOT IN ({marks}))"

        async def work(tx: Tx) -> tuple[StoreFile, str | None] | None:
            oldest = await tx.fetch(f"SELECT tenant, MIN(seq) FROM vector_store_files WHERE {waiting} GROUP BY tenant LIMIT 256", *live)
            if not oldest:
                return None
            counted = await tx.fetch(
                f"SELECT tenant, COUNT(*) FROM vector_store_files WHERE status = 'in_progress' AND owner IN ({marks}) GROUP BY tenant", *live
            )
            busy = {str(row[0]): int(row[1]) for row in counted}
            _, seq = min(oldest, key=lambda row: (busy.get(str(row[0]), 0), int(row[1])))
            rows = await tx.fetch(f"SELECT {FILE_COLUMNS} FROM vector_store_files WHERE seq = ? AND {waiting}", seq, *live)
            if not rows:
                return None
            file = StoreFile.from_row(rows[0])
            # Read Committed: another replica may have taken it since; its claim stands.
            if not await tx.execute(f"UPDATE vector_store_files SET owner = ? WHERE seq = ? AND {waiting}", owner, file.seq, *live):
                return None
            blob = await tx.fetch("SELECT blob FROM files WHERE id = ? AND tenant = ?", file.id, file.tenant)
            return file, (blob[0][0] if blob else None)

        return await self.db.transaction(work)

    async def complete(self, file: StoreFile, owner: str, written: Written, quota_bytes: int) -> str:
        """Write a file's chunks and mark it completed, if it is still this replica's to ingest: `indexed`;
        `gone` when it was cancelled, removed or taken over meanwhile (nothing is written); `over quota` when
        the tenant's indexed text would pass its quota (the file failed)."""
        # Thousands of vectors in the dialect's form: CPU work, not on the event loop (nor in the transaction).
        vectors = await run_cpu(self._vectors, written.vectors) if self.vectors and written.vectors is not None else None

        async def work(tx: Tx) -> str:
            await tx.lock(f"vector_store_usage:{file.tenant}")
            rows = await tx.fetch(f"SELECT owner FROM vector_store_files WHERE seq = ? AND status = 'in_progress'{self.db.for_update()}", file.seq)
            if not rows or rows[0][0] != owner:
                return "gone"
            used = await tx.fetch("SELECT COALESCE(SUM(usage_bytes), 0) FROM vector_store_files WHERE tenant = ?", file.tenant)
            if int(used[0][0]) + written.usage_bytes > quota_bytes:
                error = {"code": "invalid_file", "message": f"Indexing this file would pass the project's vector store quota of {quota_bytes} bytes."}
                await tx.execute(
                    "UPDATE vector_store_files SET status = 'failed', last_error = ?, owner = NULL WHERE seq = ?", json.dumps(error), file.seq
                )
                return "over quota"
            await tx.execute("DELETE FROM vector_store_chunks WHERE file_seq = ?", file.seq)
            rows = [(file.seq, file.vector_store_id, n, text) for n, text in enumerate(written.texts)]
            if rows:
                await tx.executemany("INSERT INTO vector_store_chunks (file_seq, vector_store_id, position, text) VALUES (?,?,?,?)", rows)
            if vectors is not None and rows:
                await self._write_vectors(tx, file, vectors)
            await tx.execute(
                "UPDATE vector_store_files SET status = 'completed', usage_bytes = ?, owner = NULL WHERE seq = ?", written.usage_bytes, file.seq
            )
            return "indexed"

        return await self.db.transaction(work)

    async def _write_vectors(self, tx: Tx, file: StoreFile, vectors: list[Any]) -> None:
        rows = [(vector, file.seq, position) for position, vector in enumerate(vectors)]
        if self.dialect is Dialect.POSTGRESQL:
            await tx.executemany("UPDATE vector_store_chunks SET embedding = ?::vector WHERE file_seq = ? AND position = ?", rows)
            return
        await tx.executemany(
            "INSERT INTO vector_store_vectors (rowid, vector_store_id, embedding) "
            "SELECT seq, vector_store_id, ? FROM vector_store_chunks WHERE file_seq = ? AND position = ?",
            rows,
        )

    async def fail(self, file: StoreFile, owner: str, code: str, message: str) -> None:
        error = json.dumps({"code": code, "message": message[:1000]})
        await self.db.execute(
            "UPDATE vector_store_files SET status = 'failed', last_error = ?, owner = NULL WHERE seq = ? AND owner = ? AND status = 'in_progress'",
            error, file.seq, owner,
        )  # fmt: skip

    async def release(self, file: StoreFile, owner: str) -> None:
        """Let a claimed file go, to be claimed again (by this replica or another)."""
        await self.db.execute("UPDATE vector_store_files SET owner = NULL WHERE seq = ? AND owner = ?", file.seq, owner)

    async def text(self, file_seq: int) -> list[str]:
        """A file's chunks in order (the file's `content`)."""
        rows = await self.db.fetch("SELECT text FROM vector_store_chunks WHERE file_seq = ? ORDER BY position", file_seq)
        return [row[0] for row in rows]

    # -- search ---------------------------------------------------------------------------------------------

    async def by_words(self, scope: Scope, terms: list[str], limit: int) -> list[tuple[int, float]]:
        """Chunks that hold any of `terms` (words: letters, digits, `_`), best first, with their text score:
        exact where the rare words decide, common words' chunks ranked from a sample (word_ranking.py)."""
        join, where, params = scope.where()
        words = PostgresWords if self.dialect is Dialect.POSTGRESQL else SQLiteWords

        async def search(tx: Tx) -> list[tuple[int, float]]:
            return await words(tx, join, where, params, limit).search(terms)

        return await self._searched(search)

    async def by_vector(self, scope: Scope, vector: list[float], limit: int, exact: bool = False) -> list[tuple[int, float]]:
        """The chunks nearest to `vector`, nearest first, with their cosine similarity (chunk_vectors.py:
        approximate on PostgreSQL with an HNSW index, unless `exact`)."""
        join, where, params = scope.where()
        query = self._vector(vector)

        async def search(tx: Tx) -> list[Row]:
            if self.dialect is Dialect.POSTGRESQL:
                approximate = self.approximate and not exact and await self._holds_at_least(tx, scope.store_ids, self.exact_search_below)
                return await postgres_nearest(tx, join, where, params, query, limit, approximate)
            return await sqlite_nearest(tx, join, where, params, scope.store_ids, bool(scope.filter_sql), query, limit)

        rows = await self._searched(search)
        return [(int(seq), 1.0 - float(distance)) for seq, distance in rows]

    async def _holds_at_least(self, tx: Tx, store_ids: list[str], count: int) -> bool:
        """The stores hold `count` chunks or more: counted no further (the store index, at most `count` entries)."""
        marks = ",".join("?" * len(store_ids))
        rows = await tx.fetch(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM vector_store_chunks WHERE vector_store_id IN ({marks}) LIMIT ?) held", *store_ids, count
        )
        return int(rows[0][0]) >= count

    async def chunks(self, seqs: list[int]) -> dict[int, Chunk]:
        if not seqs:
            return {}
        marks = ",".join("?" * len(seqs))
        rows = await self.db.fetch(
            "SELECT c.seq, f.id, f.filename, f.attributes, c.text FROM vector_store_chunks c "
            f"JOIN vector_store_files f ON f.seq = c.file_seq WHERE c.seq IN ({marks})",
            *seqs,
        )
        return {int(row[0]): Chunk(int(row[0]), row[1], row[2], json.loads(row[3]), row[4]) for row in rows}

    def _vectors(self, vectors: list[list[float]]) -> list[Any]:
        return [self._vector(vector) for vector in vectors]

    def _vector(self, vector: list[float] | None) -> Any:
        """A vector as the dialect takes it: pgvector's text form, or the float32s sqlite-vec reads."""
        if vector is None:
            return None
        if self.dialect is Dialect.POSTGRESQL:
            return "[" + ",".join(repr(float(value)) for value in vector) + "]"
        return array.array("f", vector).tobytes()
