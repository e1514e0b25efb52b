"""The engine's HTTP client (gateway/engine/transport.py, client.py): connections kept and reused, a stream's
lines found whatever its byte boundaries, a slow reader's buffer bounded, and an engine that answers
with broken or oversized HTTP refused with a defined error."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from openai_harmony import Message, Role

from gateway.config import EngineConfig
from gateway.engine.client import EngineClient
from gateway.engine.completion import FinishReason, Sampling
from gateway.engine.harmony import Preamble, Prompt, render_prompt
from gateway.engine.stream import Lines
from gateway.engine.transport import BUFFERED_HIGH, EngineHTTPError, EnginePool, ProtocolFault
from gateway.errors import APIError

from .conftest import emulator_stats


def prompt_of(text: str) -> Prompt:
    return Prompt.of(render_prompt(Preamble(), [Message.from_role_and_content(Role.USER, text)]))


def completion_body(text: str, max_tokens: int) -> bytes:
    """A streamed completion's request, as the engine client sends it, for reading it another way."""
    return (
        f'{{"model":"openai/gpt-oss-20b","max_tokens":{max_tokens},"stop_token_ids":[200002,200012],"return_token_ids":true,'
        f'"skip_special_tokens":false,"stream":true,"stream_options":{{"include_usage":true}},"prompt":[{prompt_of(text).json}]}}'
    ).encode()


async def answer(client: EngineClient, text: str) -> list[int]:
    stream = await client.generate(prompt_of(text), Sampling(max_tokens=4000))
    tokens: list[int] = []
    try:
        async for chunk in stream:
            tokens += chunk.token_ids
    finally:
        await stream.aclose()
    return tokens


def test_connections_are_kept_and_reused(emulator):
    async def main() -> tuple[int, list[list[int]]]:
        client = EngineClient(EngineConfig(url=emulator.url))
        try:
            answers = [await answer(client, "[answer one two three]") for _ in range(5)]
            answers += await asyncio.gather(*(answer(client, "[answer one two three]") for _ in range(3)))
            return client._http.opened, answers
        finally:
            await client.aclose()

    opened, answers = asyncio.run(main())
    assert all(tokens == answers[0] and tokens for tokens in answers)
    assert opened == 3  # the models list and the five in turn on one, two more for the three at once


def test_a_stream_reads_as_httpx_reads_it(emulator):
    """The same completion (the emulator's chunking is seeded by the prompt) read by the engine client and
    by httpx, the general-purpose client it replaced: the same chunks, token for token, finish reason and
    usage included."""
    import httpx
    import orjson

    text = "[long 300] [noanalysis]"

    async def ours() -> tuple[list[tuple[list[int], str | None]], int]:
        client = EngineClient(EngineConfig(url=emulator.url))
        try:
            stream = await client.generate(prompt_of(text), Sampling(max_tokens=4000))
            chunks = [(chunk.token_ids, chunk.finish_reason) async for chunk in stream]
            return chunks, stream.usage.completion_tokens
        finally:
            await client.aclose()

    theirs, usage = [], 0
    body = completion_body(text, 4000)
    with httpx.stream("POST", emulator.url + "/v1/completions", content=body, headers={"content-type": "application/json"}) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                chunk = orjson.loads(line[6:])
                if chunk["choices"]:
                    theirs.append((chunk["choices"][0]["token_ids"], chunk["choices"][0]["finish_reason"]))
                usage = (chunk.get("usage") or {}).get("completion_tokens", usage)
    assert asyncio.run(ours()) == (theirs, usage) and len(theirs) > 100


def test_a_connection_the_engine_closed_while_idle_is_not_used(emulator):
    """uvicorn (vLLM's server) closes a connection idle for 5 s; one kept longer here is found closed
    and a new one made, with no error."""

    async def main() -> int:
        client = EngineClient(EngineConfig(url=emulator.url))
        client._http._keepalive_expiry = 60.0
        try:
            await answer(client, "[answer first]")
            await asyncio.sleep(6)
            assert await answer(client, "[answer second]")
            return client._http.opened
        finally:
            await client.aclose()

    assert asyncio.run(main()) == 2


def test_closing_a_stream_mid_answer_aborts_it_in_the_engine(emulator):
    async def main() -> None:
        client = EngineClient(EngineConfig(url=emulator.url))
        try:
            stream = await client.generate(prompt_of("[long 5000] [slow 5]"), Sampling(max_tokens=10000))
            async for _ in stream:
                break
            await stream.aclose()
            assert await answer(client, "[answer after]")  # the pool goes on, on a new connection
            assert client._http.opened == 2  # the models list's and the stream's, then a new one
        finally:
            await client.aclose()

    before = emulator_stats(emulator)["aborted"]
    asyncio.run(main())
    deadline = time.monotonic() + 5
    while emulator_stats(emulator)["aborted"] == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert emulator_stats(emulator)["aborted"] == before + 1


