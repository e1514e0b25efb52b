"""Reasoning summaries (`reasoning.summary`): each reasoning item's summary is written by the model in an
engine call of its own, begun when the reasoning ends and run while the answer streams; it is streamed
inside its item as OpenAI streams one, stored, returned and counted; one that fails or runs long leaves the
item without a summary, never the response failed."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from .conftest import MODEL, Gateway, Process, emulator_stats, stream_sdk
from .stream_checker import check_response_stream

SUMMARY_EVENTS = [
    "response.reasoning_summary_part.added",
    "response.reasoning_summary_text.delta",
    "response.reasoning_summary_text.done",
    "response.reasoning_summary_part.done",
]


def _of_item(events: list[dict[str, Any]], index: int) -> list[str]:
    return [event["type"] for event in events if event.get("output_index") == index]


def test_each_reasoning_item_has_its_summary_streamed_stored_and_counted(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    events = stream_sdk(client, input="What is 2+2?", reasoning={"summary": "auto"})
    final = check_response_stream(events)
    assert _of_item(events, 0) == [
        "response.output_item.added", "response.content_part.added", *["response.reasoning_text.delta"] * (_of_item(events, 0).count("response.reasoning_text.delta")),
        "response.reasoning_text.done", "response.content_part.done", *SUMMARY_EVENTS, "response.output_item.done",
    ]  # fmt: skip
    (reasoning,) = [item for item in final.output if item.type == "reasoning"]
    (summary,) = reasoning.summary
    assert summary.text.startswith("**Working it out**\n\nI am thinking about this: The user said")  # the model's, over the reasoning
    asked = emulator_stats(emulator)["summary_requests"][-1]["prompt"]
    assert "a short bold title on the first line" in asked and "one to three sentences" in asked and reasoning.content[0].text in asked
    assert client.responses.retrieve(final.id).output[0].summary[0].text == summary.text  # stored
    plain = client.responses.create(model=MODEL, input="What is 2+2?")
    assert plain.output[0].summary == []  # not asked for: none
    assert final.usage.input_tokens > plain.usage.input_tokens and final.usage.output_tokens > plain.usage.output_tokens  # its call is counted


def test_the_answer_streams_while_the_summary_is_written(gateway: Gateway) -> None:
    """The summary's call begins when the reasoning ends and runs beside the answer's: the answer's item is
    added, streamed and done while the reasoning item still waits for its summary."""
    started = time.monotonic()
    arrived: dict[str, float] = {}
    events: list[dict[str, Any]] = []
    with httpx.stream("POST", f"{gateway.url}/v1/responses", json={"model": MODEL, "input": "hi [summary-slow]", "stream": True,
                                                                    "reasoning": {"summary": "concise"}}, timeout=60) as answer:  # fmt: skip
        for line in answer.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
                arrived.setdefault(events[-1]["type"] + str(events[-1].get("output_index")), time.monotonic() - started)
    check_response_stream(events)
    answer_done = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.done" and e["output_index"] == 1)
    reasoning_done = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.done" and e["output_index"] == 0)
    assert answer_done < reasoning_done
    assert arrived["response.output_text.delta1"] < arrived["response.reasoning_summary_part.added0"] - 1.0  # the answer did not wait


@pytest.mark.parametrize("fault", ["[summary-fails]", "[summary-slow]"])
def test_a_summary_that_fails_or_runs_long_leaves_its_item_without_one(make_gateway: Any, emulator: Process, fault: str) -> None:
    gateway = make_gateway(emulator.url, server={"reasoning_summary_timeout_s": 0.5})
    started = time.monotonic()
    events = stream_sdk(gateway.client(), input=f"hi {fault}", reasoning={"summary": "detailed"})
    final = check_response_stream(events)
    assert final.status == "completed" and final.output[0].summary == [] and final.output_text.startswith("You said")
    assert not [event for event in events if event["type"].startswith("response.reasoning_summary")]
    assert time.monotonic() - started < 4  # bounded by the timeout, not by the summary's 200 slow tokens


def test_summaries_can_be_turned_off(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, server={"reasoning_summaries": "off"})
    before = emulator_stats(emulator)["summary_calls"]
    response = gateway.client().responses.create(model=MODEL, input="hi", reasoning={"summary": "auto"})
    assert response.output[0].summary == [] and response.reasoning.summary == "auto"  # echoed as asked
    assert emulator_stats(emulator)["summary_calls"] == before


def test_a_websocket_gets_them_as_a_stream_does(gateway: Gateway) -> None:
    from .test_websocket import until_end

    with gateway.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="hi", reasoning={"summary": "auto"}, store=False)
        events = until_end(connection)
    final = check_response_stream(events)
    assert [event["type"] for event in events if event["type"].startswith("response.reasoning_summary")] == SUMMARY_EVENTS
    assert final.output[0].summary[0].text.startswith("**Working it out**")
