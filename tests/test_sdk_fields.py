"""What the newest openai SDK (3.57) sends is understood: each field honoured where it maps, refused by its
own path where it cannot, through the SDK as a client sends it."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import openai
import pytest

from gateway.responses.shapes.request import ResponsesRequest

from .conftest import MODEL, Gateway, emulator_stats

WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def _refused(gateway: Gateway, body: dict[str, Any], path: str = "/v1/responses") -> dict[str, Any]:
    answer = httpx.post(gateway.url + path, json={"model": MODEL} | body)
    assert answer.status_code == 400, answer.text
    error: dict[str, Any] = answer.json()["error"]
    return error


def test_effort_max_is_gpt_oss_high(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input="hi", reasoning={"effort": "max"})
    assert "Reasoning: high" in emulator_stats(emulator)["last_prompt"]
    gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], reasoning_effort="max")
    assert "Reasoning: high" in emulator_stats(emulator)["last_prompt"]


def test_a_safety_identifier_of_128_characters(gateway):
    response = gateway.client().responses.create(model=MODEL, input="hi", safety_identifier="u" * 128)
    assert response.safety_identifier == "u" * 128
    gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], safety_identifier="u" * 128)
    assert _refused(gateway, {"input": "hi", "safety_identifier": "u" * 129})["param"] == "safety_identifier"


@pytest.mark.parametrize(
    "tool",
    [
        WEATHER,
        {"type": "custom", "name": "grep"},
        {"type": "shell", "environment": {"type": "local"}},
        {"type": "apply_patch"},
        {"type": "namespace", "name": "crm", "description": "CRM", "tools": [WEATHER]},
    ],
    ids=lambda tool: tool["type"],
)
def test_direct_callers_are_every_tools_and_programmatic_ones_none(gateway, tool):
    """`allowed_callers: ["direct"]` (the model calls the tool) is what every tool here is; OpenAI's
    programmatic callers run nowhere here, and are refused by the field's own path on every tool."""

    def with_callers(callers: list[str]) -> dict[str, Any]:
        if tool["type"] == "namespace":
            return tool | {"tools": [WEATHER | {"allowed_callers": callers}]}
        return tool | {"allowed_callers": callers}

    assert gateway.client().responses.create(model=MODEL, input="hi", tools=[with_callers(["direct"])]).status == "completed"
    error = _refused(gateway, {"input": "hi", "tools": [with_callers(["programmatic"])]})
    where = "tools[0].tools[0]" if tool["type"] == "namespace" else "tools[0]"
    assert error["param"] == f"{where}.allowed_callers[0]"


@pytest.mark.parametrize("tool", [{"type": "mcp", "server_label": "docs"}, {"type": "code_interpreter", "container": {"type": "auto"}}])
def test_direct_callers_on_hosted_tools(tool):
    """The same on the tools the gateway runs (checked on the request itself: running them needs servers)."""
    assert ResponsesRequest.model_validate({"model": MODEL, "input": "hi", "tools": [tool | {"allowed_callers": ["direct"]}]})
    with pytest.raises(ValueError, match="allowed_callers"):
        ResponsesRequest.model_validate({"model": MODEL, "input": "hi", "tools": [tool | {"allowed_callers": ["programmatic"]}]})


def test_what_clients_echo_back_in_items_is_read(gateway, emulator):
    """A thread sent back as the SDK 3.57 types write it: a call's and an output's `caller`, an output's
    `name`, a part's `prompt_cache_breakpoint`, an assistant's `refusal` part, a function's output holding
    an `input_file` (read as one is in a message)."""
    csv = "data:text/csv;base64," + base64.b64encode(b"city,temp\nOslo,4\n").decode()
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "hi", "prompt_cache_breakpoint": {"ttl": "30m"}}]},
        {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I cannot help with that."}]},
        {"role": "user", "content": "the weather then"},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}', "caller": {"type": "direct"}},
        {
            "type": "function_call_output", "call_id": "c1", "name": "get_weather", "caller": {"type": "direct"},
            "output": [{"type": "input_text", "text": "See the file."}, {"type": "input_file", "filename": "temps.csv", "file_data": csv}],
        },
    ]  # fmt: skip
    response = gateway.client().responses.create(model=MODEL, input=items, tools=[WEATHER], prompt_cache_options={"mode": "implicit"})
    assert response.status == "completed"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "I cannot help with that." in prompt
    assert "See the file." in prompt and "city,temp\nOslo,4" in prompt


