"""Stored responses: the Response object, its input items, the Harmony dialog behind it, and (for
background responses) its streamed events, on the Database (SQLite or PostgreSQL).

A response that continues another stores only the messages it added, with its parent's id: the dialog
is read back along the chain of parents, so the stored size grows with a conversation, not with its
square. A response deleted or expired while a stored child still builds on it stays as a hidden row
until its last child goes.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

import anyio

from runtime.cpu import run_cpu

from ..protocol import ResponseStatus
from . import Database, StorageError, Tx

log = logging.getLogger("gateway.store")

RUNNING = tuple(status.value for status in ResponseStatus if status.running)
RELEASED = "/handed-over"  # after the owner's id: a run its replica let go, no replica's


class TooManyRunning(Exception):
    """The tenant has as many background responses running as it may."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


@dataclass
class StoredResponse:
    response: Mapping[str, Any]
    input_items: list[dict[str, Any]]
    dialog: list[dict[str, Any]]  # read back: the whole dialog; to write: the messages after the parent's
    open_calls: dict[str, str]
    state: dict[str, Any]
    tenant: str
    owner: str | None = None  # the replica running it, while it runs
    parent_id: str | None = None  # the response whose dialog this one's continues
    # Each dialog message's prompt tokens (`Prompt.json`), None where not rendered: a continuation
    # renders only what is new (harmony.GrowingPrompt).
    tokens: list[str | None] = field(default_factory=list)

    @property
    def status(self) -> str:
        return str(self.response["status"])


@dataclass(frozen=True)
class Stalled:
    """A running response, and the replica whose lease ran out while running it."""

    id: str
    owner: str


@dataclass(frozen=True)
class Orphan:
    """A running response adopted from a replica whose lease ran out: what it was at its last write."""

    stalled: Stalled
    response: dict[str, Any]
    request: str  # sealed
    checkpoint: str
    tenant: str
    next_sequence_number: int


class EndedResponses(Protocol):
    """What a background response's end writes besides its final record, in the same transaction: the
    webhook outbox (gateway/webhooks/outbox.py), so the event is never lost nor sent for an end that did not land."""

    async def write(self, tx: Tx, response: Mapping[str, Any], tenant: str) -> bool:
        """Within `tx`; whether anything was written."""

    def committed(self) -> None:
        """What `write` wrote has landed."""


