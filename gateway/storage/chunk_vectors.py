"""Vectors of chunks, dialect by dialect: where they are kept, and the chunks nearest to a query's vector.

PostgreSQL, with pgvector 0.8 or later, searches an HNSW index (approximate; built in the background, concurrently,
searches exact until it is valid), read by an iterative scan: when the
scope's filter (its stores, the client's `filters`) passes few of the nearest chunks, the scan goes on past
them until the answer is full or `hnsw.max_scan_tuples` were read. An answer that comes back short all the
same (a small store among large ones, a filter that passes almost nothing) is searched again exactly, so it
is never short. Stores holding fewer than `exact_search_below` chunks are searched exactly from the start (as
fast, and never short). Without pgvector 0.8 every search is exact. Recall is measured against the exact search (bench/vector_stores.py, README).

SQLite searches exactly: sqlite-vec's k-nearest search store by store (its partitions), or, with a filter,
the distance of each chunk that passes it.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import anyio

from .database import Database, Dialect, Row, StorageError, Tx

log = logging.getLogger("gateway.vector_stores")

HNSW_MIN_VERSION = (0, 8, 0)  # iterative index scans (hnsw.iterative_scan)
EF_SEARCH = 800  # candidates the HNSW scan keeps: recall against speed (measured at 100k and 1M chunks: README)


async def make_vectors(tx: Tx, dialect: Dialect, dimensions: int) -> bool:
    """Where vectors of `dimensions` are kept, made if missing; whether an HNSW index may search them (built
    in the background: `keep_index`)."""
    if dialect is Dialect.POSTGRESQL:
        await tx.execute(f"ALTER TABLE vector_store_chunks ADD COLUMN IF NOT EXISTS embedding vector({int(dimensions)})")
        # The chunks still to embed (chunk_index.py `unembedded`), found without reading the others.
        await tx.execute("CREATE INDEX IF NOT EXISTS vector_store_chunks_unembedded ON vector_store_chunks (seq) WHERE embedding IS NULL")
        version = await tx.fetch("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        return _version(version[0][0]) >= HNSW_MIN_VERSION
    # sqlite-vec's own table (its k-nearest search reads vectors in blocks, store by store), by the chunk's seq
    await tx.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS vector_store_vectors USING vec0(vector_store_id text partition key, "
        f"embedding float[{int(dimensions)}] distance_metric=cosine)"
    )
    await tx.execute(
        "CREATE TRIGGER IF NOT EXISTS vector_store_vectors_ad AFTER DELETE ON vector_store_chunks "
        "BEGIN DELETE FROM vector_store_vectors WHERE rowid = old.seq; END"
    )
    return False


async def drop_vectors(tx: Tx, dialect: Dialect) -> None:
    """Every chunk's vector, and what searches them (another model's: made anew, chunk_index.py)."""
    if dialect is Dialect.POSTGRESQL:
        await tx.execute("ALTER TABLE vector_store_chunks DROP COLUMN IF EXISTS embedding")  # its indexes with it
    else:
        await tx.execute("DROP TABLE IF EXISTS vector_store_vectors")


HNSW_INDEX = "vector_store_chunks_embedding"
BUILD_POLL_S = 10.0  # a replica waiting for another's build looks again this often


async def keep_index(db: Database, built: Callable[[], None]) -> None:
    """The HNSW index made if missing, concurrently (ingestion and searches go on meanwhile, searches exact),
    by one replica; `built()` once it is valid. A build that failed (an invalid index no one builds) is
    dropped and made again."""
    while True:
        try:
            rows = await db.fetch(
                "SELECT i.indisvalid, EXISTS (SELECT 1 FROM pg_stat_progress_create_index p WHERE p.index_relid = i.indexrelid) "
                "FROM pg_index i WHERE i.indexrelid = to_regclass(?)",
                HNSW_INDEX,
            )
            if rows and rows[0][0]:
                built()
                return
            if rows and rows[0][1]:  # another replica is building it
                await anyio.sleep(BUILD_POLL_S)
                continue
            if rows:
                await db.maintain(f"DROP INDEX CONCURRENTLY IF EXISTS {HNSW_INDEX}")
            log.info("building the HNSW index of chunk vectors (searches are exact until it is built)")
            await db.maintain(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {HNSW_INDEX} ON vector_store_chunks USING hnsw (embedding vector_cosine_ops)")
        except StorageError as exc:  # another replica began it meanwhile, or the database went away: look again
            log.warning("the HNSW index could not be built for now: %s", exc)
            await anyio.sleep(BUILD_POLL_S)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


async def postgres_nearest(tx: Tx, join: str, where: str, params: list[Any], query: str, limit: int, approximate: bool) -> list[Row]:
    nearest = (
        f"SELECT c.seq, c.embedding <=> ?::vector AS distance FROM vector_store_chunks c{join} "
        f"WHERE c.embedding IS NOT NULL AND {where} ORDER BY {{order}} LIMIT ?"
    )
    if approximate:
        # The index's order (no sort: the planner reads the HNSW index); relaxed order, so sorted after.
        await tx.execute("SET LOCAL enable_sort = off")
        await tx.execute(f"SET LOCAL hnsw.ef_search = {EF_SEARCH}")
        await tx.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        sql = f"WITH nearest AS MATERIALIZED ({nearest.format(order='c.embedding <=> ?::vector')}) SELECT * FROM nearest ORDER BY distance"
        rows = await tx.fetch(sql, query, *params, query, limit)
        if len(rows) >= limit:
            return rows
        await tx.execute("SET LOCAL enable_sort = on")
    # Exact: every chunk of the scope measured (an order by an expression the index cannot give).
    return await tx.fetch(nearest.format(order="(c.embedding <=> ?::vector) + 0"), query, *params, query, limit)


async def sqlite_nearest(
    tx: Tx, join: str, where: str, params: list[Any], store_ids: list[str], filtered: bool, query: bytes, limit: int
) -> list[Row]:
    if not filtered:  # sqlite-vec's k-nearest search, store by store (its partitions)
        rows: list[Row] = []
        for store_id in store_ids:
            rows += await tx.fetch(
                "SELECT rowid, distance FROM vector_store_vectors WHERE embedding MATCH ? AND k = ? AND vector_store_id = ?", query, limit, store_id
            )
        return sorted(rows, key=lambda row: row[1])[:limit]
    # Only the chunks that pass the filter are measured.
    sql = (
        f"SELECT c.seq, vec_distance_cosine(v.embedding, ?) AS distance FROM vector_store_chunks c{join} "
        f"JOIN vector_store_vectors v ON v.rowid = c.seq WHERE {where} ORDER BY distance LIMIT ?"
    )
    return await tx.fetch(sql, query, *params, limit)
