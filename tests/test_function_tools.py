"""Client-side function tools in the Responses API: declared in Harmony, streamed, continued."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import openai
import pytest

from .conftest import MODEL, emulator_stats, stream_raw, stream_sdk

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["location"],
    },
    "strict": True,
}
PARIS = '{"location":"Paris","unit":"c"}'
ASK = f"weather in Paris? [call functions.get_weather {PARIS}]"


def test_functions_are_declared_in_the_developer_message(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input=ASK, tools=[WEATHER], instructions="Be brief.")
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace functions {" in prompt
    assert "// Get the current weather for a city\ntype get_weather = (_: {" in prompt
    assert 'unit?: "c" | "f"' in prompt
    assert prompt.index("<|start|>developer") < prompt.index("namespace functions")


@pytest.mark.parametrize("order", ["", " recipient-first"])
def test_function_call_streams_its_arguments(gateway, order):
    events = stream_sdk(gateway.client(), input=ASK.replace("]", f"{order}]"), tools=[WEATHER])
    types = [e["type"] for e in events]
    assert "response.function_call_arguments.delta" in types
    assert not any("code_interpreter" in t or "mcp" in t for t in types)
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert len(deltas) > 1 and "".join(deltas) == PARIS
    final = events[-1]["response"]
    assert final["status"] == "completed"
    call = final["output"][-1]
    assert call["type"] == "function_call" and call["name"] == "get_weather"
    assert call["id"].startswith("fc_") and call["call_id"].startswith("call_")
    assert call["arguments"] == PARIS


def test_streamed_and_non_streamed_arguments_are_identical(gateway):
    """lmdeploy #4014: arguments duplicated per chunk when streamed."""
    client = gateway.client()
    plain = client.responses.create(model=MODEL, input=ASK, tools=[WEATHER])
    with client.responses.stream(model=MODEL, input=ASK, tools=[WEATHER]) as stream:
        streamed = "".join(e.delta for e in stream if e.type == "response.function_call_arguments.delta")
        final = stream.get_final_response()
    assert plain.output[-1].arguments == streamed == final.output[-1].arguments == PARIS


def test_function_loop_with_previous_response_id(gateway):
    client = gateway.client()
    first = client.responses.create(model=MODEL, input=ASK, tools=[WEATHER])
    call = first.output[-1]
    second = client.responses.create(
        model=MODEL,
        previous_response_id=first.id,
        tools=[WEATHER],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "18 C and sunny"}],
    )
    assert second.output_text == "The tool said: 18 C and sunny"
    # The call is answered: sending its output again is an error.
    with pytest.raises(openai.BadRequestError):
        client.responses.create(
            model=MODEL,
            previous_response_id=second.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "again"}],
        )


def test_a_thread_sent_again_with_previous_response_id(gateway, emulator):
    """Semantic Kernel sends the whole thread again with previous_response_id: the call and its output that
    are already in the history are skipped, not refused and not added twice."""
    client = gateway.client()
    first = client.responses.create(model=MODEL, input=ASK, tools=[WEATHER])
    call = first.output[-1]
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "18 C and sunny"}
    second = client.responses.create(model=MODEL, previous_response_id=first.id, tools=[WEATHER], input=[output])
    thread = [{"role": "user", "content": ASK}, call.to_dict(), output, {"role": "user", "content": "thanks"}]
    third = client.responses.create(model=MODEL, previous_response_id=second.id, tools=[WEATHER], input=thread)
    assert third.output_text == "You said: thanks"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert prompt.count("<|message|>18 C and sunny") == 1 and prompt.count("to=functions.get_weather") == 1
    assert prompt.count(ASK) == 1  # the question, sent again with the thread, is read once
    for wrong in ({"call_id": "call_never"}, {"output": "another answer"}):
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model=MODEL, previous_response_id=second.id, tools=[WEATHER], input=[output | wrong])
        assert err.value.body["param"] == "input[0].call_id"


