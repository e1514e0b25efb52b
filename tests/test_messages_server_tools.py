"""Anthropic's server tools served by the gateway's own machinery, through the `anthropic` SDK: web search
and fetch by the browser (its results and a cited answer), code execution in a sandbox (its stdout), each
told as a `server_tool_use` block and its `*_tool_result` block, whole and streamed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from .conftest import MODEL, Gateway, Process, gateway_config, sandbox_section
from .test_browser import OPEN_FIRST, SEARCH, browser_config, search_server, site  # noqa: F401 (the site fixture)
from .test_messages import client, raw_events


@pytest.fixture(scope="module")
def serving(emulator: Process, site: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:  # noqa: F811
    tmp: Path = tmp_path_factory.mktemp("server-tools")
    sandbox = sandbox_section("local", f"test-{os.getpid()}-messages", pool_size=0)
    config = gateway_config(emulator.url, tmp, tool_servers=[search_server(site)], browser=browser_config(), sandbox=sandbox)
    gateway = Gateway(config, tmp).start()
    yield gateway
    gateway.stop()


def blocks(message: Any) -> list[str]:
    return [block.type for block in message.content]


def test_web_search_and_fetch_with_a_cited_answer(serving: Gateway, site: Process) -> None:  # noqa: F811
    answer = "Each zebra has unique stripes【1†L2-L3】."
    asked = f"Tell me about zebra stripes. {SEARCH}{OPEN_FIRST}[[answer {answer}]]"
    tools = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}, {"type": "web_fetch_20250910", "name": "web_fetch"}]
    message = client(serving).messages.create(model=MODEL, max_tokens=1024, tools=tools, messages=[{"role": "user", "content": asked}])
    kinds = blocks(message)
    assert kinds.count("server_tool_use") == 2 and "web_search_tool_result" in kinds and "web_fetch_tool_result" in kinds
    uses = [block for block in message.content if block.type == "server_tool_use"]
    assert [use.name for use in uses] == ["web_search", "web_fetch"] and uses[0].input == {"query": "zebra stripes"}
    (results,) = [block for block in message.content if block.type == "web_search_tool_result"]
    assert results.tool_use_id == uses[0].id and all(result.url.startswith(site.url) for result in results.content) and results.content
    text = message.content[-1]
    assert text.type == "text" and text.text.startswith("Each zebra has unique stripes")
    (cited,) = text.citations
    assert cited.type == "web_search_result_location" and cited.url.startswith(site.url) and cited.cited_text
    assert message.usage.server_tool_use.web_search_requests == 2 and message.stop_reason == "end_turn"
    # Streamed: the same blocks, the citation as a `citations_delta` on the text block.
    events = raw_events(serving, {"model": MODEL, "max_tokens": 1024, "tools": tools, "messages": [{"role": "user", "content": asked}]})
    started = [data["content_block"]["type"] for kind, data in events if kind == "content_block_start"]
    assert started == kinds
    (delta,) = [data for kind, data in events if kind == "content_block_delta" and data["delta"]["type"] == "citations_delta"]
    assert delta["index"] == len(kinds) - 1 and delta["delta"]["citation"] == cited.model_dump()


def test_code_execution_runs_in_a_sandbox_streamed(serving: Gateway) -> None:
    body = {
        "model": MODEL, "max_tokens": 1024, "tools": [{"type": "code_execution_20250825", "name": "code_execution"}],
        "messages": [{"role": "user", "content": "compute [[python print(6 * 7)]] [[answer It is 42.]]"}],
    }  # fmt: skip
    events = raw_events(serving, body)
    started = [data["content_block"] for kind, data in events if kind == "content_block_start"]
    uses = [block for block in started if block["type"] == "server_tool_use"]
    (result,) = [block for block in started if block["type"] == "code_execution_tool_result"]
    assert uses[0]["name"] == "code_execution" and uses[0]["input"] == {"code": "print(6 * 7)"}
    assert result["tool_use_id"] == uses[0]["id"] and result["content"]["stdout"].strip() == "42" and result["content"]["return_code"] == 0
    assert started[-1] == {"type": "text", "text": ""}
    indexes = [data["index"] for kind, data in events if kind == "content_block_start"]
    assert indexes == list(range(len(started)))  # one index per block, in order
    message = client(serving).messages.create(**body)
    assert "code_execution_tool_result" in blocks(message) and message.content[-1].text == "It is 42."


@pytest.mark.parametrize("kind", ["computer_20250124", "memory_20250818", "tool_search_tool_regex_20251119"])
def test_server_tools_gpt_oss_cannot_serve_are_refused_by_name(serving: Gateway, kind: str) -> None:
    body = {"model": MODEL, "max_tokens": 64, "tools": [{"type": kind, "name": "x"}], "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx.post(serving.url + "/v1/messages", json=body, timeout=30)
    assert answer.status_code == 400 and kind in answer.json()["error"]["message"]


def test_a_server_tool_loop_cut_at_its_bound_pauses_the_turn(make_gateway: Any, emulator: Process) -> None:
    sandbox = sandbox_section("local", f"test-{os.getpid()}-pause", pool_size=0)
    gateway = make_gateway(emulator.url, sandbox=sandbox, loop={"max_turns": 2})
    steps = "[[python print(1)]] [[python print(2)]] [[python print(3)]] [[answer done]]"
    tools = [{"type": "code_execution_20250825", "name": "code_execution"}]
    message = client(gateway).messages.create(model=MODEL, max_tokens=512, tools=tools, messages=[{"role": "user", "content": steps}])
    assert message.stop_reason == "pause_turn" and blocks(message).count("code_execution_tool_result") == 2
    # Sent back as it came, the turn goes on from the calls it made: the third runs, then the answer.
    history = [{"role": "user", "content": steps}, {"role": "assistant", "content": [block.model_dump() for block in message.content]}]
    resumed = client(gateway).messages.create(model=MODEL, max_tokens=512, tools=tools, messages=history)
    assert blocks(resumed).count("code_execution_tool_result") == 1 and resumed.content[-1].text == "done"


def test_an_mcp_server_named_in_the_request(make_gateway: Any, emulator: Process) -> None:
    from .test_mcp import MCPProcess

    server = MCPProcess("streamable-http")
    try:
        gateway = make_gateway(emulator.url, mcp={"allowed_urls": [f"http://127.0.0.1:{server.port}/"]})
        body = {
            "model": MODEL, "max_tokens": 512,
            "mcp_servers": [{"type": "url", "name": "mine", "url": server.url, "authorization_token": "token-8841"}],
            "tools": [{"type": "mcp_toolset", "mcp_server_name": "mine"}],
            "messages": [{"role": "user", "content": '[call mine.add {"a": 2, "b": 3}]'}],
        }  # fmt: skip
        message = httpx.post(gateway.url + "/v1/messages", json=body, timeout=30).json()
    finally:
        server.stop()
    use, result = [block for block in message["content"] if block["type"].startswith("mcp_tool_")]
    assert use["type"] == "mcp_tool_use" and use["name"] == "add" and use["server_name"] == "mine" and use["input"] == {"a": 2, "b": 3}
    assert result == {"type": "mcp_tool_result", "tool_use_id": use["id"], "is_error": False, "content": [{"type": "text", "text": "5"}]}
    assert "token-8841" not in json.dumps(message)
