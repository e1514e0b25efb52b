"""The Agents API's costs (not a timed test; prints figures).

Starts the engine emulator and the gateway as separate processes, then:
  * time from `agent.session.input.message` to the first `agent.session.turn.output_text.delta` on the
    session's (already open) event stream, beside the same prompt's first `response.output_text.delta`
    through `/v1/responses` (streamed; and streamed in the background in a conversation, as a turn runs),
    p50 and p95, rounds interleaved;
  * one session's events fanned out to 1 and to 100 subscribers: time until the last subscriber has the
    turn's `agent.session.idle`, and the gateway's CPU seconds for the turn;
  * the gateway's resident memory before and after 1,000 sessions that each ran a turn and are idle.
Run: .venv/bin/python bench/agents.py [--rounds 40] [--sessions 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stream_overhead import cpu_seconds  # noqa: E402
from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402

MODEL = "openai/gpt-oss-20b"
PROMPT = "[long 20] [noanalysis]"
NONE = {"type": "none"}


def quantile(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


async def responses_first_delta(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> float:
    started = time.perf_counter()
    first = None
    async with client.stream("POST", url + "/v1/responses", json={"model": MODEL, "input": PROMPT, "stream": True, **body}) as response:
        async for line in response.aiter_lines():
            if first is None and line.startswith('data: {"type":"response.output_text.delta"'):
                first = time.perf_counter() - started
    assert first is not None
    return first


async def session(client: httpx.AsyncClient, url: str) -> str:
    created = await client.post(url + "/v1/agents/sessions", json={"agent": {"model": MODEL}, "environment": NONE})
    return str(created.json()["id"])


def message(text: str) -> dict[str, object]:
    return {"events": [{"type": "agent.session.input.message", "input": [{"role": "user", "content": [{"type": "input_text", "text": text}]}]}]}


async def subscriber(
    client: httpx.AsyncClient, url: str, session_id: str, ready: asyncio.Event, subscribed: list[int], marks: dict[str, float]
) -> float:
    """Seconds from `marks["sent"]` to this subscriber's first text delta; records its idle in marks."""
    first = None
    async with client.stream("GET", f"{url}/v1/agents/sessions/{session_id}/events") as response:
        subscribed[0] += 1
        ready.set()
        ended = False
        async for line in response.aiter_lines():
            if first is None and line.startswith("event: agent.session.turn.output_text.delta"):
                first = time.perf_counter() - marks["sent"]
            ended = ended or line.startswith("event: agent.session.turn.completed")
            if ended and line.startswith("event: agent.session.idle"):
                marks[f"idle-{id(response)}"] = time.perf_counter() - marks["sent"]
                break
    assert first is not None
    return first


async def turn(client: httpx.AsyncClient, url: str, session_id: str, subscribers: int, text: str) -> tuple[list[float], list[float]]:
    """One turn with `subscribers` readers: their times to the first delta and to idle."""
    marks: dict[str, float] = {}
    subscribed, ready = [0], asyncio.Event()
    readers = [asyncio.create_task(subscriber(client, url, session_id, ready, subscribed, marks)) for _ in range(subscribers)]
    while subscribed[0] < subscribers:
        ready.clear()
        await ready.wait()
    marks["sent"] = time.perf_counter()
    answer = await client.post(f"{url}/v1/agents/sessions/{session_id}/events", json=message(text))
    assert answer.status_code == 204, answer.text
    firsts = await asyncio.gather(*readers)
    return list(firsts), [value for key, value in marks.items() if key.startswith("idle-")]


async def first_delta(gateway: Gateway, rounds: int) -> None:
    url = gateway.url
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=200)) as client:
        conversation = (await client.post(url + "/v1/conversations", json={})).json()["id"]
        session_id = await session(client, url)
        plain, background, agents = [], [], []
        for _ in range(3):  # warm up each path
            await responses_first_delta(client, url, {})
            await turn(client, url, session_id, 1, PROMPT)
        for _ in range(rounds):
            plain.append(await responses_first_delta(client, url, {}))
            background.append(await responses_first_delta(client, url, {"background": True, "conversation": conversation}))
            agents.append((await turn(client, url, session_id, 1, PROMPT))[0][0])
        print(f"time to the first text delta over {rounds} rounds (ms, p50 / p95):")
        for name, values in (
            ("/v1/responses, streamed", plain),
            ("/v1/responses, background in a conversation", background),
            ("agents input.message -> turn delta", agents),
        ):
            print(f"  {name:46s} {quantile(values, 50) * 1000:7.2f} / {quantile(values, 95) * 1000:7.2f}")


async def fan_out(gateway: Gateway, pid: int) -> None:
    url = gateway.url
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=300)) as client:
        print("one turn of 400 tokens fanned out (ms to the last subscriber's idle; gateway CPU s for the turn):")
        for subscribers in (1, 100):
            session_id = await session(client, url)
            await turn(client, url, session_id, subscribers, "[long 10] warm")
            before = cpu_seconds(pid)
            _, idles = await turn(client, url, session_id, subscribers, "[long 400] [noanalysis]")
            print(
                f"  {subscribers:4d} subscribers: last idle {max(idles) * 1000:8.1f}, first idle {min(idles) * 1000:8.1f}, CPU {cpu_seconds(pid) - before:.3f}"
            )


async def idle_sessions(gateway: Gateway, pid: int, count: int) -> None:
    url = gateway.url
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=32)) as client:
        gate = asyncio.Semaphore(16)

        async def one() -> None:
            async with gate:
                session_id = await session(client, url)
                await client.post(f"{url}/v1/agents/sessions/{session_id}/events", json=message("hello"))
                while (await client.get(f"{url}/v1/agents/sessions/{session_id}")).json()["status"] != "idle":
                    await asyncio.sleep(0.02)

        await asyncio.gather(*(one() for _ in range(50)))  # warm: caches, pools, code paths
        before = rss_mib(pid)
        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(count)))
        took = time.perf_counter() - started
        after = rss_mib(pid)
        print(
            f"{count} sessions, each one turn then idle, in {took:.1f} s: gateway RSS {before:.1f} -> {after:.1f} MiB ({(after - before) * 1024 / count:.1f} KiB per session)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--sessions", type=int, default=1000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-agents-"))
    emulator = start_emulator(work)
    gateway = Gateway(gateway_config(emulator.url, work, agents={"max_running_sessions_per_tenant": 1000}), work).start()
    try:
        assert gateway.proc is not None
        pid = gateway.proc.pid
        asyncio.run(first_delta(gateway, args.rounds))
        asyncio.run(fan_out(gateway, pid))
        asyncio.run(idle_sessions(gateway, pid, args.sessions))
    finally:
        gateway.stop()
        emulator.stop()


if __name__ == "__main__":
    main()
