"""An engine call a run makes beside its dialog (a compaction's summary, a reasoning item's summary): a
prompt of its own, no tools, and the model's final answer as text."""

from __future__ import annotations

from dataclasses import dataclass

from openai_harmony import Message

from ...engine.completion import Sampling
from ...engine.harmony import Prompt
from ...engine.parser import HarmonyStreamParser, MessageFinished
from ...engine.routing import ModelEngine


@dataclass(frozen=True)
class Answer:
    text: str  # the final answer; where the call was cut off, what it had written of it
    input_tokens: int
    output_tokens: int


async def final_answer(engine: ModelEngine, prompt: Prompt, sampling: Sampling, session_key: str | None = None) -> Answer:
    stream = await engine.generate(prompt, sampling, session_key)
    parser, written, final = HarmonyStreamParser(), 0, ""
    try:
        async for chunk in stream:
            written += len(chunk.token_ids)
            for event in parser.feed(chunk.token_ids):
                if isinstance(event, MessageFinished) and event.message.channel == "final":
                    final = text_of(event.message)
    finally:
        await stream.aclose()
    if not final:
        partial = parser.partial_message()
        final = text_of(partial) if partial is not None and partial.channel == "final" else ""
    return Answer(final.strip(), len(prompt), written)


def text_of(message: Message) -> str:
    return "".join(getattr(part, "text", "") for part in message.content)
