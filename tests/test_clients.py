"""What real clients send, sent as they send it: the openai SDK's own helpers with a tool round trip (each
sending back exactly what it returned), and the request bodies of AutoGen, LiteLLM and Semantic Kernel
written out as JSON. A field OpenAI accepts inside a message, an item or a tool call is accepted here;
a top-level parameter OpenAI lacks stays a 400 that names it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pydantic
import pytest

from .chat_checker import parse_chat_sse
from .conftest import MODEL, Gateway, Process, emulator_stats


class GetWeather(pydantic.BaseModel):
    city: str


class Forecast(pydantic.BaseModel):
    city: str
    celsius: int


CALL = '[call functions.GetWeather {"city": "Rome"}]'
# A call, then (after its output) an answer in JSON: what the parse helpers read.
CALL_THEN_JSON = '[[call functions.GetWeather {"city": "Rome"}]] [[answer {"city": "Rome", "celsius": 18}]]'


def test_chat_completions_stream_helper_round_trip(gateway: Gateway) -> None:
    """The helper's final message carries `tool_calls[].function.parsed_arguments`; sent back as it came."""
    client = gateway.client()
    messages: list[Any] = [{"role": "user", "content": CALL}]
    tools = [openai.pydantic_function_tool(GetWeather)]
    with client.chat.completions.stream(model=MODEL, messages=messages, tools=tools) as stream:
        for _ in stream:
            pass
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    (call,) = message.tool_calls or []
    assert call.function.parsed_arguments == GetWeather(city="Rome")
    messages += [message, {"role": "tool", "tool_call_id": call.id, "content": "18 C"}]
    with client.chat.completions.stream(model=MODEL, messages=messages, tools=tools) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "The tool said: 18 C"


def test_chat_completions_parse_helper_round_trip(gateway: Gateway) -> None:
    """`parse` with a pydantic tool and format: its messages (`parsed`, `parsed_arguments`) sent back."""
    client = gateway.client()
    tools = [openai.pydantic_function_tool(GetWeather)]
    messages: list[Any] = [{"role": "user", "content": CALL_THEN_JSON}]
    first = client.chat.completions.parse(model=MODEL, messages=messages, tools=tools, response_format=Forecast)
    (call,) = first.choices[0].message.tool_calls or []
    assert call.function.parsed_arguments == GetWeather(city="Rome")
    messages += [first.choices[0].message, {"role": "tool", "tool_call_id": call.id, "content": "18 C"}]
    answered = client.chat.completions.parse(model=MODEL, messages=messages, tools=tools, response_format=Forecast)
    message = answered.choices[0].message
    assert message.parsed == Forecast(city="Rome", celsius=18)
    messages += [message, {"role": "user", "content": "thanks"}]
    again = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
    assert again.choices[0].message.content == "You said: thanks"


def test_responses_stream_and_parse_helpers_round_trip(gateway: Gateway) -> None:
    """The output items the helpers return (with `parsed_arguments`, and `parsed` on text) sent back as input."""
    client = gateway.client()
    tool = {"type": "function", "name": "GetWeather", "parameters": GetWeather.model_json_schema() | {"additionalProperties": False}, "strict": True}
    history: list[Any] = [{"role": "user", "content": CALL_THEN_JSON}]
    with client.responses.stream(model=MODEL, input=history, tools=[tool], store=False, text_format=Forecast) as stream:
        first = stream.get_final_response()
    call = first.output[-1]
    assert call.type == "function_call"
    history += [*first.output, {"type": "function_call_output", "call_id": call.call_id, "output": "18 C"}]
    parsed = client.responses.parse(model=MODEL, input=history, tools=[tool], store=False, text_format=Forecast)
    assert parsed.output_parsed == Forecast(city="Rome", celsius=18)
    history += [*parsed.output, {"role": "user", "content": "thanks"}]
    again = client.responses.create(model=MODEL, input=history, tools=[tool], store=False)
    assert again.output_text == "You said: thanks"


# -- request bodies as the libraries send them ------------------------------------------------------------

