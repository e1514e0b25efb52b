"""Tenants: each API key acts for a tenant (a key alone is its own), and a tenant sees only its own
stored responses, sandbox sessions and request-level MCP sessions, as OpenAI scopes them to a project."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest

from .conftest import MODEL, Gateway, Process, sandbox_section
from .stream_checker import check_response_stream, parse_sse

CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
KEYS = [{"key": "sk-acme-1", "tenant": "acme"}, {"key": "sk-acme-2", "tenant": "acme"}, "sk-solo"]


def call(gateway: Gateway, key: str, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"}
    return httpx.request(method, gateway.url + path, json=body, headers=headers, timeout=60)


def respond(gateway: Gateway, key: str, **body: Any) -> dict[str, Any]:
    body = {"model": MODEL, "stream": True, "include": ["code_interpreter_call.outputs"]} | body
    response = call(gateway, key, "POST", "/v1/responses", body)
    assert response.status_code == 200, response.text
    events = parse_sse(response.content)
    check_response_stream(events)
    return events[-1]["response"]


@pytest.fixture(scope="module")
def tenants_gateway(emulator: Process, workdir: Any, sandbox_image: str) -> Any:
    from .conftest import gateway_config

    instance = f"test-{os.getpid()}-tenants"
    config = gateway_config(emulator.url, workdir, auth={"api_keys": KEYS}, sandbox=sandbox_section("docker", instance, pool_size=1))
    process = Gateway(config, workdir).start()
    yield process
    process.stop()


def test_stored_responses_belong_to_the_tenant(tenants_gateway: Gateway) -> None:
    mine = respond(tenants_gateway, "sk-acme-1", input="remember the number 7")
    path = f"/v1/responses/{mine['id']}"
    assert call(tenants_gateway, "sk-acme-2", "GET", path).status_code == 200  # the same tenant's other key
    for attempt in (
        call(tenants_gateway, "sk-solo", "GET", path),
        call(tenants_gateway, "sk-solo", "GET", path + "/input_items"),
        call(tenants_gateway, "sk-solo", "DELETE", path),
        call(tenants_gateway, "sk-solo", "POST", "/v1/responses", {"model": MODEL, "input": "and?", "previous_response_id": mine["id"]}),
    ):
        assert attempt.status_code == 404, attempt.text
        assert attempt.json()["error"]["code"] in ("not_found", "previous_response_not_found")
    assert call(tenants_gateway, "sk-acme-1", "GET", path).status_code == 200  # the delete did nothing
    follow = respond(tenants_gateway, "sk-acme-2", input="and?", previous_response_id=mine["id"])
    assert follow["status"] == "completed"


def test_conversations_belong_to_the_tenant(tenants_gateway: Gateway) -> None:
    """Another tenant's conversation is as absent as one that never existed; the owner's python state
    follows the conversation from response to response."""
    created = call(tenants_gateway, "sk-acme-1", "POST", "/v1/conversations", {"metadata": {"owner": "acme"}}).json()
    path = f"/v1/conversations/{created['id']}"
    first = respond(tenants_gateway, "sk-acme-1", input="[[python counter = 41]]", tools=[CODE_TOOL], conversation=created["id"])
    item = next(item for item in first["output"] if item["type"] == "code_interpreter_call")
    for attempt in (
        call(tenants_gateway, "sk-solo", "GET", path),
        call(tenants_gateway, "sk-solo", "POST", path, {"metadata": {}}),
        call(tenants_gateway, "sk-solo", "DELETE", path),
        call(tenants_gateway, "sk-solo", "GET", path + "/items"),
        call(tenants_gateway, "sk-solo", "GET", f"{path}/items/{item['id']}"),
        call(tenants_gateway, "sk-solo", "POST", path + "/items", {"items": [{"role": "user", "content": "x"}]}),
        call(tenants_gateway, "sk-solo", "POST", "/v1/responses", {"model": MODEL, "input": "x", "conversation": created["id"]}),
    ):
        assert attempt.status_code == 404, attempt.text
    assert call(tenants_gateway, "sk-acme-2", "GET", path).json()["metadata"] == {"owner": "acme"}
    # The conversation's code ran in one session: the next response of the conversation finds its variables.
    second = respond(tenants_gateway, "sk-acme-2", input="[[python counter + 1]]", tools=[CODE_TOOL], conversation=created["id"])
    again = next(item for item in second["output"] if item["type"] == "code_interpreter_call")
    assert again["container_id"] == item["container_id"] and again["outputs"][0]["logs"] == "42"
    items = call(tenants_gateway, "sk-acme-1", "GET", path + "/items?order=asc").json()["data"]
    assert [entry["type"] for entry in items].count("code_interpreter_call") == 2


def test_background_responses_belong_to_the_tenant(tenants_gateway: Gateway) -> None:
    """While it runs and after: another tenant can neither read, follow nor cancel it."""
    body = {"model": MODEL, "input": "[long 200] [slow 20]", "background": True}
    started = call(tenants_gateway, "sk-acme-1", "POST", "/v1/responses", body).json()
    path = f"/v1/responses/{started['id']}"
    for attempt in (
        call(tenants_gateway, "sk-solo", "GET", path),
        call(tenants_gateway, "sk-solo", "GET", path + "?stream=true"),
        call(tenants_gateway, "sk-solo", "POST", path + "/cancel"),
    ):
        assert attempt.status_code == 404, attempt.text
    assert call(tenants_gateway, "sk-acme-2", "GET", path).json()["status"] in ("queued", "in_progress")
    assert call(tenants_gateway, "sk-acme-2", "POST", path + "/cancel").json()["status"] == "cancelled"
    assert call(tenants_gateway, "sk-solo", "POST", path + "/cancel").status_code == 404


def test_sandbox_sessions_belong_to_the_tenant(tenants_gateway: Gateway) -> None:
    first = respond(tenants_gateway, "sk-acme-1", input="[[python secret = 'acme-only']]", tools=[CODE_TOOL])
    container = next(item for item in first["output"] if item["type"] == "code_interpreter_call")["container_id"]
    foreign = {"type": "code_interpreter", "container": container}
    refused = call(tenants_gateway, "sk-solo", "POST", "/v1/responses", {"model": MODEL, "input": "[[python secret]]", "tools": [foreign]})
    assert refused.status_code == 404 and refused.json()["error"]["param"] == "tools[0].container"
    shared = respond(tenants_gateway, "sk-acme-2", input="[[python secret]]", tools=[foreign])
    logs = next(item for item in shared["output"] if item["type"] == "code_interpreter_call")["outputs"][0]["logs"]
    assert logs == "'acme-only'"


def test_a_tenant_evicts_its_own_sessions_first(make_gateway: Any, emulator: Process, sandbox_image: str) -> None:
    instance = f"test-{os.getpid()}-quota"
    section = sandbox_section("docker", instance, pool_size=0, max_sessions=4, max_sessions_per_tenant=1)
    gateway = make_gateway(emulator.url, auth={"api_keys": ["sk-a", "sk-b"]}, sandbox=section)
    b = respond(gateway, "sk-b", input="[[python v = 'b']]", tools=[CODE_TOOL])
    a1 = respond(gateway, "sk-a", input="[[python v = 'a1']]", tools=[CODE_TOOL])
    a2 = respond(gateway, "sk-a", input="[[python v = 'a2']]", tools=[CODE_TOOL])  # over a's quota: a1 goes

    def logs_of(response: dict[str, Any]) -> str:
        return next(item for item in response["output"] if item["type"] == "code_interpreter_call")["outputs"][0]["logs"]

    assert "NameError" in logs_of(respond(gateway, "sk-a", input="[[python v]]", tools=[CODE_TOOL], previous_response_id=a1["id"]))
    assert logs_of(respond(gateway, "sk-b", input="[[python v]]", tools=[CODE_TOOL], previous_response_id=b["id"])) == "'b'"
    assert a2["status"] == "completed"