def test_function_loop_with_history_sent_back(gateway):
    client = gateway.client()
    history = [{"role": "user", "content": ASK}]
    first = client.responses.create(model=MODEL, input=history, tools=[WEATHER], store=False)
    history += [item.to_dict() for item in first.output]
    call = first.output[-1]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "rainy"})
    events = stream_sdk(gateway.client(), input=history, tools=[WEATHER], store=False)
    assert events[-1]["response"]["output"][-1]["content"][0]["text"] == "The tool said: rainy"


def test_unknown_call_id_is_a_400(gateway):
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input=[{"type": "function_call_output", "call_id": "call_x", "output": "1"}])
    assert err.value.body["param"] == "input[0].call_id"


def test_undeclared_function_is_told_to_the_model(gateway):
    """The model calls a function the request did not declare: no item reaches the client; the model is
    told the function does not exist and answers."""
    events = stream_raw(gateway, {"input": "[call functions.launch_rocket {}] [misbehave]", "tools": [WEATHER]})
    final = events[-1]["response"]
    assert final["status"] == "completed"
    assert [item["type"] for item in final["output"]] == ["reasoning", "reasoning", "message"]
    assert "no function named 'launch_rocket'" in final["output"][-1]["content"][0]["text"]


def test_invalid_json_arguments_are_not_handed_to_the_client(gateway):
    events = stream_raw(gateway, {"input": '[call functions.get_weather {"location": Paris}] [misbehave]', "tools": [WEATHER]})
    final = events[-1]["response"]
    assert final["status"] == "completed"
    call = next(item for item in final["output"] if item["type"] == "function_call")
    assert call["status"] == "incomplete"
    assert "get_weather: it is not JSON" in final["output"][-1]["content"][0]["text"]


def test_tool_choice_none_declares_nothing(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input="hi", tools=[WEATHER], tool_choice="none")
    assert "namespace functions" not in emulator_stats(emulator)["last_prompt"]


def test_tool_choice_named_forces_the_call(gateway, emulator):
    response = gateway.client().responses.create(
        model=MODEL,
        input='hello [args {"location":"Oslo"}]',
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    assert [item.type for item in response.output] == ["function_call"]
    assert response.output[0].arguments == '{"location":"Oslo"}'
    assert emulator_stats(emulator)["last_prompt"].endswith(
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
    )


def test_tool_choice_required_forces_a_call(gateway):
    events = stream_sdk(gateway.client(), input='hi [args {"location":"Rome"}]', tools=[WEATHER], tool_choice="required")
    call = events[-1]["response"]["output"][0]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"location": "Rome"}


def test_strict_arguments_that_break_the_schema_are_called_again(gateway):
    """A strict function's arguments are checked against its schema; a call that breaks it goes back to
    the model, and `tool_choice: required` stays forced until a valid call is made."""
    events = stream_sdk(
        gateway.client(),
        input='hi [args {"city":"Rome"}] [args {"location":"Rome","unit":"k"}] [args {"location":"Rome"}] [misbehave]',
        tools=[WEATHER],
        tool_choice="required",
    )
    final = events[-1]["response"]
    calls = [item for item in final["output"] if item["type"] == "function_call"]
    assert [call["status"] for call in calls] == ["incomplete", "incomplete", "completed"]
    assert json.loads(calls[-1]["arguments"]) == {"location": "Rome"}
    assert final["status"] == "completed"


def test_strict_schema_errors_reach_the_model(gateway, emulator):
    body = {"input": '[call functions.get_weather {"location": 3}] [misbehave]', "tools": [WEATHER]}
    final = stream_raw(gateway, body)[-1]["response"]
    call = next(item for item in final["output"] if item["type"] == "function_call")
    assert call["status"] == "incomplete"
    told = final["output"][-1]["content"][0]["text"]
    assert "do not match the parameters of get_weather" in told and "is not of type 'string'" in told and "location" in told


def test_non_strict_arguments_are_not_checked(gateway):
    loose = WEATHER | {"strict": False}
    response = gateway.client().responses.create(model=MODEL, input='[call functions.get_weather {"town": "Rome"}]', tools=[loose])
    assert response.output[-1].type == "function_call" and response.output[-1].status == "completed"


