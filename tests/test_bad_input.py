"""Bad input gets a 4xx in OpenAI's error shape that names the field: never a 500, never a hang."""

from __future__ import annotations

import httpx
import pytest

from .conftest import MODEL


def post(gateway, body, raw: bytes | None = None) -> httpx.Response:
    if raw is not None:
        return httpx.post(gateway.url + "/v1/responses", content=raw, headers={"content-type": "application/json"})
    return httpx.post(gateway.url + "/v1/responses", json=body)


def assert_error(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["message"]
    assert error["param"] == param
    return error


@pytest.mark.parametrize(
    "body, param",
    [
        ({}, "input"),
        ({"input": 5}, "input"),
        ({"input": "x", "max_output_tokens": -1}, "max_output_tokens"),
        ({"input": "x", "max_output_tokens": "many"}, "max_output_tokens"),
        ({"input": "x", "temperature": 7}, "temperature"),
        ({"input": "x", "stream": "yes"}, "stream"),
        ({"input": [{"role": "robot", "content": "hi"}]}, "input[0].role"),
        ({"input": [{"role": "user"}]}, "input[0].content"),
        ({"input": [{"role": "user", "content": [{"type": "input_audio", "text": "x"}]}]}, "input[0].content[0]"),
        ({"input": [{"type": "telepathy"}]}, "input[0]"),
        ({"input": [{"type": ["message"]}]}, "input[0]"),
        ({"input": [{"type": {"a": 1}}]}, "input[0]"),
        ({"input": "x", "tools": [{"type": "teleport"}]}, "tools[0]"),
        ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"input": "x", "reasoning": {"effort": "extreme"}}, "reasoning.effort"),
        ({"input": "x", "metadata": {"a": 1}}, "metadata.a"),
        ({"input": "x", "instructions": ["no"]}, "instructions"),
        ({"input": [{"type": "function_call_output", "call_id": "call_nope", "output": "1"}]}, "input[0].call_id"),
    ],
)
def test_invalid_fields_name_the_param(gateway, body, param):
    error = assert_error(post(gateway, body), 400, param)
    assert error["type"] == "invalid_request_error"


def test_invalid_json(gateway):
    error = assert_error(post(gateway, None, raw=b"{not json"), 400, None)
    assert error["code"] == "invalid_json"


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"null"])
def test_body_not_an_object(gateway, raw):
    assert_error(post(gateway, None, raw=raw), 400, None)


def test_unknown_previous_response_is_404(gateway):
    error = assert_error(post(gateway, {"input": "x", "previous_response_id": "resp_missing"}), 404, "previous_response_id")
    assert "resp_missing" in error["message"]


def test_unknown_routes_and_methods(gateway):
    assert_error(httpx.get(gateway.url + "/v1/nothing"), 404, None)
    assert_error(httpx.put(gateway.url + "/v1/responses"), 405, None)
    assert_error(httpx.get(gateway.url + "/v1/responses/resp_nope"), 404, "response_id")
    assert_error(httpx.get(gateway.url + "/v1/responses/resp_nope/input_items"), 404, "response_id")


def test_bad_input_items_query(gateway):
    created = httpx.post(gateway.url + "/v1/responses", json={"input": "x"}).json()
    url = f"{gateway.url}/v1/responses/{created['id']}/input_items"
    assert_error(httpx.get(url, params={"limit": "lots"}), 400, "limit")
    assert_error(httpx.get(url, params={"order": "sideways"}), 400, "order")


# -- hostile bodies: bounded, strictly parsed, never a 500 ------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/chat/completions"])
def test_a_lone_surrogate_is_a_400(gateway, path: str) -> None:
    body = b'{"model": "openai/gpt-oss-20b", "input": "a\\ud800b", "messages": [{"role": "user", "content": "a\\ud800b"}]}'
    response = httpx.post(gateway.url + path, content=body, headers={"content-type": "application/json"})
    error = assert_error(response, 400, None)
    assert error["code"] == "invalid_json"


def test_deep_nesting_is_a_400(gateway) -> None:
    depth = 100_000
    raw = b'{"input": ' + b"[" * depth + b"]" * depth + b"}"
    assert assert_error(post(gateway, None, raw), 400, None)["code"] == "invalid_json"


