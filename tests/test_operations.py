"""What operators need: API keys, request ids, JSON logs, readiness, metrics, graceful shutdown, check-config."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import h11
import httpx
import openai
import pytest

from .conftest import MODEL, ROOT, Process, free_port, open_stream, sandbox_containers, sandbox_section
from .conftest import metric as _metric
from .servers import Prometheus
from .stream_checker import check_response_stream, parse_sse

KEY = "sk-test-0b1c5e9f7d"
PYTHON = sys.executable


def test_api_keys(make_gateway: Any, emulator: Process) -> None:
    os.environ["GATEWAY_TEST_KEY"] = KEY
    try:
        gateway = make_gateway(emulator.url, auth={"api_keys": ["${GATEWAY_TEST_KEY}", "sk-other"]}, logging={"format": "json"})
    finally:
        del os.environ["GATEWAY_TEST_KEY"]
    url = gateway.url + "/v1/responses"
    body = {"model": MODEL, "input": "hi"}
    missing = httpx.post(url, json=body)
    assert missing.status_code == 401
    assert missing.json() == {
        "error": {"message": missing.json()["error"]["message"], "type": "invalid_request_error", "param": None, "code": "missing_api_key"}
    }
    wrong = httpx.post(url, json=body, headers={"Authorization": "Bearer sk-wrong"})
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=gateway.url + "/v1", api_key="sk-wrong", max_retries=0).responses.create(model=MODEL, input="hi")
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=KEY, max_retries=0)
    assert client.responses.create(model=MODEL, input="hi").output_text == "You said: hi"
    assert httpx.get(gateway.url + "/health").status_code == 200  # liveness and readiness stay open
    assert httpx.get(gateway.url + "/ready").status_code == 200
    gateway.stop()
    assert KEY not in gateway.log.read_text()  # never logged


def test_request_ids_and_json_logs(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, logging={"format": "json"})
    given = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi"}, headers={"X-Request-Id": "trace-42"})
    assert given.headers["x-request-id"] == "trace-42"
    made = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi", "stream": True})
    assert made.headers["x-request-id"].startswith("req_")
    bad = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL}, headers={"X-Request-Id": "bad id\twith tabs"})
    assert bad.status_code == 400 and bad.headers["x-request-id"].startswith("req_")
    gateway.stop()
    records = [json.loads(line) for line in gateway.log.read_text().splitlines() if line.startswith("{")]
    access = [r for r in records if r["logger"] == "gateway.access"]
    assert any(r.get("request_id") == "trace-42" and "POST /v1/responses 200" in r["message"] for r in access)
    assert any(r.get("request_id") == made.headers["x-request-id"] for r in access)
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)


def test_readiness(make_gateway: Any, emulator: Process, tmp_path: Path) -> None:
    gateway = make_gateway(emulator.url)
    ready = httpx.get(gateway.url + "/ready")
    assert ready.status_code == 200 and ready.json()["engine"] is True
    down = make_gateway(
        f"http://127.0.0.1:{free_port()}",
        tool_servers=[{"label": "gone", "transport": "streamable-http", "url": f"http://127.0.0.1:{free_port()}/mcp", "timeout_s": 1}],
        mcp={"connect_wait_s": 0},
    )
    assert httpx.get(down.url + "/health").status_code == 200
    not_ready = httpx.get(down.url + "/ready")
    assert not_ready.status_code == 503
    assert not_ready.json()["engine"] is False and not_ready.json()["tool_servers"] == {"gone": False}


def test_metrics(make_gateway: Any, emulator: Process) -> None:
    local_server = {"label": "local", "transport": "stdio", "command": [PYTHON, "-m", "tests.mcp_server"], "cwd": str(ROOT)}
    gateway = make_gateway(
        emulator.url,
        tool_servers=[local_server],
        sandbox=sandbox_section("local", f"test-{os.getpid()}-metrics", pool_size=0),
    )
    client = gateway.client()
    client.responses.create(model=MODEL, input="hi")
    list(client.responses.create(model=MODEL, input="streamed", stream=True))
    client.responses.create(model=MODEL, input='[call local.add {"a": 1, "b": 2}]', tools=[{"type": "mcp", "server_label": "local"}])
    client.responses.create(model=MODEL, input="[[python 6 * 7]]", tools=[{"type": "code_interpreter", "container": {"type": "auto"}}])
    httpx.get(gateway.url + "/v1/responses/resp_missing")
    text = httpx.get(gateway.url + "/metrics").text
    assert _metric(text, "gateway_requests_total", endpoint="/v1/responses", status="200") == 4
    assert _metric(text, "gateway_requests_total", endpoint="/v1/responses/{id}", status="404") == 1
    assert _metric(text, "gateway_active_streams") == 0
    assert _metric(text, "gateway_tokens_total", direction="in") > 0
    assert _metric(text, "gateway_tokens_total", direction="out") > 0
    assert _metric(text, "gateway_time_to_first_token_seconds_count") >= 4
    assert _metric(text, "gateway_tool_calls_total", kind="mcp", outcome="completed") == 1
    assert _metric(text, "gateway_tool_calls_total", kind="python", outcome="completed") == 1
    assert _metric(text, "gateway_tool_call_seconds_count", kind="python") == 1
    assert _metric(text, "gateway_sandbox_sessions") == 1
    assert _metric(text, "gateway_mcp_server_up", server="local") == 1


def test_prometheus_scrapes_the_metrics(make_gateway: Any, emulator: Process, tmp_path: Path) -> None:
    """The exposition checked by the consumer that reads it: a real Prometheus scrapes /metrics, and its
    API returns the gateway's series with their labels and values."""
    gateway = make_gateway(emulator.url)
    gateway.client().responses.create(model=MODEL, input="hi")
    prometheus = Prometheus(gateway.port, tmp_path).start()
    try:
        query = 'gateway_requests_total{endpoint="/v1/responses",status="200"}'
        deadline = time.monotonic() + 30
        while True:
            result = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": query}, timeout=5).json()["data"]["result"]
            if result or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert result and float(result[0]["value"][1]) == 1, result
        (target,) = httpx.get(f"{prometheus.url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
        assert target["health"] == "up" and target["lastError"] == ""
        names = set(httpx.get(f"{prometheus.url}/api/v1/label/__name__/values", timeout=5).json()["data"])
        wanted = {"gateway_requests_total", "gateway_tokens_total", "gateway_active_streams", "gateway_time_to_first_token_seconds_bucket"}
        assert wanted <= names, wanted - names
        tokens = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": 'gateway_tokens_total{direction="out"}'}, timeout=5).json()
        assert float(tokens["data"]["result"][0]["value"][1]) > 0
    finally:
        prometheus.stop()


def _stream_in_thread(url: str, body: dict[str, Any], results: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            with httpx.Client(timeout=60) as client:
                response = client.post(url + "/v1/responses", json=body | {"stream": True})
                results.append(parse_sse(response.content))
        except Exception as exc:  # the test asserts on it
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_shutdown_ends_running_streams_with_a_terminal_event(make_gateway: Any, emulator: Process, sandbox_image: str) -> None:
    instance = f"test-{os.getpid()}-shutdown"
    gateway = make_gateway(emulator.url, server={"shutdown_grace_s": 1}, sandbox=sandbox_section("docker", instance, timeout_s=30))
    code_tool = {"type": "code_interpreter", "container": {"type": "auto"}}
    bodies = [
        {"model": MODEL, "input": "[long 400] [slow 40]"},  # about 10 s of streaming
        {"model": MODEL, "input": "[long 400] [slow 40]"},
        {"model": MODEL, "input": "[[python import time; time.sleep(20)]]", "tools": [code_tool]},
        {"model": MODEL, "input": "[long 10] [slow 20]"},  # finishes within the grace period
    ]
    results: list[Any] = []
    threads = [_stream_in_thread(gateway.url, body, results) for body in bodies]
    deadline = time.monotonic() + 10
    while len(sandbox_containers(instance)) < 3 and time.monotonic() < deadline:  # the python call is running
        time.sleep(0.1)
    time.sleep(0.5)
    started = time.monotonic()
    assert gateway.proc is not None
    gateway.proc.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(30)
    gateway.proc.wait(30)
    assert time.monotonic() - started < 1 + 8
    statuses = []
    for events in results:
        assert not isinstance(events, Exception), events
        check_response_stream(events)  # every client got exactly one terminal event
        statuses.append(events[-1]["response"]["status"])
        if events[-1]["type"] == "response.failed":
            assert "shutting down" in events[-1]["response"]["error"]["message"]
    assert sorted(statuses) == ["completed", "failed", "failed", "failed"]
    assert sandbox_containers(instance) == []  # no container is left


def test_draining_answers_ready_and_new_requests_with_503(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, server={"shutdown_grace_s": 5, "drain_delay_s": 2})
    assert gateway.proc is not None
    results: list[Any] = []
    running = _stream_in_thread(gateway.url, {"model": MODEL, "input": "[long 60] [slow 30]"}, results)
    time.sleep(0.3)
    gateway.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    ready = httpx.get(gateway.url + "/ready")
    assert ready.status_code == 503 and ready.json()["draining"] is True
    refused = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi"})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "server_shutting_down"
    chat = httpx.post(gateway.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    assert chat.status_code == 503
    running.join(30)
    check_response_stream(results[0])  # the response that was running finishes normally
    assert results[0][-1]["type"] == "response.completed"
    assert gateway.proc.wait(15) is not None


def test_a_body_completed_after_sigterm_is_refused(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, server={"shutdown_grace_s": 3})
    assert gateway.proc is not None
    payload = json.dumps({"model": MODEL, "input": "late"}).encode()
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        head = f"POST /v1/responses HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        sock.sendall(head.encode() + payload[:5])
        time.sleep(0.3)
        gateway.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        sock.sendall(payload[5:])
        sock.settimeout(10)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 503") and b"server_shutting_down" in answer


def test_shutdown_with_a_slow_reader(make_gateway: Any, emulator: Process) -> None:
    """A client reads slowly when SIGTERM arrives, so slowly that the gateway's writes wait for it: the
    gateway exits within the grace period plus a few seconds, with nothing failing inside it, and the
    stream either ends with exactly one terminal event or is cut (never a complete body without one)."""
    gateway = make_gateway(emulator.url, server={"shutdown_grace_s": 1})
    assert gateway.proc is not None
    # About 7 MB of events, more than the sockets buffer, then the engine goes silent (the run goes on).
    sock = open_stream(gateway, {"model": MODEL, "input": "[long 40000] [stall 100000]", "stream": True})
    received = bytearray()
    started = time.monotonic()
    while time.monotonic() - started < 2:  # about 40 KB/s: slower than the response is written
        received += sock.recv(2048)
        time.sleep(0.05)
    gateway.proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    while gateway.proc.poll() is None and time.monotonic() - signalled < 15:
        received += sock.recv(2048)
        time.sleep(0.05)
    assert gateway.proc.poll() is not None and time.monotonic() - signalled < 1 + 8
    sock.settimeout(10)
    while data := sock.recv(65536):  # what the gateway wrote before it exited
        received += data
    sock.close()
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="POST", target="/v1/responses", headers=[("Host", "gateway"), ("Content-Length", "0")]))
    client.send(h11.EndOfMessage())  # the request went out in open_stream: h11 parses the answer
    client.receive_data(bytes(received))
    client.receive_data(b"")
    body = bytearray()
    complete = False
    try:
        while not (complete := isinstance(event := client.next_event(), h11.EndOfMessage)):
            if isinstance(event, h11.Data):
                body += event.data
    except h11.RemoteProtocolError:  # the connection was closed mid-body
        pass
    events = parse_sse(bytes(body)[: bytes(body).rfind(b"\n\n") + 2])
    if complete:  # a complete body: exactly one terminal event, the last
        check_response_stream(events)
        assert events[-1]["type"] == "response.failed" and "shutting down" in events[-1]["response"]["error"]["message"]
    else:  # cut: the events that arrived are in order, none of them terminal
        assert [e["sequence_number"] for e in events] == list(range(len(events)))
        assert not any(
            e["type"].startswith("response.") and "response" in e and e["type"] != "response.created" and e["type"] != "response.in_progress"
            for e in events
        )
    log = gateway.log.read_text()
    assert "Traceback" not in log and "cancel scope" not in log


def test_check_config(tmp_path: Path) -> None:
    config = {
        "engine": {"url": "http://vllm:8000"},
        "auth": {"api_keys": ["sk-secret-value"]},
        "tool_servers": [
            {"label": "time", "transport": "stdio", "command": ["mcp-server-time"]},
            {"label": "docs", "transport": "streamable-http", "url": "https://docs.example/mcp", "headers": {"Authorization": "Bearer hidden-token"}},
        ],
        "sandbox": {"backend": "docker"},
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(json.dumps(config))
    result = subprocess.run([PYTHON, "-m", "gateway", "check-config", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "engine:       http://vllm:8000" in out
    assert "tool server:  time (stdio) mcp-server-time" in out
    assert "tool server:  docs (streamable-http) https://docs.example/mcp, headers: Authorization" in out
    assert "1 API key(s)" in out and "docker, image harmony-gateway/sandbox:latest" in out
    assert "sk-secret-value" not in out and "hidden-token" not in out
    path.write_text(json.dumps({"engine": {"url": "x"}, "tool_servers": [{"label": "a", "transport": "sse"}]}))
    result = subprocess.run([PYTHON, "-m", "gateway", "check-config", str(path)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 2 and "tool_servers[0]: Value error, a sse server needs url" in result.stderr
