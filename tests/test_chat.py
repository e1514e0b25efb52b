"""Chat Completions: plain, reasoning, tool calls streamed by the rules, the OpenAI Agents SDK end to end."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from .chat_checker import check_chat_stream, parse_chat_sse
from .conftest import MODEL, emulator_stats

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    },
}
ARGS = '{"location":"Paris"}'
ASK = f"weather in Paris? [call functions.get_weather {ARGS}]"


def chat_stream(gateway, body: dict) -> dict:
    response = httpx.post(gateway.url + "/v1/chat/completions", json={"stream": True} | body, timeout=30)
    assert response.status_code == 200, response.text
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    return check_chat_stream(parse_chat_sse(response.content), include_usage)


def test_plain_completion(gateway):
    completion = gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hello"}])
    message = completion.choices[0].message
    assert message.content == "You said: hello"
    assert message.model_extra["reasoning"] == message.model_extra["reasoning_content"] == "The user said 'hello'. I will answer."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens_details.reasoning_tokens > 0


def test_streamed_plain_with_usage(gateway):
    result = chat_stream(gateway, {"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": True}})
    assert result["content"] == "You said: hi"
    assert result["reasoning"].startswith("The user said")
    assert result["finish_reason"] == "stop"


@pytest.mark.parametrize("order", ["", " recipient-first"])
def test_tool_call_streamed_equals_non_streamed(gateway, order):
    """lmdeploy #4014: the joined fragments are exactly the arguments, once."""
    messages = [{"role": "user", "content": ASK.replace("]", f"{order}]")}]
    plain = gateway.client().chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER])
    assert plain.choices[0].finish_reason == "tool_calls"
    assert plain.choices[0].message.tool_calls[0].function.arguments == ARGS
    streamed = chat_stream(gateway, {"messages": messages, "tools": [WEATHER]})
    assert [c["arguments"] for c in streamed["tool_calls"]] == [ARGS]
    assert streamed["tool_calls"][0]["name"] == "get_weather"


def test_sdk_stream_accumulates(gateway):
    with gateway.client().chat.completions.stream(model=MODEL, messages=[{"role": "user", "content": ASK}], tools=[WEATHER]) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and call.function.arguments == ARGS


def test_multi_turn_tool_loop_with_reasoning_sent_back(gateway, emulator):
    client = gateway.client()
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": ASK}]
    first = client.chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER])
    message = first.choices[0].message
    call = message.tool_calls[0]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "reasoning": message.model_extra["reasoning"],
            "tool_calls": [{"id": call.id, "type": "function", "function": {"name": call.function.name, "arguments": call.function.arguments}}],
        }
    )
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "21 C"})
    result = chat_stream(gateway, {"messages": messages, "tools": [WEATHER]})
    assert result["content"] == "The tool said: 21 C"
    prompt = emulator_stats(emulator)["last_prompt"]
    # The earlier turn's reasoning reaches the prompt as its analysis (the turn is still in progress).
    assert f"<|channel|>analysis<|message|>{message.model_extra['reasoning']}<|end|>" in prompt
    assert "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>21 C<|end|>" in prompt
    assert "Be brief." in prompt


def test_reasoning_content_is_accepted(gateway, emulator):
    messages = [
        {"role": "user", "content": ASK},
        {
            "role": "assistant",
            "reasoning_content": "older name",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": ARGS}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "cold"},
    ]
    gateway.client().chat.completions.create(model=MODEL, messages=messages, tools=[WEATHER])
    assert "<|channel|>analysis<|message|>older name<|end|>" in emulator_stats(emulator)["last_prompt"]


def test_length_finish(gateway):
    completion = gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "[long 100]"}], max_tokens=30)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage.completion_tokens == 30
    result = chat_stream(gateway, {"messages": [{"role": "user", "content": "[long 100]"}], "max_completion_tokens": 30})
    assert result["finish_reason"] == "length"


def test_reasoning_effort_and_response_format(gateway, emulator):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    gateway.client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": 'x [[constrained <|channel|>final<|message|>{"a": "x"}<|return|>]]'}],
        reasoning_effort="low",
        response_format={"type": "json_schema", "json_schema": {"name": "out", "schema": schema}},
    )
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "Reasoning: low" in prompt and "## out" in prompt


