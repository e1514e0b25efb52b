"""A turn's run as the session follows it: its Responses events in order from a sequence number on, and its
final record. From this process's own log where the run is here (started here, or adopted here), else from
the store, which the replica running it keeps up to date: so whichever replica follows the run, a replica
that took the following over from a dead one included, reads the same events in the same order."""

from __future__ import annotations

from typing import Any, AsyncIterator, Mapping

import anyio
import orjson

from ..responses.events.log import Batch, sequence_number
from ..responses.loop.follow import follow_stored
from ..responses.run_service import RunService
from .needs import AgentsNeeds


async def run_events(services: AgentsNeeds, response_id: str, tenant: str, after: int) -> AsyncIterator[Batch]:
    """The run's events after sequence number `after`, batch by batch, until its last."""
    live = RunService(services).live(response_id, tenant)
    if live is not None and after + 1 >= live.first_logged:
        async for batch in live.follow():
            fresh = [event for event in batch if sequence_number(event) > after]
            if fresh:
                after = sequence_number(fresh[-1])
                yield fresh
        if not live.taken_over:  # else another replica took the run over: the rest as it stores it
            return
    async for frames in follow_stored(services.store, response_id, after):
        yield [_parsed(frame) for frame in frames.split(b"\n\n") if frame.strip()]


def _parsed(frame: bytes) -> dict[str, Any]:
    data = frame[frame.index(b"data: ") + 6 :]
    event: dict[str, Any] = orjson.loads(data)
    return event


async def final_response(services: AgentsNeeds, response_id: str, tenant: str) -> Mapping[str, Any] | None:
    """The run's Response once its final record is stored: the turn's next run reads the conversation that
    record completes, and a replica taking over reads the record itself. None if it is gone (deleted)."""
    with anyio.move_on_after(FINAL_WRITE_WAIT_S):
        while (state := await services.store.status(response_id)) is not None and state[1] is not None:
            await anyio.sleep(FINAL_WRITE_POLL_S)  # its last events are out; its record follows at once
    stored = await services.store.get(response_id, tenant, dialog=False)
    return stored.response if stored is not None else None


FINAL_WRITE_WAIT_S = 5.0
FINAL_WRITE_POLL_S = 0.005
