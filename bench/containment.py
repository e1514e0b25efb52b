"""Security 5: what one tenant's hostile load costs another (not a timed test; prints figures).

Starts the engine emulator and one gateway (two tenants' keys), each in its own process. Tenant `b` sends
one short request at a time and its latency is measured, p50 and p99, first alone, then while tenant `a`
keeps a hostile load going:

- `whitespace`: answers of 8,000 tokens of 128 spaces each (a model looping on whitespace), stored;
- `renders`: `input_tokens` of prompts of ~900 KB of words, four at a time (the renderer's processes);
- `schemas`: strict `text.format` schemas of 32 patterns `[a-z]{0,999}` each (compiled in workers).

Then the renderer's throughput alone: prompts of ~200 KB a second, with 1 and with N processes.

Run: .venv/bin/python bench/containment.py [--requests 60] [--processes 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402

MODEL = "openai/gpt-oss-20b"
KEYS = [{"key": "sk-a", "tenant": "a"}, {"key": "sk-b", "tenant": "b"}]
WORDS = " ".join(f"word{i % 977}" for i in range(150_000))  # ~900 KB


def _whitespace(client: httpx.Client) -> None:
    client.post("/v1/responses", json={"model": MODEL, "input": "loop [repeat 72056 8000]", "max_output_tokens": 20000})


def _renders(client: httpx.Client) -> None:
    client.post("/v1/responses/input_tokens", json={"model": MODEL, "input": WORDS})


def _schemas(client: httpx.Client) -> None:
    schema = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "pattern": f"^[a-z]{{0,{960 + i + int(time.time() * 1000) % 30}}}$"} for i in range(32)},
    }
    client.post(
        "/v1/responses",
        json={"model": MODEL, "input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": schema, "strict": True}}},
    )


def measure(gateway: Gateway, requests: int) -> tuple[float, float, int]:
    """Tenant b's p50 and p99 (ms), and how many of its requests failed."""
    latencies, failed = [], 0
    with httpx.Client(base_url=gateway.url, headers={"authorization": "Bearer sk-b"}, timeout=300) as client:
        for n in range(requests):
            started = time.perf_counter()
            try:
                response = client.post("/v1/responses", json={"model": MODEL, "input": f"hello {n}", "max_output_tokens": 64})
                failed += response.status_code != 200
            except httpx.HTTPError:  # an earlier gateway, taken down by the load
                failed += 1
            latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))], failed


def under_load(gateway: Gateway, load: Callable[[httpx.Client], None], parallel: int, requests: int) -> tuple[float, float, int]:
    stop = threading.Event()

    def keep_going() -> None:
        with httpx.Client(base_url=gateway.url, headers={"authorization": "Bearer sk-a"}, timeout=600) as client:
            while not stop.is_set():
                try:
                    load(client)
                except httpx.HTTPError:
                    time.sleep(0.1)

    threads = [threading.Thread(target=keep_going, daemon=True) for _ in range(parallel)]
    for thread in threads:
        thread.start()
    time.sleep(2)  # the load under way
    try:
        return measure(gateway, requests)
    finally:
        stop.set()
        for thread in threads:
            thread.join(600)


def renderer_throughput(processes: int, prompts: int) -> float:
    from openai_harmony import Message, Role

    from gateway.engine.renderer import PromptRenderer

    async def run() -> float:
        renderer = PromptRenderer(processes)
        text = WORDS[:200_000]
        try:
            warm = [Message.from_role_and_content(Role.USER, "warm " * 5000)]
            await asyncio.gather(*(renderer.each(warm, f"w{n}") for n in range(processes * 2)))  # every process's vocabulary loaded
            started = time.perf_counter()
            await asyncio.gather(*(renderer.each([Message.from_role_and_content(Role.USER, f"{n} {text}")], f"t{n % 4}") for n in range(prompts)))
            return prompts / (time.perf_counter() - started)
        finally:
            renderer.close()

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--loads", default="whitespace,renders,schemas", help="which hostile loads, in order")
    parser.add_argument("--gateway-only", action="store_true", help="no renderer figures (an earlier checkout has no renderer.py)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hg-bench-containment-"))
    emulator = start_emulator(workdir)
    server = {"render_processes": args.processes} if not args.gateway_only else {}
    config = gateway_config(emulator.url, workdir, auth={"api_keys": KEYS}, server=server)
    gateway = Gateway(config, workdir).start(timeout=60)
    try:
        figures: dict[str, Any] = {"idle": measure(gateway, args.requests)}
        loads = {"whitespace": ("whitespace answers (2 at a time)", _whitespace, 2), "renders": ("900 KB renders (4 at a time)", _renders, 4)}
        loads["schemas"] = ("32-pattern schemas (4 at a time)", _schemas, 4)
        for wanted in args.loads.split(","):
            name, load, parallel = loads[wanted]
            figures[name] = under_load(gateway, load, parallel, args.requests)
        print(f"tenant b's latency, {args.requests} short responses one after another (ms):")
        for name, (p50, p99, failed) in figures.items():
            print(f"  {name:<36} p50 {p50:8.1f}   p99 {p99:8.1f}   failed {failed}/{args.requests}")
        after = httpx.post(
            gateway.url + "/v1/responses", json={"model": MODEL, "input": "after"}, headers={"authorization": "Bearer sk-b"}, timeout=60
        )
        print(f"afterwards: /ready {httpx.get(gateway.url + '/ready').status_code}, a response {after.status_code}")
    finally:
        gateway.stop()
        emulator.stop()
    if args.gateway_only:
        return
    for processes in sorted({1, args.processes}):
        print(f"renderer, {processes} process(es): {renderer_throughput(processes, 48):.1f} prompts of 200 KB a second")


if __name__ == "__main__":
    main()
