"""Tool search: functions marked `defer_loading` are listed to the model one line each, found with
`tool_search.search` (run here, or by the client), declared in the search's answer after the prompt's
prefix, and callable from then on, through the openai SDK and the Agents SDK."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from .conftest import MODEL, emulator_stats, stream_sdk

SEARCH = {"type": "tool_search"}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
    "strict": True,
    "defer_loading": True,
}
CRM = {
    "type": "namespace",
    "name": "crm",
    "description": "Customer records.",
    "tools": [
        {
            "type": "function",
            "name": "lookup",
            "description": "Find a customer by id",
            "defer_loading": True,
            "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        },
    ],
}
OSLO = '{"location":"Oslo"}'


def many_functions(count: int, deferred: bool = True) -> list[dict[str, Any]]:
    """Functions of the size real agents carry: a description and a few typed parameters each."""
    return [
        {
            "type": "function",
            "name": f"action_{number}",
            "description": f"Perform business action number {number} on the selected record and report what changed.",
            "parameters": {
                "type": "object",
                "properties": {
                    "record_id": {"type": "string", "description": "The record to act on."},
                    "dry_run": {"type": "boolean", "description": "Only report what would change."},
                    "note": {"type": "string", "description": "Why the action is taken."},
                },
                "required": ["record_id"],
            },
            "defer_loading": deferred,
        }
        for number in range(count)
    ]


def search(query: str) -> str:
    return f"[[call tool_search.search {json.dumps({'query': query})}]]"


def test_300_deferred_functions_keep_the_first_prompt_small(gateway, emulator):
    client = gateway.client()
    declared = client.responses.create(model=MODEL, input="hi", tools=many_functions(300, deferred=False), store=False)
    deferred = client.responses.create(model=MODEL, input="hi", tools=[SEARCH, *many_functions(300)], store=False)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace tool_search {" in prompt and "type search = (_: {" in prompt
    assert "- functions.action_299: Perform business action number 299" in prompt
    assert "type action_0 =" not in prompt  # listed, not declared
    print(f"first prompt: {declared.usage.input_tokens} tokens with 300 functions declared, {deferred.usage.input_tokens} deferred")
    assert deferred.usage.input_tokens < declared.usage.input_tokens * 0.4


def test_a_search_loads_a_function_that_the_model_then_calls(gateway, emulator):
    client = gateway.client()
    tools = [SEARCH, *many_functions(300), WEATHER]
    events = stream_sdk(client, input=f"weather? {search('weather city')} [[call functions.get_weather {OSLO}]]", tools=tools)
    final = events[-1]["response"]
    kinds = [item["type"] for item in final["output"] if item["type"] != "reasoning"]
    assert kinds == ["tool_search_call", "tool_search_output", "function_call"]
    call, found, function = (item for item in final["output"] if item["type"] != "reasoning")
    assert call["execution"] == "server" and call["arguments"] == {"query": "weather city"} and call["status"] == "completed"
    assert found["call_id"] == call["call_id"] and found["status"] == "completed"
    assert [tool["name"] for tool in found["tools"]] == ["get_weather"]
    assert found["tools"][0]["parameters"] == WEATHER["parameters"]
    assert function["name"] == "get_weather" and function["arguments"] == OSLO and function["status"] == "completed"
    assert function["namespace"] == "get_weather"  # how OpenAI names a deferred function's own namespace
    # The model read the declaration in the search's answer: the prompt's prefix was left as it was.
    prompt = emulator_stats(emulator)["last_prompt"]
    answer = prompt.index("<|start|>tool_search.search to=assistant")
    assert prompt.index("type get_weather = (_: {") > answer
    assert "type get_weather" not in prompt[:answer] and "- functions.get_weather: Get the current weather for a city" in prompt[:answer]
    # Loaded, it stays callable in a response that continues this one.
    again = client.responses.create(
        model=MODEL,
        previous_response_id=final["id"],
        tools=tools,
        input=[{"type": "function_call_output", "call_id": function["call_id"], "output": "sunny"}],
    )
    assert again.output_text == "The tool said: sunny"
    later = client.responses.create(model=MODEL, previous_response_id=again.id, tools=tools, input=f"[call functions.get_weather {OSLO}]")
    assert [item.type for item in later.output][-1] == "function_call"


def test_a_deferred_function_not_loaded_is_refused(gateway):
    client = gateway.client()
    response = client.responses.create(model=MODEL, input=f"[call functions.get_weather {OSLO}] [misbehave]", tools=[SEARCH, WEATHER])
    assert "function_call" not in [item.type for item in response.output]
    assert "'functions.get_weather' is not loaded: find it with tool_search.search first" in response.output_text
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="x", tools=[SEARCH, WEATHER], tool_choice={"type": "function", "name": "get_weather"})
    assert err.value.body["param"] == "tool_choice.name"


def test_a_namespace_is_listed_by_name_and_found_whole(gateway, emulator):
    client = gateway.client()
    response = client.responses.create(model=MODEL, input=f'{search("crm")} [[call crm.lookup {{"id": "7"}}]]', tools=[SEARCH, CRM])
    items = [item for item in response.output if item.type != "reasoning"]
    assert [item.type for item in items] == ["tool_search_call", "tool_search_output", "function_call"]
    loaded = items[1].to_dict()["tools"]
    assert loaded == [{"type": "namespace", "name": "crm", "description": "Customer records.", "tools": [CRM["tools"][0] | {"type": "function"}]}]
    assert items[2].name == "lookup" and items[2].namespace == "crm"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "- crm (1 functions): Customer records." in prompt
    assert prompt.index("namespace crm {") > prompt.index("<|start|>tool_search.search to=assistant")


def test_a_search_that_finds_nothing_tells_the_model(gateway):
    response = gateway.client().responses.create(model=MODEL, input=search("spaceship"), tools=[SEARCH, WEATHER])
    found = next(item for item in response.output if item.type == "tool_search_output")
    assert found.tools == []
    assert "No tool that is not loaded yet matches 'spaceship'" in response.output_text


def test_a_client_runs_the_search_and_loads_its_own_tools(gateway, emulator):
    client = gateway.client()
    own = {
        "type": "tool_search",
        "execution": "client",
        "description": "Look tools up in the company catalog.",
        "parameters": {"type": "object", "properties": {"goal": {"type": "string"}}, "required": ["goal"]},
    }
    first = client.responses.create(
        model=MODEL, input='[[call tool_search.search {"goal": "weather"}]] [[call functions.get_weather {"location": "Oslo"}]]', tools=[own]
    )
    assert emulator_stats(emulator)["last_prompt"].count("goal: string") == 1
    call = first.output[-1].to_dict()
    assert call["type"] == "tool_search_call" and call["execution"] == "client" and call["arguments"] == {"goal": "weather"}
    assert first.status == "completed"
    weather = {key: value for key, value in WEATHER.items() if key != "defer_loading"}
    answer = {"type": "tool_search_output", "execution": "client", "call_id": call["call_id"], "tools": [weather]}
    second = client.responses.create(model=MODEL, previous_response_id=first.id, tools=[own], input=[answer])
    assert [item.type for item in second.output][-1] == "function_call"
    assert "type get_weather = (_: {" in emulator_stats(emulator)["last_prompt"]
    # The same thread sent whole (no stored state) reads the same way.
    history = [{"role": "user", "content": '[[call tool_search.search {"goal": "weather"}]] [[answer ok]]'}, call, answer]
    whole = client.responses.create(model=MODEL, tools=[own], input=history, store=False)
    assert whole.output_text == "ok"
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, tools=[own], input=[answer | {"call_id": "call_nowhere"}], store=False)
    assert err.value.body["param"] == "input[0].call_id"


@pytest.mark.parametrize(
    "tools, param",
    [
        ([WEATHER], "tools[0].defer_loading"),
        ([CRM], "tools[0].tools[0].defer_loading"),
        ([SEARCH, SEARCH, WEATHER], "tools[1].type"),
        ([{"type": "mcp", "server_label": "docs", "defer_loading": True}], "tools[0].defer_loading"),
    ],
)
def test_bad_tool_search_requests_are_400s(gateway, tools, param):
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input="x", tools=tools)
    assert err.value.body["param"] == param


def test_loaded_tools_sent_back_are_checked(gateway):
    bad = {
        "type": "tool_search_output",
        "execution": "server",
        "tools": [{"type": "namespace", "name": "python", "description": "", "tools": [WEATHER]}],
    }
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input=[bad], store=False)
    assert err.value.body["param"] == "input[0].tools.0.name"


def test_the_agents_sdk_searches_and_calls_a_deferred_function(gateway):
    agents = pytest.importorskip("agents")
    from agents import Agent, Runner, ToolSearchTool, function_tool

    asked: list[str] = []

    @function_tool(defer_loading=True)
    def get_weather(location: str) -> str:
        """Get the current weather for a city."""
        asked.append(location)
        return f"sunny in {location}"

    model = agents.OpenAIResponsesModel(model=MODEL, openai_client=gateway.async_client())
    agent = Agent(name="helper", model=model, tools=[ToolSearchTool(), get_weather])
    result = Runner.run_sync(agent, f"{search('weather')} [[call functions.get_weather {OSLO}]]")
    assert asked == ["Oslo"]
    assert result.final_output == "The tool said: sunny in Oslo"