@pytest.mark.parametrize(
    "parameters, why",
    [
        ({"type": "object", "properties": {"a": {"type": "strin"}}}, "not a valid JSON Schema"),
        ({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?=x)y"}}}, "is not supported"),
    ],
)
def test_invalid_strict_schema_is_a_400(gateway, parameters, why):
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input="x", tools=[WEATHER | {"parameters": parameters}])
    assert err.value.body["param"] == "tools[0].parameters" and why in err.value.body["message"]


def test_schema_patterns_run_in_linear_time(gateway):
    """A backtracking pattern against the model's arguments: RE2 answers at once."""
    evil = WEATHER | {"parameters": {"type": "object", "properties": {"location": {"type": "string", "pattern": "^(a+)+$"}}}}
    arguments = json.dumps({"location": "a" * 3000 + "!"})
    started = time.monotonic()
    response = gateway.client().responses.create(model=MODEL, input=f"[call functions.get_weather {arguments}] [misbehave]", tools=[evil])
    assert time.monotonic() - started < 5
    assert response.output[-1].type == "message" and "does not match" in response.output[-1].content[0].text


LONG_ARGS = json.dumps({"location": " ".join(f"district{i}" for i in range(40))})


def test_argument_deltas_arrive_as_the_model_writes_them(gateway):
    """Not held back until the call is complete: with a chunk every 30 ms, deltas arrive spread out."""
    arrivals = []
    body = {"input": f"[call functions.get_weather {LONG_ARGS}] [slow 30]", "tools": [WEATHER], "stream": True}
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", gateway.url + "/v1/responses", json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and '"response.function_call_arguments.delta"' in line:
                    arrivals.append(time.monotonic())
                elif '"response.function_call_arguments.done"' in line:
                    done = time.monotonic()
    assert len(arrivals) >= 20
    assert arrivals[-1] - arrivals[0] > 0.5  # about 40 chunks, 30 ms apart
    assert done - arrivals[0] > 0.5


def test_a_call_cut_by_an_engine_failure_is_incomplete(gateway):
    # The step directive: a short analysis, then the call; the engine drops about 20 tokens into the arguments.
    events = stream_raw(gateway, {"input": f"[[call functions.get_weather {LONG_ARGS}]] [drop 45]", "tools": [WEATHER]})
    final = events[-1]["response"]
    assert final["status"] == "failed"
    call = next(item for item in final["output"] if item["type"] == "function_call")
    assert call["status"] == "incomplete" and 0 < len(call["arguments"]) < len(LONG_ARGS)
    assert all(item.get("status", "incomplete") == "incomplete" for item in final["output"])
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert done and all(e["item"].get("status", "incomplete") == "incomplete" for e in done)


def test_tool_choice_unknown_name_is_a_400(gateway):
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input="x", tools=[WEATHER], tool_choice={"type": "function", "name": "nope"})
    assert err.value.body["param"] == "tool_choice.name"


def test_structured_output_schema_in_developer_message(gateway, emulator):
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    response = gateway.client().responses.create(
        model=MODEL,
        input='x [[constrained <|channel|>final<|message|>{"answer": "x"}<|return|>]]',
        text={"format": {"type": "json_schema", "name": "reply", "schema": schema, "strict": True}},
    )
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "# Response Formats\n\n## reply\n\n" in prompt
    assert json.dumps(schema, separators=(",", ":")) in prompt
    assert response.text.format.type == "json_schema"


CRM = {
    "type": "namespace",
    "name": "crm",
    "description": "Customer records.",
    "tools": [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find a customer by id",
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        }
    ],
}


