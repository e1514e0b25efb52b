"""SQLite, the embedded default: one file, one gateway process. Statements run in worker threads, one at
a time, so the event loop never waits on the disk."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

import anyio
import anyio.to_thread

from .database import Conflict, Database, Dialect, Row, StorageError, TooSlow, Tx
from .migrations import migrate

T = TypeVar("T")
log = logging.getLogger("gateway.storage")


class SQLite(Database):
    dialect = Dialect.SQLITE

    def __init__(self, path: str) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._lock = anyio.Lock()  # one statement or transaction at a time on the one connection
        self._listeners: dict[str, list[Callable[[str], None]]] = {}
        self.vectors = False  # sqlite-vec is loaded: vector stores' chunks are searched by their vectors too

    async def start(self) -> None:
        await anyio.to_thread.run_sync(self._open)
        await self.transaction(_migrate)

    def _open(self) -> None:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=ON")
        db.execute("PRAGMA busy_timeout=5000")
        self.vectors = _load_sqlite_vec(db)
        self._db = db

    async def close(self) -> None:
        async with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def transaction(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        async with self._lock:
            db = self._db
            if db is None:
                raise StorageError("the database is closed")
            await _run(db.execute, "BEGIN IMMEDIATE")
            try:
                result = await work(_SQLiteTx(db))
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await _run(db.execute, "ROLLBACK")
                raise
            finally:
                db.set_progress_handler(None, 0)  # a time limit ends with its transaction
            with anyio.CancelScope(shield=True):  # a commit that started lands, cancelled or not
                await _run(db.execute, "COMMIT")
            return result

    async def notify(self, channel: str, payload: str) -> None:
        # One process holds the file: its own listeners are all there are.
        for callback in self._listeners.get(channel, []):
            callback(payload)

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        self._listeners.setdefault(channel, []).append(callback)


class _SQLiteTx(Tx):
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._limit_s: float | None = None

    async def fetch(self, sql: str, *params: Any) -> list[Row]:
        return await _run(self._timed(lambda: self._db.execute(sql, params).fetchall()))

    async def execute(self, sql: str, *params: Any) -> int:
        return await _run(lambda: self._db.execute(sql, params).rowcount)

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        await _run(self._db.executemany, sql, rows)

    async def lock(self, key: str) -> None:
        """Nothing to take: a transaction begins IMMEDIATE, so writers already run one at a time."""

    async def limit_time(self, seconds: float) -> None:
        self._limit_s = seconds

    def _timed(self, statement: Callable[[], T]) -> Callable[[], T]:
        """The statement, interrupted past the transaction's time limit: SQLite calls the handler every
        thousand steps. The one connection is every tenant's: no statement holds it past the limit."""
        limit = self._limit_s
        if limit is None:
            return statement

        def run() -> T:
            deadline = time.monotonic() + limit
            self._db.set_progress_handler(lambda: int(time.monotonic() > deadline), 1000)
            return statement()

        return run


def _load_sqlite_vec(db: sqlite3.Connection) -> bool:
    """Load sqlite-vec (vector distances) into the connection; False where this Python's sqlite3 was built
    without extension loading (some distributions' and pyenv's builds): the vector stores search words only."""
    if not hasattr(db, "enable_load_extension"):
        return False
    import sqlite_vec

    try:
        db.enable_load_extension(True)
        sqlite_vec.load(db)
    except sqlite3.Error as exc:  # a build of SQLite the extension does not load into
        log.warning("sqlite-vec could not be loaded (%s): vector stores search by words only", exc)
        return False
    finally:
        db.enable_load_extension(False)
    return True


async def _run(function: Callable[..., T], *args: Any) -> T:
    try:
        return await anyio.to_thread.run_sync(function, *args)
    except sqlite3.IntegrityError as exc:
        if "UNIQUE" in str(exc) or "PRIMARY KEY" in str(exc):
            raise Conflict(str(exc)) from None
        raise StorageError(str(exc)) from exc
    except sqlite3.OperationalError as exc:
        if str(exc) == "interrupted":  # past its transaction's time limit (limit_time)
            raise TooSlow("the statement took longer than its time limit") from None
        raise StorageError(str(exc)) from exc
    except sqlite3.Error as exc:
        raise StorageError(str(exc)) from exc


async def _migrate(tx: Tx) -> None:
    await migrate(tx, Dialect.SQLITE, _adopt_unversioned)


async def _adopt_unversioned(tx: Tx) -> None:
    """A database from before migrations: bring its responses table to version 1's columns."""
    columns = {row[1] for row in await tx.fetch("PRAGMA table_info(responses)")}
    if columns and "state" not in columns:
        await tx.execute("ALTER TABLE responses ADD COLUMN state TEXT NOT NULL DEFAULT '{}'")
    if columns and "tenant" not in columns:
        await tx.execute("ALTER TABLE responses ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default'")
