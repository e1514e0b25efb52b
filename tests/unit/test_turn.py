"""One engine call streamed through `Turn` (responses/loop/turn.py), the per-token path, in process: scripted
chunks, a real dialog, toolset and output; what the output's log holds, what the dialog holds, what was
counted."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from gateway.engine.completion import FinishReason
from gateway.protocol import EventType, ItemStatus
from gateway.responses.events.log import sse_frame
from gateway.responses.events.output import ResponseOutput
from gateway.responses.history.dialog import Dialog
from gateway.responses.loop.turn import AnswerOptions, Turn, TurnOutcome
from gateway.responses.shapes.response_object import Usage

from .scripted import ScriptedCall, chunked, model_tokens, toolset_for

WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
ANSWER = "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello there, friend!<|return|>"
CALL = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>'


def _run(
    text: str, request: dict[str, Any], size: int, finish: FinishReason = FinishReason.STOP
) -> tuple[TurnOutcome, ResponseOutput, Dialog, Usage]:
    output, dialog, counted = ResponseOutput(), Dialog(), Usage()

    def count(usage: Usage) -> None:
        counted.input += usage.input
        counted.output += usage.output
        counted.reasoning += usage.reasoning

    async def main() -> TurnOutcome:
        toolset = await toolset_for(request, output, dialog)
        turn = Turn(output, dialog, toolset, AnswerOptions())
        call = ScriptedCall(chunked(model_tokens(text), size), finish, prompt_tokens=7)
        return await turn.stream(call, [], count, 7, None)

    return anyio.run(main), output, dialog, counted


def _events(output: ResponseOutput) -> list[dict[str, Any]]:
    """Every event in the log, as the client reads it (a text delta is written straight to its frame)."""
    frames = b"".join(sse_frame(event) for batch in output.log.batches for event in batch).decode()
    return [json.loads(line[len("data: ") :]) for line in frames.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("size", [1, 3, 50])
def test_an_answer_streams_as_its_items_and_goes_to_the_dialog(size: int) -> None:
    outcome, output, dialog, counted = _run(ANSWER, {}, size)
    assert outcome.finish_reason is FinishReason.STOP and outcome.call is None and not outcome.stopped
    assert [item.as_dict()["type"] for item in output.items] == ["reasoning", "message"]
    message = output.items[1].as_dict()
    assert message["status"] == ItemStatus.COMPLETED and message["content"][0]["text"] == "Hello there, friend!"  # type: ignore[typeddict-item]
    events = _events(output)
    deltas = "".join(event["delta"] for event in events if event["type"] == EventType.OUTPUT_TEXT_DELTA)
    assert deltas == "Hello there, friend!"
    assert [event["sequence_number"] for event in events] == list(range(len(events)))  # none repeated, none skipped
    assert events[-1]["type"] == EventType.OUTPUT_ITEM_DONE
    assert [message.channel for message in dialog.messages] == ["analysis", "final"]
    assert counted.input == 7 and counted.output == len(model_tokens(ANSWER)) and counted.reasoning > 0


def test_a_function_call_ends_the_turn_with_the_call() -> None:
    outcome, output, dialog, _ = _run(CALL, {"tools": [WEATHER]}, 2, FinishReason.STOP)
    assert outcome.call is not None and outcome.call.recipient == "functions.get_weather"
    (item,) = [item.as_dict() for item in output.items]
    assert item["type"] == "function_call" and item["name"] == "get_weather" and item["arguments"] == '{"city": "Paris"}'  # type: ignore[typeddict-item]
    types = [event["type"] for event in _events(output)]
    assert types[0] == EventType.OUTPUT_ITEM_ADDED and EventType.FUNCTION_CALL_ARGUMENTS_DONE in types
    assert dialog.open_calls  # the client owes its output


def test_a_call_to_no_declared_tool_is_refused_and_the_model_told() -> None:
    outcome, output, dialog, _ = _run(CALL, {}, 4)
    assert outcome.call is not None and outcome.call.output is not None and "no function named 'get_weather'" in outcome.call.output
    assert not dialog.open_calls


def test_a_turn_cut_by_max_tokens_leaves_its_message_incomplete() -> None:
    cut = ANSWER[: ANSWER.index("friend")]
    outcome, output, _, _ = _run(cut, {}, 5, FinishReason.LENGTH)
    assert outcome.finish_reason is FinishReason.LENGTH
    assert output.items[-1].as_dict()["status"] == ItemStatus.INCOMPLETE
