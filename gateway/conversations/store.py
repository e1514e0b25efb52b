"""Conversations in SQLite: the conversation, and its items in order.

Each item keeps the Harmony messages it stands for (a reasoning item its analysis message, a python call
its code and the tool's output), so a response that continues the conversation gives the model exactly
what it wrote and read, and deleting an item takes its messages out of what the model sees.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from ..store import SQLite

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS conversations (
        id TEXT PRIMARY KEY,
        created_at INTEGER NOT NULL,
        metadata TEXT NOT NULL,
        open_calls TEXT NOT NULL DEFAULT '{}',  -- call_id -> recipient of calls waiting for their output
        state TEXT NOT NULL DEFAULT '{}',       -- tool state: sandbox session, MCP listings, approvals
        tenant TEXT NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS conversation_items (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- the item's place in the conversation
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        id TEXT NOT NULL,
        item TEXT NOT NULL,      -- the item as the API shows it
        messages TEXT NOT NULL,  -- the Harmony messages it stands for (openai_harmony Message dicts)
        UNIQUE (conversation_id, id)
    )
    """,
)


class DuplicateItem(Exception):
    """An item id the conversation holds already."""

    def __init__(self, item_id: str) -> None:
        super().__init__(item_id)
        self.item_id = item_id


@dataclass
class Conversation:
    id: str
    created_at: int
    metadata: dict[str, str]
    tenant: str
    open_calls: dict[str, str] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "object": "conversation", "created_at": self.created_at, "metadata": self.metadata}


@dataclass
class ConversationItem:
    id: str
    item: dict[str, Any]
    messages: list[dict[str, Any]]


@dataclass
class Page:
    items: list[dict[str, Any]]
    has_more: bool


class ConversationStore:
    def __init__(self, db: SQLite) -> None:
        self._db = db
        db.setup(*_SCHEMA)

    async def create(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO conversations (id, created_at, metadata, open_calls, state, tenant) VALUES (?,?,?,?,?,?)",
                (
                    conversation.id,
                    conversation.created_at,
                    json.dumps(conversation.metadata),
                    json.dumps(conversation.open_calls),
                    json.dumps(conversation.state),
                    conversation.tenant,
                ),
            )
            _insert_items(db, conversation.id, items)

        await self._db.transaction(work)

    async def get(self, conversation_id: str, tenant: str) -> Conversation | None:
        """The tenant's conversation; another tenant's is as absent as one that never existed."""
        rows = await self._db.rows(
            "SELECT created_at, metadata, open_calls, state FROM conversations WHERE id = ? AND tenant = ?",
            (conversation_id, tenant),
        )
        if not rows:
            return None
        created_at, metadata, open_calls, state = rows[0]
        return Conversation(conversation_id, created_at, json.loads(metadata), tenant, json.loads(open_calls), json.loads(state))

    async def set_metadata(self, conversation: Conversation, metadata: dict[str, str]) -> bool:
        sql = "UPDATE conversations SET metadata = ? WHERE id = ? AND tenant = ?"
        return bool(await self._db.count(sql, (json.dumps(metadata), conversation.id, conversation.tenant)))

    async def delete(self, conversation_id: str, tenant: str) -> bool:
        sql = "DELETE FROM conversations WHERE id = ? AND tenant = ?"
        return bool(await self._db.count(sql, (conversation_id, tenant)))

    async def append(self, conversation: Conversation, items: list[ConversationItem]) -> bool:
        """Add items at the end and store the conversation's tool state; False if it was deleted meanwhile."""

        def work(db: sqlite3.Connection) -> bool:
            changed = db.execute(
                "UPDATE conversations SET open_calls = ?, state = ? WHERE id = ? AND tenant = ?",
                (json.dumps(conversation.open_calls), json.dumps(conversation.state), conversation.id, conversation.tenant),
            ).rowcount
            if changed:
                _insert_items(db, conversation.id, items)
            return bool(changed)

        return await self._db.transaction(work)

    async def all_items(self, conversation_id: str) -> list[ConversationItem]:
        rows = await self._db.rows(
            "SELECT id, item, messages FROM conversation_items WHERE conversation_id = ? ORDER BY seq", (conversation_id,)
        )
        return [ConversationItem(item_id, json.loads(item), json.loads(messages)) for item_id, item, messages in rows]

    async def page(self, conversation_id: str, *, ascending: bool, after: str | None, limit: int) -> Page | None:
        """Up to `limit` items after the item `after` (None when there is no such item), in order."""
        start = None
        if after is not None:
            rows = await self._db.rows(
                "SELECT seq FROM conversation_items WHERE conversation_id = ? AND id = ?", (conversation_id, after)
            )
            if not rows:
                return None
            start = rows[0][0]
        compare, order = (">", "ASC") if ascending else ("<", "DESC")
        sql = f"SELECT item FROM conversation_items WHERE conversation_id = ?"
        params: tuple[Any, ...] = (conversation_id,)
        if start is not None:
            sql += f" AND seq {compare} ?"
            params += (start,)
        rows = await self._db.rows(f"{sql} ORDER BY seq {order} LIMIT ?", params + (limit + 1,))
        return Page([json.loads(row[0]) for row in rows[:limit]], len(rows) > limit)

    async def item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        rows = await self._db.rows(
            "SELECT item FROM conversation_items WHERE conversation_id = ? AND id = ?", (conversation_id, item_id)
        )
        return json.loads(rows[0][0]) if rows else None

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        sql = "DELETE FROM conversation_items WHERE conversation_id = ? AND id = ?"
        return bool(await self._db.count(sql, (conversation_id, item_id)))


def _insert_items(db: sqlite3.Connection, conversation_id: str, items: list[ConversationItem]) -> None:
    for entry in items:
        try:
            db.execute(
                "INSERT INTO conversation_items (conversation_id, id, item, messages) VALUES (?,?,?,?)",
                (conversation_id, entry.id, json.dumps(entry.item), json.dumps(entry.messages)),
            )
        except sqlite3.IntegrityError:
            raise DuplicateItem(entry.id) from None
