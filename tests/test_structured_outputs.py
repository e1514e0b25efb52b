"""What the request guarantees, enforced by the engine's grammar (`structured_outputs.structural_tag`).

The emulator enforces the tag with xgrammar (tests/grammar_check.py): a scripted completion the grammar
forbids is replaced by the script's `[[constrained ...]]` alternative, as a constrained model writes what
its grammar allows. So each test here has a model that *tries* to break the guarantee.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from .conftest import MODEL, emulator_stats, start_emulator, stream_raw
from .grammar_check import accepts

CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city", "population"],
    "additionalProperties": False,
}
STRICT_FORMAT = {"format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": True}}
PARIS = '{"city": "Paris", "population": 2100000}'
# What a constrained model writes when its plain answer is forbidden: the answer in the schema's shape.
JSON_ANSWER = f"[[constrained <|channel|>final<|message|>{PARIS}<|return|>]]"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False},
    "strict": True,
}
ROCKET = {"type": "function", "name": "launch_rocket", "parameters": {"type": "object", "properties": {}}, "strict": False}


def tag_sent(emulator) -> dict | None:
    sent = emulator_stats(emulator)["last_request"].get("structured_outputs")
    return json.loads(sent["structural_tag"]) if sent else None


def test_a_strict_text_format_holds_the_answer_to_its_schema(gateway, emulator):
    """The model answers plain text; the grammar lets only the schema's JSON through."""
    response = gateway.client().responses.create(model=MODEL, input=f"Which city? {JSON_ANSWER}", text=STRICT_FORMAT)
    assert response.status == "completed"
    assert json.loads(response.output_text) == {"city": "Paris", "population": 2100000}
    tag = tag_sent(emulator)
    assert tag is not None and CITY in _schemas(tag)


def test_a_json_object_format_allows_any_object_and_nothing_else(gateway, emulator):
    response = gateway.client().responses.create(model=MODEL, input=f"Which city? {JSON_ANSWER}", text={"format": {"type": "json_object"}})
    assert json.loads(response.output_text)["city"] == "Paris"
    assert {"type": "object"} in _schemas(tag_sent(emulator))


def test_strict_arguments_keep_their_schemas_required(gateway):
    """The model leaves out a required argument; the grammar does not let it."""
    wrong = '[call functions.get_weather {"town": "Paris"}]'
    right = '[[constrained <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>]]'
    response = gateway.client().responses.create(model=MODEL, input=f"weather? {wrong} {right}", tools=[WEATHER])
    call = response.output[-1]
    assert call.type == "function_call" and call.status == "completed"
    assert json.loads(call.arguments) == {"city": "Paris"}


