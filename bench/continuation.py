"""Gateway cost of continuing a long conversation (not a timed test; prints figures).

Starts the engine emulator and the gateway as separate processes. AGENTS conversations at once each
store a first response whose prompt holds CONTEXT tokens, then continue it with `previous_response_id`
ROUNDS times (a short question, a short answer, no tools). Reported, per continued request: the
gateway process's CPU (from /proc, idle CPU taken out), the CPU of its renderer process (where large
prompts are tokenised), and the time to the answer; and the longest event-loop stall meanwhile. A
continuation loads the stored dialog and builds the whole prompt again: from the stored tokens, or by
rendering the conversation anew.

Run: .venv/bin/python bench/continuation.py [--agents 8] [--rounds 4] [--context 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.long_context import children, cpu_seconds, filler, idle_rate, pin  # noqa: E402
from tests.conftest import Gateway, gateway_config, metric, start_emulator  # noqa: E402

MODEL = "openai/gpt-oss-20b"


async def conversation(
    client: httpx.AsyncClient, url: str, context: int, rounds: int, seed: int, ready: asyncio.Barrier, done: asyncio.Barrier
) -> int:
    body = {"model": MODEL, "input": [{"role": "user", "content": filler(context, seed)}]}
    response = (await client.post(url + "/v1/responses", json=body, timeout=600)).json()
    await ready.wait()  # every conversation is stored: the measured part starts
    prompt, waited = 0, 0.0
    for number in range(rounds):
        started = time.perf_counter()
        body = {"model": MODEL, "input": f"and then? {number}", "previous_response_id": response["id"]}
        reply = await client.post(url + "/v1/responses", json=body, timeout=600)
        reply.raise_for_status()
        response = reply.json()
        assert response["status"] == "completed", response.get("error")
        prompt = response["usage"]["input_tokens"]
        waited += time.perf_counter() - started
    await done.wait()
    return prompt, waited / rounds


async def measure(gateway: Gateway, agents: int, context: int, rounds: int, others: list[int]) -> dict[str, float]:
    pid = gateway.proc.pid
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=agents + 4)) as client:
        await client.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": filler(20_000, 99)}, timeout=600)  # warm
        pin(pid, others)
        idle = await idle_rate(gateway)
        ready, done = asyncio.Barrier(agents + 1), asyncio.Barrier(agents + 1)
        tasks = [asyncio.create_task(conversation(client, gateway.url, context, rounds, seed, ready, done)) for seed in range(agents)]
        await ready.wait()
        await client.get(gateway.url + "/metrics")  # the longest lag is counted from here
        helpers = children(pid)  # the renderer process
        before, started = cpu_seconds(pid), time.perf_counter()
        helpers_before = sum(cpu_seconds(helper) for helper in helpers)
        await done.wait()
        cpu = cpu_seconds(pid) - before - idle * (time.perf_counter() - started)
        helper_cpu = sum(cpu_seconds(helper) for helper in helpers) - helpers_before
        lag = metric((await client.get(gateway.url + "/metrics")).text, "gateway_event_loop_lag_max_seconds")
        results = await asyncio.gather(*tasks)
    count = agents * rounds
    return {
        "prompt": sum(prompt for prompt, _ in results) / agents,
        "cpu_ms": 1000 * cpu / count,
        "renderer_ms": 1000 * helper_cpu / count,
        "latency_ms": 1000 * sum(waited for _, waited in results) / agents,
        "stall_ms": 1000 * lag,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--context", type=int, default=100_000)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-continuation-"))
    emulator = start_emulator(tmp, "--max-model-len", "262144")
    try:
        config = gateway_config(
            emulator.url, tmp, server={"loop_monitor_interval_s": 0.002, "max_input_chars": 4_000_000, "max_body_bytes": 32 * 1024 * 1024}
        )
        gateway = Gateway(config, tmp).start(timeout=60)
        try:
            figures = asyncio.run(measure(gateway, args.agents, args.context, args.rounds, [os.getpid(), emulator.proc.pid]))
        finally:
            gateway.stop()
        print(
            f"prompt ~{figures['prompt']:,.0f} tokens, {args.agents} conversations x {args.rounds} continuations: "
            f"per continued request: gateway CPU {figures['cpu_ms']:.1f} ms, renderer process CPU {figures['renderer_ms']:.1f} ms, "
            f"time to the answer {figures['latency_ms']:.0f} ms; longest event-loop stall {figures['stall_ms']:.1f} ms"
        )
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
