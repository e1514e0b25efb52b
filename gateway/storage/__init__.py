"""Where the gateway keeps state: one Database interface, SQLite embedded or PostgreSQL shared."""

from .database import Conflict, Database, StorageError, Tx, UnstorableValue, open_database

__all__ = ["Conflict", "Database", "StorageError", "Tx", "UnstorableValue", "open_database"]