def test_a_huge_body_is_refused_while_it_is_read(gateway) -> None:
    declared = httpx.post(gateway.url + "/v1/responses", content=b"x" * (50 * 1024 * 1024), headers={"content-type": "application/json"})
    assert assert_error(declared, 413, None)["code"] == "request_too_large"

    def chunks():  # no Content-Length: the limit holds while the body streams in
        for _ in range(50):
            yield b" " * (1024 * 1024)

    streamed = httpx.post(gateway.url + "/v1/responses", content=chunks(), headers={"content-type": "application/json"})
    assert assert_error(streamed, 413, None)["code"] == "request_too_large"


def test_a_body_that_is_not_json_is_a_415(gateway) -> None:
    response = httpx.post(gateway.url + "/v1/responses", content=b'{"input": "hi"}', headers={"content-type": "text/plain"})
    assert assert_error(response, 415, None)["code"] == "unsupported_media_type"


def test_text_that_would_stall_the_tokenizer_is_refused(gateway) -> None:
    import time

    started = time.monotonic()
    unbroken = post(gateway, {"model": MODEL, "input": "a" * 100_000})
    assert assert_error(unbroken, 400, "input")["code"] == "input_too_large"
    too_much = post(gateway, {"model": MODEL, "input": "word " * 250_000})
    assert assert_error(too_much, 400, "input")["code"] == "input_too_large"
    assert time.monotonic() - started < 5


def test_a_large_prompt_does_not_stall_other_requests(gateway) -> None:
    """Tokenising ~1M characters takes seconds; /health must keep answering meanwhile."""
    import threading
    import time

    text = " ".join(["a" * 4000] * 240)
    latencies: list[float] = []
    done = threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=30) as client:
            while not done.is_set():
                started = time.monotonic()
                try:
                    client.get(gateway.url + "/health")
                except httpx.HTTPError:
                    pass  # counted as the time it took to fail
                latencies.append(time.monotonic() - started)
                time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    try:
        started = time.monotonic()
        response = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": text, "max_output_tokens": 5}, timeout=60)
        elapsed = time.monotonic() - started
    finally:
        done.set()
        poller.join()
    # Tokenised for real: answered, or too long for the model's context, never a tokenizer failure.
    assert response.status_code == 200 or response.json()["error"]["code"] == "context_length_exceeded", response.text
    assert elapsed > 0.5, "the prompt was too small to show a stall"
    assert max(latencies) < 0.3, f"/health waited {max(latencies):.2f} s while the prompt was tokenised"


def test_request_heads_must_arrive_in_time(make_gateway, emulator) -> None:
    import socket
    import time

    gateway = make_gateway(emulator.url, server={"header_timeout_s": 1})
    sockets = [socket.create_connection(("127.0.0.1", gateway.port)) for _ in range(30)]
    for index, sock in enumerate(sockets):
        if index % 2:  # half send part of a head, half nothing at all
            sock.sendall(b"POST /v1/responses HTTP/1.1\r\nHost: x\r\n")
    time.sleep(2.5)
    for sock in sockets:
        sock.settimeout(2)
        assert sock.recv(100) == b"", "the gateway kept a connection whose head never arrived"
        sock.close()
    assert httpx.get(gateway.url + "/health").status_code == 200
    # A head that keeps growing is refused at its size limit, not held in memory.
    with socket.create_connection(("127.0.0.1", gateway.port)) as sock:
        sock.settimeout(5)
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * (4 * 1024 * 1024) + b"\r\n\r\n")
        except OSError:
            pass  # closed while we were still sending
        answer = sock.recv(100)
        assert answer == b"" or answer.startswith(b"HTTP/1.1 400"), answer
    assert httpx.get(gateway.url + "/health").status_code == 200


@pytest.mark.parametrize("label", ["functions", "python", "browser", "container", "assistant"])
def test_a_request_mcp_label_may_not_shadow_a_built_in_namespace(gateway, label):
    """A request's own MCP server labelled `python` would take the code interpreter's calls."""
    tool = {"type": "mcp", "server_label": label, "server_url": "http://127.0.0.1:9/mcp"}
    error = assert_error(post(gateway, {"input": "x", "tools": [tool]}), 400, "tools[0].server_label")
    assert "is reserved" in error["message"]
