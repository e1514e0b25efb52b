"""Background responses (OpenAI's background mode): answered at once as `queued`, run whatever the client
does, polled, resumed from any sequence number, cancelled."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import httpx
import openai
import pytest

from .conftest import MODEL, Gateway, emulator_stats, gateway_config
from .stream_checker import check_response_stream, parse_sse

SLOW = "[long 80] [slow 25]"  # about 2 s of streaming
EXPECTED = " ".join(f"word{i}" for i in range(80))


def poll(client: openai.OpenAI, response_id: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress") or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def test_background_is_answered_at_once_and_polled(gateway):
    client = gateway.client()
    response = client.responses.create(model=MODEL, input=SLOW, background=True)
    # Answered before its run ends (not a wall-clock bound, which a busy machine outruns): queued, nothing
    # output, and still running when retrieved after the answer.
    assert response.status == "queued" and response.background is True and response.output == []
    assert client.responses.retrieve(response.id).status in ("queued", "in_progress")  # still running
    done = poll(client, response.id)
    assert done.status == "completed" and done.output_text == EXPECTED and done.usage.output_tokens > 80
    assert done.background is True


def test_a_stream_resumed_after_a_lost_connection_loses_nothing(gateway):
    client = gateway.client()
    first: list[dict[str, Any]] = []
    with httpx.stream(
        "POST", f"{gateway.url}/v1/responses", json={"model": MODEL, "input": SLOW, "background": True, "stream": True}, timeout=30
    ) as answer:
        for line in answer.iter_lines():  # read a few events, then drop the connection
            if line.startswith("data: "):
                first.append(json.loads(line[6:]))
                if len(first) == 12:
                    break
    response_id = first[0]["response"]["id"]
    last = first[-1]["sequence_number"]
    # The run went on without its reader; the SDK resumes after the last event it saw, following live.
    rest = [event.to_dict() for event in client.responses.retrieve(response_id, stream=True, starting_after=last)]
    assert rest[0]["sequence_number"] == last + 1
    events = first + rest
    final = check_response_stream(events)  # in order, nothing missing, exactly one terminal event
    assert final.status == "completed" and final.output_text == EXPECTED
    # Once it ended, its events are replayed from the store, from any point.
    replayed = [event.to_dict() for event in client.responses.retrieve(response_id, stream=True, starting_after=5)]
    assert replayed == events[6:]
    whole = parse_sse(httpx.get(f"{gateway.url}/v1/responses/{response_id}", params={"stream": "true"}).content)
    assert whole == events


def test_cancel_stops_the_run(gateway, emulator):
    client = gateway.client()
    aborted = emulator_stats(emulator)["aborted"]
    response = client.responses.create(model=MODEL, input="[long 400] [slow 40]", background=True)
    with httpx.stream("GET", f"{gateway.url}/v1/responses/{response.id}", params={"stream": "true"}, timeout=30) as follower:
        time.sleep(0.5)
        cancelled = client.responses.cancel(response.id)
        assert cancelled.status == "cancelled"
        events = parse_sse(follower.read())
    # The reader's stream ended with one error event naming the cancellation.
    assert events[-1]["type"] == "error" and events[-1]["code"] == "response_cancelled"
    assert not any(event["type"] in ("response.completed", "response.failed", "response.incomplete") for event in events)
    assert emulator_stats(emulator)["aborted"] == aborted + 1  # the engine request was aborted
    assert client.responses.cancel(response.id).status == "cancelled"  # idempotent
    assert client.responses.retrieve(response.id).status == "cancelled"
    done = client.responses.create(model=MODEL, input="quick", background=True)
    assert poll(client, done.id).status == "completed"
    assert client.responses.cancel(done.id).status == "completed"  # an ended response is answered as it is


def test_background_refusals(gateway):
    client = gateway.client()
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="x", background=True, store=False)
    assert err.value.body["param"] == "background"
    plain = client.responses.create(model=MODEL, input="x")
    with pytest.raises(openai.BadRequestError):
        client.responses.cancel(plain.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.cancel("resp_missing")
    for query in ({"stream": "maybe"}, {"starting_after": "3"}, {"stream": "true", "starting_after": "-1"}):
        answer = httpx.get(f"{gateway.url}/v1/responses/{plain.id}", params=query)
        assert answer.status_code == 400, query


def test_two_cancels_at_once_and_many_runs(gateway):
    """Two cancels racing get the same cancelled response; 64 background runs at once all complete."""
    import concurrent.futures

    client = gateway.client()
    response = client.responses.create(model=MODEL, input="[long 400] [slow 40]", background=True)
    time.sleep(0.3)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: client.responses.cancel(response.id), range(2)))
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert results[0].to_dict() == results[1].to_dict()
    started = [client.responses.create(model=MODEL, input=f"run {n} [long 30]", background=True) for n in range(64)]
    finished = [poll(client, r.id, timeout=60) for r in started]
    assert [r.status for r in finished] == ["completed"] * 64
    assert finished[17].output_text == " ".join(f"word{i}" for i in range(30))


def test_a_background_run_goes_on_after_its_gateway_restarts(emulator, tmp_path):
    """One gateway on SQLite, killed while a background response streams, then started again: the new
    process adopts the run once the old one's lease has run out, and it completes, its stream whole."""
    key = base64.b64encode(bytes(range(32))).decode()  # the request is kept sealed: the key must outlive the process
    killed_and_started_again(gateway_config(emulator.url, tmp_path, storage={"lease_s": 1.0}, server={"reasoning_key": key}), tmp_path)


def killed_and_started_again(config: dict[str, Any], tmp_path: Any, words: int = 200) -> None:
    """A gateway killed (SIGKILL) while a background response streams, started again with the same config:
    the response completes, its stream whole."""
    first = Gateway(config, tmp_path).start()
    again = None
    try:
        response = first.client().responses.create(model=MODEL, input=f"[long {words}] [slow 10]", background=True)
        time.sleep(0.8)
        assert first.proc is not None
        first.proc.kill()
        again = Gateway(config, tmp_path).start()
        ended = poll(again.client(), response.id, timeout=30)
        assert ended.status == "completed" and ended.output_text == " ".join(f"word{i}" for i in range(words))
        events = parse_sse(httpx.get(f"{again.url}/v1/responses/{response.id}", params={"stream": "true"}, timeout=30).content)
        assert check_response_stream(events).output_text == ended.output_text
    finally:
        first.stop()
        if again is not None:
            again.stop()
