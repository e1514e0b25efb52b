"""The Open Responses compliance suite (openresponses.org, `src/lib/compliance-tests.ts`), ported: its
scenarios, sent as the suite sends them (plain HTTP, `stream` set per scenario), and its checks: the
final Response object against the spec's schema, every streamed event against its event schema, and each
scenario's own expectations. The scripted model needs its directive in the tool scenarios' prompts.

`image-input` needs a vision model: gpt-oss reads no images, so the gateway refuses it with a clear 400."""

from __future__ import annotations

from typing import Any, Callable

import httpx
import pytest

from .conftest import MODEL
from .open_responses import event_errors, response_errors
from .stream_checker import check_response_stream, parse_sse

WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a location",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string", "description": "The city and state, e.g. San Francisco, CA"}},
        "required": ["location"],
    },
}
WEATHER_QUESTION = 'What\'s the weather like in San Francisco? [call functions.get_weather {"location":"San Francisco, CA"}]'


def user(content: Any) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": content}


Check = Callable[[dict[str, Any], list[dict[str, Any]]], list[str]]


def has_output(response: dict[str, Any], _: list[dict[str, Any]]) -> list[str]:
    return [] if response["output"] else ["Response has no output items"]


def completed(response: dict[str, Any], _: list[dict[str, Any]]) -> list[str]:
    return [] if response["status"] == "completed" else [f"Expected status completed, got {response['status']}"]


def output_of_type(kind: str) -> Check:
    def check(response: dict[str, Any], _: list[dict[str, Any]]) -> list[str]:
        return [] if any(item["type"] == kind for item in response["output"]) else [f"No output item of type {kind}"]

    return check


def streamed_function_call(_: dict[str, Any], events: list[dict[str, Any]]) -> list[str]:
    types = [event["type"] for event in events]
    errors = []
    for wanted in ("response.output_item.added", "response.output_item.done"):
        if not any(event["type"] == wanted and event["item"]["type"] == "function_call" for event in events):
            errors.append(f"Missing {wanted} with a function_call item")
    for wanted in ("response.function_call_arguments.delta", "response.function_call_arguments.done"):
        if wanted not in types:
            errors.append(f"Missing {wanted}")
    return errors


SCENARIOS: dict[str, tuple[dict[str, Any], bool, list[Check]]] = {
    "basic-response": ({"input": [user("Say hello in exactly 3 words.")]}, False, [has_output, completed]),
    "streaming-response": ({"input": [user("Count from 1 to 5.")]}, True, [completed]),
    "system-prompt": (
        {"input": [{"type": "message", "role": "system", "content": "You are a pirate. Always respond in pirate speak."}, user("Say hello.")]},
        False,
        [has_output, completed],
    ),
    "tool-calling": ({"input": [user(WEATHER_QUESTION)], "tools": [WEATHER_TOOL]}, False, [has_output, output_of_type("function_call")]),
    "tool-calling-streaming": ({"input": [user(WEATHER_QUESTION)], "tools": [WEATHER_TOOL]}, True, [streamed_function_call]),
    "multi-turn": (
        {
            "input": [
                user("My name is Alice."),
                {"type": "message", "role": "assistant", "content": "Hello Alice! Nice to meet you. How can I help you today?"},
                user("What is my name?"),
            ]
        },
        False,
        [has_output, completed],
    ),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_compliance_scenario(gateway, scenario: str) -> None:
    body, streaming, checks = SCENARIOS[scenario]
    answer = httpx.post(f"{gateway.url}/v1/responses", json={"model": MODEL, **body, "stream": streaming}, timeout=60)
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = []
    if streaming:
        events = parse_sse(answer.content)
        assert events, "No streaming events received"
        assert event_errors(events) == []
        check_response_stream(events)  # and OpenAI's own ordering rules
        response = events[-1]["response"]
    else:
        response = answer.json()
    assert response_errors(response) == []
    assert [error for check in checks for error in check(response, events)] == []


def test_image_input_is_refused_clearly(gateway) -> None:
    """The suite's `image-input` scenario needs a vision model; gpt-oss has none."""
    content = [
        {"type": "input_text", "text": "What do you see in this image? Answer in one sentence."},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
    ]
    answer = httpx.post(f"{gateway.url}/v1/responses", json={"model": MODEL, "input": [user(content)]}, timeout=60)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["param"].startswith("input[0].content[1]")


def test_the_schema_checks_can_fail() -> None:
    """The checks find what a non-compliant server would send (the Response fields peers leave out)."""
    assert any("presence_penalty" in error for error in response_errors({"id": "resp_1", "object": "response"}))
    assert event_errors([{"type": "response.reasoning.delta", "sequence_number": 1}]) != []  # not OpenAI's name
    assert event_errors(
        [{"type": "response.output_text.delta", "sequence_number": 1, "item_id": "m", "output_index": 0, "content_index": 0, "delta": "x"}]
    )
