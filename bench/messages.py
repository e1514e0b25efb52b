"""The Messages door's cost beside the Responses door's (not a timed test; prints figures).

Starts the engine emulator and the gateway as separate processes, then:
  * gateway CPU time per streamed token, `/v1/messages` vs `/v1/responses`, at 1 and 16 concurrent streams
    (the gateway process's CPU seconds from /proc over the tokens streamed);
  * time to the first text delta through each door, p50 and p95, rounds interleaved;
  * `count_tokens` on Claude Code's own first request (captured from the real CLI, ~50 KB), p50 and p95;
  * the wall time of a Claude Code session of one Bash tool turn against the gateway.
Run: .venv/bin/python bench/messages.py [--tokens 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stream_overhead import cpu_seconds, gateway_stream  # noqa: E402
from tests import claude_code  # noqa: E402
from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402

MODEL = "openai/gpt-oss-20b"


async def messages_stream(client: httpx.AsyncClient, url: str, text: str) -> tuple[float, int]:
    """Seconds to the first text delta, and the output tokens `message_delta` reports."""
    started = time.perf_counter()
    first, tokens = None, 0
    body = {"model": MODEL, "max_tokens": 100_000, "messages": [{"role": "user", "content": text}], "stream": True}
    async with client.stream("POST", url + "/v1/messages", json=body) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith('data: {"type":"content_block_delta"') and '"text_delta"' in line:
                first = time.perf_counter() - started
            elif line.startswith('data: {"type":"message_delta"'):
                tokens = json.loads(line[6:])["usage"]["output_tokens"]
    assert first is not None
    return first, tokens


def quantile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


async def door(gateway: Gateway, pid: int, api: str, streams: int, tokens: int, rounds: int) -> dict[str, float]:
    stream = messages_stream if api == "messages" else gateway_stream
    text = f"[long {tokens}] [noanalysis] [chunk 1]"
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=streams + 8)) as client:
        await stream(client, gateway.url, "[long 10] warm up")
        cpu, streamed = 0.0, 0
        for _ in range(rounds):
            before = cpu_seconds(pid)
            results = await asyncio.gather(*(stream(client, gateway.url, text) for _ in range(streams)))
            cpu += cpu_seconds(pid) - before
            streamed += sum(n for _, n in results)
    return {"cpu_us_per_token": cpu / streamed * 1e6, "tokens": streamed}


async def first_tokens(gateway: Gateway, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"responses": [], "messages": []}
    async with httpx.AsyncClient(timeout=60) as client:
        for _ in range(rounds):  # interleaved: a busy moment weighs on both
            times["responses"].append((await gateway_stream(client, gateway.url, "[long 20] [chunk 1]"))[0])
            times["messages"].append((await messages_stream(client, gateway.url, "[long 20] [chunk 1]"))[0])
    return times


def claude_codes_first_request(work: Path) -> dict:
    """The body Claude Code sends first, as it sends it (captured by a server that refuses it)."""
    captured: list[dict] = []

    class Capture(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            captured.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"type":"error","error":{"type":"invalid_request_error","message":"captured"}}')

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Capture)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        claude_code.run(f"http://127.0.0.1:{server.server_port}", work, "hello", timeout=60)
    finally:
        server.shutdown()
    body = captured[0]
    body.pop("stream", None)
    body.pop("max_tokens", None)
    for name in ("thinking", "context_management", "output_config", "metadata"):
        body.pop(name, None)
    body["model"] = MODEL
    return body


def count_tokens(gateway: Gateway, body: dict, rounds: int) -> tuple[int, list[float]]:
    times, counted = [], 0
    with httpx.Client(timeout=30) as client:
        for _ in range(rounds):
            started = time.perf_counter()
            answer = client.post(gateway.url + "/v1/messages/count_tokens", json=body)
            times.append(time.perf_counter() - started)
            counted = answer.json()["input_tokens"]
    return counted, times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-messages-"))
    emulator = start_emulator(work)
    gateway = Gateway(gateway_config(emulator.url, work), work).start()
    try:
        assert gateway.proc is not None
        pid = gateway.proc.pid
        for streams in (1, 16):
            tokens = args.tokens if streams == 1 else max(200, args.tokens // 8)
            rounds = args.rounds * (5 if streams == 1 else 1)
            figures = {api: asyncio.run(door(gateway, pid, api, streams, tokens, rounds)) for api in ("responses", "messages")}
            print(
                f"{streams:>2} streams: gateway CPU per streamed token: responses {figures['responses']['cpu_us_per_token']:.1f} µs, "
                f"messages {figures['messages']['cpu_us_per_token']:.1f} µs ({figures['messages']['tokens']} tokens)"
            )
        times = asyncio.run(first_tokens(gateway, args.rounds * 30))
        for api, values in times.items():
            print(f"time to first text delta, {api:>9}: p50 {statistics.median(values) * 1e3:.2f} ms, p95 {quantile(values, 95) * 1e3:.2f} ms")
        body = claude_codes_first_request(work)
        size = len(json.dumps(body))
        counted, spent = count_tokens(gateway, body, 200)
        print(f"count_tokens on Claude Code's first request ({size / 1024:.0f} KB, {counted} tokens): "
              f"p50 {statistics.median(spent) * 1e3:.2f} ms, p95 {quantile(spent, 95) * 1e3:.2f} ms")  # fmt: skip
        started = time.perf_counter()
        session = claude_code.run(gateway.url, work, 'say it [[call functions.Bash {"command":"echo hi","description":"echo"}]]')
        print(f"a Claude Code session of one Bash tool turn: {time.perf_counter() - started:.2f} s wall ({session.text!r})")
    finally:
        gateway.stop()
        emulator.stop()
        subprocess.run(["rm", "-rf", str(work)], check=False)


if __name__ == "__main__":
    main()
