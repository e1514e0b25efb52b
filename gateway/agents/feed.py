"""A session's live events for its subscribers, on any replica.

Every event a session emits is written to its log in the transaction that changed the session
(storage/agent_store.py), and the database tells every replica (`notify`) once it commits. Here, one tail
per session with subscribers reads the new rows once and hands them to each of its subscribers from memory:
100 subscribers cost one query per change, not 100. The Agents API's stream is live only: a subscriber gets
what is written after it subscribed."""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from runtime.supervision import Supervisor

from ..storage import StorageError
from ..storage.agent_store import CHANNEL, AgentStore

KEPT = 4096  # frames a tail keeps for subscribers that read behind; one further behind is ended
POLL_S = 5.0  # how long a tail waits for a notification before it looks anyway (one lost is not a hang)


class _Tail:
    def __init__(self, after: int) -> None:
        self.read_to = after  # the last sequence number read from the log
        self.frames: list[tuple[int, bytes]] = []
        self.changed = asyncio.Event()  # set when the log grew (told by the database)
        self.arrived = asyncio.Condition()  # subscribers wait on it for new frames
        self.subscribers = 0
        self.failed = False

    async def add(self, rows: list[tuple[int, bytes]]) -> None:
        """Rows numbered on from `read_to`: kept (the oldest let go, in bulk, past twice KEPT), readers woken."""
        self.frames.extend(rows)
        if len(self.frames) > 2 * KEPT:
            del self.frames[:-KEPT]
        self.read_to = rows[-1][0]
        async with self.arrived:
            self.arrived.notify_all()


class Subscription:
    """One subscriber's frames. It counts as a subscriber from `subscribe` until it is closed: by its end, by
    `close()`, or, never iterated (a response that failed before its body was sent), when it is collected."""

    def __init__(self, tail: _Tail) -> None:
        self._tail, self._after, self._open = tail, tail.read_to, True

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._frames()

    def close(self) -> None:
        if self._open:
            self._open = False
            self._tail.subscribers -= 1
            if self._tail.subscribers == 0:
                self._tail.changed.set()  # the tail sees it has no one left and ends

    def __del__(self) -> None:
        self.close()

    async def _frames(self) -> AsyncIterator[bytes]:
        tail, after = self._tail, self._after
        try:
            while self._open:
                async with tail.arrived:
                    await tail.arrived.wait_for(lambda after=after: tail.read_to > after or tail.failed)  # type: ignore[misc]
                if tail.failed:
                    return
                start = after + 1 - tail.frames[0][0]  # the frames are numbered without a gap
                if start < 0:
                    return  # fell further behind than the tail keeps: the client reconnects
                after = tail.read_to
                yield b"".join(frame for _, frame in tail.frames[start:])
        finally:
            self.close()


class SessionFeed:
    def __init__(self, store: AgentStore, tasks: Supervisor) -> None:
        self._store, self._tasks = store, tasks
        self._tails: dict[str, _Tail] = {}
        store.db.listen(CHANNEL, self._told)

    def _told(self, session_id: str) -> None:
        tail = self._tails.get(session_id)
        if tail is not None:
            tail.changed.set()

    async def subscribe(self, session_id: str) -> "Subscription":
        """Subscribed when this returns (before the first frame is asked for): nothing written after is missed."""
        tail = self._tails.get(session_id)
        if tail is None or tail.subscribers == 0:  # none, or one ending
            tail = _Tail(await self._store.last_event(session_id))
            current = self._tails.get(session_id)
            if current is None or current.subscribers == 0:
                self._tails[session_id] = tail
                self._tasks.start_soon(self._follow, session_id, tail, name=f"agent session feed {session_id}")
            else:
                tail = current
        tail.subscribers += 1  # before the tail's task first runs: it ends when this falls back to 0
        return Subscription(tail)

    async def deliver(self, session_id: str, first: int, frames: list[bytes]) -> None:
        """Events this replica just wrote (committed): handed to its subscribers at once, without reading
        them back. Those of other replicas come by the database's notification."""
        tail = self._tails.get(session_id)
        if tail is None or first != tail.read_to + 1 or tail.failed:
            return  # not next in line (the tail reads the log itself)
        await tail.add(list(enumerate(frames, start=first)))

    async def _follow(self, session_id: str, tail: _Tail) -> None:
        try:
            while tail.subscribers > 0:
                rows = [row for row in await self._store.events_after(session_id, tail.read_to) if row[0] > tail.read_to]
                if rows:  # (those delivered meanwhile dropped)
                    await tail.add(rows)
                    continue
                tail.changed.clear()
                try:
                    await asyncio.wait_for(tail.changed.wait(), POLL_S)
                except asyncio.TimeoutError:
                    pass
        except StorageError:
            tail.failed = True
            async with tail.arrived:
                tail.arrived.notify_all()
        finally:
            if self._tails.get(session_id) is tail:
                del self._tails[session_id]
