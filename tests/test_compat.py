"""Every parameter of OpenAI's APIs is honoured or refused by name; unknown ones are refused as OpenAI does."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from .conftest import MODEL, Process, emulator_stats

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
}


def post(gateway: Process, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(gateway.url + path, json=body, timeout=30)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"input": "hi", "temprature": 0.5}, "temprature"),
        ({"input": [{"role": "user", "content": "hi", "colour": "red"}]}, "input[0].colour"),
        ({"input": "hi", "tools": [WEATHER | {"strictness": True}]}, "tools[0].strictness"),
        ({"input": "hi", "reasoning": {"effort": "low", "budget": 5}}, "reasoning.budget"),
    ],
)
def test_unknown_parameters_are_refused_by_name(gateway, body, param):
    response = post(gateway, "/v1/responses", body)
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": f"Unknown parameter: '{param}'.",
        "type": "invalid_request_error",
        "param": param,
        "code": "unknown_parameter",
    }


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"background_options": {"x": 1}}, "background_options"),
        ({"prompt": {"id": "pmpt_1"}}, "prompt"),
        ({"include": ["message.input_image.image_url"]}, "include[0]"),
        ({"include": ["reasoning.encrypted_content", "computer_call_output.output.image_url"]}, "include[1]"),
        ({"tools": [{"type": "web_search"}]}, "tools[0]"),
        ({"tools": [WEATHER, {"type": "computer_use_preview", "display_width": 1024, "display_height": 768, "environment": "linux"}]}, "tools[1]"),
    ],
)
def test_unimplemented_parameters_are_refused_by_name(gateway, extra, param):
    response = post(gateway, "/v1/responses", {"input": "hi"} | extra)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["code"] == "unsupported_parameter"
    assert "not supported by this gateway" in error["message"]


@pytest.mark.parametrize(
    "extra, param",
    [
        ({"include": ["everything"]}, "include[0]"),
        ({"truncation": "middle"}, "truncation"),
        ({"top_logprobs": 21}, "top_logprobs"),
        ({"service_tier": "flex"}, "service_tier"),  # the engine does not schedule by priority
        ({"service_tier": "scale"}, "service_tier"),
    ],
)
def test_values_not_implemented_are_refused(gateway, extra, param):
    response = post(gateway, "/v1/responses", {"input": "hi"} | extra)
    assert response.status_code == 400 and response.json()["error"]["param"] == param


def test_retrieving_a_stream_again_is_refused_by_name(gateway):
    """`GET /v1/responses/{id}?stream=true` of a response that was not run in the background is refused
    (never answered with JSON the SDK's stream would read as nothing); so are unknown `include` values."""
    client = gateway.client()
    response = client.responses.create(model=MODEL, input="hi")
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.retrieve(response.id, stream=True)
    assert err.value.body["param"] == "stream" and "background" in err.value.body["message"]
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.retrieve(response.id, include=["bogus"])
    assert err.value.body["param"] == "include[0]"
    assert client.responses.retrieve(response.id, include=["reasoning.encrypted_content"]).id == response.id


def test_accepted_identifiers_are_echoed_with_openais_fields(gateway):
    response = gateway.client().responses.create(
        model=MODEL,
        input="hi",
        tools=[WEATHER, WEATHER | {"name": "loose", "strict": False}],
        safety_identifier="user-hash-1",
        prompt_cache_key="thread-9",
        prompt_cache_retention="24h",
        service_tier="auto",
        truncation="disabled",
        top_logprobs=0,
        reasoning={"effort": "low", "summary": "auto"},
        text={"verbosity": "low"},
        include=["code_interpreter_call.outputs"],
        stream_options={"include_obfuscation": False},
        stream=True,
    )
    final = [event for event in response][-1].response
    data = final.to_dict()
    assert data["presence_penalty"] == 0 and data["frequency_penalty"] == 0
    assert data["safety_identifier"] == "user-hash-1" and data["prompt_cache_key"] == "thread-9"
    assert data["reasoning"] == {"effort": "low", "summary": "auto"} and data["text"]["verbosity"] == "low"
    assert [tool["strict"] for tool in data["tools"]] == [True, False]  # OpenAI's default is strict


def test_unavailable_tools_can_be_dropped_by_the_operator(make_gateway, emulator):
    gateway = make_gateway(emulator.url, server={"drop_unavailable_tools": True})
    tools = [{"type": "web_search", "external_web_access": True}, {"type": "image_generation"}, WEATHER]
    response = gateway.client().responses.create(model=MODEL, input="hi", tools=tools)
    assert response.status == "completed" and [tool.type for tool in response.tools] == ["function"]
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "get_weather" in prompt and "browser" not in prompt and "image" not in prompt
    gateway.stop()
    assert "dropped the request's 'web_search' tool" in gateway.log.read_text()


def test_output_items_replayed_as_they_came_are_accepted(gateway):
    """Clients send a response's output back as input, with every field it had (status, annotations...)."""
    client = gateway.client()
    first = client.responses.create(model=MODEL, input="remember me", store=False)
    history = [{"role": "user", "content": "remember me"}, *[item.to_dict() for item in first.output]]
    history.append({"role": "user", "content": "[recall]"})
    second = client.responses.create(model=MODEL, input=history, store=False)
    assert "remember me" in second.output_text


def test_reasoning_round_trips_sealed(gateway, emulator):
    """include reasoning.encrypted_content with store false: the reasoning comes back sealed, and sent
    back without its text, it is what the model reads; a changed blob is a 400."""
    client = gateway.client()
    first = client.responses.create(model=MODEL, input="secret plan", store=False, include=["reasoning.encrypted_content"])
    reasoning = first.output[0]
    assert reasoning.type == "reasoning" and reasoning.encrypted_content
    thought = reasoning.content[0].text
    assert reasoning.encrypted_content.find(thought) == -1  # sealed, not plain
    sent_back = {"type": "reasoning", "id": reasoning.id, "summary": [], "encrypted_content": reasoning.encrypted_content}
    client.responses.create(
        model=MODEL, input=[{"role": "user", "content": "secret plan"}, sent_back, {"role": "user", "content": "go on"}], store=False
    )
    assert thought in emulator_stats(emulator)["last_prompt"]
    blob = reasoning.encrypted_content
    tampered = sent_back | {"encrypted_content": blob[:20] + ("A" if blob[20] != "A" else "B") + blob[21:]}
    response = post(gateway, "/v1/responses", {"input": [{"role": "user", "content": "x"}, tampered], "store": False})
    assert response.status_code == 400 and response.json()["error"]["param"] == "input[1].encrypted_content"


def test_chat_sampling_parameters_reach_the_engine(gateway, emulator):
    completion = gateway.client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        presence_penalty=0.5,
        frequency_penalty=-0.25,
        logit_bias={"1234": -100, "99": 5},
        service_tier="auto",
        prompt_cache_key="k",
        stream_options=None,
    )
    assert completion.choices[0].message.content == "You said: hi"
    sent = emulator_stats(emulator)["last_request"]
    assert sent["presence_penalty"] == 0.5 and sent["frequency_penalty"] == -0.25
    assert sent["logit_bias"] == {"1234": -100, "99": 5}


