"""The Responses API's WebSocket mode through the openai SDK's `responses.connect()`: responses stream as
over HTTP and continue from memory with `store: false`; errors are events and leave the socket open;
keys, limits and a client that leaves; steering a running response into a successor."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect as raw_connect

from .conftest import MODEL, Gateway, Process, emulator_stats
from .stream_checker import check_response_stream
from .test_tool_search import SEARCH, WEATHER

ENDINGS = ("response.completed", "response.incomplete", "response.failed")


def until_end(connection: Any, stop: tuple[str, ...] = ENDINGS) -> list[dict[str, Any]]:
    """Events up to and including the next one of the `stop` types (or an error)."""
    events: list[dict[str, Any]] = []
    for event in connection:
        events.append(event.to_dict())
        if event.type in stop or event.type == "error":
            return events
    raise AssertionError(f"the socket closed after {events}")


def test_responses_stream_and_continue_from_memory(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="first [long 40]", store=False)
        first = until_end(connection)
        check_response_stream(first)  # the same events, in the same order, as an SSE stream has
        first_id = first[-1]["response"]["id"]
        assert first[-1]["type"] == "response.completed" and first[-1]["response"]["store"] is False
        # Not stored, yet continued: the socket keeps its last response in memory.
        connection.response.create(model=MODEL, input="second [recall]", previous_response_id=first_id, store=False)
        second = until_end(connection)
        check_response_stream(second)
        text = second[-1]["response"]["output"][-1]["content"][0]["text"]
        assert "users=['first [long 40]', 'second [recall]']" in text and "word39" in text
        assert httpx.get(f"{gateway.url}/v1/responses/{first_id}").status_code == 404
        # Only the last response is kept: an older one is not found (and nothing was stored).
        connection.response.create(model=MODEL, input="again", previous_response_id=first_id, store=False)
        (error,) = until_end(connection)
        assert error["type"] == "error" and error["error"]["code"] == "previous_response_not_found" and error["status"] == 404
        # A stored response continues from memory and is stored as a continuation of its parent.
        connection.response.create(model=MODEL, input="third")
        third = until_end(connection)[-1]["response"]
        connection.response.create(model=MODEL, input="fourth [recall]", previous_response_id=third["id"], stream_id="lane-1")
        fourth = until_end(connection)
        assert {event.get("stream_id") for event in fourth} == {"lane-1"}
        stored = client.responses.retrieve(fourth[-1]["response"]["id"])
        assert "users=['third', 'fourth [recall]']" in stored.output_text
        items = client.responses.input_items.list(stored.id)
        assert [item.content[0].text for item in items.data] == ["fourth [recall]"]  # type: ignore[union-attr]


def test_a_warm_up_prepares_the_state_a_response_continues(gateway: Gateway, emulator: Process) -> None:
    calls = emulator_stats(emulator)["requests"]
    with gateway.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="the context", instructions="Be brief.", generate=False, store=False)
        warm = until_end(connection)
        assert [event["type"] for event in warm] == ["response.created", "response.in_progress", "response.completed"]
        assert warm[-1]["response"]["output"] == [] and emulator_stats(emulator)["requests"] == calls  # no engine call
        connection.response.create(model=MODEL, input="and now [recall]", previous_response_id=warm[-1]["response"]["id"], store=False)
        text = until_end(connection)[-1]["response"]["output"][-1]["content"][0]["text"]
        assert "users=['the context', 'and now [recall]']" in text


def test_errors_are_events_and_the_socket_stays_open(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, server={"max_body_bytes": 4096})
    client = gateway.client()
    with client.responses.connect() as connection:
        for raw, code in [
            ("{not json", "invalid_json"),
            ('{"type": "response.dance"}', None),
            (json.dumps({"type": "response.create", "model": MODEL, "input": "x", "frobnicate": 1}), None),
            (json.dumps({"type": "response.create", "model": MODEL, "input": "x" * 5000}), "request_too_large"),
            ("[1, 2]", "invalid_type"),
        ]:
            connection.send_raw(raw)
            (error,) = until_end(connection)
            assert error["type"] == "error" and 400 <= error["status"] < 500, (raw, error)
            if code is not None:
                assert error["error"]["code"] == code, (raw, error)
        connection.send_raw(json.dumps({"type": "response.create", "model": MODEL, "input": "x", "frobnicate": 1}))
        assert until_end(connection)[0]["error"]["param"] == "frobnicate"
        connection.response.create(model=MODEL, input="still here")
        assert until_end(connection)[-1]["type"] == "response.completed"


def test_keys_and_the_sockets_a_tenant_may_hold(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, auth={"api_keys": ["sk-one"]}, server={"websocket": {"max_per_tenant": 1}})
    url = gateway.url.replace("http://", "ws://") + "/v1/responses"
    with pytest.raises(InvalidStatus) as refused:
        raw_connect(url, additional_headers={"Authorization": "Bearer sk-wrong"})
    assert refused.value.response.status_code == 401
    assert json.loads(refused.value.response.body)["error"]["code"] == "invalid_api_key"
    # No key at all, an empty one, another scheme: each refused on its own, not only a wrong key.
    for headers in [{}, {"Authorization": "Bearer "}, {"Authorization": "Basic c2stb25lOg=="}]:
        with pytest.raises(InvalidStatus) as refused:
            raw_connect(url, additional_headers=headers)
        assert refused.value.response.status_code == 401, headers
    with gateway.client(api_key="sk-one").responses.connect() as connection:
        with pytest.raises(InvalidStatus) as too_many:
            raw_connect(url, additional_headers={"Authorization": "Bearer sk-one"})
        assert too_many.value.response.status_code == 429
        connection.response.create(model=MODEL, input="hello")
        assert until_end(connection)[-1]["response"]["output"][-1]["content"][0]["text"] == "You said: hello"
    deadline = time.monotonic() + 10  # the socket closed: the tenant may open another, once the server saw it go
    while True:
        try:
            socket = raw_connect(url, additional_headers={"Authorization": "Bearer sk-one"})
            break
        except InvalidStatus:
            assert time.monotonic() < deadline, "the closed socket was never given back"
            time.sleep(0.1)
    with socket:
        socket.send(json.dumps({"type": "response.create", "model": MODEL, "input": "again"}))
        assert json.loads(socket.recv(timeout=10))["type"] == "response.created"


def test_a_client_that_leaves_stops_its_response(gateway: Gateway, emulator: Process) -> None:
    aborted = emulator_stats(emulator)["aborted"]
    with gateway.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="wait [stall]")
        until_end(connection, ("response.in_progress",))
    deadline = time.monotonic() + 10
    while emulator_stats(emulator)["aborted"] == aborted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert emulator_stats(emulator)["aborted"] == aborted + 1  # its engine request was aborted


def test_an_idle_socket_is_closed(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, server={"websocket": {"idle_timeout_s": 0.5}})
    with raw_connect(gateway.url.replace("http://", "ws://") + "/v1/responses") as socket:
        socket.ping().wait(5)  # pings are answered
        assert "Sec-WebSocket-Extensions" not in socket.response.headers  # no compression offered by default
        started = time.monotonic()
        with pytest.raises(ConnectionClosed):
            socket.recv(timeout=10)
        assert time.monotonic() - started < 5 and socket.close_code == 1000


def test_steering_ends_the_response_at_a_boundary_and_a_successor_goes_on(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    search = '[[call tool_search.search {"query": "weather"}]]'
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input=f"[slow@1 40] {search} [[answer done]]", tools=[SEARCH, WEATHER], store=False)
        opening = until_end(connection, ("response.created",))
        created = opening[-1]["response"]
        connection.response.steer(input="Actually, use Celsius.", previous_response_id=created["id"])
        first = opening + until_end(connection)
        accepted = next(event for event in first if event["type"] == "response.steer.accepted")
        assert accepted["steer"]["previous_response_id"] == created["id"] and accepted["steer"]["id"].startswith("steer_")
        steered = first[-1]["response"]
        assert first[-1]["type"] == "response.incomplete" and steered["incomplete_details"] == {"reason": "steered"}
        assert [item["type"] for item in steered["output"] if item["type"] != "reasoning"] == ["tool_search_call", "tool_search_output"]
        check_response_stream([event for event in first if not event["type"].startswith("response.steer.")])
        # The successor continues it with the input, with the same settings, at once.
        successor = until_end(connection)
        check_response_stream(successor)
        response = successor[-1]["response"]
        assert response["previous_response_id"] == created["id"] and response["tools"] == steered["tools"]
        assert response["output"][-1]["content"][0]["text"] == "You said: Actually, use Celsius."
        prompt = emulator_stats(emulator)["last_prompt"]
        assert prompt.index("<|start|>tool_search.search to=assistant") < prompt.index("<|start|>user<|message|>Actually, use Celsius.")
        # Too late, and unknown: the documented codes.
        connection.response.steer(input="more", previous_response_id=created["id"])
        late = until_end(connection, ("response.steer.failed",))[-1]
        assert late["error"]["code"] == "response_already_completed" and late["steer"]["input"] == "more"
        connection.response.steer(input="more", previous_response_id="resp_elsewhere")
        assert until_end(connection, ("response.steer.failed",))[-1]["error"]["code"] == "response_not_found"


def test_steering_waits_for_the_clients_tool_output(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    weather = WEATHER | {"defer_loading": False}
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input='[slow 30] [call functions.get_weather {"location": "Oslo"}]', tools=[weather])
        created = until_end(connection, ("response.created",))[-1]["response"]
        connection.response.steer(input=[{"role": "user", "content": "And in Bergen?"}], previous_response_id=created["id"])
        first = until_end(connection)
        call = first[-1]["response"]["output"][-1]
        assert first[-1]["type"] == "response.completed" and call["type"] == "function_call"
        (pending,) = until_end(connection, ("response.steer.pending",))
        assert pending["reason"] == "waiting_for_required_input"
        assert pending["required_input"] == [{"type": "function_call_output", "call_id": call["call_id"], "name": "get_weather"}]
        # The client's continuation carries the queued input in front of its own.
        output = {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny"}
        connection.response.create(model=MODEL, input=[output], previous_response_id=created["id"], tools=[weather])
        until_end(connection)
        prompt = emulator_stats(emulator)["last_prompt"]
        assert prompt.index("<|start|>user<|message|>And in Bergen?") < prompt.index("<|start|>functions.get_weather to=assistant")


def test_a_client_that_reads_nothing_is_dropped_and_its_response_stopped(make_gateway: Any, emulator: Process) -> None:
    """A socket whose client stops reading is closed after server.send_timeout_s, its engine request
    aborted (as an SSE stream's is)."""
    import socket as sockets

    gateway = make_gateway(emulator.url, server={"send_timeout_s": 1})
    before = emulator_stats(emulator)["aborted"]
    sock = sockets.create_connection(("127.0.0.1", gateway.port))
    sock.setsockopt(sockets.SOL_SOCKET, sockets.SO_RCVBUF, 4096)
    # The client's reader stops after one message: the rest stays in the network's buffers, then the
    # gateway's. About 7 MB of events, then the engine goes silent, holding the request.
    with raw_connect(gateway.url.replace("http://", "ws://") + "/v1/responses", sock=sock, max_queue=1) as client:
        client.send(json.dumps({"type": "response.create", "model": MODEL, "input": "[long 40000] [stall 100000]"}))
        started = time.monotonic()
        deadline = started + 20
        while emulator_stats(emulator)["aborted"] == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert emulator_stats(emulator)["aborted"] == before + 1
        assert time.monotonic() - started < 15  # not the engine's read timeout (300 s)
    assert "a WebSocket client read nothing for 1 s" in gateway.log.read_text()
