"""What reasoning summaries cost a response (not a timed test; prints figures).

Starts the engine emulator, writing a token every `--token-ms` milliseconds (a GPU's decode pace, for the
summary's engine call as for the answer's), and the gateway, then streams the same request with and without
`reasoning.summary`: the time to the answer's first text delta and to `response.completed`, p50 and p95,
at 1 and at `--concurrency` streams at once; and, with summaries, how long after the reasoning's text ended
its summary was shown (its `reasoning_summary_part.done`).
Run: .venv/bin/python bench/reasoning_summaries.py [--requests 20] [--token-ms 5] [--words 200] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402


async def one(client: httpx.AsyncClient, url: str, words: int, summary: str | None) -> dict[str, float]:
    body: dict = {"model": "openai/gpt-oss-20b", "input": f"Tell me [long {words}]", "stream": True, "store": False}
    if summary is not None:
        body["reasoning"] = {"summary": summary}
    started = time.perf_counter()
    marks: dict[str, float] = {}
    async with client.stream("POST", url + "/v1/responses", json=body) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            kind = json.loads(line[6:])["type"]
            for mark in ("response.reasoning_text.done", "response.output_text.delta", "response.reasoning_summary_part.done", "response.completed"):
                if kind == mark and mark not in marks:
                    marks[mark] = time.perf_counter() - started
    return marks


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms, p95 {p95 * 1000:7.1f} ms"


async def measure(url: str, requests: int, concurrency: int, words: int, summary: str | None) -> list[dict[str, float]]:
    results: list[dict[str, float]] = []
    async with httpx.AsyncClient(timeout=120) as client:
        await one(client, url, words, summary)  # warm-up
        for _ in range(max(1, requests // concurrency)):
            results += await asyncio.gather(*(one(client, url, words, summary) for _ in range(concurrency)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--token-ms", type=float, default=5.0, help="the emulator's pace: milliseconds a token")
    parser.add_argument("--words", type=int, default=200, help="the answer's length")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    emulator = start_emulator(work, "--chunk-delay-ms", str(args.token_ms))
    gateway = Gateway(gateway_config(emulator.url, work), work).start()
    try:
        for streams in (1, args.concurrency):
            for summary in (None, "auto"):
                results = asyncio.run(measure(gateway.url, args.requests, streams, args.words, summary))
                name = f"{streams:>2} streams, summary {summary or 'none':<4}"
                first = [r["response.output_text.delta"] for r in results]
                total = [r["response.completed"] for r in results]
                print(f"{name}: first answer token {percentiles(first)}; completed {percentiles(total)}")
                if summary is not None:
                    shown = [r["response.reasoning_summary_part.done"] - r["response.reasoning_text.done"] for r in results]
                    print(f"{'':>27}summary shown after the reasoning ended: {percentiles(shown)}")
    finally:
        gateway.stop()
        emulator.stop()


if __name__ == "__main__":
    main()
