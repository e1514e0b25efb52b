"""OpenTelemetry traces, end to end: the gateway exports over OTLP/HTTP to a real receiver started here,
whose protobuf is decoded with the official `opentelemetry-proto` messages. A response with a python call
and an MCP call gives one tree of spans under the client's `traceparent`; the emulator (as vLLM) and the
MCP test server receive the trace context; no prompt text is in any span."""

from __future__ import annotations

import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from gateway.config import TracingConfig
from gateway.tracing import Tracing

from .conftest import MODEL, ROOT, Process, emulator_stats, sandbox_section
from .test_mcp import MCPProcess
from .webhook_receiver import Receiver as WebhookReceiver

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
PYTHON = sys.executable


class Receiver:
    """An OTLP/HTTP traces endpoint on loopback: every span it was sent, as dicts."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        for span in scope.spans:
                            receiver.spans.append(
                                {
                                    "name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
                                    "parent_id": span.parent_span_id.hex(), "scope": scope.scope.name, "status": span.status.code,
                                    "attributes": {a.key: _value(a.value) for a in span.attributes},
                                }
                            )  # fmt: skip
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["name"].startswith(prefix)]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.server.shutdown()


def test_a_response_is_one_tree_of_spans_under_the_clients_trace(make_gateway: Any, emulator: Process, receiver: Receiver) -> None:
    remote = MCPProcess("streamable-http", name="remote")
    stdio = {"label": "local", "transport": "stdio", "command": [PYTHON, "-m", "tests.mcp_server"], "cwd": str(ROOT)}
    http = {"label": "remote", "transport": "streamable-http", "url": remote.url}
    try:
        gateway = make_gateway(
            emulator.url, tool_servers=[stdio, http], tracing={"enabled": True, "endpoint": receiver.url, "export_delay_s": 0.2},
            sandbox=sandbox_section("local", f"test-{os.getpid()}-tracing", pool_size=0),
        )  # fmt: skip
        _check_the_tree(gateway, emulator, receiver)
    finally:
        remote.stop()


def _check_the_tree(gateway: Any, emulator: Process, receiver: Receiver) -> None:
    client = gateway.client(default_headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
    tools = [
        {"type": "code_interpreter", "container": {"type": "auto"}},
        {"type": "mcp", "server_label": "local"},
        {"type": "mcp", "server_label": "remote"},
    ]
    steps = "[[python 6 * 7]] [[call local.traceparent {}]] [[call remote.traceparent {}]] [[answer done]]"
    response = client.responses.create(model=MODEL, input=steps, tools=tools)
    assert response.status == "completed" and response.output_text == "done"
    deadline = time.monotonic() + 15
    while not receiver.named("invoke_agent") and time.monotonic() < deadline:
        time.sleep(0.1)
    (root,) = receiver.named("invoke_agent")
    ours = [span for span in receiver.spans if span["scope"] == "harmony-gateway"]
    assert {span["trace_id"] for span in ours} == {TRACE_ID}  # the client's trace, continued
    assert root["parent_id"] == PARENT_ID
    assert root["attributes"]["gen_ai.response.id"] == response.id and root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.usage.output_tokens"] == response.usage.output_tokens  # type: ignore[union-attr]
    engine = receiver.named("text_completion")
    assert len(engine) == 4 and all(span["parent_id"] == root["span_id"] for span in engine)  # four engine calls
    assert all(span["attributes"]["gen_ai.usage.input_tokens"] > 0 for span in engine)
    tools_run = {span["attributes"]["gen_ai.tool.name"]: span for span in receiver.named("execute_tool")}
    assert set(tools_run) == {"python", "local.traceparent", "remote.traceparent"}
    assert (
        tools_run["python"]["attributes"]["gen_ai.tool.type"] == "python"
        and tools_run["local.traceparent"]["attributes"]["gen_ai.tool.type"] == "mcp"
    )
    assert all(span["parent_id"] == root["span_id"] for span in tools_run.values())
    # The mcp SDK's own span of the call nests under the tool's (a server connection's listing is its own trace).
    (saved,) = receiver.named("storage save")  # the response stored before its end is told
    assert saved["parent_id"] == root["span_id"]
    # The sandbox started for the python call (no pool here) is a span under the call's.
    (started,) = receiver.named("sandbox.start")
    assert started["parent_id"] == tools_run["python"]["span_id"]
    sent = {span["parent_id"] for span in receiver.named("MCP send tools/call") if span["trace_id"] == TRACE_ID}
    assert sent == {tools_run["local.traceparent"]["span_id"], tools_run["remote.traceparent"]["span_id"]}
    # The trace went on: to the engine in its headers, to the MCP server in the request's `_meta`.
    assert emulator_stats(emulator)["last_headers"]["traceparent"].split("-")[1] == TRACE_ID
    calls = {item.server_label: item.output or "" for item in response.output if item.type == "mcp_call"}  # type: ignore[union-attr]
    assert f"traceparent=00-{TRACE_ID}-" in calls["local"] and "header=None" in calls["local"]  # stdio: `_meta` only
    assert f"traceparent=00-{TRACE_ID}-" in calls["remote"] and f"header=00-{TRACE_ID}-" in calls["remote"]  # HTTP: headers too
    # No prompt or output text in any span, unless content capture is on.
    assert not any("6 * 7" in str(value) or "done" == value for span in ours for value in span["attributes"].values())
    # Each run's span names the door that started it.
    assert root["attributes"]["http.route"] == "/v1/responses"
    body = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(gateway.url + "/v1/messages", json=body, timeout=30).status_code == 200
    deadline = time.monotonic() + 15
    while len(receiver.named("invoke_agent")) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [span["attributes"]["http.route"] for span in receiver.named("invoke_agent")] == ["/v1/responses", "/v1/messages"]


def test_each_webhook_attempt_is_a_span_naming_no_secret(make_gateway: Any, emulator: Process, receiver: Receiver) -> None:
    hooks = WebhookReceiver(answers=[500])
    try:
        gateway = make_gateway(
            emulator.url, tracing={"enabled": True, "endpoint": receiver.url, "export_delay_s": 0.2},
            webhooks={"allowed_urls": [hooks.origin], "first_retry_s": 0.2, "poll_interval_s": 0.1},
        )  # fmt: skip
        client = gateway.client()
        endpoint = client.webhooks.create(name="traced", url=hooks.url("hook?token=s3cr3t"), event_types=["response.completed"])
        response = client.responses.create(model=MODEL, input="hi", background=True)
        deliveries = hooks.wait_for(2, "hook?token=s3cr3t")
        deadline = time.monotonic() + 15
        while len(receiver.named("deliver_webhook")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        spans = receiver.named("deliver_webhook")
        assert [span["attributes"]["http.response.status_code"] for span in spans] == [500, 200]
        assert [span["status"] for span in spans] == [2, 0]  # STATUS_CODE_ERROR, then unset
        for number, span in enumerate(spans, 1):
            attributes = span["attributes"]
            assert attributes["webhook.id"] == deliveries[0].webhook_id and attributes["webhook.attempt"] == number
            assert attributes["webhook.event_type"] == "response.completed" and attributes["webhook.endpoint_id"] == endpoint.id
            assert attributes["server.address"] == "127.0.0.1" and span["parent_id"] == ""
        assert not any(
            "s3cr3t" in str(value) or endpoint.signing_secret in str(value) for span in receiver.spans for value in span["attributes"].values()
        )
        assert client.responses.retrieve(response.id).status == "completed"
        assert "s3cr3t" not in gateway.log.read_text() and "127.0.0.1" in gateway.log.read_text()  # logged without its query
    finally:
        hooks.stop()


def test_tracing_is_on_as_opentelemetry_configures_it(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    assert not Tracing(TracingConfig()).enabled  # off by default
    assert Tracing(TracingConfig(enabled=True)).enabled
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")
    assert Tracing(TracingConfig()).enabled  # the standard variable alone turns it on
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not Tracing(TracingConfig(enabled=True)).enabled