@pytest.mark.parametrize(
    "extra, param, code",
    [
        ({"top_logprobs": 2}, "top_logprobs", "invalid_value"),  # without logprobs: true
        ({"functions": [{"name": "f"}]}, "functions", "unsupported_parameter"),
        ({"metadata": {"a": 1}}, "metadata.a", "invalid_type"),  # accepted as OpenAI shapes it, with no effect
        ({"store": True}, "store", "invalid_value"),
        ({"logit_bias": {"not-a-token": 1}}, "logit_bias", "invalid_value"),
        ({"logit_bias": {"5": 101}}, "logit_bias", "invalid_value"),
        ({"best_of": 2}, "best_of", "unknown_parameter"),
    ],
)
def test_chat_parameters_refused_by_name(gateway, extra, param, code):
    response = post(gateway, "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]} | extra)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param and response.json()["error"]["code"] == code


def test_chat_messages_replayed_from_a_completion_are_accepted(gateway):
    client = gateway.client()
    messages: list[Any] = [{"role": "user", "content": "hi"}]
    first = client.chat.completions.create(model=MODEL, messages=messages)
    messages.append(first.choices[0].message.model_dump() | {"refusal": None, "annotations": [], "audio": None, "function_call": None})
    messages.append({"role": "user", "content": "again"})
    assert client.chat.completions.create(model=MODEL, messages=messages).choices[0].message.content == "You said: again"


def test_input_tokens_are_exact(gateway, emulator):
    client = gateway.client()
    body = {"input": "count these words", "instructions": "Be brief.", "tools": [WEATHER]}
    counted = post(gateway, "/v1/responses/input_tokens", body | {"model": MODEL})
    assert counted.status_code == 200 and counted.json()["object"] == "response.input_tokens"
    response = client.responses.create(model=MODEL, **body)
    assert counted.json()["input_tokens"] == response.usage.input_tokens  # the engine's own count
    assert client.responses.input_tokens.count(model=MODEL, input="count these words").input_tokens > 0
    follow_up = {"input": "more", "previous_response_id": response.id}
    previous = post(gateway, "/v1/responses/input_tokens", follow_up).json()["input_tokens"]
    assert previous == client.responses.create(model=MODEL, **follow_up).usage.input_tokens


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_service_tiers_are_the_engines_request_priority(emulator, make_gateway, api):
    """With `engine.priority_scheduling` (vLLM's `--scheduling-policy priority`), `priority` and `flex` are
    sent as the engine request's priority and echoed; a call after a tool's output goes a step ahead."""
    gateway = make_gateway(emulator.url, engine={"priority_scheduling": True})
    sent = []
    for tier in ("priority", "flex", "auto"):
        if api == "responses":
            response = gateway.client().responses.create(model=MODEL, input="hi", service_tier=tier)
            assert response.service_tier == ("default" if tier == "auto" else tier)
        else:
            gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], service_tier=tier)
        sent.append(emulator_stats(emulator)["last_request"].get("priority"))
    assert sent == [-10, 10, None]
    if api == "responses":
        tool = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
        answered = gateway.client().responses.create(model=MODEL, input="[call functions.launch {}] [misbehave]", tools=[tool], service_tier="flex")
        assert "no function named 'launch'" in answered.output_text  # the model was told, in a second engine call ...
        assert emulator_stats(emulator)["last_request"]["priority"] == 9  # ... a step ahead of its tier