def test_prompt_cache_options_are_accepted_everywhere(gateway):
    client = gateway.client()
    assert client.responses.create(model=MODEL, input="hi", prompt_cache_options={"ttl": "30m"}).status == "completed"
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], extra_body={"prompt_cache_options": {"ttl": "30m"}})


def test_a_model_is_retrieved_by_its_id(gateway):
    client = gateway.client()
    assert client.models.retrieve(MODEL).id == MODEL  # an id with a slash in it
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-5")
    assert missing.value.body["code"] == "model_not_found" and missing.value.body["param"] == "model"  # type: ignore[index]


@pytest.mark.parametrize(
    "choice, param",
    [({"type": "function"}, "tool_choice.name"), ({"type": "bogus"}, "tool_choice"), ("maybe", "tool_choice")],
)
def test_a_refused_tool_choice_names_the_requests_own_path(gateway, choice, param):
    assert _refused(gateway, {"input": "hi", "tools": [WEATHER], "tool_choice": choice})["param"] == param


def test_an_item_reference_is_the_stored_item_it_names(make_gateway, emulator):
    """`item_reference` names an item of one of the tenant's stored responses (output or input): the model
    reads the item itself. Another tenant's, a deleted response's, or an unknown id is not found (400)."""
    keys = [{"key": "alice-key", "tenant": "alice"}, {"key": "bob-key", "tenant": "bob"}]
    gateway = make_gateway(emulator.url, auth={"api_keys": keys})
    alice, bob = gateway.client(api_key="alice-key"), gateway.client(api_key="bob-key")
    first = alice.responses.create(model=MODEL, input="remember the blue door")
    (asked,) = alice.responses.input_items.list(first.id).data
    answer = first.output[-1]
    refs = [{"type": "item_reference", "id": asked.id}, {"type": "item_reference", "id": answer.id}]
    second = alice.responses.create(model=MODEL, input=[*refs, {"role": "user", "content": "[recall]"}])
    assert "users=['remember the blue door', '[recall]']" in second.output_text and "You said: remember the blue door" in second.output_text
    listed = alice.responses.input_items.list(second.id, order="asc").data
    assert [item.id for item in listed][:2] == [asked.id, answer.id]  # listed as the items they stand for
    for client, item_id in ((bob, answer.id), (alice, "msg_nothing")):
        with pytest.raises(openai.BadRequestError) as missing:
            client.responses.create(model=MODEL, input=[{"type": "item_reference", "id": item_id}])
        assert missing.value.body["code"] == "item_not_found" and missing.value.body["param"] == "input[0].id"  # type: ignore[index]
    alice.responses.delete(first.id)
    with pytest.raises(openai.BadRequestError):
        alice.responses.create(model=MODEL, input=[{"type": "item_reference", "id": answer.id}])


def test_a_custom_tool_inside_a_namespace(gateway, emulator):
    """A namespace may hold custom tools: declared in the namespace (raw text in), called as NAME.tool,
    streamed as a `custom_tool_call` naming its namespace, and read back when the client answers it."""
    crm = {
        "type": "namespace",
        "name": "crm",
        "description": "The CRM",
        "tools": [WEATHER, {"type": "custom", "name": "grep", "description": "Search notes"}],
    }
    client = gateway.client()
    first = client.responses.create(model=MODEL, input="[freeform crm.grep blue door]]", tools=[crm])
    call = first.output[-1]
    assert (call.type, call.namespace, call.name, call.input, call.status) == ("custom_tool_call", "crm", "grep", "blue door", "completed")
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace crm {" in prompt and "Write the input as raw text, not JSON." in prompt
    answer = {"type": "custom_tool_call_output", "call_id": call.call_id, "output": "2 notes"}
    thread = [{"role": "user", "content": "notes?"}, call.model_dump(exclude_none=True), answer]  # sent back whole, statelessly
    again = client.responses.create(model=MODEL, input=thread, tools=[crm], store=False)
    assert again.output_text == "The tool said: 2 notes"
    assert "to=crm.grep<|channel|>commentary<|message|>blue door<|call|>" in emulator_stats(emulator)["last_prompt"]
