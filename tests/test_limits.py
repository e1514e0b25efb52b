"""Bounds one tenant cannot push past: foreground responses running at once, per tenant and in all, counted
over HTTP, Chat Completions and the WebSocket alike, each cap seen holding on its own."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest
from websockets.exceptions import ConnectionClosedError
from websockets.sync.client import connect as raw_connect

from .conftest import MODEL, Gateway, Process
from .test_tool_search import WEATHER
from .test_websocket import until_end

KEYS = [{"key": "alice-key", "tenant": "alice"}, {"key": "mallory-key", "tenant": "mallory"}]


@contextlib.contextmanager
def held(gateway: Gateway, key: str) -> Iterator[None]:
    """A streamed response that runs until the client leaves (the engine stalls), held open meanwhile."""
    body = {"model": MODEL, "input": "[stall]", "stream": True}
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", f"{gateway.url}/v1/responses", json=body, headers={"authorization": f"Bearer {key}"}) as response:
            assert response.status_code == 200
            lines = response.iter_lines()
            while "response.in_progress" not in next(lines):
                pass
            yield


def refused(gateway: Gateway, key: str) -> dict[str, Any]:
    answer = httpx.post(f"{gateway.url}/v1/responses", json={"model": MODEL, "input": "hi"}, headers={"authorization": f"Bearer {key}"})
    assert answer.status_code == 429, answer.text
    return answer.json()["error"]


def test_foreground_responses_are_capped_per_tenant_and_in_all(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url, auth={"api_keys": KEYS}, limits={"max_concurrent_per_tenant": 2, "max_concurrent": 3})
    alice, mallory = gateway.client(api_key="alice-key"), gateway.client(api_key="mallory-key")
    for _ in range(3):  # a request refused while it is planned gives its place back
        with pytest.raises(openai.NotFoundError):
            alice.responses.create(model=MODEL, input="hi", previous_response_id="resp_missing")
    with held(gateway, "alice-key"), held(gateway, "alice-key"):
        # Alice's third is refused while the gateway has room: the per-tenant cap alone.
        error = refused(gateway, "alice-key")
        assert error["code"] == "rate_limit_exceeded" and "2 responses running" in error["message"]
        with pytest.raises(openai.RateLimitError):
            alice.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
        with pytest.raises(openai.RateLimitError):
            alice.responses.compact(model=MODEL, input="compact this")
        with alice.responses.connect() as connection:
            connection.response.create(model=MODEL, input="hi")
            (event,) = until_end(connection)
            assert event["type"] == "error" and event["status"] == 429 and event["error"]["code"] == "rate_limit_exceeded"
        # Mallory is not held back by alice's count.
        assert mallory.responses.create(model=MODEL, input="hi").status == "completed"
        with held(gateway, "mallory-key"):
            # The gateway's cap alone: mallory has one running, below her own cap.
            assert "is running 3 responses" in refused(gateway, "mallory-key")["message"]
    # Ended (the clients left), their places are free again.
    deadline = time.monotonic() + 10
    while True:
        answer = httpx.post(f"{gateway.url}/v1/responses", json={"model": MODEL, "input": "hi"}, headers={"authorization": "Bearer alice-key"})
        if answer.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert answer.status_code == 200 and answer.json()["status"] == "completed"
    # A background run is counted by its own cap, not this one.
    with held(gateway, "alice-key"), held(gateway, "alice-key"):
        background = alice.responses.create(model=MODEL, input="hi", background=True)
        assert background.status in ("queued", "in_progress", "completed")


def rss_bytes(process: Process) -> int:
    assert process.proc is not None
    status = (Path(f"/proc/{process.proc.pid}/status")).read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) * 1024


def test_steering_left_waiting_is_bounded_per_socket_and_dropped(make_gateway: Any, emulator: Process) -> None:
    """40 responses that each stop for the client's tool output, 8 large steers queued on each: the steers
    of one are dropped (each with its event) when the socket goes on with the next, so memory stays flat;
    the count and the bytes waiting on the socket are each capped on their own."""
    gateway = make_gateway(emulator.url, server={"websocket": {"max_pending_steer_bytes": 2_000_000}})
    weather = WEATHER | {"defer_loading": False}
    big = "steer " * 33_000  # ~200 KB
    with gateway.client().responses.connect() as connection:
        before = rss_bytes(gateway)
        for round in range(40):
            # The engine holds its answer until the steers are in: the response is still running when each comes.
            held = f'[held steers{round}] [call functions.get_weather {{"location": "Oslo"}}]'
            connection.response.create(model=MODEL, input=held, tools=[weather], store=False)
            events = until_end(connection, ("response.created",))
            if round:  # the previous response's steers, dropped as this one starts
                dropped = [event for event in events if event["type"] == "response.steer.failed"]
                assert len(dropped) == 8 and {event["error"]["code"] for event in dropped} == {"response_not_active"}
            created = events[-1]["response"]["id"]
            for _ in range(8):
                connection.response.steer(input=big, previous_response_id=created)
            accepted = until_end(connection, ("response.steer.accepted",))
            for _ in range(7):
                accepted += until_end(connection, ("response.steer.accepted",))
            httpx.post(f"{emulator.url}/_emulator/release/steers{round}")
            events = accepted + until_end(connection)
            assert [event["type"] for event in events].count("response.steer.accepted") == 8
            pending = until_end(connection, ("response.steer.pending",))
            for _ in range(7):
                pending += until_end(connection, ("response.steer.pending",))
            assert len(pending) == 8
        grown = rss_bytes(gateway) - before
        assert grown < 40_000_000, grown  # 320 steers of 200 KB kept would be 64 MB and more
        # The count alone: a ninth steer, small, is refused on this socket whatever response it names.
        held = '[held count] [call functions.get_weather {"location": "Oslo"}]'
        connection.response.create(model=MODEL, input=held, tools=[weather], store=False)
        created = until_end(connection, ("response.created",))[-1]["response"]["id"]
        for _ in range(8):
            connection.response.steer(input="small", previous_response_id=created)
        connection.response.steer(input="one more", previous_response_id=created)
        events = until_end(connection, ("response.steer.failed",))
        refused = [event for event in events if event["type"] == "response.steer.failed" and event["steer"]["input"] == "one more"]
        assert refused and refused[0]["error"]["code"] == "too_many_pending_steers"
        httpx.post(f"{emulator.url}/_emulator/release/count")
        until_end(connection)
    # The bytes alone: 3 steers of 800 KB come to more than 2 MB while their count is below 8.
    with gateway.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="[held bytes] [long 60]", store=False)
        created = until_end(connection, ("response.created",))[-1]["response"]["id"]
        for _ in range(3):
            connection.response.steer(input="more " * 160_000, previous_response_id=created)
        events = until_end(connection, ("response.steer.failed",))
        assert events[-1]["error"]["code"] == "too_many_pending_steers" and "bytes" in events[-1]["error"]["message"]
        httpx.post(f"{emulator.url}/_emulator/release/bytes")
        until_end(connection)


def test_queued_creates_are_bounded_by_what_they_weigh_parsed(make_gateway: Any, emulator: Process) -> None:
    """A create of numbers is small as bytes and large once parsed: the ones waiting behind the running
    response are bounded by their parsed weight, while a create that alone is small still queues."""
    gateway = make_gateway(emulator.url, server={"websocket": {"max_queued_bytes": 4_000_000}})
    numbers = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}, "x-pad": [1] * 200_000}}
    with gateway.client().responses.connect() as connection:
        connection.response.create(model=MODEL, input="[slow 20] [long 60]", store=False)
        until_end(connection, ("response.created",))
        connection.response.create(model=MODEL, input="queued and small", store=False)
        connection.response.create(model=MODEL, input="queued and heavy", tools=[numbers], store=False)  # ~400 KB of text
        events: list[dict[str, Any]] = []
        while [event["type"] for event in events].count("response.completed") < 2:
            events += until_end(connection)
        errors = [event for event in events if event["type"] == "error"]
        assert len(errors) == 1 and errors[0]["error"]["code"] == "too_many_queued_responses" and "parsed" in errors[0]["error"]["message"]
        assert "queued and small" in events[-1]["response"]["output"][-1]["content"][0]["text"]
        # Nothing waiting, the same heavy create runs (as it would over HTTP).
        connection.response.create(model=MODEL, input="now alone", tools=[numbers], store=False)
        assert until_end(connection)[-1]["type"] == "response.completed"


def test_a_frame_that_is_not_utf8_closes_the_socket_with_one_line(make_gateway: Any, emulator: Process) -> None:
    gateway = make_gateway(emulator.url)
    for _ in range(3):
        with raw_connect(gateway.url.replace("http://", "ws://") + "/v1/responses") as socket:
            socket.send(b"\xff\xfe{}", text=True)
            with pytest.raises(ConnectionClosedError):
                socket.recv(timeout=5)
            assert socket.close_code == 1007
    log = gateway.log.read_text()
    assert log.count("a WebSocket client sent a text frame that is not UTF-8") == 3
    assert "Traceback" not in log and "ERROR" not in log
