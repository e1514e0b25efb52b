"""Following a background response from the store: what a replica that does not run the response (or a
client resuming after the run ended) reads. The replica running it writes its events as they come
(journal.py); this reads them back in order until the terminal event, which is written in the same
transaction as the final record, or by the replica that ended the run of a dead one."""

from __future__ import annotations

from typing import AsyncIterator

import anyio

from ...protocol import EventType, ends_stream, event_frame
from ...storage import StorageError
from ...storage.response_store import ResponseStore

POLL_S = 0.1  # how often a running response's new events are looked for


async def follow_stored(store: ResponseStore, response_id: str, after: int) -> AsyncIterator[bytes]:
    """The stored events after sequence number `after`, then those still to come, until the last."""
    last, ended = after, False
    try:
        while True:
            rows = await store.events_after(response_id, last)
            if rows:
                frames = []
                for number, frame in rows:
                    frames.append(frame)
                    last = number
                    if ends_stream(frame):
                        yield b"".join(frames)
                        return
                yield b"".join(frames)
                continue
            if ended:
                return
            state = await store.status(response_id)
            if state is None:
                yield _error(last + 1, "not_found", "The response was deleted.")
                return
            if state[1] is None:
                # It ended: its last events were stored with (or before) its end, perhaps after the read
                # above, so one more read takes in any not read yet.
                ended = True
                continue
            await anyio.sleep(POLL_S)
    except StorageError:
        yield storage_unavailable(last + 1)


async def stored_before(store: ResponseStore, response_id: str, after: int, end: int) -> AsyncIterator[tuple[int, bytes]]:
    """The stored events after sequence number `after` and before `end`, all of which are stored already
    (an adopted run's, written by the replica that began it): the last one's number, and their frames."""
    last = after
    while last + 1 < end:
        rows = [(number, frame) for number, frame in await store.events_after(response_id, last) if number < end]
        if not rows:
            return
        last = rows[-1][0]
        yield last, b"".join(frame for _, frame in rows)


def storage_unavailable(sequence_number: int) -> bytes:
    return _error(sequence_number, "storage_unavailable", "The gateway's database became unavailable; resume the stream later.")


def _error(sequence_number: int, code: str, message: str) -> bytes:
    return event_frame({"type": EventType.ERROR, "code": code, "message": message, "param": None, "sequence_number": sequence_number})
