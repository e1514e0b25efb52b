"""A background response's journal: its events and its progress, written to the store while it runs, so
that any replica can show it (GET), follow it (a resumed stream) or cancel it, and nothing is lost if
this replica dies (its lease runs out and another replica ends the response).

Writes are batched: every FLUSH_INTERVAL_S at most, one transaction with the new events' frames and the
Response object as it is now. The last write, with the terminal event, is the response's final record:
one transaction, so a reader never sees the end of the stream without the stored result, or the
reverse.

Readers here see an event only once it is written (`follow`): a replica that takes the run over goes on
after the last event written, so no sequence number a client may have seen is ever given to another
event. A stream read here lags the run by one write at most (FLUSH_INTERVAL_S and the write itself).
"""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator, Awaitable, Callable, Mapping

import anyio

from ...storage import StorageError
from ...storage.response_store import ResponseStore
from ..events.log import Batch, EventLog, Wakeup, follow_batches, numbered_frames

logger = logging.getLogger("gateway.responses")

FLUSH_INTERVAL_S = 0.05
RETRY_FINAL_S = 2.0  # a final record that could not be written is tried again this often

Frames = list[tuple[int, bytes]]


class Journal:
    def __init__(
        self,
        store: ResponseStore,
        response_id: str,
        owner: str,
        log: EventLog,
        snapshot: Callable[[], Mapping[str, Any]],
        checkpoint: Callable[[], str | None],
        on_taken_over: Callable[[], None],
    ) -> None:
        self._store = store
        self._id = response_id
        self._owner = owner
        self._log = log
        self._snapshot = snapshot
        # Where another replica would go on from, taken in the same instant as the events written with it.
        self._checkpoint = checkpoint
        self._on_taken_over = on_taken_over  # the run stops: another replica runs it now
        self._written = 0  # batches of the log written so far
        self._lock = anyio.Lock()
        self._finished = False
        self._settled = False  # the final record is written, or the run was taken over: nothing more to read
        self.taken_over = False  # another replica ended the run (this one was thought gone)
        self._wakeup = Wakeup()  # readers here, waiting for the next write

    async def run(self) -> None:
        """Follow the log, writing what is new, until the run's end hands the rest to `finish`."""
        while not self._finished:
            await self._log.wait_beyond(self._written)
            if self._log.closed or self._finished:
                return
            await anyio.sleep(FLUSH_INTERVAL_S)  # events of the next moments go in the same write
            try:
                await self.flush()
            except StorageError as exc:  # tried again with the next events; the final write has them all
                logger.warning("progress of response %s not stored: %s", self._id, exc)

    async def flush(self) -> bool:
        """Write what is new now (before a tool call runs, so that the call is never made twice: an adopter
        goes on after it); False once the run is another replica's, which also stops it here."""
        async with self._lock:
            if self._finished:
                return not self.taken_over
            end = len(self._log.batches)
            if end > self._written:
                owned = await self._store.progress(self._id, self._owner, self._snapshot(), self._frames(end), self._checkpoint())
                if not owned:
                    logger.warning("response %s was taken over by another replica: its events are no longer written here", self._id)
                    self.taken_over = self._finished = True
                    self._settle()
                    self._on_taken_over()
                    return False
                self._written = end
                self._wakeup.set()
            return True

    async def finish(self, save: Callable[[Frames], Awaitable[bool]]) -> None:
        """Write the final record with the events not yet written, by `save(frames)`; while the database
        is unreachable, again and again (the response stays readable here meanwhile; if this replica
        stops first, another ends the response when the lease runs out)."""
        async with self._lock:
            self._finished = True
            frames = self._frames(len(self._log.batches))
        if self.taken_over:
            return
        while True:
            try:
                with anyio.CancelScope(shield=True):
                    if await save(frames):
                        self._written = len(self._log.batches)
                    else:
                        logger.warning("response %s was ended by another replica before its own end was stored", self._id)
                        self.taken_over = True
                self._settle()
                return
            except StorageError as exc:
                logger.error("response %s could not be stored (%s); trying again", self._id, exc)
            await anyio.sleep(RETRY_FINAL_S)

    async def hand_over(self, release: Callable[[], Awaitable[bool]]) -> bool:
        """The run stopped here at a clean point (this replica shuts down): write what is new, then let
        another replica have it (`release`). Readers here go on from the store, as after a take-over."""
        try:
            owned = await self.flush()
            async with self._lock:
                self._finished = True
                released = owned and await release()
        except StorageError as exc:  # its lease runs out as this replica leaves; another adopts it then
            logger.warning("response %s not handed over (%s); another replica adopts it when this one's lease ends", self._id, exc)
            released = False
        self.taken_over = True
        self._settle()
        return released

    def follow(self) -> AsyncIterator[Batch]:
        """The log's batches as they are written, until the last; merged when a reader is behind. After a
        take-over the rest of the stream is the other replica's, in the store (`taken_over`)."""
        return follow_batches(self._log.batches, lambda: self._written, lambda: self._settled, self._wakeup)

    def _settle(self) -> None:
        self._settled = True
        self._wakeup.set()

    def _frames(self, end: int) -> Frames:
        return numbered_frames(self._log.batches[self._written : end])