def test_closing_the_client_stops_its_streams_in_the_engine(emulator):
    """A gateway that shuts down closes every connection of its pool, the busy ones too: the engine stops
    generating for it then, not when the process is gone."""

    async def main() -> None:
        client = EngineClient(EngineConfig(url=emulator.url))
        stream = await client.generate(prompt_of("[long 5000] [slow 5]"), Sampling(max_tokens=10000))
        async for _ in stream:
            break
        before = await asyncio.to_thread(lambda: emulator_stats(emulator)["aborted"])
        await client.aclose()
        deadline = time.monotonic() + 5
        while await asyncio.to_thread(lambda: emulator_stats(emulator)["aborted"]) == before:
            assert time.monotonic() < deadline, "the engine still generates for a client that closed"
            await asyncio.sleep(0.05)
        await stream.aclose()

    asyncio.run(main())


def test_a_slow_reader_holds_a_bounded_buffer(emulator):
    """The engine streams faster than this reader reads: the socket is paused, not the memory grown."""

    async def main() -> int:
        pool = EnginePool(emulator.url, headers={}, connect_timeout=5, read_timeout=30, max_connections=4, keepalive_expiry=2)
        body = completion_body("[long 20000] [noanalysis]", 30000)
        try:
            response = await pool.request("POST", "/v1/completions", headers={"content-type": "application/json"}, body=body)
            largest = total = 0
            await asyncio.sleep(2)  # long enough for the engine to send it all, were the socket not paused
            while True:
                await asyncio.sleep(0.01)
                data = await response.read_some()
                if not data:
                    return total
                largest, total = max(largest, len(data)), total + len(data)
                assert largest <= BUFFERED_HIGH + 256 * 1024  # the high mark and at most one socket read past it
        finally:
            await pool.aclose()

    assert asyncio.run(main()) > 4 * BUFFERED_HIGH


@pytest.mark.parametrize("seed", range(20))
def test_lines_are_found_across_any_byte_boundaries(seed):
    rng = random.Random(seed)
    lines = [b'data: {"t":"a\xe2\x80\xa8b\xc2\x85c"}', b"", b"data: [DONE]", b": comment", b"x" * rng.randrange(0, 300)]
    body = b"".join(line + rng.choice([b"\n", b"\r\n", b"\r"]) for line in lines * 3)
    cuts = sorted(rng.sample(range(1, len(body)), rng.randrange(1, 40)))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)])]
    splitter = Lines()
    found = [line for piece in pieces for line in splitter.feed(piece)] + splitter.rest()
    assert [line for line in found if line] == [line for line in body.splitlines() if line]


