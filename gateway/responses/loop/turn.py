"""One engine call, streamed into the response's output: tokens → parser → items and events.

This is the per-token path. Each chunk of tokens is parsed once; a message's text deltas go straight to
its item's prefix-built frames, and only what needs it (stop sequences, citations, logprobs) takes the
slower path. Messages the model finishes go to the dialog; a call's header goes to the toolset, which
claims it and opens its item.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from ...engine.completion import Chunks, FinishReason
from ...engine.parser import HarmonyStreamParser, MalformedHarmony, MessageFinished, MessageStarted, TextDelta
from ...errors import APIError
from ...protocol import ItemStatus
from ..events.citations import CitationRewriter, Piece
from ..events.output import ResponseOutput
from ..events.tool_call import ToolCall
from ..history.dialog import Dialog
from ..shapes.items import Delta, Event, LiveArgumentsItem, MessageOutput, OutputItem, ReasoningOutput, TextItem
from ..shapes.response_object import Usage
from ..tools import Toolset
from .logprobs import ContentLogprob, parse_with_logprobs
from .stops import StopMatcher
from .summaries import Summaries

logger = logging.getLogger("gateway.responses")


@dataclass
class TurnOutcome:
    finish_reason: FinishReason | None = None
    stopped: bool = False  # a stop sequence ended the generation before the engine did
    stop_sequence: str | None = None  # which one
    call: ToolCall | None = None  # the call the model's turn ended with
    refused: str | None = None  # why the final answer was not shown: it breaks the request's format (CheckAnswer)


# Where no grammar held the final answer to the request's format: why it breaks it (None: it fits).
CheckAnswer = Callable[[str], Awaitable[str | None]]


@dataclass(frozen=True)
class AnswerOptions:
    """How the model's messages are shown: stop sequences (Chat), logprobs, sealed reasoning."""

    stops: tuple[str, ...] = ()
    logprob_count: int | None = None  # alternatives per token, when logprobs are asked for
    seal: Callable[[str], str] | None = None  # reasoning.encrypted_content: seals the reasoning's text


