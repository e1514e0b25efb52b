"""Faults end in a defined, reported outcome: engine down, failing, dropping, stalling, malformed output,
clients that go away, and many streams at once."""

from __future__ import annotations

import asyncio
import time

import httpx
import openai
import pytest

from .conftest import MODEL, emulator_stats, free_port, open_stream, start_emulator, stream_raw
from .conftest import metric as _metric
from .stream_checker import check_response_stream


def wait_for(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_engine_down(make_gateway):
    gateway = make_gateway(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    assert httpx.get(gateway.url + "/health").status_code == 200
    client = gateway.client()
    with pytest.raises(openai.InternalServerError) as err:
        client.responses.create(model=MODEL, input="hi")
    assert err.value.status_code == 503
    assert err.value.body["code"] == "engine_unavailable"
    response = httpx.post(gateway.url + "/v1/responses", json={"input": "hi", "stream": True})
    assert response.status_code == 503
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert httpx.get(gateway.url + "/v1/models").status_code == 503


def test_engine_500(gateway):
    with pytest.raises(openai.APIStatusError) as err:
        gateway.client().responses.create(model=MODEL, input="boom [error500]")
    assert err.value.status_code == 502
    assert "EngineCore" in err.value.body["message"]


@pytest.mark.parametrize("directive", ["[drop]", "[midstream-error]", "[malformed]"])
def test_engine_failure_mid_stream_ends_in_failed(gateway, directive):
    events = stream_raw(gateway, {"input": f"fail {directive}"})
    final = events[-1]
    assert final["type"] == "response.failed"
    assert final["response"]["error"]["code"] == "server_error"
    assert final["response"]["error"]["message"]
    assert all(item.get("status", "incomplete") == "incomplete" for item in final["response"]["output"])


@pytest.mark.parametrize("directive", ["[drop]", "[midstream-error]", "[malformed]"])
def test_engine_failure_non_streaming(gateway, directive):
    with pytest.raises(openai.APIStatusError) as err:
        gateway.client().responses.create(model=MODEL, input=f"fail {directive}")
    assert err.value.status_code == 502
    assert err.value.body["type"] == "server_error"


def test_failed_response_is_stored_as_failed(gateway):
    events = stream_raw(gateway, {"input": "fail [drop]"})
    stored = gateway.client().responses.retrieve(events[-1]["response"]["id"])
    assert stored.status == "failed" and stored.error.message


def test_engine_stall_times_out(emulator, make_gateway):
    gateway = make_gateway(emulator.url, engine={"read_timeout_s": 1})
    started = time.monotonic()
    events = stream_raw(gateway, {"input": "wait [stall]"})
    assert time.monotonic() - started < 10
    assert events[-1]["type"] == "response.failed"
    assert "did not answer in time" in events[-1]["response"]["error"]["message"]
    with pytest.raises(openai.APIStatusError) as err:
        gateway.client().responses.create(model=MODEL, input="wait [stall]")
    assert err.value.status_code == 504


def test_client_timeout_aborts_engine_request(gateway, emulator):
    before = emulator_stats(emulator)["aborted"]
    with pytest.raises(openai.APITimeoutError):
        gateway.client(timeout=1.0).responses.create(model=MODEL, input="wait [stall]")
    wait_for(lambda: emulator_stats(emulator)["aborted"] == before + 1)
    assert emulator_stats(emulator)["active"] == 0


def test_streaming_client_disconnect_aborts_engine_request(gateway, emulator):
    before = emulator_stats(emulator)["aborted"]
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", gateway.url + "/v1/responses", json={"input": "[long 500] [slow 20]", "stream": True}) as response:
            seen = 0
            for line in response.iter_lines():
                if line.startswith("data: "):
                    seen += 1
                if seen >= 8:
                    break  # leave mid-stream
    wait_for(lambda: emulator_stats(emulator)["aborted"] == before + 1)
    assert emulator_stats(emulator)["active"] == 0


def test_stalled_reader_is_dropped_and_its_engine_request_aborted(emulator, make_gateway):
    """A client that stops reading is gone after server.send_timeout_s: its engine request is aborted."""
    gateway = make_gateway(emulator.url, server={"send_timeout_s": 1})
    before = emulator_stats(emulator)["aborted"]
    # About 7 MB of events, more than the sockets buffer, then the engine goes silent, holding the request.
    sock = open_stream(gateway, {"input": "[long 40000] [stall 100000]", "stream": True})
    try:
        assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        started = time.monotonic()  # from here on, the client reads nothing
        wait_for(lambda: emulator_stats(emulator)["aborted"] == before + 1, timeout=20)
        assert time.monotonic() - started < 15  # not the engine's read timeout (300 s)
        sock.settimeout(10)
        while sock.recv(65536):  # what was sent before it stalled, then the gateway closes the connection
            pass
    finally:
        sock.close()
    assert emulator_stats(emulator)["active"] == 0
    assert "the client read nothing for 1 s" in gateway.log.read_text()


def test_usage_is_counted_when_the_engine_fails(gateway):
    before = _metric(httpx.get(gateway.url + "/metrics").text, "gateway_tokens_total", 0, direction="out")
    events = stream_raw(gateway, {"input": "count me [drop]"})
    final = events[-1]["response"]
    assert final["status"] == "failed"
    assert final["usage"]["input_tokens"] > 0
    assert final["usage"]["output_tokens"] >= 6  # the emulator drops the connection after 6 tokens
    assert final["usage"]["total_tokens"] == final["usage"]["input_tokens"] + final["usage"]["output_tokens"]
    after = _metric(httpx.get(gateway.url + "/metrics").text, "gateway_tokens_total", 0, direction="out")
    assert after - before == final["usage"]["output_tokens"]


def test_usage_is_counted_when_the_client_goes_away(gateway, emulator):
    before = _metric(httpx.get(gateway.url + "/metrics").text, "gateway_tokens_total", 0, direction="out")
    aborted = emulator_stats(emulator)["aborted"]
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", gateway.url + "/v1/responses", json={"input": "[long 500] [slow 20]", "stream": True}) as response:
            deltas = 0
            for line in response.iter_lines():
                deltas += '"response.output_text.delta"' in line
                if deltas >= 5:
                    break
    wait_for(lambda: emulator_stats(emulator)["aborted"] == aborted + 1)
    wait_for(lambda: _metric(httpx.get(gateway.url + "/metrics").text, "gateway_tokens_total", 0, direction="out") - before >= 5)


def test_deltas_arrive_as_tokens_arrive(gateway):
    """With the engine sending a chunk every 30 ms, deltas must reach the client spread out, not batched."""
    arrivals = []
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", gateway.url + "/v1/responses", json={"input": "[long 30] [slow 30] [noanalysis]", "stream": True}) as response:
            for line in response.iter_lines():
                if line.startswith("data: ") and '"response.output_text.delta"' in line:
                    arrivals.append(time.monotonic())
    assert len(arrivals) >= 10
    assert arrivals[-1] - arrivals[0] > 0.2  # ~20 chunks 30 ms apart


def test_context_overflow_is_a_400(workdir, make_gateway):
    small = start_emulator(workdir, "--max-model-len", "300")
    try:
        gateway = make_gateway(small.url)
        with pytest.raises(openai.BadRequestError) as err:
            gateway.client().responses.create(model=MODEL, input="word " * 400)
        assert err.value.body["code"] == "context_length_exceeded"
        assert "maximum context length is 300" in err.value.body["message"]
        # Close to the limit, generation is capped by what is left of the context.
        response = gateway.client().responses.create(model=MODEL, input="word " * 150 + " [long 300]")
        assert response.status == "incomplete"
    finally:
        small.stop()


def test_truncation_auto_drops_the_oldest_turns(workdir, make_gateway):
    small = start_emulator(workdir, "--max-model-len", "400")
    try:
        client = make_gateway(small.url).client()
        previous = None
        for turn in range(8):  # each turn adds ~40 tokens: past the context by the last ones
            text = f"turn {turn} " + "word " * 25
            try:
                response = client.responses.create(model=MODEL, input=text, previous_response_id=previous, max_output_tokens=40)
            except openai.BadRequestError as err:
                assert err.body["code"] == "context_length_exceeded"
                break
            previous = response.id
        else:
            raise AssertionError("the conversation never outgrew the context")
        response = client.responses.create(model=MODEL, input=text, previous_response_id=previous, max_output_tokens=40, truncation="auto")
        assert response.status in ("completed", "incomplete") and response.truncation == "auto"
        prompt = emulator_stats(small)["last_prompt"]
        assert f"turn {turn} " in prompt and "turn 0 " not in prompt  # the oldest turns are gone, this one is kept
        assert response.usage.input_tokens < 400
    finally:
        small.stop()


def test_32_concurrent_streams(gateway):
    async def one(client: openai.AsyncOpenAI, n: int) -> list[dict]:
        stream = await client.responses.create(model=MODEL, input=f"stream {n} [long 60]", stream=True)
        return [event.to_dict() async for event in stream]

    async def main() -> list[list[dict]]:
        async with gateway.async_client(timeout=60) as client:
            return await asyncio.gather(*(one(client, n) for n in range(32)))

    results = asyncio.run(main())
    for events in results:
        response = check_response_stream(events)
        assert response.status == "completed"
        assert response.output_text == " ".join(f"word{i}" for i in range(60))
    assert len({events[0]["response"]["id"] for events in results}) == 32


@pytest.mark.parametrize(
    "chunk",
    [
        b'{"choices":[{"text":"a","token_ids":[1,2],"prompt_token_ids":[3,4,5]}]}',  # vLLM: compact, key last
        b'{"choices": [{"prompt_token_ids": [3, 4, 5], "text": "a", "token_ids": [1, 2]}]}',  # key first, spaced
        b'{"choices":[{"text":"\\"prompt_token_ids\\":[9]","token_ids":[1,2],"prompt_token_ids":[3]}]}',  # the key in the text
        b'{"choices":[{"text":"a","token_ids":[1,2],"prompt_token_ids":null}]}',  # no list: left as it is
    ],
)
def test_the_echoed_prompt_is_cut_from_the_first_chunk(chunk):
    """The prompt ids vLLM echoes on the first chunk are cut out unparsed (a long context would be parsed
    into as many Python ints); what is left is the same chunk, the model's text and tokens untouched."""
    import json

    from gateway.engine.stream import without_prompt_ids

    original, trimmed = json.loads(chunk), json.loads(without_prompt_ids(chunk))
    choice = original["choices"][0]
    assert trimmed["choices"][0] == {key: value for key, value in choice.items() if key != "prompt_token_ids" or value is None}