async def serve_raw(answer: bytes, hold: bool = False) -> tuple[asyncio.Server, str]:
    """A peer that answers any request with `answer`, bytes as they are, and closes (or, with `hold`,
    goes silent)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(answer)
        await writer.drain()
        if hold:
            await asyncio.sleep(60)
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.mark.parametrize(
    "answer, code",
    [
        (b"HTTP/1.1 200 OK\r\n" + b"x-a: b\r\n" * 200 + b"\r\n", 502),  # too many headers
        (b"HTTP/1.1 200 OK\r\nx-a: " + b"b" * 100_000 + b"\r\n\r\n", 502),  # a header too large
        (b"SMTP ready\r\n\r\n", 502),  # not HTTP
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\ndata:", 502),  # cut in the middle
        (b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 0\r\n\r\n", 502),  # compressed, not asked
        (b"HTTP/1.1 400 Bad Request\r\ncontent-length: 60\r\n\r\n" + b'{"error":{"message":"maximum context length is 10"}}'.ljust(60), 400),
        (b"HTTP/1.1 500 Oops\r\ncontent-length: 20000000\r\n\r\n" + b"x" * 100, 502),  # an error body too large
    ],
)
def test_a_broken_engine_answer_is_a_defined_error(answer, code):
    async def main() -> APIError:
        server, url = await serve_raw(answer)
        client = EngineClient(EngineConfig(url=url, model="m", read_timeout_s=5))
        try:
            with pytest.raises(APIError) as caught:
                stream = await client.generate(prompt_of("hi"), Sampling(max_tokens=10))
                async for _ in stream:
                    pass
            return caught.value
        finally:
            await client.aclose()
            server.close()

    error = asyncio.run(main())
    assert error.status == code


def test_a_response_body_past_its_limit_is_refused(emulator):
    async def main() -> None:
        pool = EnginePool(emulator.url, headers={}, connect_timeout=5, read_timeout=5, max_connections=4, keepalive_expiry=2)
        try:
            response = await pool.request("GET", "/v1/models")
            with pytest.raises(ProtocolFault):
                await response.read(10)
        finally:
            await pool.aclose()

    asyncio.run(main())


def test_a_header_value_with_a_line_break_is_refused(emulator):
    async def main() -> None:
        pool = EnginePool(emulator.url, headers={}, connect_timeout=5, read_timeout=5, max_connections=4, keepalive_expiry=2)
        try:
            with pytest.raises(ValueError):
                await pool.request("GET", "/health", headers={"x-session": "a\r\nx-injected: 1"})
        finally:
            await pool.aclose()

    asyncio.run(main())


def test_an_engine_whose_health_answer_stalls_is_unhealthy_in_time():
    async def main() -> tuple[bool, float]:
        server, url = await serve_raw(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nok", hold=True)
        client = EngineClient(EngineConfig(url=url, connect_timeout_s=0.5, read_timeout_s=300))
        started = time.monotonic()
        try:
            return await client.healthy(), time.monotonic() - started
        finally:
            await client.aclose()
            server.close()

    healthy, took = asyncio.run(main())
    assert not healthy and took < 3  # the connect timeout bounds the whole check, not the read timeout


@pytest.mark.parametrize("second_answer, retried", [(b"", True), (b"HTTP/1.1 200 OK\r\ncontent-le", False)])
def test_a_request_goes_again_only_when_nothing_of_its_answer_was_read(second_answer, retried):
    """A kept-alive connection the engine closed as the second request went: with nothing of the answer
    read, the request goes once more on a new connection; with part of it read (the engine may have
    acted on it), it is never sent again, and the caller gets the error."""
    requests: list[bytes] = []

    async def main() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            first_on_connection = True
            while True:
                try:
                    requests.append(await reader.readuntil(b"\r\n\r\n"))
                except asyncio.IncompleteReadError:
                    break
                if first_on_connection or (retried and len(requests) > 2):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
                    await writer.drain()
                    first_on_connection = False
                    continue
                writer.write(second_answer)
                await writer.drain()
                break
            writer.close()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        pool = EnginePool(url, headers={}, connect_timeout=5, read_timeout=5, max_connections=4, keepalive_expiry=30)
        try:
            assert await (await pool.request("GET", "/health")).read(100) == b"{}"
            if retried:
                assert await (await pool.request("GET", "/health")).read(100) == b"{}"
            else:
                with pytest.raises(EngineHTTPError):
                    await (await pool.request("GET", "/health")).read(100)
        finally:
            await pool.aclose()
            server.close()

    asyncio.run(main())
    assert len(requests) == (3 if retried else 2)


def _sse_answer(finish_reason: object) -> bytes:
    """A whole streamed completion of one token, ending with `finish_reason`, chunked as vLLM sends it."""
    import json

    events = [
        {"choices": [{"index": 0, "token_ids": [1], "finish_reason": None}]},
        {"choices": [{"index": 0, "token_ids": [], "finish_reason": finish_reason}]},
    ]
    body = b"".join(f"data: {json.dumps(event)}\n\n".encode() for event in events) + b"data: [DONE]\n\n"
    chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" + chunked


async def _serve_engine(completion: bytes) -> tuple[asyncio.Server, str]:
    """A peer that lists one model and answers every completion with `completion`, on kept connections."""
    models = b'{"data":[{"id":"m","max_model_len":1000}]}'
    listing = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(models), models)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                writer.write(listing if head.startswith(b"GET /v1/models") else completion)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


@pytest.mark.parametrize(
    "sent, read",
    [
        ("stop", FinishReason.STOP),
        ("length", FinishReason.LENGTH),
        ("abort", FinishReason.ABORT),
        ("error", FinishReason.ABORT),
        (7, FinishReason.ABORT),
    ],
)
def test_a_finish_reason_the_gateway_does_not_know_ends_the_generation_as_a_failure(sent, read):
    """vLLM's finish reasons are read as what they are; any other value (a newer engine's `error`, or not
    a string at all) is an abort, which fails the response, never a completion."""

    async def main() -> list[FinishReason | None]:
        server, url = await _serve_engine(_sse_answer(sent))
        client = EngineClient(EngineConfig(url=url, model="m", read_timeout_s=5))
        try:
            stream = await client.generate(prompt_of("hi"), Sampling(max_tokens=10))
            return [chunk.finish_reason async for chunk in stream]
        finally:
            await client.aclose()
            server.close()

    assert asyncio.run(main()) == [None, read]
