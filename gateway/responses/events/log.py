"""The event log of one response: its run appends, any number of readers follow.

A response's run is a task of its own (`Runs`, core/runs.py); it never waits for a reader, and a reader never holds
the run back. Every way of reading a response is a reader of this log: the SSE stream, the
non-streamed result (which waits for the end), and later a resumed stream. Readers hold no cancel
scope and the run yields nothing to them, so a reader that goes away, at any point, leaves the run
in a defined state (PEP 789's hazard of cancel scopes across `yield` cannot arise).

The log holds what the response's own items hold (their text, each tool output once more in its
event), so its size is bounded by the response's limits: max_output_tokens, max_turns and the tools'
output caps.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable, Sequence

from ...protocol import event_frame
from ..shapes.items import Delta, Event

Batch = Sequence[Event | Delta]

MAX_MERGED_BATCHES = 256  # a reader that fell behind gets several batches in one write, up to this many


class Wakeup:
    """Readers waiting for something new; an event is made only while one waits.

    asyncio's Event rather than anyio's: a reader waits once a token, and anyio's wrapper (its backend
    looked up to make it, a checkpoint in its wait) costs 1.4 µs more a wake. The gateway runs on asyncio."""

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    def set(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self) -> None:
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()


async def follow_batches(
    batches: Sequence[Batch], readable: Callable[[], int], ended: Callable[[], bool], wakeup: Wakeup, start: int = 0
) -> AsyncIterator[Batch]:
    """The batches from `start` on as `readable()` lets them be read, until `ended()` and all are read. A
    reader that is behind gets what is waiting merged into one batch, so a slow client costs fewer writes."""
    read = start
    while True:
        available = readable()
        if read < available:
            end = min(available, read + MAX_MERGED_BATCHES)
            if end - read == 1:
                yield batches[read]
            else:
                yield [event for batch in batches[read:end] for event in batch]
            read = end
        elif ended():
            return
        else:
            await wakeup.wait()


class EventLog:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.closed = False
        self._wakeup = Wakeup()

    def append(self, batch: Batch) -> None:
        """Add the events one step of the run gave rise to; readers waiting for more wake up."""
        if batch:
            self.batches.append(batch)
            self._wakeup.set()

    def close(self) -> None:
        """No more events: readers finish once they have read everything."""
        self.closed = True
        self._wakeup.set()

    async def wait_closed(self) -> None:
        while not self.closed:
            await self._wakeup.wait()

    async def wait_beyond(self, count: int) -> None:
        """Wait until the log holds more than `count` batches, or is closed."""
        while len(self.batches) <= count and not self.closed:
            await self._wakeup.wait()

    def follow(self, start: int = 0) -> AsyncIterator[Batch]:
        """Every batch from `start` on, as soon as it is appended, until the log is closed."""
        return follow_batches(self.batches, lambda: len(self.batches), lambda: self.closed, self._wakeup, start)


def sequence_number(event: Event | Delta) -> int:
    return event.sequence_number if isinstance(event, Delta) else event["sequence_number"]


def numbered_frames(batches: list[Batch]) -> list[tuple[int, bytes]]:
    return [(sequence_number(event), sse_frame(event)) for batch in batches for event in batch]


def sse_frame(event: Event | Delta) -> bytes:
    """The SSE frame of one event: `event: TYPE`, `data: JSON`, a blank line."""
    if isinstance(event, Delta):
        return event.frame()
    return event_frame(event)
