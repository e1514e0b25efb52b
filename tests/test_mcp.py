"""MCP servers end to end: real servers (tests/mcp_server.py and PyPI's mcp-server-time) over real
transports, called by the scripted model through /v1/responses, every stream checked."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from connectors.connection import _describe
from connectors.urls import shown

from .conftest import MODEL, ROOT, Gateway, Process, emulator_stats, free_port, gateway_config, metric, stream_raw, stream_sdk, wait_for_port
from .helpers import items_of
from .mcp_server import digest

PYTHON = sys.executable
BIN = Path(sys.executable).parent


class MCPProcess:
    """A test MCP server on an HTTP transport, in its own process."""

    def __init__(self, transport: str, port: int | None = None, name: str = "test") -> None:
        self.port = port or free_port()
        self.transport = transport
        path = "/mcp" if transport == "streamable-http" else "/sse"
        self.url = f"http://127.0.0.1:{self.port}{path}"
        args = [PYTHON, "-m", "tests.mcp_server", "--transport", transport, "--port", str(self.port), "--name", name]
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def http_server() -> Iterator[MCPProcess]:
    server = MCPProcess("streamable-http", name="remote")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sse_server() -> Iterator[MCPProcess]:
    server = MCPProcess("sse", name="events")
    yield server
    server.stop()


def servers_config(http_server: MCPProcess, sse_server: MCPProcess) -> list[dict[str, Any]]:
    return [
        {"label": "local", "transport": "stdio", "command": [PYTHON, "-m", "tests.mcp_server"], "args": ["--name", "local"], "cwd": str(ROOT)},
        {
            "label": "remote",
            "transport": "streamable-http",
            "url": http_server.url,
            "headers": {"Authorization": "Bearer ${MCP_TEST_TOKEN:-config-token}"},
            "timeout_s": 1,
        },
        {"label": "events", "transport": "sse", "url": sse_server.url, "allowed_tools": ["add", "echo", "whoami"]},
        {
            "label": "guarded",
            "transport": "stdio",
            "command": [PYTHON, "-m", "tests.mcp_server"],
            "cwd": str(ROOT),
            "require_approval": {"never": {"tool_names": ["echo", "tally_count"]}},
        },
        {"label": "time", "transport": "stdio", "command": [str(BIN / "mcp-server-time")]},
        {"label": "growing", "transport": "stdio", "command": [PYTHON, "-m", "tests.mcp_server"], "cwd": str(ROOT)},
    ]


@pytest.fixture(scope="module")
def mcp_gateway(emulator: Process, workdir: Path, http_server: MCPProcess, sse_server: MCPProcess) -> Iterator[Gateway]:
    config = gateway_config(emulator.url, workdir / "mcp", mcp={"allowed_urls": [f"http://127.0.0.1:{http_server.port}/"]})
    (workdir / "mcp").mkdir(exist_ok=True)
    config["tool_servers"] = servers_config(http_server, sse_server)
    gateway = Gateway(config, workdir / "mcp").start(timeout=60)
    yield gateway
    gateway.stop()


def mcp(label: str, **extra: Any) -> dict[str, Any]:
    return {"type": "mcp", "server_label": label} | extra


def run(gateway: Gateway, text: str, tools: list[dict[str, Any]], **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    events = stream_raw(gateway, {"model": MODEL, "input": text, "tools": tools} | extra, timeout=60)
    return events[-1]["response"], events


def final_text(response: dict[str, Any]) -> str:
    return response["output"][-1]["content"][0]["text"]


def test_max_tool_calls_runs_calls_up_to_its_limit_and_times_each(mcp_gateway: Gateway) -> None:
    """`max_tool_calls` at exactly its limit: as many calls run as it allows and the next is refused (the
    model is told); each call run is counted once, with the time it took."""

    def timed() -> tuple[float, float]:
        text = httpx.get(mcp_gateway.url + "/metrics").text
        return metric(text, "gateway_tool_call_seconds_count", 0, kind="mcp"), metric(text, "gateway_tool_call_seconds_sum", 0, kind="mcp")

    count, seconds = timed()
    add = '{"a": 1, "b": 1}'
    response, _ = run(mcp_gateway, f"[[call local.add {add}]][[call local.add {add}]][[call local.add {add}]]", [mcp("local")], max_tool_calls=2)
    assert [call["status"] for call in items_of(response, "mcp_call")] == ["completed", "completed"]
    assert "limit of 2 tool calls" in final_text(response)
    now_count, now_seconds = timed()
    assert now_count - count == 2 and 0 < now_seconds - seconds < 30


@pytest.mark.parametrize("label", ["local", "remote", "events"])
def test_each_transport_end_to_end(mcp_gateway: Gateway, emulator: Process, label: str) -> None:
    events = stream_sdk(mcp_gateway.client(), input=f'[call {label}.add {{"a": 2, "b": 3}}]', tools=[mcp(label)])
    response = events[-1]["response"]
    (listing,) = items_of(response, "mcp_list_tools")
    assert listing["server_label"] == label and "add" in [tool["name"] for tool in listing["tools"]]
    (call,) = items_of(response, "mcp_call")
    assert (call["server_label"], call["name"], call["status"], call["output"]) == (label, "add", "completed", "5")
    assert json.loads(call["arguments"]) == {"a": 2, "b": 3}
    assert final_text(response) == "The tool said: 5"
    prompt = emulator_stats(emulator)["last_prompt"]
    # The namespace, described by the server's instructions.
    assert f"## {label}\n\n// Test tools of the {label} server.\nnamespace {label} {{" in prompt
    assert "type add = (_: {\na: number,\nb: number,\n}) => any;" in prompt
    assert f"<|start|>{label}.add to=assistant<|channel|>commentary<|message|>5<|end|>" in prompt
    kinds = [e["type"] for e in events if e.get("item_id") == call["id"]]
    assert kinds[0] == "response.mcp_call.in_progress" and kinds[-1] == "response.mcp_call.completed"


def test_non_streaming(mcp_gateway: Gateway) -> None:
    response = mcp_gateway.client().responses.create(model=MODEL, input='[call local.echo {"text": "hello"}]', tools=[mcp("local")])
    call = next(item for item in response.output if item.type == "mcp_call")
    assert call.output == "hello" and call.status == "completed"
    assert response.output_text == "The tool said: hello"


def test_tools_listed_once_per_conversation(mcp_gateway: Gateway) -> None:
    first, _ = run(mcp_gateway, '[call local.add {"a": 1, "b": 1}]', [mcp("local")])
    second, _ = run(mcp_gateway, '[call local.add {"a": 2, "b": 2}]', [mcp("local")], previous_response_id=first["id"])
    assert len(items_of(first, "mcp_list_tools")) == 1
    assert items_of(second, "mcp_list_tools") == []
    assert items_of(second, "mcp_call")[0]["output"] == "4"


def test_configured_headers_reach_the_server(mcp_gateway: Gateway) -> None:
    response, _ = run(mcp_gateway, "[call remote.whoami {}]", [mcp("remote")])
    assert items_of(response, "mcp_call")[0]["output"] == f"headers=[('authorization', '{digest('Bearer config-token')}')]"


def test_request_level_server_with_headers(mcp_gateway: Gateway, http_server: MCPProcess, workdir: Path) -> None:
    secret = "tenant-secret-7731"
    tool = mcp("mine", server_url=http_server.url, headers={"X-Tenant": secret}, require_approval="never")
    response, _ = run(mcp_gateway, "[call mine.whoami {}]", [tool])
    assert items_of(response, "mcp_call")[0]["output"] == f"headers=[('x-tenant', '{digest(secret)}')]"
    # The header goes to that server only: not in the response, the stored record or the logs.
    assert response["tools"][0]["headers"] is None
    stored = httpx.get(f"{mcp_gateway.url}/v1/responses/{response['id']}").json()
    assert secret not in json.dumps(stored)
    for path in (workdir / "mcp").iterdir():
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    # The session is reused by the next turn.
    follow, _ = run(mcp_gateway, '[call mine.add {"a": 5, "b": 5}]', [tool], previous_response_id=response["id"])
    assert items_of(follow, "mcp_call")[0]["output"] == "10"


def test_credentials_in_a_server_url_are_used_and_never_shown(mcp_gateway: Gateway, http_server: MCPProcess, workdir: Path) -> None:
    """A token in the query string, or a user and password, is a credential as a header is: the response,
    its stored record, the listing of a server that failed and the logs show the URL without it."""
    token = "url-token-5813"
    tool = mcp("mine", server_url=f"{http_server.url}?token={token}", require_approval="never")
    response, _ = run(mcp_gateway, '[call mine.add {"a": 2, "b": 2}]', [tool])
    assert items_of(response, "mcp_call")[0]["output"] == "4"
    assert response["tools"][0]["server_url"] == http_server.url
    stored = httpx.get(f"{mcp_gateway.url}/v1/responses/{response['id']}").json()
    assert token not in json.dumps(stored) and stored["tools"][0]["server_url"] == http_server.url
    # A server that fails: httpx quotes the URL it was asked, the listing's error and the logs do not.
    missing = mcp("gone", server_url=f"http://127.0.0.1:{http_server.port}/missing?token={token}", require_approval="never")
    failed, _ = run(mcp_gateway, "[call gone.add {}]", [missing])
    (listing,) = items_of(failed, "mcp_list_tools")
    assert listing["error"] and token not in json.dumps(failed)
    # User info: refused (the allow-list reads no URL two ways), and not repeated in the refusal.
    secret = httpx.post(
        f"{mcp_gateway.url}/v1/responses",
        json={"model": MODEL, "input": "x", "tools": [mcp("mine", server_url=f"http://admin:pass-{token}@127.0.0.1:{http_server.port}/mcp")]},
    )
    assert secret.status_code == 400 and token not in secret.text
    for path in (workdir / "mcp").iterdir():
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path


def test_a_url_is_shown_without_its_credentials() -> None:
    assert shown("https://user:pw@Example.com:8443/a/mcp?token=t#frag") == "https://example.com:8443/a/mcp"
    assert shown("http://[::1]:9/mcp?x=1") == "http://[::1]:9/mcp"
    assert shown("http://host:99999/") == "(an invalid URL)"
    url = "http://127.0.0.1:9/mcp?token=t-1"
    error = RuntimeError(f"Client error '401 Unauthorized' for url '{url}'")
    assert _describe(ExceptionGroup("x", [error]), url) == "Client error '401 Unauthorized' for url 'http://127.0.0.1:9/mcp'"


def test_allowed_tools_filter_the_list_and_the_model(mcp_gateway: Gateway, emulator: Process) -> None:
    # `events` allows add, echo and whoami in the config; the request narrows it to add.
    response, _ = run(mcp_gateway, "[call events.secret {}] [misbehave]", [mcp("events", allowed_tools=["add", "secret"])])
    (listing,) = items_of(response, "mcp_list_tools")
    assert [tool["name"] for tool in listing["tools"]] == ["add"]
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "type add" in prompt and "type secret" not in prompt and "type echo" not in prompt
    assert items_of(response, "mcp_call") == []  # the filtered tool is not called
    assert "has no tool named 'secret'" in final_text(response)


def test_approval_approved(mcp_gateway: Gateway) -> None:
    tools = [mcp("guarded")]
    asked, _ = run(mcp_gateway, '[call guarded.add {"a": 20, "b": 22}]', tools)
    assert asked["status"] == "completed"
    (request,) = items_of(asked, "mcp_approval_request")
    assert (request["server_label"], request["name"], json.loads(request["arguments"])) == ("guarded", "add", {"a": 20, "b": 22})
    assert items_of(asked, "mcp_call") == []
    assert asked["output"][-1] == request  # the response ends with the request: the user answers first
    answer = [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}]
    done, events = run(mcp_gateway, "", tools, input=answer, previous_response_id=asked["id"])
    (call,) = items_of(done, "mcp_call")
    assert call["approval_request_id"] == request["id"] and call["output"] == "42"
    assert final_text(done) == "The tool said: 42"
    # The same id cannot be answered twice.
    again = httpx.post(f"{mcp_gateway.url}/v1/responses", json={"model": MODEL, "input": answer, "tools": tools, "previous_response_id": done["id"]})
    assert again.status_code == 400 and again.json()["error"]["param"] == "input[0].approval_request_id"


def test_approval_denied(mcp_gateway: Gateway, emulator: Process) -> None:
    tools = [mcp("guarded")]
    asked, _ = run(mcp_gateway, '[call guarded.add {"a": 1, "b": 2}]', tools)
    request = items_of(asked, "mcp_approval_request")[0]
    answer = [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": False, "reason": "not today"}]
    done, _ = run(mcp_gateway, "", tools, input=answer, previous_response_id=asked["id"])
    assert items_of(done, "mcp_call") == []
    assert final_text(done) == "The tool said: The user denied this call. Reason: not today"


def tally_count(gateway: Gateway, label: str = "guarded", tools: list[dict[str, Any]] | None = None) -> int:
    response, _ = run(gateway, f"[call {label}.tally_count {{}}]", tools or [mcp(label)])
    return int(items_of(response, "mcp_call")[0]["output"])


def test_a_denied_call_never_runs(mcp_gateway: Gateway) -> None:
    before = tally_count(mcp_gateway)
    asked, _ = run(mcp_gateway, "[call guarded.tally {}]", [mcp("guarded")])
    request = items_of(asked, "mcp_approval_request")[0]
    answer = [{"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": False}]
    done, _ = run(mcp_gateway, "", [mcp("guarded")], input=answer, previous_response_id=asked["id"])
    assert items_of(done, "mcp_call") == [] and "denied" in final_text(done)
    assert tally_count(mcp_gateway) == before  # the tool's side effect did not happen
    approve = [answer[0] | {"approve": True}]
    asked, _ = run(mcp_gateway, "[call guarded.tally {}]", [mcp("guarded")])
    approve[0]["approval_request_id"] = items_of(asked, "mcp_approval_request")[0]["id"]
    run(mcp_gateway, "", [mcp("guarded")], input=approve, previous_response_id=asked["id"])
    assert tally_count(mcp_gateway) == before + 1  # and the approved one did


def test_a_request_cannot_weaken_the_operators_approval(mcp_gateway: Gateway) -> None:
    before = tally_count(mcp_gateway)
    for rule in ("never", {"never": {"tool_names": ["tally"]}}):
        response, _ = run(mcp_gateway, "[call guarded.tally {}]", [mcp("guarded", require_approval=rule)])
        assert items_of(response, "mcp_call") == [] and len(items_of(response, "mcp_approval_request")) == 1
    assert tally_count(mcp_gateway) == before


def test_a_requests_own_server_asks_for_approval_by_default(mcp_gateway: Gateway, http_server: MCPProcess) -> None:
    own = mcp("mine", server_url=http_server.url)
    response, _ = run(mcp_gateway, '[call mine.add {"a": 1, "b": 2}]', [own])
    assert items_of(response, "mcp_call") == []
    (request,) = items_of(response, "mcp_approval_request")
    assert (request["server_label"], request["name"]) == ("mine", "add")
    response, _ = run(mcp_gateway, '[call mine.add {"a": 1, "b": 2}]', [own | {"require_approval": "never"}])
    assert items_of(response, "mcp_call")[0]["output"] == "3"


ECHO = json.dumps({"text": " ".join(f"word{i}" for i in range(40))})


def test_engine_faults_around_a_tool_call(mcp_gateway: Gateway) -> None:
    """Faults reach every point of a response: while the model writes the call, and on the engine call
    after the tool ran. Items the fault cut are incomplete; the call that ran keeps its result."""
    tools = [mcp("guarded")]
    # Step directives: a short analysis, then the call (the drop comes about 20 tokens into its arguments).
    cut, _ = run(mcp_gateway, f"[[call guarded.echo {ECHO}]] [drop@1 45]", tools)
    assert cut["status"] == "failed"
    (call,) = items_of(cut, "mcp_call")
    assert call["status"] == "incomplete" and call.get("output") is None
    ran, events = run(mcp_gateway, f"[[call guarded.echo {ECHO}]] [midstream-error@2 3]", tools)
    assert ran["status"] == "failed"
    (call,) = items_of(ran, "mcp_call")
    assert call["status"] == "completed" and call["output"] == json.loads(ECHO)["text"]
    assert ran["output"][-1]["type"] == "reasoning" and ran["output"][-1]["status"] == "incomplete"
    refused, _ = run(mcp_gateway, f"[[call guarded.echo {ECHO}]] [error500@2]", tools)
    assert refused["status"] == "failed" and items_of(refused, "mcp_call")[0]["status"] == "completed"
    slow_started = time.monotonic()
    delayed, _ = run(mcp_gateway, '[[call guarded.echo {"text": "hi"}]] [slow@1 40]', tools)
    assert delayed["status"] == "completed" and time.monotonic() - slow_started > 0.4


@pytest.mark.parametrize("choice", [{"type": "mcp", "server_label": "guarded", "name": "echo"}, {"type": "mcp", "server_label": "events"}])
def test_tool_choice_forces_an_mcp_call_once(mcp_gateway: Gateway, choice: dict[str, Any]) -> None:
    """The forced call is made, and once it ran the model answers freely (no forcing loop)."""
    label = choice["server_label"]
    arguments = '{"text": "forced"}' if label == "guarded" else '{"a": 2, "b": 3}'
    # Unnamed, the scripted model writes the arguments after the server's first tool (echo): its grammar
    # holds them to echo's schema, unless the model names add (the alternative).
    picked = f"[[constrained add <|constrain|>json<|message|>{arguments}<|call|>]]"
    response, _ = run(mcp_gateway, f"hi [args {arguments}] {picked}", [mcp(label)], tool_choice=choice)
    (call,) = items_of(response, "mcp_call")
    assert call["server_label"] == label
    if label == "guarded":  # named: that tool; unnamed: the model picked one of the server's tools
        assert call["name"] == "echo" and call["output"] == "forced"
    assert response["status"] == "completed" and final_text(response).startswith("The tool said:")


def test_tools_without_approval_in_a_filter(mcp_gateway: Gateway) -> None:
    response, _ = run(mcp_gateway, '[call guarded.echo {"text": "free"}]', [mcp("guarded")])
    assert items_of(response, "mcp_call")[0]["output"] == "free"


@pytest.mark.parametrize(
    "call, error",
    [
        ('[call local.fail {"message": "nope"}]', "Error executing tool fail: nope"),
        ("[call local.crash {}]", "Error executing tool crash"),
        ('[call remote.slow {"seconds": 3}]', "the tool did not answer within 1 s"),
        ('[call local.add {"a": 1, "b": }] [misbehave]', "The arguments are not a valid JSON object."),
    ],
)
def test_failed_calls_are_reported_and_told(mcp_gateway: Gateway, call: str, error: str) -> None:
    label = call.split(".")[0][6:]
    response, _ = run(mcp_gateway, call, [mcp(label)])
    assert response["status"] == "completed"
    (item,) = items_of(response, "mcp_call")
    assert item["status"] == "failed" and item["output"] is None
    failure = item["error"]
    if failure["type"] == "mcp_tool_execution_error":  # the tool ran and said it failed
        assert error in failure["content"][0]["text"]
    else:  # no result: timeout, bad arguments
        assert failure["type"] == "mcp_protocol_error" and error in failure["message"]
    assert final_text(response).startswith("The tool said: Error")


def test_tool_list_refreshed_on_list_changed(mcp_gateway: Gateway) -> None:
    tools = [mcp("growing")]
    before, _ = run(mcp_gateway, "[call growing.grow {}]", tools)
    assert "extra" not in [tool["name"] for tool in items_of(before, "mcp_list_tools")[0]["tools"]]
    assert items_of(before, "mcp_call")[0]["output"] == "grown"
    deadline = time.monotonic() + 10
    while True:  # the notification is handled in the background; a new conversation lists again
        after, _ = run(mcp_gateway, "[call growing.extra {}]", tools)
        if items_of(after, "mcp_call") or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "extra" in [tool["name"] for tool in items_of(after, "mcp_list_tools")[0]["tools"]]
    assert items_of(after, "mcp_call")[0]["output"] == "extra here"


def test_stdio_server_killed_and_back_on_the_next_call(mcp_gateway: Gateway) -> None:
    tools = [mcp("local")]
    first, _ = run(mcp_gateway, "[call local.pid {}]", tools)
    pid = int(items_of(first, "mcp_call")[0]["output"])
    os.kill(pid, signal.SIGKILL)
    second, _ = run(mcp_gateway, "[call local.pid {}]", tools, previous_response_id=first["id"])
    (call,) = items_of(second, "mcp_call")
    assert call["status"] == "completed"
    assert int(call["output"]) != pid  # a new server process answered


def test_third_party_time_server(mcp_gateway: Gateway) -> None:
    response, _ = run(mcp_gateway, '[call time.get_current_time {"timezone": "UTC"}]', [mcp("time")])
    (listing,) = items_of(response, "mcp_list_tools")
    assert {"get_current_time", "convert_time"} <= {tool["name"] for tool in listing["tools"]}
    result = json.loads(items_of(response, "mcp_call")[0]["output"])
    assert result["timezone"] == "UTC" and result["datetime"].startswith(time.strftime("%Y-", time.gmtime()))


def test_server_down_at_startup_comes_back(make_gateway: Any, emulator: Process) -> None:
    port = free_port()
    config = [{"label": "late", "transport": "streamable-http", "url": f"http://127.0.0.1:{port}/mcp", "timeout_s": 2}]
    gateway = make_gateway(emulator.url, mcp={"connect_wait_s": 1}, tool_servers=config)  # starts although it is down
    response, _ = run(gateway, '[call late.add {"a": 1, "b": 1}]', [mcp("late")])
    (listing,) = items_of(response, "mcp_list_tools")
    assert "unavailable" in listing["error"] and listing["tools"] == []
    assert items_of(response, "mcp_call") == [] and "unavailable" in final_text(response)
    server = MCPProcess("streamable-http", port=port, name="late")
    try:
        deadline = time.monotonic() + 30
        while True:
            response, _ = run(gateway, '[call late.add {"a": 1, "b": 1}]', [mcp("late")])
            if items_of(response, "mcp_call") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert items_of(response, "mcp_call")[0]["output"] == "2"
        assert items_of(response, "mcp_list_tools")[0]["tools"]
    finally:
        server.stop()


@pytest.mark.parametrize(
    "tool, param",
    [
        (mcp("unknown"), "tools[0].server_label"),
        (mcp("mine", server_url="http://10.0.0.1/mcp"), "tools[0].server_url"),
        (mcp("mine", server_url="file:///etc/passwd"), "tools[0].server_url"),
        (mcp("local", server_url="http://127.0.0.1:1/mcp"), "tools[0].server_label"),
        (mcp("bad label!"), "tools[0].server_label"),
        (mcp("local", connector_id="connector_gmail"), "tools[0].connector_id"),
    ],
)
def test_refused_servers(mcp_gateway: Gateway, tool: dict[str, Any], param: str) -> None:
    response = httpx.post(f"{mcp_gateway.url}/v1/responses", json={"model": MODEL, "input": "hi", "tools": [tool]})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


# -- hostile requests and faults ----------------------------------------------------------------------------


def test_allowed_urls_are_matched_by_parts(make_gateway: Any, emulator: Process, http_server: MCPProcess) -> None:
    other = MCPProcess("streamable-http", name="other")
    try:
        a, b = http_server.port, other.port
        gateway = make_gateway(emulator.url, mcp={"allowed_urls": [f"http://127.0.0.1:{a}", f"http://127.0.0.1:{b}/mcp"]})
        for url in (
            f"http://127.0.0.1:{a}@127.0.0.1:{b}/mcp",  # user info: the host is the second one
            f"http://127.0.0.1:{a}\\@127.0.0.1:{b}/mcp",
            f"http://127.0.0.1:{a}#@127.0.0.1:{b}/mcp",
            f"http://127.0.0.1:{a}0/mcp",  # another port that starts with the same digits
            f"http://127.0.0.1:{b}/mcpx",  # not under /mcp on a segment boundary
            f"http://127.0.0.1:{b}/mcp/../admin",
            f"http://127.0.0.1:{b}/mcp/%2e%2e/admin",
        ):
            tool = mcp("mine", server_url=url, headers={"X-Tenant": "secret"}, require_approval="never")
            response = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi", "tools": [tool]})
            assert response.status_code == 400, url
            assert response.json()["error"]["param"] == "tools[0].server_url"
        ok = mcp("mine", server_url=f"http://127.0.0.1:{b}/mcp", require_approval="never")
        response, _ = run(gateway, '[call mine.add {"a": 1, "b": 2}]', [ok])
        assert items_of(response, "mcp_call")[0]["output"] == "3"
    finally:
        other.stop()


def test_request_level_sessions_are_capped(make_gateway: Any, emulator: Process, http_server: MCPProcess) -> None:
    gateway = make_gateway(emulator.url, mcp={"allowed_urls": [http_server.url], "max_request_servers_per_tenant": 2, "max_request_servers": 3})

    def tool(value: str) -> dict[str, Any]:
        return mcp("mine", server_url=http_server.url, headers={"X-Tenant": value}, require_approval="never")

    for number in range(5):  # each set of headers is a session of its own
        response, _ = run(gateway, '[call mine.add {"a": 1, "b": 1}]', [tool(f"t{number}")])
        assert items_of(response, "mcp_call")[0]["output"] == "2"
        assert httpx.get(gateway.url + "/ready").json()["mcp_request_sessions"] <= 2
    # Every kept session busy: a new one is refused with a 429 rather than piling up.
    import threading

    busy = [threading.Thread(target=run, args=(gateway, '[call mine.slow {"seconds": 2}]', [tool(f"busy{n}")])) for n in range(2)]
    for thread in busy:
        thread.start()
    time.sleep(1)
    refused = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi", "tools": [tool("one-more")]})
    for thread in busy:
        thread.join()
    assert refused.status_code == 429 and refused.json()["error"]["param"] == "tools[0].server_url"


def test_a_call_whose_connection_dropped_is_not_sent_again(mcp_gateway: Gateway) -> None:
    import threading

    first, _ = run(mcp_gateway, "[call local.pid {}]", [mcp("local")])
    pid = int(items_of(first, "mcp_call")[0]["output"])
    result: dict[str, Any] = {}
    slow = threading.Thread(
        target=lambda: result.update(run(mcp_gateway, '[call local.slow {"seconds": 3}]', [mcp("local")], previous_response_id=first["id"])[0])
    )
    slow.start()
    time.sleep(1.5)
    os.kill(pid, signal.SIGKILL)  # mid-call
    slow.join()
    (call,) = items_of(result, "mcp_call")
    assert call["status"] == "failed"
    assert call["error"]["type"] == "mcp_protocol_error" and "not sent again" in call["error"]["message"]


def test_redirects_to_another_origin_are_not_followed(make_gateway: Any, emulator: Process) -> None:
    """An allowed server that answers with a redirect elsewhere must not send the request's headers there."""
    import http.server
    import threading

    seen: list[str] = []

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("X-Secret", ""))
            self.send_response(500)
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    elsewhere = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)

    class Redirecting(Elsewhere):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{elsewhere.server_port}/mcp")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

    allowed = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirecting)
    for server in (elsewhere, allowed):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{allowed.server_port}/mcp"
        gateway = make_gateway(emulator.url, mcp={"allowed_urls": [url], "connect_wait_s": 3})
        tool = mcp("mine", server_url=url, headers={"X-Secret": "do-not-forward"}, require_approval="never")
        response, _ = run(gateway, '[call mine.add {"a": 1, "b": 2}]', [tool])
        (listing,) = items_of(response, "mcp_list_tools")
        assert "unavailable" in listing["error"]
        assert seen == []
    finally:
        for server in (elsewhere, allowed):
            server.shutdown()