def test_namespace_tools_end_to_end(gateway, emulator):
    client = gateway.client()
    events = stream_sdk(client, input='[call crm.lookup {"id":"c1"}]', tools=[WEATHER, CRM])
    prompt = emulator_stats(emulator)["last_prompt"]
    developer = prompt[prompt.index("<|start|>developer") :]
    assert "// Customer records.\nnamespace crm {" in developer and "type lookup = (_: {" in developer
    assert "namespace functions {" in developer
    added = next(e for e in events if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call")
    assert added["item"]["namespace"] == "crm" and added["item"]["name"] == "lookup"
    call = events[-1]["response"]["output"][-1]
    assert (call["name"], call["namespace"], call["arguments"], call["status"]) == ("lookup", "crm", '{"id":"c1"}', "completed")
    answer = {"type": "function_call_output", "call_id": call["call_id"], "output": "Ada, since 2019"}
    done = client.responses.create(model=MODEL, previous_response_id=events[-1]["response"]["id"], tools=[CRM], input=[answer])
    assert done.output_text == "The tool said: Ada, since 2019"
    assert "<|start|>crm.lookup to=assistant" in emulator_stats(emulator)["last_prompt"]
    # Sent back as history instead, the call is rendered under its namespace too.
    history = [{"role": "user", "content": "who?"}, call, answer]
    client.responses.create(model=MODEL, input=history, tools=[CRM], store=False)
    assert "to=crm.lookup" in emulator_stats(emulator)["last_prompt"]


def test_namespace_functions_are_strict_and_known(gateway):
    response = gateway.client().responses.create(model=MODEL, input='[call crm.lookup {"ident": 1}] [misbehave]', tools=[CRM])
    call = next(item for item in response.output if item.type == "function_call")
    assert call.status == "incomplete" and "do not match the parameters of lookup" in response.output_text
    response = gateway.client().responses.create(model=MODEL, input="[call crm.erase {}] [misbehave]", tools=[CRM])
    assert [item.type for item in response.output] == ["reasoning", "reasoning", "message"]
    assert "no function named 'erase' is available in crm" in response.output_text


@pytest.mark.parametrize(
    "tools, param",
    [
        ([CRM | {"name": "functions"}], "tools[0].name"),
        ([CRM | {"name": "python"}], "tools[0].name"),
        ([CRM, CRM], "tools[1].name"),
        ([CRM | {"tools": CRM["tools"] * 2}], "tools[0].tools"),
        ([CRM | {"tools": [CRM["tools"][0] | {"defer_loading": True}]}], "tools[0].tools[0].defer_loading"),
    ],
)
def test_bad_namespaces_are_400s(gateway, tools, param):
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input="x", tools=tools)
    assert err.value.body["param"] == param


def test_allowed_tools_narrow_what_the_model_sees(gateway, emulator):
    other = WEATHER | {"name": "get_time", "description": "Get the time"}
    choice = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_weather"}]}
    response = gateway.client().responses.create(model=MODEL, input='hi [args {"location":"Oslo"}]', tools=[other, WEATHER], tool_choice=choice)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "type get_weather" in prompt and "get_time" not in prompt
    assert response.output[0].type == "function_call" and response.output[0].name == "get_weather"
    assert [tool.name for tool in response.tools] == ["get_time", "get_weather"]  # echoed as sent
    assert response.tool_choice.type == "allowed_tools"
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(
            model=MODEL, input="x", tools=[WEATHER], tool_choice=choice | {"tools": [{"type": "function", "name": "nope"}]}
        )
    assert err.value.body["param"] == "tool_choice.tools[0]"


@pytest.mark.parametrize(
    "choice, param",
    [
        ({"type": "mcp", "server_label": "absent"}, "tool_choice.server_label"),
        ({"type": "code_interpreter"}, "tool_choice.type"),
    ],
)
def test_tool_choice_naming_a_missing_tool_is_a_400(gateway, choice, param):
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input="x", tools=[WEATHER], tool_choice=choice)
    assert err.value.body["param"] == param


PATCH_TOOL = {"type": "custom", "name": "apply_patch", "description": "Apply a patch to the workspace."}
PATCH = "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch"