class ResponseStore:
    def __init__(self, db: Database, ended: EndedResponses | None = None) -> None:
        self._db = db
        self._ended = ended
        self._lock_row = db.for_share()
        self._lock_rows = db.for_update()

    async def put(
        self,
        record: StoredResponse,
        whole: Callable[[], tuple[list[dict[str, Any]], list[str | None]]] | None = None,
        *,
        frames: list[tuple[int, bytes]] | None = None,
        owner: str | None = None,
    ) -> bool:
        """Store a response that ended (or replace what was stored of it). With a parent, `record.dialog`
        (and `record.tokens`) hold only the messages after the parent's, and `whole` gives all of them,
        stored instead if the parent was removed meanwhile. A background response's final record comes with its last
        events and the replica that ran it: written only if that replica still owns it (False if not)."""
        encoded = await run_cpu(_encode, record)
        only_if_owned = " WHERE responses.owner = ?" if owner is not None else ""

        async def work(tx: Tx) -> tuple[bool, bool]:
            parent_id, dialog, tokens = record.parent_id, encoded["dialog"], encoded["tokens"]
            if parent_id is not None:
                # Locked so that removing the parent waits for this child, and then sees it.
                rows = await tx.fetch(f"SELECT 1 FROM responses WHERE id = ?{self._lock_row}", parent_id)
                if not rows:
                    parent_id = None
                    all_messages, all_tokens = whole() if whole is not None else (record.dialog, record.tokens)
                    dialog, tokens = await run_cpu(_encode_dialog, all_messages, all_tokens)
            changed = await tx.execute(
                f"""
                INSERT INTO responses (id, created_at, response, input_items, dialog, open_calls, state, tenant, status, owner, parent_id, tokens)
                VALUES (?,?,?,?,?,?,?,?,?,NULL,?,?)
                ON CONFLICT (id) DO UPDATE SET response = excluded.response, input_items = excluded.input_items,
                    dialog = excluded.dialog, open_calls = excluded.open_calls, state = excluded.state,
                    status = excluded.status, owner = NULL, parent_id = excluded.parent_id, tokens = excluded.tokens,
                    request = NULL, checkpoint = NULL{only_if_owned}
                """,
                record.response["id"],
                float(record.response["created_at"]),
                encoded["response"],
                encoded["input_items"],
                dialog,
                encoded["open_calls"],
                encoded["state"],
                record.tenant,
                record.status,
                parent_id,
                tokens,
                *((owner,) if owner is not None else ()),
            )
            if changed and frames:
                await self._insert_events(tx, record.response["id"], frames)
            if changed and encoded["item_ids"]:  # where `item_reference` finds them; an id held before stays where it was
                rows = [(item_id, record.response["id"], record.tenant) for item_id in encoded["item_ids"]]
                await tx.executemany("INSERT INTO response_items (id, response_id, tenant) VALUES (?,?,?) ON CONFLICT (tenant, id) DO NOTHING", rows)
            final_record = bool(changed) and owner is not None  # a background response's, written by its replica
            announced = final_record and await self._announce(tx, record.response, record.tenant)
            return bool(changed), announced

        stored, announced = await self._db.transaction(work)
        self._landed(announced)
        return stored

    async def _announce(self, tx: Tx, response: Mapping[str, Any], tenant: str) -> bool:
        return self._ended is not None and await self._ended.write(tx, response, tenant)

    def _landed(self, announced: bool) -> None:
        if announced and self._ended is not None:
            self._ended.committed()

    @staticmethod
    async def _insert_events(tx: Tx, response_id: str, frames: list[tuple[int, bytes]]) -> None:
        await tx.executemany(
            "INSERT INTO response_events (response_id, sequence_number, frame) VALUES (?,?,?) ON CONFLICT (response_id, sequence_number) DO NOTHING",
            [(response_id, number, frame) for number, frame in frames],
        )

    async def begin(
        self, response: Mapping[str, Any], input_items: list[dict[str, Any]], tenant: str, owner: str, max_running: int, request: str | None
    ) -> None:
        """A background response, stored as it starts, so that any replica finds it while it runs, with the
        request it runs (sealed), for a replica that adopts it; raises TooManyRunning when the tenant has
        `max_running` running already (on any replica)."""

        async def work(tx: Tx) -> None:
            await tx.lock(f"background:{tenant}")
            rows = await tx.fetch(
                f"SELECT COUNT(*) FROM responses WHERE owner IS NOT NULL AND tenant = ? AND status IN ({','.join('?' * len(RUNNING))})",
                tenant, *RUNNING,
            )  # fmt: skip
            if int(rows[0][0]) >= max_running:
                raise TooManyRunning(max_running)
            await tx.execute(
                """
                INSERT INTO responses (id, created_at, response, input_items, dialog, open_calls, state, tenant, status, owner, request)
                VALUES (?,?,?,?,'[]','{}','{}',?,?,?,?)
                """,
                response["id"], float(response["created_at"]), json.dumps(response), json.dumps(input_items), tenant,
                response["status"], owner, request,
            )  # fmt: skip

        await self._db.transaction(work)

    async def progress(
        self, response_id: str, owner: str, response: Mapping[str, Any], frames: list[tuple[int, bytes]], checkpoint: str | None
    ) -> bool:
        """A running background response's new events, what it looks like now and where another replica
        would go on from, written by the replica that runs it; False, and nothing written, once it no
        longer owns it (its lease ran out and another replica took it: the owner is the fence)."""

        async def work(tx: Tx) -> bool:
            changed = await tx.execute(
                "UPDATE responses SET response = ?, status = ?, checkpoint = ? WHERE id = ? AND owner = ?",
                json.dumps(response),
                response["status"],
                checkpoint,
                response_id,
                owner,
            )
            if not changed:
                return False
            await self._insert_events(tx, response_id, frames)
            return True

        return await self._db.transaction(work)

    async def get(self, response_id: str, tenant: str, *, dialog: bool = True) -> StoredResponse | None:
        """The tenant's stored response; another tenant's is as absent as one that never existed. With
        `dialog`, the whole dialog along its chain of parents."""
        rows = await self._db.fetch(
            "SELECT response, input_items, open_calls, state, owner, parent_id FROM responses WHERE id = ? AND tenant = ? AND deleted = 0",
            response_id,
            tenant,
        )
        if not rows:
            return None
        response, input_items, open_calls, state, owner, parent_id = rows[0]
        chain: list[tuple[str, str | None]] = []
        if dialog:
            chain = await self._db.fetch(
                """
                WITH RECURSIVE chain(id, parent_id, dialog, tokens, depth) AS (
                    SELECT id, parent_id, dialog, tokens, 0 FROM responses WHERE id = ?
                    UNION ALL
                    SELECT r.id, r.parent_id, r.dialog, r.tokens, c.depth + 1 FROM responses r JOIN chain c ON r.id = c.parent_id
                )
                SELECT dialog, tokens FROM chain ORDER BY depth DESC
                """,
                response_id,
            )
        # Decoded in a worker thread, a row at a time: a long conversation does not hold up the event loop.
        decoded = await run_cpu(_decode, response, input_items, open_calls, state, chain)
        body, items, messages, calls, tool_state, tokens = decoded
        return StoredResponse(body, items, messages, calls, tool_state, tenant=tenant, owner=owner, parent_id=parent_id, tokens=tokens)

    async def item(self, item_id: str, tenant: str) -> dict[str, Any] | None:
        """An item of the tenant's stored responses (their output, or their input as it came), by its id."""
        rows = await self._db.fetch(
            "SELECT r.response, r.input_items FROM response_items i JOIN responses r ON r.id = i.response_id "
            "WHERE i.id = ? AND i.tenant = ? AND r.tenant = ? AND r.deleted = 0",
            item_id, tenant, tenant,
        )  # fmt: skip
        return await run_cpu(_find_item, item_id, rows[0][0], rows[0][1]) if rows else None

    async def status(self, response_id: str) -> tuple[str, str | None] | None:
        """A stored response's status and the replica running it (None once it ended, or if it is gone)."""
        rows = await self._db.fetch("SELECT status, owner FROM responses WHERE id = ? AND deleted = 0", response_id)
        return (rows[0][0], rows[0][1]) if rows else None

    async def events_after(self, response_id: str, sequence_number: int, limit: int = 1000) -> list[tuple[int, bytes]]:
        rows = await self._db.fetch(
            "SELECT sequence_number, frame FROM response_events WHERE response_id = ? AND sequence_number > ? ORDER BY sequence_number LIMIT ?",
            response_id,
            sequence_number,
            limit,
        )
        return [(number, bytes(frame)) for number, frame in rows]

    async def delete(self, response_id: str, tenant: str) -> bool:
        async def work(tx: Tx) -> bool:
            if not await tx.execute("UPDATE responses SET deleted = 1 WHERE id = ? AND tenant = ? AND deleted = 0", response_id, tenant):
                return False
            await tx.execute("DELETE FROM response_events WHERE response_id = ?", response_id)
            await self._purge(tx)
            return True

        return await self._db.transaction(work)

    async def expire(self, older_than: float) -> int:
        """Remove the responses created before this time (running ones stay), with their events; how many went."""

        async def work(tx: Tx) -> int:
            expired = await tx.execute("UPDATE responses SET deleted = 1 WHERE created_at < ? AND deleted = 0 AND owner IS NULL", older_than)
            await tx.execute("DELETE FROM response_events WHERE response_id IN (SELECT id FROM responses WHERE deleted = 1)")
            await self._purge(tx)
            return expired

        return await self._db.transaction(work)

    async def _purge(self, tx: Tx) -> None:
        """Remove the hidden rows no stored child builds on, then their parents that are left childless."""
        while True:
            candidates = await tx.fetch(
                f"SELECT id FROM responses r WHERE deleted = 1 AND NOT EXISTS (SELECT 1 FROM responses c WHERE c.parent_id = r.id){self._lock_rows}"
            )
            removed = 0
            for (candidate,) in candidates:
                # A fresh look, after the lock: a child stored meanwhile keeps its parent.
                gone = await tx.execute(
                    "DELETE FROM responses WHERE id = ? AND NOT EXISTS (SELECT 1 FROM responses c WHERE c.parent_id = ?)",
                    candidate,
                    candidate,
                )
                if gone:
                    await tx.execute("DELETE FROM response_items WHERE response_id = ?", candidate)
                removed += gone
            if not removed:
                return

    async def stalled(self, live_since: float) -> list[Stalled]:
        """Running responses whose replica has not renewed its lease since `live_since`."""
        rows = await self._db.fetch(
            """
            SELECT r.id, r.owner FROM responses r
            WHERE r.owner IS NOT NULL AND NOT EXISTS (SELECT 1 FROM replicas p WHERE p.id = r.owner AND p.heartbeat_at >= ?)
            """,
            live_since,
        )
        return [Stalled(id, owner) for id, owner in rows]

    async def adopt(self, stalled: Stalled, owner: str) -> Orphan | None:
        """Make `owner` the replica running a stalled response, if it still is the stalled replica's and
        can be gone on with (it has a checkpoint): a compare-and-set, so two replicas never both adopt it."""

        async def work(tx: Tx) -> Orphan | None:
            changed = await tx.execute(
                "UPDATE responses SET owner = ? WHERE id = ? AND owner = ? AND request IS NOT NULL AND checkpoint IS NOT NULL",
                owner, stalled.id, stalled.owner,
            )  # fmt: skip
            if not changed:
                return None
            rows = await tx.fetch("SELECT response, request, checkpoint, tenant FROM responses WHERE id = ?", stalled.id)
            response, request, checkpoint, tenant = rows[0]
            return Orphan(stalled, json.loads(response), request, checkpoint, tenant, await _next_sequence_number(tx, stalled.id))

        return await self._db.transaction(work)

    async def release(self, response_id: str, owner: str) -> bool:
        """A running response's replica lets it go (it is shutting down): its owner becomes one that holds
        no lease, so another replica adopts it as it would a stalled one."""
        released = await self._db.execute("UPDATE responses SET owner = ? WHERE id = ? AND owner = ?", f"{owner}{RELEASED}", response_id, owner)
        return bool(released)

    async def release_all(self, owner: str) -> int:
        """Release every running response `owner` holds (see `release`); how many."""
        return await self._db.execute("UPDATE responses SET owner = ? WHERE owner = ?", f"{owner}{RELEASED}", owner)

    async def take_over(self, stalled: Stalled, response: dict[str, Any], event: Callable[[int], bytes]) -> bool:
        """End a stalled response as `response` says, with `event(sequence_number)` as its last event;
        False if its replica finished it, or another replica took it over, first."""

        async def work(tx: Tx) -> tuple[bool, bool]:
            changed = await tx.execute(
                "UPDATE responses SET response = ?, status = ?, owner = NULL WHERE id = ? AND owner = ?",
                json.dumps(response),
                response["status"],
                stalled.id,
                stalled.owner,
            )
            if not changed:
                return False, False
            number = await _next_sequence_number(tx, stalled.id)
            await tx.execute("INSERT INTO response_events (response_id, sequence_number, frame) VALUES (?,?,?)", stalled.id, number, event(number))
            tenant = await tx.fetch("SELECT tenant FROM responses WHERE id = ?", stalled.id)
            return True, await self._announce(tx, response, tenant[0][0])

        taken, announced = await self._db.transaction(work)
        self._landed(announced)
        return taken


