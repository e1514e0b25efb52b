"""Anthropic's Messages API through the `anthropic` SDK: answers whole and streamed, every block the run
makes, tool turns with thinking given back under its signature, deferred tools, count_tokens, the
models list, and errors in Anthropic's shape with its statuses."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import httpx
import pytest

from .conftest import MODEL, Gateway, Process, emulator_stats
from .test_limits import held
from .test_structured_outputs import CITY, JSON_ANSWER, PARIS

WEATHER = {
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
}
ARGS = {"location": "Paris"}
ASK = f"weather in Paris? [call functions.get_weather {json.dumps(ARGS, separators=(',', ':'))}]"
KEYS = [{"key": "alice-key", "tenant": "alice"}, {"key": "mallory-key", "tenant": "mallory"}, {"key": "bob-key", "tenant": "bob"}]


def client(gateway: Gateway, **kwargs: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(**({"base_url": gateway.url, "api_key": "unused", "max_retries": 0} | kwargs))


def post(gateway: Gateway, path: str, body: Any, **headers: str) -> httpx.Response:
    return httpx.post(gateway.url + path, json=body, headers={"anthropic-version": "2023-06-01", **headers}, timeout=30)


def raw_events(gateway: Gateway, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    response = post(gateway, "/v1/messages", {"stream": True} | body)
    assert response.status_code == 200, response.text
    events = []
    for frame in response.text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_a_plain_answer_whole_with_its_thinking_under_a_default_claude_name(gateway: Gateway) -> None:
    message = client(gateway).messages.create(model="claude-opus-5-5", max_tokens=1024, messages=[{"role": "user", "content": "hello"}])
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking == "The user said 'hello'. I will answer." and thinking.signature
    assert text.type == "text" and text.text == "You said: hello"
    assert message.stop_reason == "end_turn" and message.model == "claude-opus-5-5" and message.id.startswith("msg_")
    assert message.usage.input_tokens + message.usage.cache_read_input_tokens > 0 and message.usage.output_tokens > 0


def test_the_stream_tells_every_block_in_order_and_counts_input_once(gateway: Gateway) -> None:
    events = raw_events(gateway, {"model": MODEL, "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}]})
    kinds = [kind for kind, _ in events if kind != "ping"]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    start = events[0][1]["message"]
    assert start["usage"]["input_tokens"] > 0 and start["content"] == [] and start["stop_reason"] is None
    blocks = [data["content_block"]["type"] for kind, data in events if kind == "content_block_start"]
    assert blocks == ["thinking", "text"]
    deltas = [data["delta"] for kind, data in events if kind == "content_block_delta"]
    assert "".join(d["thinking"] for d in deltas if d["type"] == "thinking_delta") == "The user said 'hi'. I will answer."
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == "You said: hi"
    signatures = [d["signature"] for d in deltas if d["type"] == "signature_delta"]
    assert len(signatures) == 1 and signatures[0]
    ended = events[-2][1]
    assert ended["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}
    assert set(ended["usage"]) == {"output_tokens"}  # the input is not told again: Claude Code would add it twice
    stops = [data["index"] for kind, data in events if kind == "content_block_stop"]
    assert stops == [0, 1]


def test_a_tool_turn_streamed_then_answered_with_its_thinking_given_back(gateway: Gateway, emulator: Process) -> None:
    sdk = client(gateway)
    with sdk.messages.stream(model=MODEL, max_tokens=1024, tools=[WEATHER], messages=[{"role": "user", "content": ASK}]) as stream:
        partial = "".join(event.partial_json for event in stream if event.type == "input_json")
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use"
    call = first.content[-1]
    assert call.type == "tool_use" and call.name == "get_weather" and call.input == ARGS and json.loads(partial) == ARGS
    history = [{"role": "user", "content": ASK}, {"role": "assistant", "content": [block.model_dump() for block in first.content]}]
    history.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "18C and sunny"}]})
    second = sdk.messages.create(model=MODEL, max_tokens=1024, tools=[WEATHER], messages=history)
    assert second.content[-1].text == "The tool said: 18C and sunny" and second.stop_reason == "end_turn"
    # The analysis before the call, unsealed from its signature, was in the prompt between the call and its result.
    assert "I will answer.<|end|><|start|>assistant to=functions.get_weather" in emulator_stats(emulator)["last_prompt"]


def test_an_error_result_is_told_as_one(gateway: Gateway, emulator: Process) -> None:
    history = [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": ARGS}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True, "content": [{"type": "text", "text": "no network"}]}]},
    ]  # fmt: skip
    answer = client(gateway).messages.create(model=MODEL, max_tokens=512, tools=[WEATHER], messages=history)
    assert answer.content[-1].text == "The tool said: Error: no network"


def test_a_forged_or_foreign_signature_is_refused(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, auth={"api_keys": KEYS})
    alice, mallory = client(gateway, api_key="alice-key"), client(gateway, auth_token="mallory-key", api_key=None)
    first = alice.messages.create(model=MODEL, max_tokens=1024, tools=[WEATHER], messages=[{"role": "user", "content": ASK}])
    thinking, call = first.content[0], first.content[-1]
    for signature in (thinking.signature[:-4] + "AAAA", "forged"):
        history = [
            {"role": "user", "content": ASK},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "anything", "signature": signature}, call.model_dump()]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "ok"}]},
        ]
        with pytest.raises(anthropic.BadRequestError) as refused:
            alice.messages.create(model=MODEL, max_tokens=256, tools=[WEATHER], messages=history)
        assert refused.value.body["error"]["type"] == "invalid_request_error" and "signature" in refused.value.body["error"]["message"]
    history[1]["content"][0] = thinking.model_dump()  # alice's own, sent by mallory
    with pytest.raises(anthropic.BadRequestError):
        mallory.messages.create(model=MODEL, max_tokens=256, tools=[WEATHER], messages=history)
    assert alice.messages.create(model=MODEL, max_tokens=256, tools=[WEATHER], messages=history).stop_reason == "end_turn"


def test_keys_by_either_header_and_a_401_in_anthropic_shape(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, auth={"api_keys": KEYS})
    body = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    assert post(gateway, "/v1/messages", body, **{"x-api-key": "alice-key"}).status_code == 200
    assert post(gateway, "/v1/messages", body, authorization="Bearer alice-key").status_code == 200
    with pytest.raises(anthropic.AuthenticationError) as refused:
        client(gateway, api_key="wrong").messages.create(**body)
    assert refused.value.body["type"] == "error" and refused.value.body["error"]["type"] == "authentication_error"
    answer = post(gateway, "/v1/messages", body)
    assert answer.status_code == 401 and answer.json()["request_id"] == answer.headers["request-id"]


def test_deferred_tools_are_declared_only_once_referenced(gateway: Gateway, emulator: Process) -> None:
    cron = {"name": "CronList", "description": "List the cron jobs", "input_schema": {"type": "object", "properties": {}}, "defer_loading": True}
    search = {"name": "ToolSearch", "description": "Find tools", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}
    sdk = client(gateway)
    asked = 'find cron [call functions.ToolSearch {"query":"select:CronList"}]'
    first = sdk.messages.create(model=MODEL, max_tokens=512, tools=[search, cron], messages=[{"role": "user", "content": asked}])
    assert "type CronList" not in emulator_stats(emulator)["last_prompt"]
    call = first.content[-1]
    history = [
        {"role": "user", "content": asked},
        {"role": "assistant", "content": [call.model_dump()]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": [{"type": "tool_reference", "tool_name": "CronList"}]}],
        },
    ]
    sdk.messages.create(model=MODEL, max_tokens=512, tools=[search, cron], messages=history)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert prompt.count("type CronList") == 1 and prompt.index("Tool CronList is loaded") < prompt.index("type CronList")


def test_system_turns_the_billing_line_and_thinking_budgets(gateway: Gateway, emulator: Process) -> None:
    system = [{"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332; cch=12345;"}, {"type": "text", "text": "Be terse."}]
    messages = [{"role": "user", "content": "[instructions]"}, {"role": "system", "content": "Mind the tests."}]
    messages = [messages[1], messages[0]]
    for thinking, effort in (
        ({"type": "enabled", "budget_tokens": 31999}, "high"),
        ({"type": "disabled"}, "low"),
        ({"type": "adaptive", "display": "updates"}, "medium"),
    ):
        body = {"model": "claude-sonnet-4-5-20250929", "max_tokens": 512, "system": system, "thinking": thinking, "messages": messages}
        answer = post(gateway, "/v1/messages", body)
        assert answer.status_code == 200, answer.text
        text = answer.json()["content"][-1]["text"]
        assert f"effort={effort}" in text and "Be terse." in emulator_stats(emulator)["last_prompt"]
        assert "Mind the tests." in emulator_stats(emulator)["last_prompt"] and "billing-header" not in emulator_stats(emulator)["last_prompt"]
    body["output_config"] = {"effort": "low"}
    assert "effort=low" in post(gateway, "/v1/messages", body).json()["content"][-1]["text"]


def test_a_json_schema_answer_held_by_the_grammar(gateway: Gateway) -> None:
    body = {"model": MODEL, "max_tokens": 512, "messages": [{"role": "user", "content": f"a city {JSON_ANSWER}"}]}
    answer = post(gateway, "/v1/messages", body | {"output_config": {"format": {"type": "json_schema", "schema": CITY}}})
    assert answer.status_code == 200, answer.text
    assert json.loads(answer.json()["content"][-1]["text"]) == json.loads(PARIS)


def test_stop_sequences_and_max_tokens_are_stop_reasons(gateway: Gateway) -> None:
    sdk = client(gateway)
    stopped = sdk.messages.create(model=MODEL, max_tokens=512, stop_sequences=["said"], messages=[{"role": "user", "content": "hi"}])
    assert stopped.stop_reason == "stop_sequence" and stopped.stop_sequence == "said" and stopped.content[-1].text == "You "
    cut = sdk.messages.create(model=MODEL, max_tokens=30, messages=[{"role": "user", "content": "[long 400]"}])
    assert cut.stop_reason == "max_tokens" and cut.usage.output_tokens == 30


def test_count_tokens_is_the_prompt_the_answer_used(gateway: Gateway) -> None:
    sdk = client(gateway)
    body = {"model": MODEL, "system": "Be brief.", "tools": [WEATHER], "messages": [{"role": "user", "content": "count me"}]}
    counted = sdk.messages.count_tokens(**body)
    answered = sdk.messages.create(max_tokens=256, **body)
    assert counted.input_tokens == answered.usage.input_tokens + answered.usage.cache_read_input_tokens > 0


def test_models_in_anthropic_shape_when_asked_so(gateway: Gateway) -> None:
    listed = client(gateway).models.list()
    assert [model.id for model in listed.data] == [MODEL] and listed.data[0].type == "model"
    assert client(gateway).models.retrieve("claude-opus-5-5").id == "claude-opus-5-5"
    assert httpx.get(gateway.url + "/v1/models").json()["object"] == "list"  # OpenAI's, without the header


@pytest.mark.parametrize(
    "body, status, words",
    [
        ({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}, 400, "max_tokens"),
        (
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
            400,
            "'image' is not supported",
        ),
        ({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], "tempo": 1}, 400, "tempo"),
        (
            {
                "model": MODEL,
                "max_tokens": 10,
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"type": "computer_20250124", "name": "computer"}],
            },
            400,
            "computer_20250124",
        ),
        (
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]},
            400,
            "prefill",
        ),
        (
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nope"}]}]},
            400,
            "tool_use_id",
        ),
        ({"model": "gpt-4o", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}, 404, "gpt-4o"),
        ([1, 2], 400, ""),
        (
            {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER | {"name": "n" * 100}]},
            400,
            "tools[0].name",
        ),
        ({"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}], "thinking": {"type": "enabled"}}, 400, "budget_tokens"),
    ],
)
def test_bad_requests_are_anthropic_errors(gateway: Gateway, body: Any, status: int, words: str) -> None:
    answer = post(gateway, "/v1/messages", body)
    assert answer.status_code == status, answer.text
    error = answer.json()
    assert error["type"] == "error" and set(error) == {"type", "error", "request_id"} and words in error["error"]["message"]
    assert error["error"]["type"] == ("not_found_error" if status == 404 else "invalid_request_error")


def test_a_huge_body_is_a_413_in_anthropic_shape(gateway: Gateway) -> None:
    text = "x" * (100 * 1024 * 1024)
    answer = httpx.post(gateway.url + "/v1/messages", content=b'{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"' + text.encode() + b'"}]}',
                        headers={"content-type": "application/json"}, timeout=60)  # fmt: skip
    assert answer.status_code == 413 and answer.json()["error"]["type"] == "request_too_large"


def test_a_tenants_limit_is_429_and_back_pressure_529_overloaded(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, auth={"api_keys": KEYS}, limits={"max_concurrent_per_tenant": 1, "max_concurrent": 2})
    body = {"model": MODEL, "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    with held(gateway, "alice-key"):
        limited = post(gateway, "/v1/messages", body, **{"x-api-key": "alice-key"})
        assert limited.status_code == 429 and limited.json()["error"]["type"] == "rate_limit_error"
        with held(gateway, "mallory-key"):
            answer = post(gateway, "/v1/messages", body, **{"x-api-key": "bob-key"})  # under his own limit, over the gateway's
            assert answer.status_code == 529 and answer.json()["error"]["type"] == "overloaded_error"


def test_an_engine_failing_mid_answer_ends_the_stream_with_an_error_event(gateway: Gateway) -> None:
    body = {"model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": "fail [midstream-error]"}]}
    events = raw_events(gateway, body)
    assert events[0][0] == "message_start" and events[-1][0] == "error" and "message_stop" not in [kind for kind, _ in events]
    assert events[-1][1]["type"] == "error" and events[-1][1]["error"]["type"] == "api_error" and events[-1][1]["error"]["message"]
    with pytest.raises(anthropic.InternalServerError) as failed:  # what Claude Code asks again without streaming
        client(gateway).messages.create(**body)
    assert failed.value.body["type"] == "error" and failed.value.body["error"]["type"] == "api_error"


def test_an_engine_cut_mid_answer_goes_on_unseen(gateway: Gateway) -> None:
    with client(gateway).messages.stream(model=MODEL, max_tokens=256, messages=[{"role": "user", "content": "go on [crash 9]"}]) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "You said: go on [crash 9]" and final.stop_reason == "end_turn"


def test_clear_tool_uses_clears_the_older_results_once_due(gateway: Gateway, emulator: Process) -> None:
    history: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    for step in (1, 2, 3):
        call = {"type": "tool_use", "id": f"toolu_{step}", "name": "get_weather", "input": {"location": f"city-{step}"}}
        history += [
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{step}", "content": f"result-{step} " + "words " * 40}]},
        ]
    edit = {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "tool_uses", "value": 3},
        "keep": {"type": "tool_uses", "value": 1},
        "clear_tool_inputs": True,
    }
    body = {"model": MODEL, "max_tokens": 256, "tools": [WEATHER], "messages": history, "context_management": {"edits": [edit]}}
    answer = post(gateway, "/v1/messages", body).json()
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "result-1" not in prompt and "city-2" not in prompt and "result-3" in prompt and prompt.count("cleared to save context") == 2
    (applied,) = answer["context_management"]["applied_edits"]
    assert (
        applied["cleared_tool_uses"] == 2
        and applied["cleared_input_tokens"] > 0
        and answer["content"][-1]["text"].startswith("The tool said: result-3")
    )
    # Not yet due (a trigger of four uses), or excluded: nothing is cleared.
    for changed in ({"trigger": {"type": "tool_uses", "value": 4}}, {"exclude_tools": ["get_weather"]}):
        body["context_management"] = {"edits": [edit | changed]}
        assert post(gateway, "/v1/messages", body).json()["context_management"] is None
        assert "result-1" in emulator_stats(emulator)["last_prompt"]
    body["context_management"] = {"edits": [{"type": "clear_everything"}]}
    assert post(gateway, "/v1/messages", body).status_code == 400
