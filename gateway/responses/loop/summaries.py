"""Reasoning summaries (`reasoning.summary`: auto, concise, detailed): what the model writes of each of its
reasoning items for the user, in OpenAI's style (a bold title line, then a few sentences).

gpt-oss writes no summaries of its own, so each is a short engine call of its own over the item's text,
begun the moment the reasoning ends and run while the main generation goes on. The item's text part
closes at once; its summary part and its end follow when the summary is written, as OpenAI streams them
(`reasoning_summary_part.added`, `reasoning_summary_text.delta` and `.done`, `reasoning_summary_part.done`,
then `output_item.done`), while the next items already stream. An engine call's summaries all end before
the call counts as ended. A summary that fails or runs past `server.reasoning_summary_timeout_s` never fails
the response: its item ends without one. Its tokens count in the response's usage. An engine call begins
at most `server.reasoning_summaries_per_call` summaries: the reasoning items past them end without one (a
model that writes hundreds of analysis messages costs no more engine calls than that).

A background run's checkpoint holds the summaries whose events are out (`ResponseOutput.summaries`): a
replica that adopts the run gives those again, silently, and writes only the ones never shown.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import AsyncIterator

import anyio
from anyio.abc import TaskGroup
from openai_harmony import Message, Role

from ...engine.completion import Sampling
from ...engine.harmony import Preamble
from ...engine.routing import ModelEngine
from ...protocol import EventType, ItemStatus
from ..shapes.items import Event, Events, ReasoningOutput
from ..shapes.response_object import Usage
from .needs import ResponsesNeeds
from .run_state import RunState
from .side_call import final_answer

logger = logging.getLogger("gateway.responses")

INSTRUCTION = (
    "Summarize the reasoning below for the user who is waiting on it, in the first person and the present tense. "
    "Write a short bold title on the first line (**like this**), a blank line, then {length}. Say what is being "
    "worked out and why; leave out the details of each step. Write only the summary."
)
LENGTHS = {"concise": "one sentence", "detailed": "four to six sentences", "auto": "one to three sentences"}


def wanted(style: str | None, setting: str) -> bool:
    """Whether a request's `reasoning.summary` asks for summaries that `server.reasoning_summaries` allows."""
    return setting == "on" and style in ("auto", "concise", "detailed")


class Summaries:
    """The summaries of one run's reasoning items."""

    def __init__(self, services: ResponsesNeeds, engine: ModelEngine, style: str, state: RunState, tenant: str) -> None:
        self._services = services
        self._tenant = tenant
        self._begun = 0  # summaries begun in this engine call: at most `reasoning_summaries_per_call`
        self._engine = engine  # the run's model
        self._instruction = INSTRUCTION.format(length=LENGTHS.get(style, LENGTHS["auto"]))
        self._state = state
        self._output = state.output
        self._tasks: TaskGroup | None = None

    @asynccontextmanager
    async def during_call(self) -> AsyncIterator[None]:
        """One engine call: the summaries its reasoning items begin are all ended when it exits."""
        async with anyio.create_task_group() as tasks:
            self._tasks, self._begun = tasks, 0
            try:
                yield
            finally:
                self._tasks = None

    def cancel(self) -> None:
        """The engine call failed: its summaries are not waited for (their items end with the response)."""
        if self._tasks is not None:
            self._tasks.cancel_scope.cancel()

    def reasoning_ended(self, item: ReasoningOutput) -> list[Event]:
        """The item's text is whole: its part closes now; its summary and end come when written."""
        batch = item.text_done(self._output.events)
        given = self._output.summaries.get(item.output_index)
        if given is not None and self._output.muted:  # an adopted call, parsed again: its summary was shown
            return [*batch, *summarized(self._output.events, item, given)]
        assert self._tasks is not None, "a reasoning item ended outside an engine call"
        if self._begun >= self._services.config.server.reasoning_summaries_per_call:  # a model that writes hundreds
            self._output.when_unmuted(lambda: self._show(item, ""))  # ends without one, as a failed summary does
            return batch
        self._begun += 1
        self._tasks.start_soon(self._summarize, item)
        return batch

    async def _summarize(self, item: ReasoningOutput) -> None:
        config = self._services.config.server
        summary = ""
        with anyio.move_on_after(config.reasoning_summary_timeout_s):
            try:
                summary = await self._write(item.text)
            except Exception as exc:  # never the response's failure: the item ends without a summary
                logger.warning("a reasoning summary could not be written: %s", exc)
        self._output.when_unmuted(lambda: self._show(item, summary))

    def _show(self, item: ReasoningOutput, summary: str) -> None:
        output = self._output
        output.summaries[item.output_index] = summary  # with its events, in one step: a checkpoint has both or neither
        output.emit(summarized(output.events, item, summary))

    async def _write(self, reasoning: str) -> str:
        services = self._services
        ask = Message.from_role_and_content(Role.USER, f"{self._instruction}\n\nThe reasoning:\n\n{reasoning}")
        prompt = await services.renderer.prompt(Preamble(effort="low"), [ask], self._tenant)
        sampling = Sampling(max_tokens=services.config.server.reasoning_summary_max_tokens)
        answer = await final_answer(self._engine, prompt, sampling, self._state.dialog.session_key)
        self._state.count(Usage(input=answer.input_tokens, output=answer.output_tokens))
        return answer.text


def summarized(events: Events, item: ReasoningOutput, summary: str) -> list[Event]:
    """The item's summary (none where none could be written), as OpenAI streams one: one part; then its end."""
    batch = []
    if summary:
        item.summary = summary
        ids = {"item_id": item.id, "output_index": item.output_index, "summary_index": 0}
        batch = [
            events.make(EventType.REASONING_SUMMARY_PART_ADDED, **ids, part={"type": "summary_text", "text": ""}),
            events.make(EventType.REASONING_SUMMARY_TEXT_DELTA, **ids, delta=summary),
            events.make(EventType.REASONING_SUMMARY_TEXT_DONE, **ids, text=summary),
            events.make(EventType.REASONING_SUMMARY_PART_DONE, **ids, part={"type": "summary_text", "text": summary}),
        ]
    item.status = ItemStatus.COMPLETED
    return [*batch, item.done(events)]
