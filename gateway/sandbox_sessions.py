"""The python sessions' directory (sandbox/directory.py) in the gateway's database, shared by its replicas.

A replica that takes a session over tells the others with a notification, so the one it was taken from
detaches at once; a notification that is lost costs nothing but an attach kept open until that
replica's next use of the session (which finds it changed hands) or its idle reaping.
"""

from __future__ import annotations

import time
from typing import Callable

from sandbox.directory import Placement, SessionBusy, SessionNotFound, SessionTaken

from .replicas import Replicas
from .storage import Conflict, Database, Tx

TAKEN_CHANNEL = "gateway_sandbox_taken"


class SessionDirectory:
    def __init__(self, db: Database, replicas: Replicas) -> None:
        self.db = db
        self.owner = replicas.id
        self._lease_s = replicas.lease_s
        self._lock = db.for_update(of="s")
        self._handlers: list[Callable[[str, str], None]] = []
        db.listen(TAKEN_CHANNEL, self._on_taken)

    def on_taken(self, handler: Callable[[str, str], None]) -> None:
        self._handlers.append(handler)

    def _on_taken(self, payload: str) -> None:
        session_id, _, owner = payload.partition(" ")
        for handler in self._handlers:
            handler(session_id, owner)

    async def acquire(self, session_id: str, tenant: str, busy_s: float) -> Placement | None:
        now = time.time()

        async def claim(tx: Tx) -> tuple[Placement | None, bool]:
            rows = await tx.fetch(
                "SELECT s.tenant, s.container, s.owner, s.generation, s.busy_until, s.last_used, r.heartbeat_at "
                "FROM sandbox_sessions s LEFT JOIN replicas r ON r.id = s.owner WHERE s.session_id = ?" + self._lock,
                session_id,
            )
            if not rows:
                return None, False
            owner_tenant, container, owner, generation, busy_until, last_used, heartbeat = rows[0]
            if owner_tenant != tenant:
                raise SessionNotFound(session_id)
            moved = owner != self.owner
            owner_alive = heartbeat is not None and heartbeat >= now - self._lease_s
            if moved and busy_until > now and owner_alive:
                raise SessionBusy(f"session {session_id} is running code on another gateway replica")
            generation += int(moved)
            await tx.execute(
                "UPDATE sandbox_sessions SET owner = ?, generation = ?, busy_until = ? WHERE session_id = ?",
                self.owner,
                generation,
                now + busy_s,
                session_id,
            )
            return Placement(container, self.owner, generation, last_used), moved

        placement, moved = await self.db.transaction(claim)
        if moved:
            await self.db.notify(TAKEN_CHANNEL, f"{session_id} {self.owner}")
        return placement

    async def register(self, session_id: str, tenant: str, container: str, busy_s: float) -> int:
        now = time.time()
        try:
            await self.db.execute(
                "INSERT INTO sandbox_sessions (session_id, tenant, container, owner, generation, busy_until, last_used) VALUES (?, ?, ?, ?, 1, ?, ?)",
                session_id,
                tenant,
                container,
                self.owner,
                now + busy_s,
                now,
            )
        except Conflict:
            raise SessionTaken(session_id) from None
        return 1

    async def release(self, session_id: str, container: str) -> None:
        await self.db.execute(
            "UPDATE sandbox_sessions SET busy_until = 0, last_used = ?, container = ? WHERE session_id = ? AND owner = ?",
            time.time(),
            container,
            session_id,
            self.owner,
        )

    async def forget(self, session_id: str) -> bool:
        removed = await self.db.execute("DELETE FROM sandbox_sessions WHERE session_id = ? AND owner = ?", session_id, self.owner)
        return removed > 0

    async def placements(self) -> dict[str, Placement]:
        rows = await self.db.fetch("SELECT container, owner, generation, last_used FROM sandbox_sessions")
        return {row[0]: Placement(*row) for row in rows}

    async def drop(self, container: str, owner: str) -> None:
        await self.db.execute("DELETE FROM sandbox_sessions WHERE container = ? AND owner = ?", container, owner)
