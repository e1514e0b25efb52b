"""Background runs that outlive their replica: the checkpoint a run writes with its events, and how
another replica goes on from it.

A running background response writes, in the same transaction as its events (journal.py), where it
stands: the dialog as it was when the engine call in progress began, the output items ended by then, and
the tokens of that call whose events are out. When its replica's lease runs out, another replica takes
the run over (a compare-and-set on its owner, storage/response_store.py) and goes on from there: it plans the request
again, puts the dialog back, parses the call's tokens again with its events muted (they were sent; the
items' ids follow from the response's id, so they are the ones the client saw), and asks the engine to
continue the prompt that ends with those tokens. Its events go on at the next sequence number.

A tool call is never made twice: its tokens are written before it runs (`Journal.flush`), and a call an
adopter finds in flight is taken up by its tool (`Tool.resume`), not made again: python collects the
result its kernel kept, the browser (which only reads) is asked again, and for any other the model is
told the call was interrupted.

What the checkpoint holds, and how it is put back, is the run state's own (run_state.py); the run adopts
(`ResponseRun.adopt`); this module replays the call in progress.
"""

from __future__ import annotations

from typing import AsyncIterator

from ...engine.completion import Chunks, EngineChunk, EngineUsage
from ..events.output import ResponseOutput
from .run_state import Checkpoint


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

    @property
    def resumed(self) -> bool:
        # The engine goes on from the checkpoint's tokens without the call's grammar.
        return self._engine is not None

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
