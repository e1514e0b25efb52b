"""Stored responses in SQLite, with the Harmony dialog behind each, so conversations survive restarts.

sqlite3 calls run in a worker thread (anyio.to_thread) so the event loop never waits on the disk.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import anyio.to_thread

T = TypeVar("T")
log = logging.getLogger("gateway.store")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    response TEXT NOT NULL,      -- the Response object as the API returns it
    input_items TEXT NOT NULL,   -- the request's input items, as input_items lists them
    dialog TEXT NOT NULL,        -- Harmony messages after the preamble (openai_harmony Message dicts)
    open_calls TEXT NOT NULL,    -- call_id -> function name of calls still waiting for output
    state TEXT NOT NULL DEFAULT '{}',  -- the conversation's tool state: sandbox session, MCP listings
    tenant TEXT NOT NULL DEFAULT 'default'  -- whose it is: other tenants never see it
)
"""

# The streamed events of background responses, kept so that a stream can be resumed after any of them.
_EVENTS_SCHEMA = """
CREATE TABLE IF NOT EXISTS response_events (
    response_id TEXT NOT NULL,
    sequence_number INTEGER NOT NULL,
    frame BLOB NOT NULL,             -- the event's SSE frame, as it was sent
    PRIMARY KEY (response_id, sequence_number)
)
"""


class SQLite:
    """One SQLite database file, shared by the stores: statements run in a worker thread, one at a time."""

    def __init__(self, path: str) -> None:
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def columns(self, table: str) -> set[str]:
        """A table's column names, read at start-up (to migrate databases of older versions)."""
        with self._lock:
            return {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}

    def setup(self, *statements: str) -> None:
        """Schema statements, run at start-up."""
        with self._lock:
            for statement in statements:
                self._db.execute(statement)

    async def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return await anyio.to_thread.run_sync(self._rows, sql, params)

    async def count(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        """How many rows a statement changed."""
        return await anyio.to_thread.run_sync(self._count, sql, params)

    async def transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run `work` on the connection inside one transaction: all of it lands, or none."""
        return await anyio.to_thread.run_sync(self._transaction, work)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _count(self, sql: str, params: tuple[Any, ...]) -> int:
        with self._lock:
            return self._db.execute(sql, params).rowcount

    def _transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                result = work(self._db)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
            return result


@dataclass
class StoredResponse:
    response: dict[str, Any]
    input_items: list[dict[str, Any]]
    dialog: list[dict[str, Any]]
    open_calls: dict[str, str]
    state: dict[str, Any]
    tenant: str


class ResponseStore:
    def __init__(self, db: SQLite) -> None:
        self._db = db
        db.setup(_SCHEMA, _EVENTS_SCHEMA)
        columns = db.columns("responses")
        if "state" not in columns:  # a database from before tool state was kept
            db.setup("ALTER TABLE responses ADD COLUMN state TEXT NOT NULL DEFAULT '{}'")
        if "tenant" not in columns:  # a database from before tenants
            db.setup("ALTER TABLE responses ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'")

    async def put(self, record: StoredResponse) -> None:
        row = (
            record.response["id"],
            record.response["created_at"],
            json.dumps(record.response),
            json.dumps(record.input_items),
            json.dumps(record.dialog),
            json.dumps(record.open_calls),
            json.dumps(record.state),
            record.tenant,
        )
        sql = "INSERT OR REPLACE INTO responses (id, created_at, response, input_items, dialog, open_calls, state, tenant) VALUES (?,?,?,?,?,?,?,?)"
        await self._db.rows(sql, row)

    async def get(self, response_id: str, tenant: str) -> StoredResponse | None:
        """The tenant's stored response; another tenant's is as absent as one that never existed."""
        rows = await self._db.rows(
            "SELECT response, input_items, dialog, open_calls, state FROM responses WHERE id = ? AND tenant = ?",
            (response_id, tenant),
        )
        if not rows:
            return None
        response, input_items, dialog, open_calls, state = rows[0]
        return StoredResponse(
            json.loads(response), json.loads(input_items), json.loads(dialog), json.loads(open_calls), json.loads(state), tenant
        )

    async def delete(self, response_id: str, tenant: str) -> bool:
        def work(db: sqlite3.Connection) -> bool:
            deleted = db.execute("DELETE FROM responses WHERE id = ? AND tenant = ?", (response_id, tenant)).rowcount
            if deleted:
                db.execute("DELETE FROM response_events WHERE response_id = ?", (response_id,))
            return bool(deleted)

        return await self._db.transaction(work)

    async def expire(self, older_than: float) -> int:
        """Remove the responses created before this time, with their events; how many went."""

        def work(db: sqlite3.Connection) -> int:
            db.execute(
                "DELETE FROM response_events WHERE response_id IN (SELECT id FROM responses WHERE created_at < ?)", (older_than,)
            )
            return db.execute("DELETE FROM responses WHERE created_at < ?", (older_than,)).rowcount

        return await self._db.transaction(work)

    async def put_events(self, response_id: str, frames: list[tuple[int, bytes]]) -> None:
        """A background response's events (sequence number, SSE frame), all at once when it ends."""

        def work(db: sqlite3.Connection) -> None:
            db.executemany(
                "INSERT OR REPLACE INTO response_events (response_id, sequence_number, frame) VALUES (?,?,?)",
                [(response_id, number, frame) for number, frame in frames],
            )

        await self._db.transaction(work)

    async def events_after(self, response_id: str, sequence_number: int) -> list[bytes]:
        rows = await self._db.rows(
            "SELECT frame FROM response_events WHERE response_id = ? AND sequence_number > ? ORDER BY sequence_number",
            (response_id, sequence_number),
        )
        return [row[0] for row in rows]


async def expire_responses(store: ResponseStore, ttl_s: float, interval_s: float) -> None:
    """Run for the app's lifetime: every `interval_s`, remove responses older than `ttl_s`."""
    while True:
        await anyio.sleep(interval_s)
        try:
            removed = await store.expire(time.time() - ttl_s)
        except sqlite3.Error:
            log.exception("removing expired responses failed; trying again later")
            continue
        if removed:
            log.info("removed %d expired responses", removed)