AUTOGEN = {  # autogen-ext's OpenAIChatCompletionClient, an AssistantAgent's first call
    "messages": [
        {"content": "You are a helpful AI assistant. Reply with TERMINATE when the task is done.", "role": "system"},
        {"content": "What is the weather in Rome?", "role": "user", "name": "user"},
    ],
    "model": MODEL,
    "stream": False,
}
LITELLM_TOOL_TURN = {  # LiteLLM sends back the assistant message it got, with its own fields
    "model": MODEL,
    "messages": [
        {"role": "user", "content": "weather in Rome?"},
        {
            "content": None, "role": "assistant", "function_call": None, "provider_specific_fields": {"refusal": None},
            "tool_calls": [{"function": {"arguments": '{"city": "Rome"}', "name": "GetWeather"}, "id": "call_1", "type": "function"}],
        },
        {"tool_call_id": "call_1", "role": "tool", "name": "GetWeather", "content": "18 C"},
    ],
    "metadata": {"session": "abc"},
}  # fmt: skip


def test_autogen_names_are_accepted_and_not_read(gateway: Gateway, emulator: Process) -> None:
    answer = httpx.post(gateway.url + "/v1/chat/completions", json=AUTOGEN)
    assert answer.status_code == 200, answer.text
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "<|start|>user<|message|>What is the weather in Rome?" in prompt  # the name changes nothing read


def test_litellm_tool_turn_is_accepted(gateway: Gateway) -> None:
    answer = httpx.post(gateway.url + "/v1/chat/completions", json=LITELLM_TOOL_TURN)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "The tool said: 18 C"


def test_an_unknown_top_level_parameter_is_still_named(gateway: Gateway) -> None:
    answer = httpx.post(gateway.url + "/v1/chat/completions", json=AUTOGEN | {"best_of": 2})
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "best_of"


def test_semantic_kernel_sends_the_thread_again(gateway: Gateway, emulator: Process) -> None:
    """With previous_response_id, the first user message and every output so far, then the new output:
    the model reads its question once, before its call."""
    client = gateway.client()
    tool = {"type": "function", "name": "GetWeather", "parameters": GetWeather.model_json_schema() | {"additionalProperties": False}}
    ask = {"role": "user", "content": [{"type": "input_text", "text": CALL}]}
    first = client.responses.create(model=MODEL, input=[ask], tools=[tool])
    output = {"type": "function_call_output", "call_id": first.output[-1].call_id, "output": "18 C"}
    second = client.responses.create(model=MODEL, previous_response_id=first.id, input=[ask, output], tools=[tool])
    assert second.output_text == "The tool said: 18 C"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert prompt.count(f"<|start|>user<|message|>{CALL}") == 1
    # A repeated message that is not the thread again is new input, as before.
    third = client.responses.create(model=MODEL, previous_response_id=second.id, input="hello")
    fourth = client.responses.create(model=MODEL, previous_response_id=third.id, input="hello")
    assert fourth.output_text == "You said: hello"
    assert emulator_stats(emulator)["last_prompt"].count("<|start|>user<|message|>hello") == 2


# -- Chat Completions' custom tools, allowed_tools and file parts ------------------------------------------

PATCH = {"type": "custom", "custom": {"name": "apply_patch", "description": "Apply a patch."}}


