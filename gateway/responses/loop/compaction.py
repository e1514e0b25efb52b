"""Compaction: a conversation that outgrows the context goes on with a summary the model wrote of it in
place of its old turns.

The summary is written by the model itself, in one engine call: the conversation as it stands, then
the instruction below as a user turn, no tools. What the model reads afterwards is the user's own
messages (and the developer's), in order, then the summary as the model's answer: the same whether
compaction ran inside a response (`context_management`, run.py) or through `POST /v1/responses/compact`,
whose `compaction` item, sealed like reasoning's `encrypted_content`, brings the summary back as input.
The dialog's state (python sessions, MCP listings, browser pages, loaded tools) is not text and is kept."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

from openai_harmony import Message, Role
from pydantic import Field

from ...core.ids import new_id
from ...core.models import StrictModel
from ...engine.completion import Sampling
from ...engine.harmony import Preamble
from ...engine.routing import ModelEngine
from ...errors import APIError
from ...protocol import EventType, ItemStatus
from ..shapes.input_models import InputItem
from ..shapes.items import Event, Events, MessageOutput, OutputItem
from ..shapes.output_items import CompactionShape
from ..shapes.request import ResponsesRequest
from .needs import ResponsesNeeds
from .side_call import final_answer, text_of

# The one instruction gpt-oss summarises with, tuned for what an agent needs to go on working.
INSTRUCTION = (
    "Context compaction: the conversation above is about to be replaced by a summary that you write now, "
    "and you will continue from that summary alone (the user's messages are kept as they are). Write it for "
    "yourself: the task and its constraints, what has been done so far and with what results (including the "
    "latest tool outputs you still need: numbers, names, paths, identifiers), what remains to do, and anything "
    "the user asked for that is not finished. Be complete but concise; do not call any tool."
)
MAX_SUMMARY_TOKENS = 4096
MIN_SUMMARY_TOKENS = 256  # room in the context a summary needs at least


@dataclass(frozen=True)
class Summary:
    text: str
    input_tokens: int
    output_tokens: int


class CompactRequest(StrictModel):
    """`POST /v1/responses/compact`, as the openai SDK sends it."""

    model: str
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = Field(None, max_length=256)
    prompt_cache_retention: Literal["in_memory", "24h"] | None = None
    service_tier: Literal["auto", "default"] | None = None
    prompt_cache_options: Any = None
    image: None = Field(None, description="gpt-oss reads no images")

    def as_request(self) -> ResponsesRequest:
        """The conversation to compact, planned as a response's would be."""
        return ResponsesRequest(model=self.model, input=self.input or [], previous_response_id=self.previous_response_id)


async def summarize(
    services: ResponsesNeeds,
    engine: ModelEngine,
    messages: list[Message],
    session_key: str,
    effort: str | None = None,
    instructions: str | None = None,
    tenant: str = "",
) -> Summary:
    """The model's summary of `messages`: one engine call, its final answer (or, cut off, what it wrote)."""
    preamble = Preamble(effort=effort or "low", instructions=instructions)
    prompt = await services.renderer.prompt(preamble, [*messages, Message.from_role_and_content(Role.USER, INSTRUCTION)], tenant)
    room = (await engine.model()).max_model_len
    room = MAX_SUMMARY_TOKENS if room is None else min(MAX_SUMMARY_TOKENS, room - len(prompt))
    if room < MIN_SUMMARY_TOKENS:
        raise APIError(
            400, "The conversation is too long to be summarised within the model's context.", param="input", code="context_length_exceeded"
        )
    answer = await final_answer(engine, prompt, Sampling(max_tokens=room), session_key)
    return Summary(answer.text or "(no summary was written)", answer.input_tokens, answer.output_tokens)


def user_texts(messages: list[Message]) -> list[str]:
    return [text_of(message) for message in messages if message.author.role == Role.USER]


class CompactionOutput(OutputItem):
    """A compaction inside a response: added as the summary is asked for, done with it sealed."""

    type = "compaction"
    id_prefix = "cmp"

    def __init__(self, output_index: int) -> None:
        super().__init__(output_index)
        self.encrypted_content = ""

    def compacting(self, events: Events) -> list[Event]:
        added = self.added(events)
        return [added, self._event(events, EventType.COMPACTION_COMPACTING)]

    def sealed(self, events: Events, encrypted_content: str) -> list[Event]:
        self.encrypted_content, self.status = encrypted_content, ItemStatus.COMPLETED
        return [self.done(events)]

    def as_dict(self) -> CompactionShape:
        return {"id": self.id, "type": "compaction", "encrypted_content": self.encrypted_content, "created_by": None}


def compacted_response(messages: list[Message], summary: Summary, encrypted_content: str) -> dict[str, Any]:
    """`POST /v1/responses/compact`'s answer: every user message, then one compaction item."""
    users = [
        {
            "id": MessageOutput.fresh_id(),
            "type": "message",
            "role": "user",
            "status": ItemStatus.COMPLETED,
            "content": [{"type": "input_text", "text": text}],
        }
        for text in user_texts(messages)
    ]
    compaction = {"id": CompactionOutput.fresh_id(), "type": "compaction", "encrypted_content": encrypted_content, "created_by": None}
    return {
        "id": new_id("resp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "output": [*users, compaction],
        "usage": {
            "input_tokens": summary.input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": summary.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": summary.input_tokens + summary.output_tokens,
        },
    }