def test_custom_tool_end_to_end(gateway, emulator):
    client = gateway.client()
    events = stream_sdk(client, input=f"[freeform functions.apply_patch {PATCH}]]", tools=[PATCH_TOOL])
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "type apply_patch = (_: string) => any;" in prompt and "raw text, not JSON" in prompt
    deltas = [e["delta"] for e in events if e["type"] == "response.custom_tool_call_input.delta"]
    assert len(deltas) > 1 and "".join(deltas) == PATCH
    done = next(e for e in events if e["type"] == "response.custom_tool_call_input.done")
    assert done["input"] == PATCH
    call = events[-1]["response"]["output"][-1]
    assert (call["type"], call["name"], call["input"], call["status"]) == ("custom_tool_call", "apply_patch", PATCH, "completed")
    answer = {"type": "custom_tool_call_output", "call_id": call["call_id"], "output": "Done: added hello.txt"}
    second = client.responses.create(model=MODEL, previous_response_id=events[-1]["response"]["id"], tools=[PATCH_TOOL], input=[answer])
    assert second.output_text == "The tool said: Done: added hello.txt"
    history = [{"role": "user", "content": "patch it"}, call, answer]  # stateless: sent back as items
    third = client.responses.create(model=MODEL, input=history, tools=[PATCH_TOOL], store=False)
    assert third.output_text == "The tool said: Done: added hello.txt"


LARK = 'start: "hello" NAME\n%import common.CNAME -> NAME\n%ignore " "'


@pytest.mark.parametrize(
    "grammar, good, bad, shown",
    [
        # The engine's grammar holds a regex tool's input (a model that breaks it anyway: an incomplete item) ...
        ({"syntax": "regex", "definition": "[a-z]+"}, "abc", "abc1", ["incomplete"]),
        # ... but not a lark one's (free text): its call is shown only once its input is known to parse.
        ({"syntax": "lark", "definition": LARK}, "hello world", "goodbye world", []),
    ],
)
def test_custom_tool_grammar_is_checked(gateway, grammar, good, bad, shown):
    tool = {"type": "custom", "name": "word", "format": {"type": "grammar", **grammar}}
    client = gateway.client()
    fine = client.responses.create(model=MODEL, input=f"[freeform functions.word {good}]]", tools=[tool])
    assert fine.output[-1].type == "custom_tool_call" and fine.output[-1].input == good
    wrong = client.responses.create(model=MODEL, input=f"[freeform functions.word {bad}]] [misbehave]", tools=[tool])
    assert [item.status for item in wrong.output if item.type == "custom_tool_call"] == shown
    assert "is not valid" in wrong.output_text


@pytest.mark.parametrize(
    "grammar",
    [{"syntax": "regex", "definition": "(?=a)b"}, {"syntax": "lark", "definition": "start: undefined_rule"}],
)
def test_unusable_grammars_are_400s(gateway, grammar):
    tool = {"type": "custom", "name": "word", "format": {"type": "grammar", **grammar}}
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input="x", tools=[tool])
    assert err.value.body["param"] == "tools[0].format.definition"


def test_tool_choice_forces_a_custom_tool(gateway, emulator):
    response = gateway.client().responses.create(
        model=MODEL, input="go", tools=[WEATHER, PATCH_TOOL], tool_choice={"type": "custom", "name": "apply_patch"}
    )
    assert response.output[0].type == "custom_tool_call" and response.output[0].name == "apply_patch"
    assert emulator_stats(emulator)["last_prompt"].endswith("<|start|>assistant<|channel|>commentary to=functions.apply_patch<|message|>")


def test_a_backtracking_lark_terminal_cannot_stall_the_gateway(gateway):
    """Lark matches terminals with Python's re: the check runs in a worker process with a time limit."""
    tool = {"type": "custom", "name": "word", "format": {"type": "grammar", "syntax": "lark", "definition": "start: A\nA: /(a+)+$/"}}
    result: list[Any] = []
    worker = threading.Thread(
        target=lambda: result.append(
            gateway.client(timeout=60).responses.create(model=MODEL, input=f"[freeform functions.word {'a' * 40}!]]", tools=[tool])
        )
    )
    started = time.monotonic()
    worker.start()
    time.sleep(1)
    assert httpx.get(gateway.url + "/health", timeout=2).status_code == 200  # the event loop serves meanwhile
    worker.join(60)
    assert time.monotonic() - started < 30
    assert "could not be checked against the grammar" in result[0].output_text
