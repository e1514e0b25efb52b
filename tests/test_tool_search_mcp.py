"""Tool search over MCP servers marked `defer_loading`: the server is listed to the model by its label and
description, its tools are found one by one, declared in the search's answer as the connected server
describes them, and only those found can be called, in this response, its continuations, and a thread
sent back whole. Real MCP servers (tests/mcp_server.py) over stdio and HTTP."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from .conftest import MODEL, Gateway, Process, emulator_stats, stream_sdk
from .test_mcp import http_server, mcp, mcp_gateway, sse_server  # noqa: F401 (fixtures)

SEARCH = {"type": "tool_search"}
ADD = '{"a": 2, "b": 3}'


def search(query: str) -> str:
    return f"[[call tool_search.search {json.dumps({'query': query})}]]"


def kinds(output: list[Any]) -> list[str]:
    return [item["type"] for item in output if item["type"] != "reasoning"]


def test_a_deferred_server_is_listed_and_its_found_tool_called(mcp_gateway: Gateway, emulator: Process) -> None:
    client = mcp_gateway.client()
    tools = [SEARCH, mcp("local", defer_loading=True)]
    events = stream_sdk(client, input=f"{search('add')} [[call local.add {ADD}]]", tools=tools)
    final = events[-1]["response"]
    assert kinds(final["output"]) == ["mcp_list_tools", "tool_search_call", "tool_search_output", "mcp_call"] + ["message"]
    found = next(item for item in final["output"] if item["type"] == "tool_search_output")
    assert found["tools"] == [{"type": "mcp", "server_label": "local", "allowed_tools": ["add"]}]
    call = next(item for item in final["output"] if item["type"] == "mcp_call")
    assert (call["name"], call["status"], call["output"]) == ("add", "completed", "5")
    prompt = emulator_stats(emulator)["last_prompt"]
    answer = prompt.index("<|start|>tool_search.search to=assistant")
    # Listed by its label and description before the search; declared, the found tool only, after it.
    assert "- local (" in prompt[:answer] and "tools): Test tools of the local server." in prompt[:answer]
    assert "namespace local {" not in prompt[:answer]
    declared = prompt[answer:]
    assert "namespace local {" in declared and "type add = (_: {\na: number,\nb: number,\n}) => any;" in declared
    assert "type echo" not in declared

    # Loaded, it stays callable in a continuation; a tool of the server not found is not.
    again = client.responses.create(model=MODEL, previous_response_id=final["id"], tools=tools, input=f"[call local.add {ADD}]")
    assert next(item for item in again.output if item.type == "mcp_call").output == "5"
    other = client.responses.create(model=MODEL, previous_response_id=again.id, tools=tools, input='[call local.echo {"text": "x"}] [misbehave]')
    assert "mcp_call" not in [item.type for item in other.output]
    assert "'local.echo' is not loaded: find it with tool_search.search first" in other.output_text


def test_a_deferred_server_not_searched_is_not_called(mcp_gateway: Gateway, emulator: Process) -> None:
    client = mcp_gateway.client()
    tools = [SEARCH, mcp("local", defer_loading=True), mcp("remote")]
    response = client.responses.create(model=MODEL, input=f"[call local.add {ADD}] [misbehave]", tools=tools)
    assert "mcp_call" not in [item.type for item in response.output]
    assert "'local.add' is not loaded" in response.output_text
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "namespace remote {" in prompt and "namespace local {" not in prompt  # the other server is declared
    for choice in ({"type": "mcp", "server_label": "local"}, {"type": "mcp", "server_label": "local", "name": "add"}):
        with pytest.raises(openai.BadRequestError) as err:
            client.responses.create(model=MODEL, input="x", tools=tools, tool_choice=choice)  # type: ignore[arg-type]
        assert err.value.body["param"] == "tool_choice"
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="x", tools=[mcp("local", defer_loading=True)])
    assert err.value.body["param"] == "tools[0].defer_loading"


def test_a_thread_sent_back_whole_declares_the_loaded_tools(mcp_gateway: Gateway, emulator: Process) -> None:
    client = mcp_gateway.client()
    tools = [SEARCH, mcp("local", defer_loading=True)]
    first = client.responses.create(model=MODEL, input=f"{search('add')} [[answer found]]", tools=tools, store=False)
    history: list[Any] = [{"role": "user", "content": "add please"}]
    history += [item.to_dict() for item in first.output if item.type != "reasoning"]
    assert history[2]["type"] == "tool_search_call" and history[3]["tools"][0]["allowed_tools"] == ["add"]
    history.append({"role": "user", "content": f"[call local.add {ADD}]"})
    whole = client.responses.create(model=MODEL, input=history, tools=tools, store=False)
    assert next(item for item in whole.output if item.type == "mcp_call").output == "5"
    prompt = emulator_stats(emulator)["last_prompt"]
    answer = prompt.index("<|start|>tool_search.search to=assistant")
    assert prompt.index("type add = (_: {") > answer
    # The server must be the request's: a tool_search_output cannot bring one of its own.
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input=history, tools=[SEARCH, mcp("remote", defer_loading=True)], store=False)
    assert err.value.body["param"] == "input"


def test_a_client_search_loads_a_servers_tool(mcp_gateway: Gateway, emulator: Process) -> None:
    client = mcp_gateway.client()
    tools = [{"type": "tool_search", "execution": "client"}, mcp("local", defer_loading=True)]
    first = client.responses.create(model=MODEL, input=f'{search("echo")} [[call local.echo {{"text": "hi"}}]]', tools=tools)
    call = first.output[-1].to_dict()
    assert call["type"] == "tool_search_call" and call["execution"] == "client"
    # A client may echo the server's whole definition, credentials included: they are used for nothing
    # and stored nowhere.
    loaded = {"type": "mcp", "server_label": "local", "allowed_tools": ["echo"], "headers": {"X-Key": "client-secret-5521"}}
    answer = {"type": "tool_search_output", "execution": "client", "call_id": call["call_id"], "tools": [loaded]}
    second = client.responses.create(model=MODEL, previous_response_id=first.id, tools=tools, input=[answer])
    assert next(item for item in second.output if item.type == "mcp_call").output == "hi"
    assert "type echo = (_: {\ntext: string,\n}) => any;" in emulator_stats(emulator)["last_prompt"]
    listed = client.responses.input_items.list(second.id)
    assert "client-secret-5521" not in json.dumps([item.to_dict() for item in listed.data])
