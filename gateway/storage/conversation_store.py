"""Conversations in the database: the conversation, and its items in order.

Each item keeps the Harmony messages it stands for (a reasoning item its analysis message, a python call
its code and the tool's output), so a response that continues the conversation gives the model exactly
what it wrote and read, and deleting an item takes its messages out of what the model sees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import Conflict, Database, Tx


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
    item: Mapping[str, Any]
    messages: list[dict[str, Any]]


@dataclass
class Page:
    items: list[dict[str, Any]]
    has_more: bool


class ConversationStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, conversation: Conversation, items: list[ConversationItem]) -> None:
        async def work(tx: Tx) -> None:
            await tx.execute(
                "INSERT INTO conversations (id, created_at, metadata, open_calls, state, tenant) VALUES (?,?,?,?,?,?)",
                conversation.id,
                conversation.created_at,
                json.dumps(conversation.metadata),
                json.dumps(conversation.open_calls),
                json.dumps(conversation.state),
                conversation.tenant,
            )
            await _insert_items(tx, conversation.id, items)

        await self._db.transaction(work)

    async def get(self, conversation_id: str, tenant: str) -> Conversation | None:
        """The tenant's conversation; another tenant's is as absent as one that never existed."""
        rows = await self._db.fetch(
            "SELECT created_at, metadata, open_calls, state FROM conversations WHERE id = ? AND tenant = ?",
            conversation_id,
            tenant,
        )
        if not rows:
            return None
        created_at, metadata, open_calls, state = rows[0]
        return Conversation(conversation_id, created_at, json.loads(metadata), tenant, json.loads(open_calls), json.loads(state))

    async def set_metadata(self, conversation: Conversation, metadata: dict[str, str]) -> bool:
        sql = "UPDATE conversations SET metadata = ? WHERE id = ? AND tenant = ?"
        return bool(await self._db.execute(sql, json.dumps(metadata), conversation.id, conversation.tenant))

    async def delete(self, conversation_id: str, tenant: str) -> bool:
        sql = "DELETE FROM conversations WHERE id = ? AND tenant = ?"
        return bool(await self._db.execute(sql, conversation_id, tenant))

    async def append(self, conversation: Conversation, items: list[ConversationItem]) -> bool:
        """Add items at the end and store the conversation's tool state; False if it was deleted meanwhile."""

        async def work(tx: Tx) -> bool:
            changed = await tx.execute(
                "UPDATE conversations SET open_calls = ?, state = ? WHERE id = ? AND tenant = ?",
                json.dumps(conversation.open_calls),
                json.dumps(conversation.state),
                conversation.id,
                conversation.tenant,
            )
            if changed:
                await _insert_items(tx, conversation.id, items)
            return bool(changed)

        return await self._db.transaction(work)

    async def count_items(self, conversation_id: str) -> int:
        rows = await self._db.fetch("SELECT COUNT(*) FROM conversation_items WHERE conversation_id = ?", conversation_id)
        return int(rows[0][0])

    async def all_items(self, conversation_id: str) -> list[ConversationItem]:
        rows = await self._db.fetch("SELECT id, item, messages FROM conversation_items WHERE conversation_id = ? ORDER BY seq", conversation_id)
        return [ConversationItem(item_id, json.loads(item), json.loads(messages)) for item_id, item, messages in rows]

    async def page(self, conversation_id: str, *, ascending: bool, after: str | None, limit: int) -> Page | None:
        """Up to `limit` items after the item `after` (None when there is no such item), in order."""
        start = None
        if after is not None:
            rows = await self._db.fetch("SELECT seq FROM conversation_items WHERE conversation_id = ? AND id = ?", conversation_id, after)
            if not rows:
                return None
            start = rows[0][0]
        compare, order = (">", "ASC") if ascending else ("<", "DESC")
        sql = "SELECT item FROM conversation_items WHERE conversation_id = ?"
        params: tuple[Any, ...] = (conversation_id,)
        if start is not None:
            sql += f" AND seq {compare} ?"
            params += (start,)
        rows = await self._db.fetch(f"{sql} ORDER BY seq {order} LIMIT ?", *params, limit + 1)
        return Page([json.loads(row[0]) for row in rows[:limit]], len(rows) > limit)

    async def item(self, conversation_id: str, item_id: str) -> dict[str, Any] | None:
        rows = await self._db.fetch("SELECT item FROM conversation_items WHERE conversation_id = ? AND id = ?", conversation_id, item_id)
        return json.loads(rows[0][0]) if rows else None

    async def delete_item(self, conversation_id: str, item_id: str) -> bool:
        sql = "DELETE FROM conversation_items WHERE conversation_id = ? AND id = ?"
        return bool(await self._db.execute(sql, conversation_id, item_id))


async def _insert_items(tx: Tx, conversation_id: str, items: list[ConversationItem]) -> None:
    for entry in items:
        try:
            await tx.execute(
                "INSERT INTO conversation_items (conversation_id, id, item, messages) VALUES (?,?,?,?)",
                conversation_id,
                entry.id,
                json.dumps(entry.item),
                json.dumps(entry.messages),
            )
        except Conflict:
            raise DuplicateItem(entry.id) from None