def test_chat_custom_tool_round_trip(gateway: Gateway) -> None:
    client = gateway.client()
    messages: list[Any] = [{"role": "user", "content": "[freeform functions.apply_patch *** Begin Patch]]"}]
    completion = client.chat.completions.create(model=MODEL, messages=messages, tools=[PATCH])
    message = completion.choices[0].message
    (call,) = message.tool_calls or []
    assert call.type == "custom" and call.custom.name == "apply_patch" and call.custom.input == "*** Begin Patch"
    assert completion.choices[0].finish_reason == "tool_calls"
    messages += [message, {"role": "tool", "tool_call_id": call.id, "content": "applied"}]
    assert client.chat.completions.create(model=MODEL, messages=messages, tools=[PATCH]).choices[0].message.content == "The tool said: applied"
    streamed = httpx.post(gateway.url + "/v1/chat/completions", json={"messages": messages[:1], "tools": [PATCH], "stream": True})
    calls = [
        call
        for chunk in parse_chat_sse(streamed.content)
        if "choices" in chunk and chunk["choices"]
        for call in chunk["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert calls[0]["type"] == "custom" and calls[0]["custom"]["name"] == "apply_patch"
    assert "".join(call["custom"]["input"] for call in calls) == "*** Begin Patch"


def test_chat_allowed_tools_and_a_named_custom_tool(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    weather = {"type": "function", "function": {"name": "GetWeather", "parameters": GetWeather.model_json_schema()}}
    choice = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [{"type": "custom", "custom": {"name": "apply_patch"}}]}}
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], tools=[weather, PATCH], tool_choice=choice)  # type: ignore[arg-type]
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "apply_patch" in prompt and "GetWeather" not in prompt
    forced = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        tools=[weather, PATCH],
        tool_choice={"type": "custom", "custom": {"name": "apply_patch"}},
    )
    assert (forced.choices[0].message.tool_calls or [])[0].type == "custom"


def test_chat_file_parts_are_read(gateway: Gateway, emulator: Process) -> None:
    import base64

    data = base64.b64encode(b"city,temp\nRome,18\n").decode()
    content = [{"type": "text", "text": "Summarise"}, {"type": "file", "file": {"filename": "temps.csv", "file_data": data}}]
    gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": content}])  # type: ignore[misc]
    assert "[file temps.csv]\ncity,temp\nRome,18" in emulator_stats(emulator)["last_prompt"]


# -- line separators ----------------------------------------------------------------------------------------


def test_line_separators_are_escaped_in_every_json(gateway: Gateway) -> None:
    """U+2028, U+2029 and U+0085 inside text: every SSE line and JSON body splits into lines as sent."""
    text = "a\u2028b\u2029c\x85d"
    body = {"model": MODEL, "input": text, "stream": True}  # the scripted model answers "You said: " and the input
    with httpx.stream("POST", gateway.url + "/v1/responses", json=body) as streamed:
        raw = streamed.read().decode()
    assert "\u2028" not in raw and "\u2029" not in raw and "\x85" not in raw and "\\u2028" in raw
    lines = [line for line in raw.splitlines() if line.startswith("data: ")]
    events = [json.loads(line[len("data: ") :]) for line in lines]
    assert events[-1]["response"]["output"][-1]["content"][0]["text"] == f"You said: {text}"
    plain = httpx.post(gateway.url + "/v1/responses", json=body | {"stream": False})
    assert "\u2028" not in plain.text and plain.json()["output"][-1]["content"][0]["text"] == f"You said: {text}"
    chat = httpx.post(gateway.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": text}], "stream": True})
    assert "\u2028" not in chat.text and "\\u2028" in chat.text


@pytest.mark.parametrize("field", ["parsed_arguments", "provider_specific_fields"])
def test_fields_clients_echo_inside_tool_calls(gateway: Gateway, field: str) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "GetWeather", "arguments": "{}"}}
    if field == "parsed_arguments":
        call["function"] |= {"parsed_arguments": {"city": "Rome"}}  # type: ignore[operator]
    else:
        call[field] = {}
    messages = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"},
    ]
    answer = httpx.post(gateway.url + "/v1/chat/completions", json={"messages": messages})
    assert answer.status_code == 200, answer.text


def test_responses_output_items_dumped_whole_are_accepted(gateway: Gateway) -> None:
    """A parsed response's items written out as JSON by hand (not through the SDK's transform) keep
    `parsed` on their text and `parsed_arguments` on their calls."""
    items = [
        {"role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "{}", "annotations": [], "parsed": {"a": 1}, "logprobs": []}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "parsed_arguments": {"x": 1}, "id": "fc_1", "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
    ]  # fmt: skip
    tool = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}}
    answer = httpx.post(gateway.url + "/v1/responses", json={"input": items, "tools": [tool]})
    assert answer.status_code == 200, answer.text
    listed = httpx.get(f"{gateway.url}/v1/responses/{answer.json()['id']}/input_items").json()["data"]
    assert not any("parsed_arguments" in item for item in listed)  # ignored: not kept, not listed
