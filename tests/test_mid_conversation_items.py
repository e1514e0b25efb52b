"""SDK 3.57's items that change a conversation as it goes: `additional_tools` (tools offered from that point
on) and `configuration_update` (reasoning effort and the answer's format for what follows), sent through
the openai SDK, kept with stored responses and conversations, and read again when sent back."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from .conftest import MODEL, Process, emulator_stats, stream_sdk
from .test_structured_outputs import CITY, JSON_ANSWER, WEATHER

CALL = '[call functions.get_weather {"city": "Rome"}]'
ADDED = {"type": "additional_tools", "role": "developer", "tools": [WEATHER]}
AS_JSON = {"type": "configuration_update", "text": {"format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": True}}}


def calls(response: Any) -> list[Any]:
    return [item for item in response.output if item.type == "function_call"]


def test_additional_tools_are_callable_from_where_they_stand_on(gateway: Any, emulator: Process) -> None:
    client = gateway.client()
    first = client.responses.create(model=MODEL, input=[{"role": "user", "content": "hello"}, ADDED, {"role": "user", "content": CALL}])
    (call,) = calls(first)
    assert (call.name, json.loads(call.arguments), call.status) == ("get_weather", {"city": "Rome"}, "completed")
    assert call.namespace is None  # a function as declared, not one tool search loaded
    prompt = emulator_stats(emulator)["last_prompt"]
    # Declared where the item stands: after the first message, in a developer message; the preamble is as before.
    assert prompt.index("hello") < prompt.index("These tools are available from now on") < prompt.index(CALL)
    assert "<|start|>developer<|message|>These tools are available from now on" in prompt
    assert first.tools == []  # not the request's tools: the Response echoes those alone
    listed = [item.type for item in client.responses.input_items.list(first.id, order="asc").data]
    assert listed == ["message", "additional_tools", "message"]
    # Kept with the stored response: answered, and called again, with no tools in the requests.
    answered = client.responses.create(
        model=MODEL, previous_response_id=first.id, input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}]
    )
    assert answered.output_text == "The tool said: sunny"
    again = client.responses.create(model=MODEL, previous_response_id=answered.id, input=CALL)
    assert [item.name for item in calls(again)] == ["get_weather"]
    # Streamed: the call streams as a declared function's does.
    events = stream_sdk(client, input=[ADDED, {"role": "user", "content": CALL}], store=False)
    assert [event["item"]["type"] for event in events if event["type"] == "response.output_item.done"][-1] == "function_call"


def test_additional_tools_in_a_conversation(gateway: Any) -> None:
    client = gateway.client()
    conversation = client.conversations.create(items=[ADDED])
    response = client.responses.create(model=MODEL, conversation=conversation.id, input=CALL)
    assert [item.name for item in calls(response)] == ["get_weather"]
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [item.type for item in items][:2] == ["additional_tools", "message"]
    assert items[0].tools[0].name == "get_weather"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("tools", "param", "words"),
    [
        ([{"type": "code_interpreter", "container": {"type": "auto"}}], "input[0].tools[0].type", "declare it in the request's tools"),
        ([{"type": "function", "name": "bad name!"}], "input[0].tools[0].name", "should match pattern"),
    ],
)
def test_additional_tools_nothing_can_add_are_refused(gateway: Any, tools: list[dict[str, Any]], param: str, words: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(
            model=MODEL, input=[{"type": "additional_tools", "role": "developer", "tools": tools}, {"role": "user", "content": "hi"}]
        )
    assert err.value.body["param"] == param and words in err.value.body["message"], err.value.body


def test_a_configuration_update_sets_the_format_and_effort_for_what_follows(gateway: Any, emulator: Process) -> None:
    client = gateway.client()
    first = client.responses.create(model=MODEL, input=[AS_JSON, {"role": "user", "content": f"Which city? {JSON_ANSWER}"}])
    assert json.loads(first.output_text) == {"city": "Paris", "population": 2100000}
    sent = emulator_stats(emulator)["last_request"]["structured_outputs"]["structural_tag"]
    assert '"population"' in sent  # held by the engine's grammar, as a request's own text.format is
    assert first.text.format.type == "json_schema"  # the Response shows the format it answered in
    # Kept: the next response answers in the format without asking for it.
    second = client.responses.create(model=MODEL, previous_response_id=first.id, input=f"And again? {JSON_ANSWER}")
    assert json.loads(second.output_text)["city"] == "Paris"
    # Until a later update replaces it; the reasoning effort too.
    plain = {"type": "configuration_update", "text": {"format": {"type": "text"}}, "reasoning": {"effort": "high"}}
    third = client.responses.create(model=MODEL, previous_response_id=second.id, input=[plain, {"role": "user", "content": "[instructions]"}])
    assert "effort=high" in third.output_text
    fourth = client.responses.create(model=MODEL, previous_response_id=third.id, input="[instructions]")
    assert "effort=high" in fourth.output_text
    listed = [item.type for item in client.responses.input_items.list(third.id, order="asc").data]
    assert "configuration_update" in listed
    # Streamed, with nothing stored: the same.
    events = stream_sdk(client, input=[AS_JSON, {"role": "user", "content": f"Which city? {JSON_ANSWER}"}], store=False)
    assert json.loads(events[-1]["response"]["output"][-1]["content"][0]["text"])["city"] == "Paris"


def test_a_configuration_update_is_checked(gateway: Any) -> None:
    broken = {"type": "configuration_update", "text": {"format": {"type": "json_schema", "name": "x"}}}
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input=[broken, {"role": "user", "content": "hi"}])
    assert err.value.body["param"] == "input[0].text.format.schema"
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input=[{"type": "configuration_update", "reasoning": {"effort": "extreme"}}])
    assert err.value.body["param"].startswith("input[0].reasoning.effort")


def test_a_thread_sent_again_whole_reads_its_items_once(gateway: Any, emulator: Process) -> None:
    """A client that sends the whole thread again with `previous_response_id`: the items it sent before (an
    `additional_tools` among them) are not read twice, so the tools are declared once."""
    client = gateway.client()
    thread = [{"role": "user", "content": "hello"}, ADDED]
    first = client.responses.create(model=MODEL, input=thread)
    client.responses.create(model=MODEL, previous_response_id=first.id, input=[*thread, {"role": "user", "content": "[recall]"}])
    assert emulator_stats(emulator)["last_prompt"].count("These tools are available from now on") == 1
