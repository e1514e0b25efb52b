"""This gateway process among the replicas that share one database.

Each replica holds a lease it renews every `lease_s / 3`. A background response is stored as it starts
with the replica running it as its owner; when a replica stops renewing (killed, cut off), another
replica adopts its responses and goes on with them from their last written event
(responses/loop/adoption.py). One that cannot be gone on with is ended as failed, with a last event that
ends every stream following it, so no response stays `in_progress` forever. A cancel that reaches a replica not running the response is
sent to the one that is (PostgreSQL's NOTIFY); if that one is gone, the cancel is carried out here.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from typing import Any, Awaitable, Callable

import anyio

from .config import StorageConfig
from .protocol import ResponseStatus, event_frame, terminal_event
from .storage import Database, StorageError
from .storage.response_store import RUNNING, Orphan, ResponseStore, Stalled, StoredResponse

log = logging.getLogger("gateway.replicas")

CANCEL_CHANNEL = "gateway_cancel"
HANDOVER_CHANNEL = "gateway_handover"  # a replica let runs go: the others adopt them now, not at their next round
_STOPPED = {"code": "server_error", "message": "The gateway replica running this response stopped before it finished."}
_RESEND_CANCEL_S = 1.0


class Replicas:
    def __init__(self, db: Database, store: ResponseStore, config: StorageConfig) -> None:
        self.db = db
        self.store = store
        self.lease_s = config.lease_s
        self.id = config.replica_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._cancel_handlers: list[Callable[[str], None]] = []
        self._adopt: Callable[[Orphan], Awaitable[None]] | None = None
        self.draining = False  # shutting down: runs are handed over, none taken
        self._reap_now = anyio.Event()
        db.listen(CANCEL_CHANNEL, self._on_cancel)
        db.listen(HANDOVER_CHANNEL, lambda _: self._reap_now.set())

    def on_cancel(self, handler: Callable[[str], None]) -> None:
        """Call `handler(response_id)` when any replica asks for a response to be cancelled."""
        self._cancel_handlers.append(handler)

    def on_adopt(self, adopt: Callable[[Orphan], Awaitable[None]]) -> None:
        """Go on here with the runs of replicas whose lease ran out, by `adopt(orphan)`."""
        self._adopt = adopt

    def _on_cancel(self, response_id: str) -> None:
        for handler in self._cancel_handlers:
            handler(response_id)

    async def join(self) -> None:
        """Take the lease before running anything, so no other replica mistakes this one's runs for orphans.
        Runs held under this name already are a previous process's (a replica restarted with the same
        `replica_id`): they are let go, to be adopted like any stalled run."""
        await self._renew()
        released = await self.store.release_all(self.id)
        if released:
            log.warning("%d running responses of an earlier process named %s are let go, to be adopted", released, self.id)

    async def run(self) -> None:
        """For the app's lifetime: renew the lease, and end the runs of replicas whose lease ran out."""
        interval = self.lease_s / 3
        while True:
            with anyio.move_on_after(interval):
                await self._reap_now.wait()
            self._reap_now = anyio.Event()
            try:
                await self._renew()
                await self.reap()
                await self.db.execute("DELETE FROM replicas WHERE heartbeat_at < ?", time.time() - 10 * self.lease_s)
            except StorageError as exc:
                log.warning("lease not renewed: %s", exc)

    async def _renew(self) -> None:
        await self.db.execute(
            "INSERT INTO replicas (id, heartbeat_at) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            self.id,
            time.time(),
        )

    async def hand_over(self, response_id: str) -> bool:
        """Let a run this replica stopped go (its last events and checkpoint are written): it is no longer
        this replica's, and the others are told to adopt it now. False if it was not this replica's."""
        if not await self.store.release(response_id, self.id):
            return False
        try:
            await self.db.notify(HANDOVER_CHANNEL, response_id)
        except StorageError:  # the others adopt it at their next round
            pass
        return True

    async def leave(self) -> None:
        """A clean shutdown: give the lease up (the runs here have ended by now)."""
        with anyio.move_on_after(2, shield=True):
            try:
                await self.db.execute("DELETE FROM replicas WHERE id = ?", self.id)
            except StorageError:
                pass

    async def reap(self) -> int:
        """Adopt the responses of replicas whose lease ran out, or end as failed those that cannot be gone
        on with; how many."""
        ended = 0
        if self.draining:
            return ended
        for stalled in await self.store.stalled(time.time() - self.lease_s):
            if await self._adopted(stalled):
                ended += 1
                continue
            if await self._end(stalled, ResponseStatus.FAILED, _STOPPED):
                log.warning("response %s failed: its replica %s stopped renewing its lease", stalled.id, stalled.owner)
                ended += 1
        return ended

    async def _adopted(self, stalled: Stalled) -> bool:
        """Take the run over and go on with it here; False if it cannot be (no checkpoint, or another
        replica took it first). One that fails to start again here is ended as failed."""
        if self._adopt is None:
            return False
        orphan = await self.store.adopt(stalled, self.id)
        if orphan is None:
            return False
        try:
            await self._adopt(orphan)
        except Exception:
            log.exception("response %s could not be adopted from replica %s; it fails", stalled.id, stalled.owner)
            await self._end(Stalled(stalled.id, self.id), ResponseStatus.FAILED, _STOPPED)
        return True

    async def cancel(self, stored: StoredResponse, wait_s: float) -> None:
        """Cancel a background response another replica runs: ask it (again every second, notifications
        can be lost) until the response ends; if its replica is gone, cancel it here."""
        deadline = time.monotonic() + wait_s
        resend = 0.0
        while time.monotonic() < deadline:
            state = await self.store.status(stored.response["id"])
            if state is None or state[0] not in RUNNING or state[1] is None:
                return
            if not await self._alive(state[1]):
                await self._end(Stalled(stored.response["id"], state[1]), ResponseStatus.CANCELLED, None)
                return
            if time.monotonic() >= resend:
                await self.db.notify(CANCEL_CHANNEL, stored.response["id"])
                resend = time.monotonic() + _RESEND_CANCEL_S
            await anyio.sleep(0.05)

    async def live(self) -> set[str]:
        """The replicas whose lease is current (this one included)."""
        rows = await self.db.fetch("SELECT id FROM replicas WHERE heartbeat_at >= ?", time.time() - self.lease_s)
        return {row[0] for row in rows} | {self.id}

    async def _alive(self, replica: str) -> bool:
        rows = await self.db.fetch("SELECT heartbeat_at FROM replicas WHERE id = ?", replica)
        return bool(rows) and rows[0][0] >= time.time() - self.lease_s

    async def _end(self, stalled: Stalled, status: str, error: dict[str, str] | None) -> bool:
        rows = await self.db.fetch("SELECT response FROM responses WHERE id = ?", stalled.id)
        if not rows:
            return False
        response: dict[str, Any] = json.loads(rows[0][0]) | {"status": status, "error": error}
        kind, fields = terminal_event(status, response)

        def frame(sequence_number: int) -> bytes:
            return event_frame({"type": kind, "sequence_number": sequence_number, **fields})

        return await self.store.take_over(stalled, response, frame)
