"""The one interface the stores talk to: SQL statements, transactions, and notifications between replicas.

Statements are written once, with `?` placeholders and SQL that SQLite and PostgreSQL both read
(`INSERT ... ON CONFLICT`, recursive CTEs); the PostgreSQL backend numbers the placeholders. What the two
dialects write differently (column types, auto-increment) lives only in the migrations.
"""

from __future__ import annotations

import abc
import enum
import logging
from typing import Any, Awaitable, Callable, TypeVar

T = TypeVar("T")
Row = tuple[Any, ...]
log = logging.getLogger("gateway.storage")


class StorageError(Exception):
    """The database could not be reached, or failed, for longer than the retry window."""


class TooSlow(StorageError):
    """A statement ran past the time its transaction allowed it (`Tx.limit_time`): the input's cost, not the
    database's fault."""


class Conflict(Exception):
    """A unique key the statement would have written twice."""


class UnstorableValue(Exception):
    """A value the database cannot hold (PostgreSQL's text takes no NUL character): the client's bad input."""


class Tx(abc.ABC):
    """Statements inside one transaction."""

    @abc.abstractmethod
    async def fetch(self, sql: str, *params: Any) -> list[Row]: ...

    @abc.abstractmethod
    async def execute(self, sql: str, *params: Any) -> int:
        """Run a statement; how many rows it changed."""

    @abc.abstractmethod
    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None: ...

    @abc.abstractmethod
    async def lock(self, key: str) -> None:
        """Hold the lock named `key` until the transaction ends; another transaction taking it waits. A
        check and the write it allows (a quota's SUM, then an INSERT) are one step when both hold it."""

    @abc.abstractmethod
    async def limit_time(self, seconds: float) -> None:
        """The statements after this one in the transaction are stopped past `seconds` each (TooSlow)."""


class Dialect(enum.StrEnum):
    """Which SQL a database speaks: what differs is chosen by it in this package only."""

    SQLITE = "sqlite"
    POSTGRESQL = "postgresql"


class Database(abc.ABC):
    """A database the stores share. Every call is retried while the database is unreachable (a restart,
    a failover), up to the configured window; after that it raises StorageError. A transaction's work is
    run again from the start on a retry, so it must only read and write through its `Tx`."""

    dialect: Dialect

    def for_update(self, of: str | None = None) -> str:
        """The clause that makes a SELECT lock the rows it reads (of table alias `of`) until its
        transaction ends; empty where a write transaction holds the whole database already (SQLite)."""
        return ""

    def skip_locked(self) -> str:
        """The clause that makes a SELECT lock the rows it reads, passing over those another transaction
        holds: replicas claiming work from one queue each take different rows, none waiting on another."""
        return ""

    def for_share(self) -> str:
        """The clause that keeps the rows a SELECT reads from being changed until its transaction ends."""
        return ""

    @abc.abstractmethod
    async def start(self) -> None:
        """Connect, and bring the schema up to date (migrations.py)."""

    @abc.abstractmethod
    async def close(self) -> None: ...

    @abc.abstractmethod
    async def transaction(self, work: Callable[[Tx], Awaitable[T]]) -> T:
        """Run `work` in one transaction: all of it lands, or none."""

    async def fetch(self, sql: str, *params: Any) -> list[Row]:
        return await self.transaction(lambda tx: tx.fetch(sql, *params))

    async def execute(self, sql: str, *params: Any) -> int:
        return await self.transaction(lambda tx: tx.execute(sql, *params))

    async def maintain(self, sql: str) -> None:
        """A maintenance statement outside any transaction and without the statements' time limit (building an
        index concurrently, for minutes): PostgreSQL's alone."""
        raise NotImplementedError(f"{self.dialect} runs no maintenance statements")

    @abc.abstractmethod
    async def notify(self, channel: str, payload: str) -> None:
        """Tell every replica listening on `channel` (this one included)."""

    @abc.abstractmethod
    def listen(self, channel: str, callback: Callable[[str], None]) -> None:
        """Call `callback(payload)` for every notification on `channel`, for the database's lifetime."""

    async def keep_listening(self) -> None:  # noqa: B027 (a default: most backends have nothing to do)
        """Run for the app's lifetime where notifications come from other processes; by default they do not."""