def test_only_the_allowed_tools_can_be_called(gateway):
    """`allowed_tools` leaves get_weather only: the model's call to launch_rocket is not in the grammar."""
    wrong = "[call functions.launch_rocket {}]"
    right = '[[constrained <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>]]'
    response = gateway.client().responses.create(
        model=MODEL,
        input=f"go {wrong} {right}",
        tools=[WEATHER, ROCKET],
        tool_choice={"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "get_weather"}]},
    )
    call = response.output[-1]
    assert call.type == "function_call" and call.name == "get_weather"


def test_a_named_tool_choice_holds_the_forced_calls_arguments(gateway, emulator):
    """The call's header is in the prompt; its arguments are the named function's, whatever the model tries."""
    response = gateway.client().responses.create(
        model=MODEL,
        input='go [args {"town": "Rome"}] [[constrained {"city": "Rome"}<|call|>]]',
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    assert json.loads(response.output[-1].arguments) == {"city": "Rome"}
    assert emulator_stats(emulator)["last_prompt"].endswith("to=functions.get_weather <|constrain|>json<|message|>")


def test_tool_choice_none_leaves_no_call_in_the_grammar(gateway, emulator):
    response = gateway.client().responses.create(
        model=MODEL,
        input="[call functions.get_weather {}] [[constrained <|channel|>final<|message|>No tools.<|return|>]]",
        tools=[WEATHER],
        tool_choice="none",
    )
    assert response.output_text == "No tools."
    assert "get_weather" not in json.dumps(tag_sent(emulator))


def test_every_header_shape_gpt_oss_writes_is_in_the_grammar(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input="hi", tools=[WEATHER])
    tag = json.dumps(tag_sent(emulator))
    encode = _encoder()
    for header in (
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
        "<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>",
        "<|channel|>commentary to=functions.get_weather json<|message|>",
        "<|channel|>commentary to=functions.get_weather<|message|>",
        " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>",
        " to=functions.get_weather<|channel|>commentary json<|message|>",
        "<|channel|>analysis to=functions.get_weather code<|message|>",
    ):
        assert accepts(tag, encode(f'<|channel|>analysis<|message|>x<|end|><|start|>assistant{header}{{"city": "P"}}<|call|>')), header
    for broken in (
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": 1}<|call|>',  # not its schema
        "<|channel|>final<|message|>a <|channel|> in the answer<|return|>",  # a special token's text in an item
        "<|channel|>analysis<|message|>x <|start|>assistant<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>",
    ):
        assert not accepts(tag, encode(broken)), broken


def test_without_structured_outputs_no_tag_is_sent(emulator, make_gateway):
    gateway = make_gateway(emulator.url, engine={"structured_outputs": "off"})
    gateway.client().responses.create(model=MODEL, input="hi", tools=[WEATHER])
    assert tag_sent(emulator) is None


def test_an_engine_that_refuses_the_grammar_is_called_again_without_it(emulator, make_gateway):
    """`auto`: the answer still comes, and the refusal is counted; `on`: a clear error, not a 500."""
    gateway = make_gateway(emulator.url)
    response = gateway.client().responses.create(model=MODEL, input="hi [refuse-grammar]")
    assert response.status == "completed" and response.output_text.startswith("You said")
    metrics = httpx.get(gateway.url + "/metrics").text
    assert "gateway_structured_outputs_refused_total 1.0" in metrics
    strict = make_gateway(emulator.url, engine={"structured_outputs": "on"})
    refused = httpx.post(strict.url + "/v1/responses", json={"model": MODEL, "input": "hi [refuse-grammar]"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "structured_outputs_refused"


def test_chat_response_format_is_enforced(gateway, emulator):
    completion = gateway.client().chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": f"Which city? {JSON_ANSWER}"}],
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY, "strict": True}},
    )
    assert json.loads(completion.choices[0].message.content or "") == {"city": "Paris", "population": 2100000}
    assert CITY in _schemas(tag_sent(emulator))


def _schemas(tag: dict | None) -> list[dict]:
    """Every JSON schema in a tag."""
    found: list[dict] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "json_schema":
                found.append(node["json_schema"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tag)
    return found


def _encoder():
    from gateway.engine.harmony import encoding

    return lambda text: encoding().encode(text, allowed_special="all")


@pytest.mark.parametrize("refused_by", ["off", "engine"])
def test_where_nothing_enforced_the_format_a_broken_answer_is_never_shown(emulator, make_gateway, refused_by):
    """No grammar held the answer (enforcement off, or an engine that refused it): the plain-text answer is
    checked, not shown, and the model told to answer again; its JSON answer is the response's only message."""
    gateway = make_gateway(emulator.url, engine={"structured_outputs": "off" if refused_by == "off" else "auto"})
    refuse = " [refuse-grammar]" if refused_by == "engine" else ""
    events = stream_raw(gateway, {"input": f"Which city?{refuse} [[corrected <|channel|>final<|message|>{PARIS}<|return|>]]", "text": STRICT_FORMAT})
    final = events[-1]["response"]
    assert final["status"] == "completed"
    messages = [item for item in final["output"] if item["type"] == "message"]
    assert len(messages) == 1 and json.loads(messages[0]["content"][0]["text"]) == json.loads(PARIS)
    deltas = [event["delta"] for event in events if event["type"] == "response.output_text.delta"]
    assert "You said" not in "".join(deltas)
    assert "Your answer does not fit the required format: it is not JSON" in emulator_stats(emulator)["last_prompt"]


def test_a_model_that_never_fits_the_format_fails_the_response_after_its_tries(emulator, make_gateway):
    gateway = make_gateway(emulator.url, engine={"structured_outputs": "off"})
    events = stream_raw(gateway, {"input": "Which city?", "text": STRICT_FORMAT})
    final = events[-1]["response"]
    assert events[-1]["type"] == "response.failed" and final["status"] == "failed"
    assert "did not fit the response's text.format after 3 tries" in final["error"]["message"]
    assert not [item for item in final["output"] if item["type"] == "message"]


def test_a_schema_broken_answer_is_told_what_breaks(emulator, make_gateway):
    gateway = make_gateway(emulator.url, engine={"structured_outputs": "off"})
    wrong = '[[corrected <|channel|>final<|message|>{"city": "Paris"}<|return|>]]'
    with pytest.raises(openai.InternalServerError) as failed:  # a response that failed, asked without a stream
        gateway.client().responses.create(model=MODEL, input=f"Which city? {wrong}", text=STRICT_FORMAT)
    assert failed.value.body["code"] == "model_output_invalid" and "'population' is a required property" in failed.value.body["message"]
    assert "'population' is a required property" in emulator_stats(emulator)["last_prompt"].split("Your answer does not fit")[-1]


@pytest.mark.parametrize("refused_by", ["off", "engine"])
def test_where_nothing_enforced_the_arguments_a_call_is_shown_only_once_it_is_usable(emulator, make_gateway, refused_by):
    """No grammar held the call (enforcement off, or an engine that refused it): the client sees nothing of
    a call whose arguments are not JSON or break the schema (no item, no delta, no index), only the call
    the model then writes as it should, whole; the model is told what was wrong each time."""
    gateway = make_gateway(emulator.url, engine={"structured_outputs": "off" if refused_by == "off" else "auto"})
    refuse = " [refuse-grammar]" if refused_by == "engine" else ""
    tries = '[args {"city": Rome}] [args {"town":"Rome"}] [args {"city":"Rome"}]'
    events = stream_raw(gateway, {"input": f"weather {tries}{refuse}", "tools": [WEATHER], "tool_choice": "required"})
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert [(item["type"], item["status"]) for item in final["output"]] == [("function_call", "completed")]
    assert json.loads(final["output"][0]["arguments"]) == {"city": "Rome"}
    shown = [event for event in events if "item_id" in event or "item" in event]
    assert {event.get("item_id") or event["item"]["id"] for event in shown} == {final["output"][0]["id"]}
    assert [event["type"] for event in shown] == [
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
    ]  # fmt: skip
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "get_weather: it is not JSON" in prompt and "('town' was unexpected)" in prompt

    stream = gateway.client().chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": f"weather {tries}{refuse}"}], stream=True,
        tools=[{"type": "function", "function": {key: WEATHER[key] for key in ("name", "parameters", "strict")}}], tool_choice="required",
    )  # fmt: skip
    calls = [call for chunk in stream for choice in chunk.choices for call in choice.delta.tool_calls or ()]
    assert {call.index for call in calls} == {0}
    assert json.loads("".join(call.function.arguments or "" for call in calls)) == {"city": "Rome"}


@pytest.fixture
def lax_engine(workdir):
    """A vLLM-like engine that takes `structured_outputs` and enforces nothing (as one before 0.10.2 does,
    while its /version says a release that should)."""
    engine = start_emulator(workdir, "--ignore-grammar")
    yield engine
    engine.stop()


def test_an_engine_that_takes_the_grammar_and_breaks_it_is_distrusted(lax_engine, make_gateway):
    """The first call that breaks the grammar it was sent (streamed live, as a held call is) ends incomplete
    and the model writes it again; the engine is marked, and from then on no grammar is sent to it and its
    calls are held back: a call whose arguments do not parse never reaches the client."""
    gateway = make_gateway(lax_engine.url, engine={"distrust_on_violation": True})
    assert _grammar_of(gateway) == ("0.11.1", "enforced")
    # Arguments that are JSON and miss the schema are refused alone: a grammar may not hold every keyword.
    schema_only = {"input": 'weather [args {"town":"Rome"}] [args {"city":"Rome"}]', "tools": [WEATHER], "tool_choice": "required"}
    assert [item["status"] for item in stream_raw(gateway, schema_only)[-1]["response"]["output"]] == ["incomplete", "completed"]
    assert _grammar_of(gateway) == ("0.11.1", "enforced")
    # Arguments that are not JSON at all: what any grammar forbids.
    tries = '[args {"city": Rome}] [args {"city":"Rome"}]'
    body = {"input": f"weather {tries}", "tools": [WEATHER], "tool_choice": "required"}
    final = stream_raw(gateway, body)[-1]["response"]
    assert final["status"] == "completed"
    assert [(item["type"], item["status"]) for item in final["output"]] == [("function_call", "incomplete"), ("function_call", "completed")]
    assert json.loads(final["output"][1]["arguments"]) == {"city": "Rome"}
    assert _grammar_of(gateway) == ("0.11.1", "ignored")
    assert "gateway_grammar_violations_total{" in httpx.get(gateway.url + "/metrics").text
    # Distrusted: the broken call is held back and never shown, only the call the model then writes.
    events = stream_raw(gateway, body)
    final = events[-1]["response"]
    assert [(item["type"], item["status"]) for item in final["output"]] == [("function_call", "completed")]
    assert {event.get("item_id") or event["item"]["id"] for event in events if "item_id" in event or "item" in event} == {final["output"][0]["id"]}
    assert "structured_outputs" not in emulator_stats(lax_engine)["last_request"]
    gateway.stop()
    assert gateway.log.read_text().count("it does not enforce grammars") == 1


def test_an_answer_past_its_grammar_fails_and_marks_the_engine(lax_engine, make_gateway):
    """A strict format's answer the engine did not hold was streamed as it came: the response fails, and the
    next one is checked before anything is shown (the model told, and it answers in the format)."""
    gateway = make_gateway(lax_engine.url, engine={"distrust_on_violation": True})
    with pytest.raises(openai.APIStatusError) as failed:
        gateway.client().responses.create(model=MODEL, input=f"Which city? {JSON_ANSWER}", text=STRICT_FORMAT)
    assert failed.value.status_code == 502 and "written past the grammar" in failed.value.message
    assert _grammar_of(gateway)[1] == "ignored"
    fixed = '[[corrected <|channel|>final<|message|>{"city": "Paris", "population": 2100000}<|return|>]]'
    answer = gateway.client().responses.create(model=MODEL, input=f"Which city? {fixed}", text=STRICT_FORMAT)
    assert json.loads(answer.output_text) == {"city": "Paris", "population": 2100000}


def test_an_engine_too_old_to_read_the_grammar_gets_none(workdir, make_gateway):
    """vLLM before 0.10.2 ignores `structured_outputs`: read from /version at start, it is sent no grammar,
    and its calls are held back and checked from the first."""
    old = start_emulator(workdir, "--ignore-grammar", "--vllm-version", "0.10.1.1")
    unknown = start_emulator(workdir, "--vllm-version", "none")
    silent = start_emulator(workdir, "--vllm-version", "hang")
    try:
        gateway = make_gateway(old.url, engine={"distrust_on_violation": True})
        assert _grammar_of(gateway) == ("0.10.1.1", "ignored")
        events = stream_raw(gateway, {"input": 'weather [args {"city": Rome}] [args {"city":"Rome"}]', "tools": [WEATHER], "tool_choice": "required"})
        assert [item["status"] for item in events[-1]["response"]["output"]] == ["completed"]
        assert "structured_outputs" not in emulator_stats(old)["last_request"]
        # No /version (not vLLM's, or hidden): trusted, and checked.
        assert _grammar_of(make_gateway(unknown.url)) == (None, "unverified")
        # A /version held open costs nothing: the engine is up, its grammar unverified, and it answers.
        held = make_gateway(silent.url)
        assert _grammar_of(held) == (None, "unverified")
        assert httpx.get(held.url + "/ready").json()["engine"] is True
        assert held.client().responses.create(model=MODEL, input="hi").output_text == "You said: hi"
    finally:
        old.stop()
        unknown.stop()
        silent.stop()


def _grammar_of(gateway) -> tuple[str | None, str]:
    (engine,) = httpx.get(gateway.url + "/ready").json()["engines"]
    return engine["version"], engine["grammar"]