async def _next_sequence_number(tx: Tx, response_id: str) -> int:
    """The number after the last event stored for a response: where whoever goes on with it goes on."""
    rows = await tx.fetch("SELECT MAX(sequence_number) FROM response_events WHERE response_id = ?", response_id)
    return rows[0][0] + 1 if rows and rows[0][0] is not None else 0


def _encode(record: StoredResponse) -> dict[str, Any]:
    dialog, tokens = _encode_dialog(record.dialog, record.tokens)
    items = [*record.response.get("output", ()), *record.input_items]
    return {
        "response": json.dumps(record.response),
        "input_items": json.dumps(record.input_items),
        "dialog": dialog,
        "tokens": tokens,
        "open_calls": json.dumps(record.open_calls),
        "state": json.dumps(record.state),
        "item_ids": [item["id"] for item in items if isinstance(item.get("id"), str)],
    }


def _find_item(item_id: str, response: str, input_items: str) -> dict[str, Any] | None:
    for item in [*json.loads(response).get("output", ()), *json.loads(input_items)]:
        if item.get("id") == item_id:
            return dict(item)
    return None


def _encode_dialog(dialog: list[dict[str, Any]], tokens: list[str | None]) -> tuple[str, str]:
    tokens = (tokens + [None] * len(dialog))[: len(dialog)]  # one entry a message, None where not rendered
    return json.dumps(dialog), json.dumps(tokens)


_Decoded = tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], dict[str, str], dict[str, Any], list[str | None]]


def _decode(response: str, input_items: str, open_calls: str, state: str, chain: list[tuple[str, str | None]]) -> _Decoded:
    dialog: list[dict[str, Any]] = []
    tokens: list[str | None] = []
    for part, part_tokens in chain:
        messages = json.loads(part)
        dialog += messages
        known = json.loads(part_tokens) if part_tokens else []
        tokens += known if len(known) == len(messages) else [None] * len(messages)  # rows from before tokens were kept
    return json.loads(response), json.loads(input_items), dialog, json.loads(open_calls), json.loads(state), tokens


async def expire_responses(store: ResponseStore, ttl_s: float, interval_s: float) -> None:
    """Run for the app's lifetime: every `interval_s`, remove responses older than `ttl_s`."""
    while True:
        await anyio.sleep(interval_s)
        try:
            removed = await store.expire(time.time() - ttl_s)
        except StorageError:
            log.exception("removing expired responses failed; trying again later")
            continue
        if removed:
            log.info("removed %d expired responses", removed)