def test_engine_failure_mid_stream(gateway):
    response = httpx.post(gateway.url + "/v1/chat/completions", json={"stream": True, "messages": [{"role": "user", "content": "[drop]"}]})
    chunks = parse_chat_sse(response.content)
    assert "error" in chunks[-1] and chunks[-1]["error"]["message"]


@pytest.mark.parametrize(
    "body, param",
    [
        ({"messages": []}, "messages"),
        ({}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]}, "tools[0].function.name"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "user", "content": "x"}], "max_tokens": "ten"}, "max_tokens"),
        ({"messages": [{"role": "tool", "tool_call_id": "nope", "content": "x"}]}, "messages[0].tool_call_id"),
    ],
)
def test_bad_input(gateway, body, param):
    response = httpx.post(gateway.url + "/v1/chat/completions", json=body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["param"] == param


def test_openai_agents_sdk_with_a_function_tool(gateway):
    from agents import Agent, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    seen = []

    @function_tool
    def get_weather(location: str) -> str:
        """Get the current weather for a city."""
        seen.append(location)
        return f"sunny in {location}"

    async def run(model_class) -> str:
        client = gateway.async_client()
        agent = Agent(
            name="weather",
            instructions="Use the tool.",
            tools=[get_weather],
            model=model_class(model=MODEL, openai_client=client),
        )
        result = await Runner.run(agent, 'weather? [call functions.get_weather {"location":"Lima"}]')
        return result.final_output

    assert asyncio.run(run(OpenAIResponsesModel)) == "The tool said: sunny in Lima"
    assert asyncio.run(run(OpenAIChatCompletionsModel)) == "The tool said: sunny in Lima"
    assert seen == ["Lima", "Lima"]


@pytest.mark.parametrize("stream", [False, True])
def test_stop_sequences_end_the_visible_text(gateway, emulator, stream):
    """`stop` cuts the answer before the first stop sequence and ends the generation; the reasoning,
    which the client did not ask to stop, keeps the same words."""
    said = "alpha Observation: beta gamma delta epsilon zeta eta theta [slow 20]"
    body = {"messages": [{"role": "user", "content": said}], "stop": ["Observation:", "never"]}
    before = emulator_stats(emulator)["aborted"]
    if stream:
        result = chat_stream(gateway, body)
        content, reasoning, finish = result["content"], result["reasoning"], result["finish_reason"]
    else:
        completion = gateway.client().chat.completions.create(model=MODEL, **body)
        choice = completion.choices[0]
        content, reasoning, finish = choice.message.content, choice.message.model_extra["reasoning"], choice.finish_reason
    assert content == "You said: alpha "
    assert "Observation:" in reasoning
    assert finish == "stop"
    assert emulator_stats(emulator)["aborted"] == before + 1  # the rest was never generated


def test_stop_sequence_that_never_completes_is_passed_on(gateway):
    """Text held back because it could begin a stop sequence is sent once it turns out not to."""
    completion = gateway.client().chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "ends with Obs"}], stop="Observation")
    assert completion.choices[0].message.content == "You said: ends with Obs"


@pytest.mark.parametrize("stop", [["a", "b", "c", "d", "e"], [""], ["x" * 300]])
def test_bad_stop_is_a_400(gateway, stop):
    response = httpx.post(gateway.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "stop": stop})
    assert response.status_code == 400 and response.json()["error"]["param"] == "stop"


def test_stop_matcher_at_every_split():
    from gateway.responses.loop.stops import StopMatcher

    text, stops = "one two STOP three", ("STOP", "TOPS", "ne t")
    for first in range(len(text) + 1):
        for second in range(first, len(text) + 1):
            matcher, out, stopped = StopMatcher(stops), "", False
            for piece in (text[:first], text[first:second], text[second:]):
                passed, stopped = matcher.feed(piece)
                out += passed
                if stopped:
                    break
            assert stopped and out == "o", (first, second, out)
    matcher = StopMatcher(("abc",))
    assert matcher.feed("xab") == ("x", False) and matcher.feed("d") == ("abd", False)
    assert matcher.feed("ab") == ("", False) and matcher.flush() == "ab"
