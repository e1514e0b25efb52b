"""A scripted engine call (`Chunks`, engine/completion.py) and the loop's objects around one turn, made
in process: a real `Dialog`, `Toolset` and `ResponseOutput`, fake services where nothing is used."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator

from gateway.config import parse_config
from gateway.engine.completion import EngineChunk, EngineUsage, FinishReason
from gateway.engine.harmony import encoding
from gateway.metrics import Metrics
from gateway.responses.events.output import ResponseOutput
from gateway.responses.history.dialog import Dialog
from gateway.responses.shapes.request import ResponsesRequest
from gateway.responses.tools import CallBudget, ToolContext, Toolset


def model_tokens(text: str) -> list[int]:
    """What the model writes, in Harmony's text form (special tokens spelled out), as token ids."""
    return encoding().encode(text, allowed_special="all")


class ScriptedCall:
    """One engine call whose chunks are given: each a list of token ids; the last ends with `finish`."""

    def __init__(self, chunks: list[list[int]], finish: FinishReason = FinishReason.STOP, prompt_tokens: int = 0) -> None:
        self._chunks = chunks
        self._finish = finish
        self._prompt_tokens = prompt_tokens
        self.usage = EngineUsage()
        self.resumed = False
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[EngineChunk]:
        for number, ids in enumerate(self._chunks):
            yield EngineChunk(list(ids), self._finish if number == len(self._chunks) - 1 else None)
        self.usage = EngineUsage(self._prompt_tokens, sum(len(ids) for ids in self._chunks), 0)

    async def aclose(self) -> None:
        self.closed = True


def chunked(tokens: list[int], size: int) -> list[list[int]]:
    return [tokens[start : start + size] for start in range(0, len(tokens), size)] or [[]]


@dataclass
class FakeServices:
    """What a tool may use of the app (ToolNeeds), with nothing behind what these tests do not reach."""

    config: Any = field(default_factory=lambda: parse_config({"engine": {"url": "http://engine.invalid"}}))
    metrics: Metrics = field(default_factory=Metrics)
    files: Any = None
    skills: Any = None
    vector_stores: Any = None
    mcp: Any = None
    sandbox: Any = None
    browser: Any = None


async def toolset_for(request: dict[str, Any], output: ResponseOutput, dialog: Dialog) -> Toolset:
    """The request's tools, prepared over `dialog` as a run prepares them (nothing provisioned)."""
    body = ResponsesRequest.model_validate({"model": "gpt-oss-120b", "input": "hi"} | request)
    context = ToolContext(FakeServices(), body, "tenant", output, CallBudget(body.max_tool_calls), list(body.tools), body.tool_choice)
    toolset = Toolset(context)
    await toolset.prepare(dialog, provision=False)
    return toolset
