"""A client-function agent over HTTP and over the Responses WebSocket, side by side (not a timed test;
prints figures).

Starts the engine emulator and the gateway as separate processes. One agent makes TURNS calls to a client
function, each answered by the client: over HTTP each turn is a streamed `POST /v1/responses` with
`previous_response_id` and the function's output (the gateway reads the stored response back, renders
from its stored tokens, stores the new one); over the socket each turn is a `response.create` on one
connection, continued from the socket's memory (`store: false`, and `store: true`, which is still
written to the store). Reported per turn: the gateway process's CPU (from /proc, idle CPU taken out) and
the wall time from sending the turn to its terminal event.

Run: .venv/bin/python bench/socket_turns.py [--turns 20] [--agents 4] [--context 2000] [--rounds 3] [--profile DIR]
(--profile: a py-spy profile of each mode's round, its top entries printed; the CPU figures then include
the sampler's cost.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.long_context import cpu_seconds, filler, idle_rate, pin  # noqa: E402
from bench.profiling import profiled, top  # noqa: E402
from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402

MODEL = "openai/gpt-oss-20b"
TOOL = {
    "type": "function",
    "name": "lookup",
    "description": "Look a record up.",
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
}
MODES = ("http", "socket", "socket, stored")
ENDINGS = ("response.completed", "response.incomplete", "response.failed", "error")


def first_input(turns: int, context: int, seed: int) -> str:
    calls = " ".join(f'[[call functions.lookup {{"id": "{number}"}}]]' for number in range(turns))
    return f"{filler(context, seed)}\n{calls} [[answer done]]"


def last_call(output: list[Any]) -> str:
    return str(next(item for item in reversed(output) if item.type == "function_call").call_id)


async def over_http(client: openai.AsyncOpenAI, turns: int, context: int, seed: int) -> float:
    """The agent over HTTP: seconds per turn."""
    stream = await client.responses.create(model=MODEL, input=first_input(turns, context, seed), tools=[TOOL], stream=True)
    response = [event async for event in stream][-1].response  # type: ignore[attr-defined]
    started = time.perf_counter()
    for number in range(turns):
        output = {"type": "function_call_output", "call_id": last_call(response.output), "output": f"record {number}"}
        stream = await client.responses.create(
            model=MODEL,
            input=[output],
            tools=[TOOL],
            previous_response_id=response.id,
            stream=True,  # type: ignore[list-item]
        )
        response = [event async for event in stream][-1].response  # type: ignore[attr-defined]
    assert response.status == "completed" and response.output_text == "done", response
    return (time.perf_counter() - started) / turns


async def over_socket(client: openai.AsyncOpenAI, turns: int, context: int, seed: int, store: bool) -> float:
    """The agent over one socket: seconds per turn."""
    async with client.responses.connect() as connection:

        async def turn(**fields: Any) -> Any:
            await connection.response.create(model=MODEL, tools=[TOOL], store=store, **fields)  # type: ignore[arg-type]
            async for event in connection:
                if event.type in ENDINGS:
                    assert event.type == "response.completed", event
                    return event.response  # type: ignore[union-attr]
            raise AssertionError("the socket closed")

        response = await turn(input=first_input(turns, context, seed))
        started = time.perf_counter()
        for number in range(turns):
            output = {"type": "function_call_output", "call_id": last_call(response.output), "output": f"record {number}"}
            response = await turn(input=[output], previous_response_id=response.id)
        assert response.output_text == "done", response
        return (time.perf_counter() - started) / turns


async def measure(gateway: Gateway, mode: str, agents: int, turns: int, context: int, idle: float) -> tuple[float, float]:
    client = gateway.async_client()
    pid = gateway.proc.pid
    before, started = cpu_seconds(pid), time.perf_counter()
    if mode == "http":
        waits = await asyncio.gather(*(over_http(client, turns, context, seed) for seed in range(agents)))
    else:
        waits = await asyncio.gather(*(over_socket(client, turns, context, seed, mode == "socket, stored") for seed in range(agents)))
    cpu = cpu_seconds(pid) - before - idle * (time.perf_counter() - started)
    # The CPU counted includes each agent's first response: taken out with the same agents' first turns alone.
    return cpu / (agents * turns), sum(waits) / agents


async def first_turns(gateway: Gateway, agents: int, turns: int, context: int, idle: float) -> float:
    client = gateway.async_client()
    pid = gateway.proc.pid
    before, started = cpu_seconds(pid), time.perf_counter()
    await asyncio.gather(
        *(client.responses.create(model=MODEL, input=first_input(turns, context, seed), tools=[TOOL], store=False) for seed in range(agents))
    )
    return cpu_seconds(pid) - before - idle * (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--context", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every mode; the medians are reported")
    parser.add_argument("--profile", type=Path, default=None, help="a folder for py-spy profiles of each mode")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-socket-"))
    emulator = start_emulator(tmp)
    try:
        gateway = Gateway(gateway_config(emulator.url, tmp), tmp).start(timeout=60)
        try:
            asyncio.run(measure(gateway, "socket", 1, 2, 100, 0.0))  # warm both paths
            asyncio.run(measure(gateway, "http", 1, 2, 100, 0.0))
            pin(gateway.proc.pid, [os.getpid(), emulator.proc.pid])
            idle = asyncio.run(idle_rate(gateway))
            first = asyncio.run(first_turns(gateway, args.agents, args.turns, args.context, idle)) / (args.agents * args.turns)
            rounds: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
            for number in range(args.rounds):  # the modes interleaved, so that the machine's drift hits all alike
                for mode in MODES:
                    profile = None if args.profile is None or number else args.profile / (mode.replace(", ", "-") + ".txt")
                    with profiled(gateway.proc.pid, profile):
                        rounds[mode].append(asyncio.run(measure(gateway, mode, args.agents, args.turns, args.context, idle)))
                    if profile is not None:
                        print(f"== {mode}\n{top(profile)}")
            figures: dict[str, Any] = {}
            for mode, measured in rounds.items():
                cpu, wall = statistics.median(cpu for cpu, _ in measured), statistics.median(wall for _, wall in measured)
                figures[mode] = {"cpu_ms": 1000 * (cpu - first), "wall_ms": 1000 * wall}
        finally:
            gateway.stop()
    finally:
        emulator.stop()
    print(
        f"{args.agents} agents x {args.turns} client-function turns, first prompt ~{args.context:,} tokens of context "
        f"(medians of {args.rounds} rounds):"
    )
    for mode, figure in figures.items():
        print(f"  {mode:15s} gateway CPU {figure['cpu_ms']:.2f} ms/turn, wall {figure['wall_ms']:.1f} ms/turn")
    ratio = figures["socket"]["cpu_ms"] / figures["http"]["cpu_ms"]
    print(f"  the socket (store false) costs {ratio:.0%} of HTTP's gateway CPU per turn")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
