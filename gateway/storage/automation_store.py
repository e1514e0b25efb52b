"""The Agents API's automations and their invocations (gateway/agents/automations.py, scheduler.py). Another
tenant's is as absent as one that never existed.

Every replica fires due automations from the same table: `fire_due` locks the due rows it takes (passing over
those another replica's transaction holds), writes each one's invocation and moves its `next_run_at` on in one
transaction, so an occurrence fires once, whichever replica takes it and whenever one dies. An invocation is
then delivered (its session made, its message sent) under a claim that lapses with its replica, so one killed
mid-delivery leaves it to another; delivery itself is idempotent (the session's id chosen when it was queued,
its message sent with the invocation's id as its key)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from ..protocol import AutomationStatus, InvocationStatus
from . import Database, Tx
from .file_store import TooMany
from .paging import PageQuery, fetch_page


@dataclass
class Automation:
    id: str
    tenant: str
    created_at: int
    status: str  # active | paused | completed
    pause_reason: str | None
    next_run_at: float | None
    session_id: str | None  # the session it targets, or the one whose agent made it
    body: dict[str, Any]  # type, name, metadata, expression and timezone or run_at, target, created_by


@dataclass
class Invocation:
    id: str
    automation_id: str
    tenant: str
    created_at: int
    status: str  # queued | completed | failed | skipped
    source: str  # manual | automation
    scheduled_at: int | None
    skip_reason: str | None
    error: dict[str, str] | None
    session_id: str | None
    turn_id: str | None


@dataclass
class Firing:
    """What firing a due automation does, as the scheduler decides it (schedule.py)."""

    scheduled_at: int  # the occurrence it fires for (the latest one due: missed ones are not fired in a burst)
    next_run_at: float | None  # None: it is done (a one-time automation)
    invocation_id: str
    session_id: str | None  # a new session's id, chosen now


_AUTOMATION = "id, tenant, created_at, status, pause_reason, next_run_at, session_id, body"
_INVOCATION = "id, automation_id, tenant, created_at, status, source, scheduled_at, skip_reason, error, session_id, turn_id"


def _automation(row: Any) -> Automation:
    next_run = float(row[5]) if row[5] is not None else None
    return Automation(row[0], row[1], int(row[2]), row[3], row[4], next_run, row[6], json.loads(row[7]))


def _invocation(row: Any) -> Invocation:
    scheduled = int(row[6]) if row[6] is not None else None
    error = json.loads(row[8]) if row[8] else None
    return Invocation(row[0], row[1], row[2], int(row[3]), row[4], row[5], scheduled, row[7], error, row[9], row[10])


class AutomationStore:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._skip_locked = db.skip_locked()

    # Automations

    async def create(self, automation: Automation, limit: int, tx: Tx | None = None) -> None:
        """Kept, within `tx` when given (an agent's own tool call, in its session's change)."""

        async def work(tx: Tx) -> None:
            await tx.lock(f"agent_automations:{automation.tenant}")
            rows = await tx.fetch("SELECT COUNT(*) FROM agent_automations WHERE tenant = ?", automation.tenant)
            if int(rows[0][0]) >= limit:
                raise TooMany("automations", limit)
            await tx.execute(
                f"INSERT INTO agent_automations ({_AUTOMATION}) VALUES (?,?,?,?,?,?,?,?)",
                automation.id, automation.tenant, automation.created_at, automation.status, automation.pause_reason,
                automation.next_run_at, automation.session_id, json.dumps(automation.body),
            )  # fmt: skip

        await (work(tx) if tx is not None else self._db.transaction(work))

    async def automation(self, automation_id: str, tenant: str, tx: Tx | None = None) -> Automation | None:
        query = f"SELECT {_AUTOMATION} FROM agent_automations WHERE id = ? AND tenant = ?"
        rows = await (tx or self._db).fetch(query, automation_id, tenant)
        return _automation(rows[0]) if rows else None

    async def automations(self, tenant: str, session_id: str | None, page: PageQuery) -> tuple[list[Automation], bool] | None:
        where, params = "tenant = ?", [tenant]
        if session_id is not None:
            where, params = where + " AND session_id = ?", params + [session_id]
        rows = await fetch_page(self._db, "agent_automations", _AUTOMATION, where, params, page)
        return None if rows is None else ([_automation(row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def of_session(self, tx: Tx, tenant: str, session_id: str, limit: int) -> list[Automation]:
        """The session's first `limit`, within its change (an agent's own tool call)."""
        rows = await tx.fetch(
            f"SELECT {_AUTOMATION} FROM agent_automations WHERE tenant = ? AND session_id = ? ORDER BY created_at, id LIMIT ?",
            tenant,
            session_id,
            limit,
        )
        return [_automation(row) for row in rows]

    async def change(self, automation_id: str, tenant: str, work: Callable[[Automation], None], tx: Tx | None = None) -> Automation | None:
        """`work` on the locked automation; what it leaves is written back. None when there is none."""

        async def locked(tx: Tx) -> Automation | None:
            query = f"SELECT {_AUTOMATION} FROM agent_automations WHERE id = ? AND tenant = ?{self._db.for_update()}"
            rows = await tx.fetch(query, automation_id, tenant)
            if not rows:
                return None
            automation = _automation(rows[0])
            work(automation)
            await self._write(tx, automation)
            return automation

        return await (locked(tx) if tx is not None else self._db.transaction(locked))

    async def _write(self, tx: Tx, automation: Automation) -> None:
        await tx.execute(
            "UPDATE agent_automations SET status = ?, pause_reason = ?, next_run_at = ?, session_id = ?, body = ? WHERE id = ?",
            automation.status, automation.pause_reason, automation.next_run_at, automation.session_id,
            json.dumps(automation.body), automation.id,
        )  # fmt: skip

    async def delete(self, automation_id: str, tenant: str, tx: Tx | None = None) -> bool:
        async def work(tx: Tx) -> bool:
            if not await tx.execute("DELETE FROM agent_automations WHERE id = ? AND tenant = ?", automation_id, tenant):
                return False
            await tx.execute("DELETE FROM agent_automation_invocations WHERE automation_id = ?", automation_id)
            return True

        return await (work(tx) if tx is not None else self._db.transaction(work))

    # Firing

    async def next_due(self) -> float | None:
        rows = await self._db.fetch("SELECT MIN(next_run_at) FROM agent_automations WHERE next_run_at IS NOT NULL")
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    async def fire_due(
        self, now: float, limit: int, replica: str, lease_s: float, fire: Callable[[Automation], Firing]
    ) -> tuple[list[Invocation], int]:
        """Up to `limit` automations due by `now`, fired: each one's invocation written (queued, claimed by
        `replica` for delivery; or skipped while its last one is still queued) and its next time set.
        The queued invocations, and how many were skipped."""

        async def work(tx: Tx) -> tuple[list[Invocation], int]:
            rows = await tx.fetch(
                f"SELECT {_AUTOMATION} FROM agent_automations WHERE next_run_at <= ? ORDER BY next_run_at LIMIT ?{self._skip_locked}",
                now, limit,
            )  # fmt: skip
            queued: list[Invocation] = []
            skipped = 0
            for row in rows:
                automation = _automation(row)
                firing = fire(automation)
                busy = await tx.fetch(
                    "SELECT 1 FROM agent_automation_invocations WHERE automation_id = ? AND status = 'queued' LIMIT 1", automation.id
                )
                status, session = (InvocationStatus.SKIPPED, None) if busy else (InvocationStatus.QUEUED, firing.session_id)
                invocation = Invocation(
                    firing.invocation_id, automation.id, automation.tenant, int(now), status, "automation", firing.scheduled_at,
                    "pending_delivery" if busy else None, None, session, None,
                )  # fmt: skip
                await self._insert(tx, invocation, replica if not busy else None, now + lease_s)
                if busy:
                    skipped += 1
                else:
                    queued.append(invocation)
                automation.next_run_at = firing.next_run_at
                if firing.next_run_at is None:
                    automation.status = AutomationStatus.COMPLETED
                await self._write(tx, automation)
            return queued, skipped

        return await self._db.transaction(work)

    async def _insert(self, tx: Tx, invocation: Invocation, claimed_by: str | None, claimed_until: float | None) -> None:
        await tx.execute(
            f"INSERT INTO agent_automation_invocations ({_INVOCATION}, claimed_by, claimed_until) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            invocation.id, invocation.automation_id, invocation.tenant, invocation.created_at, invocation.status,
            invocation.source, invocation.scheduled_at, invocation.skip_reason,
            json.dumps(invocation.error) if invocation.error else None, invocation.session_id, invocation.turn_id,
            claimed_by, claimed_until if claimed_by is not None else None,
        )  # fmt: skip

    async def invoke(self, invocation: Invocation) -> None:
        """A manual invocation, queued for whichever replica's scheduler claims it first."""
        await self._db.transaction(lambda tx: self._insert(tx, invocation, None, None))

    # Delivery

    async def claim_undelivered(self, replica: str, now: float, lease_s: float, live_since: float, limit: int) -> list[Invocation]:
        """Queued invocations not delivered yet that no live claim holds (new manual ones, those waiting for
        their session to be idle, those whose claimant died), claimed by `replica` for `lease_s`."""

        async def work(tx: Tx) -> list[Invocation]:
            rows = await tx.fetch(
                f"SELECT {_INVOCATION} FROM agent_automation_invocations WHERE status = 'queued' AND turn_id IS NULL "
                "AND (claimed_by IS NULL OR claimed_until < ? "
                "OR NOT EXISTS (SELECT 1 FROM replicas r WHERE r.id = claimed_by AND r.heartbeat_at >= ?)) "
                f"ORDER BY created_at LIMIT ?{self._skip_locked}",
                now, live_since, limit,
            )  # fmt: skip
            found = [_invocation(row) for row in rows]
            for invocation in found:
                await tx.execute(
                    "UPDATE agent_automation_invocations SET claimed_by = ?, claimed_until = ? WHERE id = ?", replica, now + lease_s, invocation.id
                )
            return found

        return await self._db.transaction(work)

    async def release(self, invocation_id: str) -> None:
        """Not delivered this time (its session is busy): any replica tries it again."""
        await self._db.execute("UPDATE agent_automation_invocations SET claimed_by = NULL, claimed_until = NULL WHERE id = ?", invocation_id)

    async def release_claims(self) -> None:
        await self._db.execute("UPDATE agent_automation_invocations SET claimed_by = NULL, claimed_until = NULL WHERE status = 'queued'")

    async def delivered(self, invocation_id: str, turn_id: str) -> None:
        await self._db.execute(
            "UPDATE agent_automation_invocations SET turn_id = ?, claimed_by = NULL, claimed_until = NULL WHERE id = ? AND status = 'queued'",
            turn_id, invocation_id,
        )  # fmt: skip

    async def awaiting(self, limit: int) -> list[Invocation]:
        """Delivered invocations whose turn has not been seen to end."""
        rows = await self._db.fetch(
            f"SELECT {_INVOCATION} FROM agent_automation_invocations WHERE status = 'queued' AND turn_id IS NOT NULL ORDER BY created_at LIMIT ?",
            limit,
        )
        return [_invocation(row) for row in rows]

    async def settle(self, invocation: Invocation, status: str, error: dict[str, str] | None, pause: bool) -> bool:
        """The invocation ended (`completed` or `failed`); with `pause`, its automation paused as its target
        session failed. False when another replica settled it first."""

        async def work(tx: Tx) -> bool:
            settled = await tx.execute(
                "UPDATE agent_automation_invocations SET status = ?, error = ?, claimed_by = NULL, claimed_until = NULL "
                "WHERE id = ? AND status = 'queued'",
                status, json.dumps(error) if error else None, invocation.id,
            )  # fmt: skip
            if settled and pause:
                await tx.execute(
                    "UPDATE agent_automations SET status = 'paused', pause_reason = 'target_session_failed', next_run_at = NULL "
                    "WHERE id = ? AND status = 'active'",
                    invocation.automation_id,
                )
            return bool(settled)

        return await self._db.transaction(work)

    # Invocations as listed

    async def invocation(self, automation_id: str, invocation_id: str, tenant: str) -> Invocation | None:
        rows = await self._db.fetch(
            f"SELECT {_INVOCATION} FROM agent_automation_invocations WHERE id = ? AND automation_id = ? AND tenant = ?",
            invocation_id, automation_id, tenant,
        )  # fmt: skip
        return _invocation(rows[0]) if rows else None

    async def invocations(self, automation_id: str, page: PageQuery) -> tuple[list[Invocation], bool] | None:
        rows = await fetch_page(self._db, "agent_automation_invocations", _INVOCATION, "automation_id = ?", [automation_id], page)
        return None if rows is None else ([_invocation(row) for row in rows[: page.limit]], len(rows) > page.limit)