class Turn:
    def __init__(self, output: ResponseOutput, dialog: Dialog, toolset: Toolset, options: AnswerOptions, summaries: Summaries | None = None) -> None:
        self.output = output
        self.dialog = dialog
        self.toolset = toolset
        self.options = options
        self.summaries = summaries  # reasoning summaries, where the request asks for them
        self.outcome = TurnOutcome()

    async def stream(
        self,
        stream: Chunks,
        prefill: list[int],
        count: Callable[[Usage], None],
        prompt_length: int,
        first_token: Callable[[], None] | None,
        check_answer: CheckAnswer | None = None,
    ) -> TurnOutcome:
        """Stream one engine call until the engine stops (or a stop sequence does); `first_token` is
        called when its first tokens arrive. With `check_answer`, the final answer is held back until it
        is whole and shown only if it fits the request's format (`outcome.refused` says why it did not)."""
        outcome, options, dialog = self.outcome, self.options, self.dialog
        parser = HarmonyStreamParser()
        events, emit, emit_tokens = self.output.events, self.output.emit, self.output.emit_tokens
        item: OutputItem | None = None
        stopper: StopMatcher | None = None  # the open message's stop sequences, when the request has any
        rewriter: CitationRewriter | None = None  # the open message's citations, when the browser is on
        held: list[str] | None = None  # the final answer's text, while it is held back to be checked
        tokens = 0
        try:
            async for chunk in stream:
                tokens += len(chunk.token_ids)
                if first_token is not None:
                    first_token()
                    first_token = None
                batch: list[Event | Delta] = []
                generated = chunk.token_ids  # the model's own: without a prefill put before them
                if prefill:  # a forced call's header goes through the parser as if the model had written it
                    chunk.token_ids = prefill + chunk.token_ids
                    if chunk.logprobs is not None:
                        chunk.logprobs = [*(None for _ in prefill), *chunk.logprobs]
                    prefill = []
                if options.logprob_count is None:
                    parsed_events: list[Any] = parser.feed(chunk.token_ids)
                else:
                    parsed_events = parse_with_logprobs(parser, chunk, options.logprob_count)
                for parsed in parsed_events:
                    if type(parsed) is TextDelta:
                        if not isinstance(item, TextItem):  # none open, a web_search_call (shows its action only), ...
                            if held is not None:
                                held.append(parsed.text)
                            elif isinstance(item, LiveArgumentsItem):  # ... or a call whose arguments stream as its own events
                                batch += item.feed(events, parsed.text)
                        elif stopper is None and rewriter is None:
                            batch.append(item.delta(events, parsed.text))
                        elif self._visible(item, parsed.text, stopper, rewriter, batch):
                            # A stop sequence: the message ends here, and with it the generation.
                            outcome.stop_sequence = stopper.matched if stopper is not None else None
                            item = stopper = rewriter = None
                            outcome.finish_reason, outcome.stopped = FinishReason.STOP, True
                            break
                    elif type(parsed) is MessageStarted:
                        if check_answer is not None and parsed.recipient is None and parsed.channel == "final":
                            held, dialog.owner = [], None  # its item opens once it is known to fit
                            continue
                        item = self._open_item(parsed)
                        dialog.owner = item.id if item is not None else None
                        if item is not None:
                            batch += item.opened(events)
                        is_message = isinstance(item, MessageOutput)
                        stopper = StopMatcher(options.stops) if options.stops and is_message else None
                        citations = self.toolset.citations
                        rewriter = CitationRewriter(citations) if citations is not None and is_message else None
                    elif type(parsed) is ContentLogprob:
                        if isinstance(item, MessageOutput):  # reported for the visible answer only
                            item.pending_logprobs.append(parsed.entry)
                    else:
                        assert isinstance(parsed, MessageFinished)
                        dialog.append(parsed.message)
                        if held is not None and check_answer is not None:
                            batch += await self._checked("".join(held), check_answer)
                            held = None
                            continue
                        batch += await self._finished(parsed, item, stopper, rewriter)
                        item = stopper = rewriter = None
                if chunk.finish_reason is not None:
                    outcome.finish_reason = chunk.finish_reason
                emit_tokens(batch, generated, chunk.finish_reason)
                if outcome.stopped:
                    break  # a stop sequence: the engine request is aborted when the stream closes
        finally:
            # What the engine did is counted however the call ended: done, failed, cancelled.
            counted = stream.usage
            count(
                Usage(counted.prompt_tokens or prompt_length, counted.cached_tokens, max(counted.completion_tokens, tokens), parser.reasoning_tokens)
            )
        unended = parser.unended() if outcome.finish_reason is FinishReason.STOP and not outcome.stopped else None
        if unended is not None:  # the engine stopped on its own: the message is whole without its end token
            dialog.append(unended.message)
            if held is not None and check_answer is not None:
                emit(await self._checked("".join(held), check_answer))
            else:
                emit(await self._finished(unended, item, stopper, rewriter))
            item = None
        # Anything still open was cut off by max_tokens.
        if item is not None:
            emit([*self._held_back(item, stopper, rewriter), *item.closed(events, ItemStatus.INCOMPLETE)])
        partial = parser.partial_message()
        if partial is not None:
            dialog.append(partial)
        if parser.recovered:  # the model wrote broken Harmony: what could be read was, the rest dropped
            logger.warning("the model's output was repaired: %s", "; ".join(parser.recovered[:4]))
            if parser.finished == 0 and partial is None:  # nothing readable is left
                raise MalformedHarmony(f"the model's output is not valid Harmony: {parser.recovered[0]}")
        if outcome.finish_reason is None:
            outcome.finish_reason = FinishReason.STOP
        elif outcome.finish_reason is FinishReason.ABORT:
            raise APIError(502, "The engine aborted the generation.", type="server_error", code="engine_error")
        return outcome

    async def _finished(
        self, parsed: MessageFinished, item: OutputItem | None, stopper: StopMatcher | None, rewriter: CitationRewriter | None
    ) -> list[Event | Delta]:
        """A message is complete: a call goes to its tool; a message or reasoning item closes."""
        call = self.outcome.call
        if call is not None and call.tool is not None:
            return [*await self.toolset.written(call, "".join(getattr(part, "text", "") for part in parsed.message.content))]
        if item is None:
            return []
        events = self.output.events
        batch = self._held_back(item, stopper, rewriter)
        if isinstance(item, MessageOutput):
            batch += [item.annotated(events, annotation) for annotation in self.toolset.annotations(item.text)]
        if isinstance(item, ReasoningOutput) and self.summaries is not None:
            return [*batch, *self.summaries.reasoning_ended(item)]  # its summary, and its end, follow
        return [*batch, *item.closed(events)]

    async def _checked(self, text: str, check_answer: CheckAnswer) -> list[Event | Delta]:
        """A final answer held back: shown whole if it fits the request's format; otherwise not at all."""
        self.outcome.refused = await check_answer(text)
        if self.outcome.refused is not None:
            return []
        events = self.output.events
        item = self.output.add(lambda index: MessageOutput(index, "final_answer", with_logprobs=self.options.logprob_count is not None))
        self.dialog.owners[-1] = item.id  # the answer's message belongs to its item (conversations, stored dialogs)
        return [*item.opened(events), item.delta(events, text), *item.closed(events)]

    def _open_item(self, header: MessageStarted) -> OutputItem | None:
        """The item a message streams as: reasoning, a message, or a call's (when its tool claims it)."""
        output, options = self.output, self.options
        if header.recipient is not None:
            self.outcome.call = call = ToolCall(header.recipient, header.channel)
            return self.toolset.open_call(call)
        if header.channel == "analysis":
            return output.add(lambda index: ReasoningOutput(index, options.seal))
        phase = "commentary" if header.channel == "commentary" else "final_answer"
        return output.add(lambda index: MessageOutput(index, phase, with_logprobs=options.logprob_count is not None))

    def _visible(self, item: Any, text: str, stopper: StopMatcher | None, rewriter: CitationRewriter | None, batch: list[Event | Delta]) -> bool:
        """A message's text as the client gets it: citations made links (each announced as an annotation
        after the delta that ends it), cut at a stop sequence. True when a stop sequence ended the message."""
        events = self.output.events
        for piece in rewriter.feed(text) if rewriter is not None else [Piece(text)]:
            shown, stopped = stopper.feed(piece.text) if stopper is not None else (piece.text, False)
            if shown:
                batch.append(item.delta(events, shown))
            if stopped:
                batch += item.closed(events)
                return True
            if piece.annotation is not None:
                batch.append(item.annotated(events, piece.annotation))
        return False

    def _held_back(self, item: Any, stopper: StopMatcher | None, rewriter: CitationRewriter | None) -> list[Event | Delta]:
        """The end of a message: what could have begun a citation or a stop sequence, once it is clear it did
        not (both watch messages only)."""
        held = "".join(piece.text for piece in rewriter.flush()) if rewriter is not None else ""
        if stopper is not None:
            held = stopper.feed(held)[0] + stopper.flush()
        return [item.delta(self.output.events, held)] if held else []
