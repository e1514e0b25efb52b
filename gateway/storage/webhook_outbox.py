"""The webhook outbox: one delivery per endpoint and event, written in the transaction that makes the event
true (a background response's final record), and kept until it is delivered or given up.

Any replica sends any delivery: it claims a batch of those due for a while (`claimed_until`, longer than an
attempt may take), so a replica that dies mid-attempt leaves them to the others once its claim runs out,
and records each attempt with the delivery's next step. A delivery keeps its id, the `webhook-id` header,
on every attempt: receivers deduplicate by it.
"""

from __future__ import annotations

import enum
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from . import Database, Tx
from .webhook_store import SigningSecrets


class Outcome(enum.StrEnum):
    """What became of a delivery after an attempt; the value is its status."""

    DELIVERED = "delivered"
    RETRY = "pending"
    GIVEN_UP = "given_up"


@dataclass(frozen=True)
class Due:
    """A delivery claimed for an attempt, with where it goes and what signs it as they are now."""

    id: str
    endpoint_id: str
    tenant: str
    event_type: str
    payload: bytes
    created_at: float  # when its event happened
    attempts: int  # made before this one
    url: str
    secrets: SigningSecrets


@dataclass(frozen=True)
class Attempt:
    replica: str
    at: float
    duration_ms: float
    status_code: int | None  # None: no answer (a timeout, a refused connection, a URL the guard blocked)
    error: str | None


MAX_TENANTS_A_CLAIM = 64  # tenants one claim looks at (those whose deliveries are due longest)
MAX_BLOCKED = 256  # endpoints a claim's query leaves out by name


class Room:
    """What one claim may take: per tenant and per endpoint, as the deliverer's caps and breakers leave it
    (the default: no bounds)."""

    def tenant(self, tenant: str) -> int:
        return 1 << 30

    def endpoint(self, endpoint_id: str) -> int:
        return 1 << 30

    def blocked(self) -> list[str]:
        """Endpoints with no room at all (at their cap, their breaker open): left out by the query itself."""
        return []

    def shares(self, tenants: list[str], limit: int) -> dict[str, int]:
        """`limit` dealt out one at a time to the tenants in turn, each up to its room."""
        shares = dict.fromkeys(tenants, 0)
        open_ = [tenant for tenant in tenants if self.tenant(tenant) > 0]
        while limit > 0 and open_:
            for tenant in list(open_):
                if limit == 0:
                    break
                shares[tenant] += 1
                limit -= 1
                if shares[tenant] >= self.tenant(tenant):
                    open_.remove(tenant)
        return {tenant: share for tenant, share in shares.items() if share}

    def take(self, rows: list[tuple[str, str]], share: int) -> list[str]:
        """Of a tenant's due deliveries (id, endpoint), oldest first, those its share and endpoints' room allow."""
        taken: list[str] = []
        per_endpoint: dict[str, int] = {}
        for delivery_id, endpoint_id in rows:
            if len(taken) == share:
                break
            if per_endpoint.get(endpoint_id, 0) < self.endpoint(endpoint_id):
                per_endpoint[endpoint_id] = per_endpoint.get(endpoint_id, 0) + 1
                taken.append(delivery_id)
        return taken