def test_a_tool_loop_only_appends_to_its_prompt(mcp_gateway, emulator):
    """Each engine call of a run extends the previous one's prompt: the gateway appends the turn's new
    messages instead of rendering the conversation again, so the past the engine has cached never
    changes, even where Harmony's rule for dropping earlier analysis would flip once the model is in
    the middle of a tool call."""
    client = mcp_gateway.client()
    first = client.responses.create(model=MODEL, input="hello there")  # a final answer, after analysis
    tools: Any = [mcp("local")]
    add = '{"a": 2, "b": 3}'
    response = client.responses.create(
        model=MODEL, input=f"[[call local.add {add}]][[call local.add {add}]]", tools=tools, previous_response_id=first.id
    )
    assert [item.type for item in response.output].count("mcp_call") == 2
    prompts = emulator_stats(emulator)["recent_prompts"][-3:]
    closing = "<|start|>assistant"
    for earlier, later in zip(prompts, prompts[1:]):
        assert earlier.endswith(closing) and later.startswith(earlier[: -len(closing)])
    assert "The tool local.add answered" not in prompts[0] and prompts[-1].count("to=local.add") == 2


def test_the_whole_thread_sent_back_after_an_mcp_call_is_read(mcp_gateway: Gateway, emulator: Process) -> None:
    """Sent back as the SDK types dump them (mcp_list_tools, mcp_call, reasoning, message), the items are read
    with what the model saw: the call and its output; the listing is not made again."""
    client = mcp_gateway.client()
    first = client.responses.create(model=MODEL, input='[call local.add {"a": 20, "b": 22}]', tools=[mcp("local")], store=False)
    assert [item.type for item in first.output][:3] == ["mcp_list_tools", "reasoning", "mcp_call"]
    thread = [{"role": "user", "content": "add"}, *[item.model_dump(exclude_none=True) for item in first.output], {"role": "user", "content": "and?"}]
    again = client.responses.create(model=MODEL, input=thread, tools=[mcp("local")], store=False)
    assert again.output_text == "You said: and?" and "mcp_list_tools" not in [item.type for item in again.output]
    assert "<|start|>local.add to=assistant<|channel|>commentary<|message|>42<|end|>" in emulator_stats(emulator)["last_prompt"]
