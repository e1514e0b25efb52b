"""Gateway overhead on the streaming path (not a timed test; prints figures).

Starts the engine emulator (streaming as fast as it can, one token a chunk as vLLM does at low and medium
load) and the gateway as separate processes, then:
  * gateway CPU time per streamed token: the gateway process's CPU seconds (from /proc) over the tokens it
    streamed, at 1 and at 64 concurrent streams; then with 2, 4 and 8 tokens a chunk (Responses);
  * time to first token added by the gateway: time to the first output-text delta through the gateway,
    minus time to the engine chunk carrying the first content token when the same prompt goes straight to
    the engine, p50 and p95, at 1 and at 64 concurrent streams.
With `--logprobs N`, every Responses stream asks for the answer's logprobs with N alternatives (the
slower per-token path that feeds the parser one token at a time).
Run: .venv/bin/python bench/stream_overhead.py [--tokens 2000] [--rounds 3] [--logprobs N] [--profile DIR] [--tracing] [--structured-outputs off]
(--profile: a py-spy profile of each concurrency's Responses round, its top entries printed.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openai_harmony import Message, Role  # noqa: E402

from bench.profiling import profiled, top  # noqa: E402
from gateway.engine.harmony import MESSAGE, Preamble, render_prompt  # noqa: E402
from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


EXTRA_BODY: dict = {}  # fields every Responses request of the run carries (--logprobs)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


async def gateway_stream(client: httpx.AsyncClient, url: str, text: str) -> tuple[float, int]:
    """Returns (seconds to first output-text delta, output tokens)."""
    started = time.perf_counter()
    first = None
    tokens = 0
    body = {"model": "openai/gpt-oss-20b", "input": text, "stream": True, "store": False} | EXTRA_BODY
    async with client.stream("POST", url + "/v1/responses", json=body) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith('data: {"type":"response.output_text.delta"'):
                first = time.perf_counter() - started
            elif line.startswith('data: {"type":"response.completed"'):
                tokens = json.loads(line[6:])["response"]["usage"]["output_tokens"]
    assert first is not None
    return first, tokens


async def chat_stream(client: httpx.AsyncClient, url: str, text: str) -> tuple[float, int]:
    """Chat Completions: (seconds to first content delta, completion tokens)."""
    started = time.perf_counter()
    first = None
    tokens = 0
    body = {"model": "openai/gpt-oss-20b", "messages": [{"role": "user", "content": text}], "stream": True, "stream_options": {"include_usage": True}}
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        async for line in response.aiter_lines():
            if first is None and '"delta":{"content":"' in line and '"content":""' not in line:
                first = time.perf_counter() - started
            elif '"choices":[],"usage":' in line:
                tokens = json.loads(line[6:])["usage"]["completion_tokens"]
    assert first is not None
    return first, tokens


async def engine_stream(client: httpx.AsyncClient, url: str, prompt: list[int], max_tokens: int) -> float:
    """Seconds to the chunk that carries the first content token, straight from the engine."""
    started = time.perf_counter()
    first = None
    seen_message = False
    body = {
        "model": "openai/gpt-oss-20b",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "stream": True,
        "return_token_ids": True,
        "stop_token_ids": [200002, 200012],
        "stream_options": {"include_usage": True},
    }
    async with client.stream("POST", url + "/v1/completions", json=body) as response:
        async for line in response.aiter_lines():
            if first is not None or not line.startswith("data: {"):
                continue
            choices = json.loads(line[6:]).get("choices") or []
            for token in choices[0]["token_ids"] if choices else []:
                if seen_message:
                    first = time.perf_counter() - started
                    break
                seen_message = token == MESSAGE
    assert first is not None
    return first


async def measure(
    gateway: Gateway, engine_url: str, pid: int, streams: int, tokens: int, rounds: int, api: str = "responses", chunk: int = 1
) -> dict:
    """CPU per token on long streams of `chunk` tokens a chunk; time to first token on short ones (so that
    the emulator's burst of a long answer, which the engine path never reads, does not weigh on one side
    only), with one token a chunk only."""
    long_text = f"[long {tokens}] [noanalysis] [chunk {chunk}]"
    short_text = "[long 20] [noanalysis] [chunk 1]"
    prompt = render_prompt(Preamble(), [Message.from_role_and_content(Role.USER, short_text)])
    limits = httpx.Limits(max_connections=streams + 8)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        await gateway_stream(client, gateway.url, "[long 10] warm up")
        gateway_ttft, engine_ttft, cpu, streamed = [], [], 0.0, 0
        for _ in range(rounds):
            before = cpu_seconds(pid)
            stream = gateway_stream if api == "responses" else chat_stream
            results = await asyncio.gather(*(stream(client, gateway.url, long_text) for _ in range(streams)))
            cpu += cpu_seconds(pid) - before
            streamed += sum(n for _, n in results)
        for _ in range(rounds * 3 if api == "responses" and chunk == 1 else 0):
            results = await asyncio.gather(*(gateway_stream(client, gateway.url, short_text) for _ in range(streams)))
            gateway_ttft += [t for t, _ in results]
            engine_ttft += await asyncio.gather(*(engine_stream(client, engine_url, prompt, 100_000) for _ in range(streams)))
    p = lambda xs, q: statistics.quantiles(xs, n=100)[q - 1] if len(xs) > 1 else xs[0]  # noqa: E731
    if not gateway_ttft:
        return {"streams": streams, "tokens": streamed, "cpu_us_per_token": cpu / streamed * 1e6}
    return {
        "streams": streams,
        "tokens": streamed,
        "cpu_us_per_token": cpu / streamed * 1e6,
        "ttft_gateway_p50_ms": statistics.median(gateway_ttft) * 1e3,
        "ttft_engine_p50_ms": statistics.median(engine_ttft) * 1e3,
        "ttft_added_p50_ms": (statistics.median(gateway_ttft) - statistics.median(engine_ttft)) * 1e3,
        "ttft_added_p95_ms": (p(gateway_ttft, 95) - p(engine_ttft, 95)) * 1e3,
    }


class _Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=2000, help="output tokens per stream")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--logprobs", type=int, default=None, help="ask for logprobs with this many alternatives")
    parser.add_argument("--profile", type=Path, default=None, help="a folder for py-spy profiles")
    parser.add_argument("--tracing", action="store_true", help="with OpenTelemetry tracing on (spans to a local sink)")
    parser.add_argument(
        "--structured-outputs", choices=["auto", "on", "off"], default="auto",
        help="engine.structured_outputs (off: no grammar sent, so the emulator checks none: the figures of a gateway without it)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.logprobs is not None:
        EXTRA_BODY.update(include=["message.output_text.logprobs"], top_logprobs=args.logprobs)
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    emulator = start_emulator(work)
    sections: dict = {"engine": {"structured_outputs": args.structured_outputs}}
    if args.tracing:  # spans exported to a sink here that reads and drops them
        sink = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
        threading.Thread(target=sink.serve_forever, daemon=True).start()
        sections["tracing"] = {"enabled": True, "endpoint": f"http://127.0.0.1:{sink.server_address[1]}/v1/traces"}
    gateway = Gateway(gateway_config(emulator.url, work, **sections), work).start()
    try:
        assert gateway.proc is not None
        pid = gateway.proc.pid

        def run(streams: int, api: str = "responses", chunk: int = 1) -> dict:
            """One figure's rounds: long streams at 1 stream, shorter ones (as many tokens in all) at more."""
            tokens = args.tokens if streams == 1 else max(200, args.tokens // 8)
            rounds = args.rounds * (10 if streams == 1 else 1)
            return asyncio.run(measure(gateway, emulator.url, pid, streams, tokens, rounds, api, chunk))

        for streams in args.concurrency:
            profile = None if args.profile is None else args.profile / f"responses-{streams}.txt"
            with profiled(pid, profile):
                result = run(streams)
            if profile is not None:
                print(top(profile))
            chat = run(streams, "chat")
            print(
                f"{streams:>3} streams: {result['tokens']:>7} tokens, gateway CPU {result['cpu_us_per_token']:.1f} µs/token; "
                f"TTFT p50 gateway {result['ttft_gateway_p50_ms']:.2f} ms vs engine {result['ttft_engine_p50_ms']:.2f} ms "
                f"→ added p50 {result['ttft_added_p50_ms']:.2f} ms, p95 {result['ttft_added_p95_ms']:.2f} ms"
            )
            print(f"{streams:>3} streams, Chat Completions: {chat['tokens']:>7} tokens, gateway CPU {chat['cpu_us_per_token']:.1f} µs/token")
        for streams in args.concurrency:  # more tokens a chunk: the cost per token falls
            figures = [run(streams, chunk=chunk)["cpu_us_per_token"] for chunk in (2, 4, 8)]
            print(f"{streams:>3} streams, 2 / 4 / 8 tokens a chunk: gateway CPU " + " / ".join(f"{f:.1f}" for f in figures) + " µs/token")
    finally:
        gateway.stop()
        emulator.stop()


if __name__ == "__main__":
    main()