class WebhookOutbox:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._on_written: list[Callable[[], None]] = []
        self._skip_locked = db.skip_locked()
        self._lock_row = db.for_update()

    def on_written(self, callback: Callable[[], None]) -> None:
        """Call `callback()` after a transaction wrote deliveries here (the deliverer wakes up)."""
        self._on_written.append(callback)

    def written(self) -> None:
        for callback in self._on_written:
            callback()

    async def enqueue(self, tx: Tx, tenant: str, event_type: str, payload: bytes, created_at: float, new_id: Callable[[], str]) -> int:
        """Within `tx`: a delivery of the event to each of the tenant's endpoints that wants its type; how many."""
        rows = await tx.fetch("SELECT id, event_types FROM webhook_endpoints WHERE tenant = ?", tenant)
        wanted = [endpoint_id for endpoint_id, event_types in rows if event_type in json.loads(event_types)]
        if wanted:
            await tx.executemany(
                "INSERT INTO webhook_deliveries (id, endpoint_id, tenant, event_type, payload, created_at, status, next_attempt_at) "
                "VALUES (?,?,?,?,?,?,'pending',?)",
                [(new_id(), endpoint_id, tenant, event_type, payload.decode(), created_at, time.time()) for endpoint_id in wanted],
            )
        return len(wanted)

    async def claim(self, replica: str, limit: int, lease_s: float, live_since: float, room: Room | None = None) -> list[Due]:
        """Up to `limit` deliveries due now, claimed by `replica` for `lease_s`: those no claim holds, or
        whose claim ran out, or whose claiming replica has not renewed its lease since `live_since` (gone).

        Tenants take turns: the tenants with deliveries due (those `room` leaves any) share the batch
        round-robin, so one tenant's backlog never holds another's webhook behind it; within a tenant the
        oldest come first, and no endpoint gets more than `room` allows (its cap, an open breaker)."""
        room = room or Room()
        blocked = room.blocked()[:MAX_BLOCKED]
        not_blocked = f" AND endpoint_id NOT IN ({','.join('?' * len(blocked))})" if blocked else ""

        async def work(tx: Tx) -> list[Due]:
            now = time.time()
            due = (
                "status = 'pending' AND next_attempt_at <= ? AND (claimed_by IS NULL OR claimed_until < ? "
                f"OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = claimed_by AND r.heartbeat_at >= ?)){not_blocked}"
            )
            tenants = await tx.fetch(
                f"SELECT tenant FROM webhook_deliveries WHERE {due} GROUP BY tenant ORDER BY MIN(next_attempt_at) LIMIT ?",
                now, now, live_since, *blocked, MAX_TENANTS_A_CLAIM,
            )  # fmt: skip
            shares = room.shares([row[0] for row in tenants], limit)
            ids: list[str] = []
            for tenant, share in shares.items():
                rows = await tx.fetch(
                    f"SELECT id, endpoint_id FROM webhook_deliveries WHERE tenant = ? AND {due} "
                    f"ORDER BY next_attempt_at LIMIT ?{self._skip_locked}",
                    tenant, now, now, live_since, *blocked, share * 2,
                )  # fmt: skip
                ids += room.take([(row[0], row[1]) for row in rows], share)
            if not ids:
                return []
            marks = ",".join("?" * len(ids))
            await tx.execute(f"UPDATE webhook_deliveries SET claimed_by = ?, claimed_until = ? WHERE id IN ({marks})", replica, now + lease_s, *ids)
            found = await tx.fetch(
                "SELECT d.id, d.endpoint_id, d.tenant, d.event_type, d.payload, d.created_at, d.attempts, "
                "e.url, e.secret, e.secret_hint, e.previous_secret, e.previous_until "
                f"FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.id IN ({marks})",
                *ids,
            )
            return [_due(row) for row in found]

        return await self._db.transaction(work)

    async def record(self, due: Due, attempt: Attempt, outcome: Outcome, next_attempt_at: float | None = None) -> None:
        """An attempt, and the delivery's next step: delivered, given up, or tried again at `next_attempt_at`
        (unless another replica took the delivery over meanwhile: its claim stands)."""

        async def work(tx: Tx) -> None:
            rows = await tx.fetch(f"SELECT attempts FROM webhook_deliveries WHERE id = ?{self._lock_row}", due.id)
            if not rows:  # its endpoint was deleted meanwhile
                return
            number = int(rows[0][0]) + 1
            await tx.execute(
                "INSERT INTO webhook_attempts (delivery_id, number, at, replica, status_code, error, duration_ms) VALUES (?,?,?,?,?,?,?) "
                "ON CONFLICT (delivery_id, number) DO NOTHING",
                due.id, number, attempt.at, attempt.replica, attempt.status_code, attempt.error, attempt.duration_ms,
            )  # fmt: skip
            if outcome is Outcome.RETRY:
                await tx.execute(
                    "UPDATE webhook_deliveries SET attempts = ?, next_attempt_at = ?, claimed_by = NULL, claimed_until = NULL "
                    "WHERE id = ? AND status = 'pending' AND claimed_by = ?",
                    number, next_attempt_at, due.id, attempt.replica,
                )  # fmt: skip
            else:
                await tx.execute(
                    "UPDATE webhook_deliveries SET attempts = ?, status = ?, ended_at = ?, claimed_by = NULL, claimed_until = NULL "
                    "WHERE id = ? AND status = 'pending'",
                    number, outcome.value, time.time(), due.id,
                )  # fmt: skip

        await self._db.transaction(work)

    async def release_claims(self) -> int:
        """Let every claim go: the embedded database's one process starts, so whoever held them is gone."""
        return await self._db.execute("UPDATE webhook_deliveries SET claimed_by = NULL, claimed_until = NULL WHERE status = 'pending'")

    async def prune(self, ended_before: float) -> int:
        """Remove the deliveries (and their attempts) delivered or given up before this time; how many."""
        return await self._db.execute("DELETE FROM webhook_deliveries WHERE status <> 'pending' AND ended_at < ?", ended_before)


def _due(row: tuple[Any, ...]) -> Due:
    id, endpoint_id, tenant, event_type, payload, created_at, attempts, url, secret, hint, previous, previous_until = row
    secrets = SigningSecrets(secret, hint, previous, previous_until)
    return Due(id, endpoint_id, tenant, event_type, payload.encode(), float(created_at), int(attempts), url, secrets)
