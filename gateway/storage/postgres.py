"""PostgreSQL through asyncpg: the shared store of several gateway replicas.

A restart or failover of the server shows up as lost connections; every transaction is then retried
with backoff until the retry window closes (so a run that is saving its response waits for the server
rather than failing at once), and the listener connection reconnects on its own.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from typing import Any, Awaitable, Callable, TypeVar

import anyio
import asyncpg

from .database import Conflict, Database, Dialect, Row, StorageError, TooSlow, Tx, UnstorableValue
from .migrations import migrate

T = TypeVar("T")
log = logging.getLogger("gateway.storage")

_MIGRATION_LOCK = 7_201_000_001  # pg_advisory_xact_lock key: replicas starting together migrate one at a time
_CONNECT_TIMEOUT_S = 5.0

# The server went away or is not accepting connections yet: worth trying again.
_MAINTENANCE_TIMEOUT_S = 24 * 3600.0  # an index of millions of vectors takes minutes to build; hours is a fault
_TRANSIENT = (
    OSError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.InterfaceError,
    # A connection left mid-operation when the server went away ("another operation is in progress"):
    # the pool replaces it, and the attempt is made again on another.
    asyncpg.exceptions.InternalClientError,
    asyncpg.exceptions.TooManyConnectionsError,
    TimeoutError,
)


@functools.lru_cache(maxsize=512)
def numbered(sql: str) -> str:
    """`?` placeholders as PostgreSQL's `$1, $2, ...` (the stores' SQL has no `?` anywhere else)."""
    counter = iter(range(1, 1000))
    return re.sub(r"\?", lambda _: f"${next(counter)}", sql)


class PostgreSQL(Database):
    dialect = Dialect.POSTGRESQL

    def __init__(self, url: str, *, retry_s: float, pool_size: int) -> None:
        self.url = url
        self.retry_s = retry_s
        self.pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._listeners: dict[str, list[Callable[[str], None]]] = {}
        self._listener: asyncpg.Connection | None = None
        self._closing = False

    def for_update(self, of: str | None = None) -> str:
        return f" FOR UPDATE OF {of}" if of else " FOR UPDATE"

    def skip_locked(self) -> str:
        return " FOR UPDATE SKIP LOCKED"

    def for_share(self) -> str:
        return " FOR SHARE"

    async def start(self) -> None:
        self._pool = await self._retrying(self._create_pool)
        await self.transaction(_migrate)

    async def _create_pool(self) -> asyncpg.Pool:
        return await asyncpg.create_pool(self.url, min_size=1, max_size=self.pool_size, timeout=_CONNECT_TIMEOUT_S, command_timeout=30)

    async def close(self) -> None:
        self._closing = True
        with anyio.CancelScope(shield=True):
            if self._listener is not None:
                self._listener.terminate()
            if self._pool is not None:
                self._pool.terminate()

    async def transaction(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        pool = self._pool
        if pool is None:
            raise StorageError("the database is not connected")

        async def attempt() -> T:
            async with pool.acquire(timeout=_CONNECT_TIMEOUT_S) as connection:
                async with connection.transaction():
                    return await work(_PostgresTx(connection))

        return await self._retrying(attempt)

    async def _retrying(self, attempt: Callable[[], Awaitable[T]]) -> T:
        deadline = time.monotonic() + self.retry_s
        delay = 0.05
        while True:
            try:
                return await attempt()
            except _TRANSIENT as exc:
                if self._closing or time.monotonic() + delay > deadline:
                    raise StorageError(f"PostgreSQL is unreachable: {exc}") from exc
                log.warning("PostgreSQL unreachable (%s); trying again in %.2fs", exc.__class__.__name__, delay)
            except asyncpg.QueryCanceledError as exc:  # statement_timeout (limit_time), or a cancel by an operator
                raise TooSlow(f"PostgreSQL stopped the statement: {exc}") from exc
            except asyncpg.PostgresError as exc:
                raise StorageError(f"PostgreSQL failed: {exc}") from exc
            await anyio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def maintain(self, sql: str) -> None:
        pool = self._pool
        if pool is None:
            raise StorageError("the database is not connected")

        async def attempt() -> None:
            async with pool.acquire(timeout=_CONNECT_TIMEOUT_S) as connection:
                await connection.execute(sql, timeout=_MAINTENANCE_TIMEOUT_S)

        await self._retrying(attempt)

    async def notify(self, channel: str, payload: str) -> None:
        await self.execute("SELECT pg_notify(?, ?)", channel, payload)

    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        self._listeners.setdefault(channel, []).append(callback)

    async def keep_listening(self) -> None:
        """Run for the app's lifetime: hold a connection that LISTENs on every channel, reconnecting when
        the server goes away (notifications sent meanwhile are lost; callers do not rely on them alone)."""
        while not self._closing:
            try:
                connection = await asyncpg.connect(self.url, timeout=_CONNECT_TIMEOUT_S)
            except _TRANSIENT + (asyncpg.PostgresError,) as exc:
                log.warning("listener cannot connect to PostgreSQL (%s); retrying", exc.__class__.__name__)
                await anyio.sleep(1.0)
                continue
            self._listener = connection
            lost = anyio.Event()
            connection.add_termination_listener(lambda _, lost=lost: lost.set())
            try:
                for channel in list(self._listeners):  # (one registered meanwhile must not end the loop)
                    await connection.add_listener(channel, self._dispatch)
                while not connection.is_closed() and not lost.is_set():
                    with anyio.move_on_after(1.0):
                        await lost.wait()
            except _TRANSIENT + (asyncpg.PostgresError,):
                pass
            finally:
                self._listener = None
                connection.terminate()
            if not self._closing:
                await anyio.sleep(0.2)

    def _dispatch(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        for callback in self._listeners.get(channel, []):
            callback(payload)


# Text PostgreSQL cannot hold (a NUL character): a value from the request, not a database that is down.
_UNSTORABLE = (asyncpg.exceptions.CharacterNotInRepertoireError, asyncpg.exceptions.UntranslatableCharacterError)


class _PostgresTx(Tx):
    def __init__(self, connection: asyncpg.Connection) -> None:
        self._connection = connection

    async def fetch(self, sql: str, *params: Any) -> list[Row]:
        try:
            return [tuple(record) for record in await self._connection.fetch(numbered(sql), *params)]
        except _UNSTORABLE as exc:
            raise UnstorableValue(str(exc)) from None

    async def execute(self, sql: str, *params: Any) -> int:
        try:
            status = await self._connection.execute(numbered(sql), *params)
        except asyncpg.UniqueViolationError as exc:
            raise Conflict(str(exc)) from None
        except _UNSTORABLE as exc:
            raise UnstorableValue(str(exc)) from None
        # "UPDATE 3", "INSERT 0 1", "DELETE 0", "SELECT 1": the last word is the row count.
        last = status.rsplit(" ", 1)[-1]
        return int(last) if last.isdigit() else 0

    async def lock(self, key: str) -> None:
        # Read Committed lets two transactions read the same SUM before either inserts: a transaction
        # lock on the key's hash serialises them (a collision of two keys only makes them wait).
        await self._connection.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", key)

    async def limit_time(self, seconds: float) -> None:
        await self._connection.execute(f"SET LOCAL statement_timeout = {max(1, int(seconds * 1000))}")

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        try:
            await self._connection.executemany(numbered(sql), rows)
        except asyncpg.UniqueViolationError as exc:
            raise Conflict(str(exc)) from None
        except _UNSTORABLE as exc:
            raise UnstorableValue(str(exc)) from None


async def _migrate(tx: Tx) -> None:
    await tx.execute("SELECT pg_advisory_xact_lock(?)", _MIGRATION_LOCK)
    await migrate(tx, Dialect.POSTGRESQL)
