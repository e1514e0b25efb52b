"""Background runs that outlive their replica: the checkpoint a run writes with its events, and how
another replica goes on from it.

A running background response writes, in the same transaction as its events (journal.py), where it
stands: the dialog as it was when the engine call in progress began, the output items ended by then, and
the tokens of that call whose events are out. When its replica's lease runs out, another replica takes
the run over (a compare-and-set on its owner, store.py) and goes on from there: it plans the request
again, puts the dialog back, parses the call's tokens again with its events muted (they were sent; the
items' ids follow from the response's id, so they are the ones the client saw), and asks the engine to
continue the prompt that ends with those tokens. Its events go on at the next sequence number.

A tool call is never made twice: its tokens are written before it runs (`Journal.flush`), and a call an
adopter finds in flight is taken up by its tool (`Tool.resume`), not made again: python collects the
result its kernel kept, the browser (which only reads) is asked again, and for any other the model is
told the call was interrupted.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from ..core.services import Services
from ..engine import Chunks, EngineChunk, EngineUsage
from ..jsontext import dumps
from ..store import Orphan
from .conversation import Dialog
from .output import ResponseOutput
from .sealed import Purpose
from .turn import Usage

logger = logging.getLogger("gateway.adoption")

WHOLE = -1  # `base` of a dialog written whole (after a compaction rewrote its past)


@dataclass
class TurnStart:
    """The run as an engine call begins: what another replica puts back before parsing the call's tokens."""

    base: int  # where `messages` start in the dialog the request plans (WHOLE: they are all of it)
    messages: list[dict[str, Any]]
    owners: list[str | None]  # the item each of `messages` belongs to (a conversation stores them by item)
    open_calls: dict[str, str]
    state: dict[str, Any]
    items: int  # the output items ended before the call
    usage: dict[str, int]
    turns: int  # engine calls made before this one
    tool_called: bool
    compacted_at: int
    container_id: str | None  # the auto container the run's tools use, made or not yet

    def encode(self) -> str:
        return dumps(self.__dict__)


@dataclass
class Checkpoint:
    turn: TurnStart
    generated: list[int] = field(default_factory=list)  # the call's tokens whose events were sent
    finish_reason: str | None = None  # the engine finished the call
    ended: bool = False  # the call's own events are all out: a tool call it ended with may be running

    @staticmethod
    def encode(turn: str, output: ResponseOutput) -> str:
        """The checkpoint in JSON, the turn's part encoded once per call (it is written many times)."""
        return (
            f'{{"turn":{turn},"generated":{dumps(output.generated)},"finish_reason":{dumps(output.finish_reason)},'
            f'"ended":{"true" if output.call_ended else "false"}}}'
        )

    @classmethod
    def decode(cls, text: str) -> "Checkpoint":
        data = json.loads(text)
        return cls(TurnStart(**data["turn"]), list(data["generated"]), data["finish_reason"], bool(data["ended"]))

    def dialog(self, planned: Dialog) -> Dialog:
        """The dialog as the call began, from the one the request plans (which holds what came before the run)."""
        turn = self.turn
        if turn.base != WHOLE and len(planned.messages) != turn.base:
            # A conversation's items changed since the run began (another response added to it).
            raise ValueError("the dialog the request plans is not the one the run began with")
        dialog = Dialog.from_json(turn.messages, turn.open_calls, turn.state)
        dialog.owners = list(turn.owners)
        if turn.base != WHOLE:  # the planned messages, as they are, before the run's own
            dialog.messages[:0], dialog.owners[:0] = planned.messages, planned.owners
        return dialog

    def usage(self) -> Usage:
        return Usage(**self.turn.usage)


def turn_start(
    dialog: Dialog, base: int, items: int, usage: Usage, turns: int, tool_called: bool, compacted_at: int, container_id: str | None
) -> str:
    start = max(base, 0)
    messages = [message.to_dict() for message in dialog.messages[start:]]
    state = dialog.state()
    return TurnStart(
        base, messages, dialog.owners[start:], dialog.open_calls, state, items, usage.__dict__, turns, tool_called, compacted_at, container_id
    ).encode()


class ReplayStream:
    """The engine call an adopter goes on with: first the tokens the other replica had sent the events of
    (their events muted: the client has them), then the engine's continuation, if the call had not ended."""

    def __init__(self, output: ResponseOutput, checkpoint: Checkpoint, engine: Chunks | None) -> None:
        self._output = output
        self._checkpoint = checkpoint
        self._engine = engine

    @property
    def usage(self) -> EngineUsage:
        # The engine's, read when the call ends (EngineStream replaces it as the usage chunk arrives).
        return self._engine.usage if self._engine is not None else EngineUsage()

    async def __aiter__(self) -> AsyncIterator[EngineChunk]:
        checkpoint = self._checkpoint
        yield EngineChunk(list(checkpoint.generated), checkpoint.finish_reason)
        if not checkpoint.ended:
            self._output.unmute()  # what comes next was never sent
        if self._engine is not None:
            async for chunk in self._engine:
                yield chunk

    async def aclose(self) -> None:
        if self._engine is not None:
            await self._engine.aclose()


async def adopt(services: Services, orphan: Orphan) -> None:
    """Go on with a run whose replica stopped; raises if it cannot be (the caller then ends it as failed)."""
    from .request import ResponsesRequest
    from .run import ResponseRun

    request = ResponsesRequest.model_validate_json(services.sealer.open(orphan.request, Purpose.RUN_REQUEST, orphan.tenant))
    run = ResponseRun(services, request, orphan.tenant)
    await run.resume(orphan.response, Checkpoint.decode(orphan.checkpoint), orphan.next_sequence_number)
    logger.warning(
        "response %s adopted by replica %s from replica %s, whose lease ran out; going on at event %d",
        orphan.response["id"], services.replicas.id, orphan.stalled.owner, orphan.next_sequence_number,
    )  # fmt: skip
