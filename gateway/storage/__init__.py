"""Where the gateway keeps state: one Database interface, SQLite embedded or PostgreSQL shared.

The interface (database.py) knows neither backend; this package picks one. The modules import in one
direction only: the backends import the interface and the migrations, nothing imports back. Every store
lives here, over the interface: `response_store.py` (responses and a background run's event journal),
`conversation_store.py`, `file_store.py` (files, containers and their files), `skill_store.py`; and
`paging.py`, the list endpoints' pages.
"""

from .database import Conflict, Database, StorageError, TooSlow, Tx, UnstorableValue

__all__ = ["Conflict", "Database", "StorageError", "TooSlow", "Tx", "UnstorableValue", "open_database"]


def open_database(url: str, *, retry_s: float, pool_size: int) -> Database:
    """The database `storage.url` names: `sqlite:///PATH` (or a bare path) or `postgresql://...`."""
    if url.startswith(("postgresql://", "postgres://")):
        from .postgres import PostgreSQL  # asyncpg is only imported where it is used

        return PostgreSQL(url, retry_s=retry_s, pool_size=pool_size)
    from .sqlite import SQLite

    # As SQLAlchemy writes them: sqlite:///relative/path, sqlite:////absolute/path.
    return SQLite(url[len("sqlite:///") :] if url.startswith("sqlite:///") else url)
