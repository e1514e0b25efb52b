"""Gateway cost of tool turns over long contexts (not a timed test; prints figures).

Starts the engine emulator and the gateway as separate processes; the tool is python on the Docker
sandbox backend (the default one; `--backend local` for bubblewrap), or with `--tool mcp` the test MCP
server's `add` over stdio. For each context size, AGENTS agents run at once, each one response whose
prompt holds that many tokens of earlier text and whose model makes TURNS python calls before answering, so the gateway
renders, sends and parses a prompt of that size TURNS + 1 times. Reported:
  * gateway CPU per tool turn: the gateway process's CPU seconds (from /proc) for those responses, minus
    the CPU of the same responses without tool calls, over the tool turns made (the CPU the gateway
    spends idle, measured before, is taken out of both: the emulator is slow at long contexts);
  * the longest event-loop stall during those responses: the gateway's gateway_event_loop_lag_max_seconds
    (since the previous scrape), sampled every 2 ms (while it stalls, every other stream of the process
    waits), and how long the loop's thread waited for a CPU in all (other processes on its core).
Run: .venv/bin/python bench/long_context.py [--agents 8] [--turns 8] [--contexts 1000,100000] [--tool mcp] [--backend local]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gateway, ensure_sandbox_image, gateway_config, metric, start_emulator  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")
WORDS = "the of and to in is was for on that with as by at from his her are be this which it or an had not".split()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def run_queue_wait(pid: int) -> float:
    """Seconds the process's main thread (the event loop's) has waited, runnable, for a CPU: its stalls
    include these waits, which are the machine's (other processes on its core), not the gateway's work."""
    return int(Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()[1]) / 1e9


def filler(tokens: int, seed: int) -> str:
    """About `tokens` tokens of text: common words (one token each with their space), in lines."""
    rng = random.Random(seed)
    words = [rng.choice(WORDS) for _ in range(tokens)]
    return "\n".join(" ".join(words[i : i + 16]) for i in range(0, len(words), 16))


TOOL = "python"  # or "mcp": the test MCP server's `add` over stdio (--tool)
PIN: list[int] | None = None  # the processes kept off the gateway's core (--no-pin: none)


async def agent(client: httpx.AsyncClient, url: str, context: int, turns: int, seed: int) -> int:
    """One response: the context, then `turns` tool calls. Returns its input tokens (all engine calls)."""
    if TOOL == "python":
        steps = "".join(f"[[python {seed} + {turn}]]" for turn in range(turns))
        tools: list[dict] = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    else:
        steps = "".join(f'[[call local.add {{"a": {seed}, "b": {turn}}}]]' for turn in range(turns))
        tools = [{"type": "mcp", "server_label": "local"}]
    body = {
        "model": "openai/gpt-oss-20b",
        "input": [
            {"role": "user", "content": filler(context, seed)},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": f"Now compute. {steps}"},
        ],
        "tools": tools,
        "store": False,
    }
    response = await client.post(url + "/v1/responses", json=body, timeout=600)
    response.raise_for_status()
    data = response.json()
    assert data["status"] == "completed", data.get("error")
    calls = [item for item in data["output"] if item["type"] in ("code_interpreter_call", "mcp_call")]
    assert len(calls) == turns, f"{len(calls)} calls, expected {turns}"
    return data["usage"]["input_tokens"]


async def idle_rate(gateway: Gateway, seconds: float = 3.0) -> float:
    """CPU seconds per second the gateway spends with nothing to do (timers: the loop monitor, leases),
    taken out of each round's CPU, so that a slow engine does not count as the gateway's work."""
    before = cpu_seconds(gateway.proc.pid)
    await asyncio.sleep(seconds)
    return (cpu_seconds(gateway.proc.pid) - before) / seconds


async def round_of(gateway: Gateway, agents: int, context: int, turns: int, idle: float) -> tuple[float, int]:
    pid = gateway.proc.pid
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=agents + 4)) as client:
        before, started = cpu_seconds(pid), time.perf_counter()
        inputs = await asyncio.gather(*(agent(client, gateway.url, context, turns, seed) for seed in range(agents)))
        return cpu_seconds(pid) - before - idle * (time.perf_counter() - started), sum(inputs)


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *children(int(child))]
    return found


def pin(gateway_pid: int, others: list[int]) -> None:
    """On a machine of few cores, the gateway's event loop gets a core of its own, and everything else (the
    emulator, this client, the gateway's renderer process, tool servers and kernels) the others: what is
    measured is then the gateway's own work, not the emulator taking its core."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return
    os.sched_setaffinity(gateway_pid, {cores[0]})
    for pid in others + children(gateway_pid):
        try:
            os.sched_setaffinity(pid, set(cores[1:]))
        except ProcessLookupError:
            pass


async def measure(gateway: Gateway, agents: int, context: int, turns: int) -> dict[str, float]:
    await round_of(gateway, 1, 20_000, 1, 0.0)  # warm: sandbox pool, renderer process, connections
    await asyncio.sleep(1.0)  # the pool refilled
    if PIN is not None:
        pin(gateway.proc.pid, PIN)
    idle = await idle_rate(gateway)
    httpx.get(gateway.url + "/metrics")  # the longest lag is counted from here (start-up's is left out)
    without_cpu, _ = await round_of(gateway, agents, context, 0, idle)
    waited = run_queue_wait(gateway.proc.pid)
    with_cpu, input_tokens = await round_of(gateway, agents, context, turns, idle)
    waited = run_queue_wait(gateway.proc.pid) - waited
    lag = metric(httpx.get(gateway.url + "/metrics").text, "gateway_event_loop_lag_max_seconds")
    return {
        "context": input_tokens / (agents * (turns + 1)),
        "cpu_per_turn_ms": 1000 * (with_cpu - without_cpu) / (agents * turns),
        "cpu_per_response_ms": 1000 * without_cpu / agents,
        "max_stall_ms": 1000 * lag,
        "idle_cpu_percent": 100 * idle,
        "run_queue_wait_ms": 1000 * waited,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=8)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--contexts", default="1000,100000")
    parser.add_argument("--tool", choices=["python", "mcp"], default="python")
    parser.add_argument("--backend", choices=["docker", "local"], default="docker")
    parser.add_argument("--no-pin", action="store_true", help="let the gateway share every core with the rest")
    args = parser.parse_args()
    global TOOL, PIN
    TOOL = args.tool
    tmp = Path(tempfile.mkdtemp(prefix="bench-long-"))
    image = {"image": ensure_sandbox_image()} if args.backend == "docker" and args.tool == "python" else {}
    emulator = start_emulator(tmp, "--max-model-len", "262144")
    PIN = None if args.no_pin else [os.getpid(), emulator.proc.pid]
    try:
        for context in (int(size) for size in args.contexts.split(",")):
            sandbox = {
                "backend": args.backend,
                "pool_size": args.agents,
                "max_sessions": 4 * args.agents,
                "max_sessions_per_tenant": 4 * args.agents,
                "instance": f"bench-{os.getpid()}",
                **image,
            }
            config = gateway_config(
                emulator.url,
                tmp,
                sandbox=sandbox,
                server={"loop_monitor_interval_s": 0.002, "max_input_chars": 4_000_000, "max_body_bytes": 32 * 1024 * 1024},
            )
            root = Path(__file__).resolve().parent.parent
            config["tool_servers"] = [
                {
                    "label": "local",
                    "transport": "stdio",
                    "command": [sys.executable, "-m", "tests.mcp_server"],
                    "args": ["--name", "local"],
                    "cwd": str(root),
                }
            ]
            gateway = Gateway(config, tmp).start(timeout=60)
            try:
                started = time.perf_counter()
                figures = asyncio.run(measure(gateway, args.agents, context, args.turns))
                elapsed = time.perf_counter() - started
            finally:
                gateway.stop()
            print(
                f"context ~{figures['context']:,.0f} tokens, {args.agents} agents x {args.turns} tool turns: "
                f"gateway CPU per tool turn {figures['cpu_per_turn_ms']:.1f} ms, "
                f"per response without tools {figures['cpu_per_response_ms']:.1f} ms, "
                f"longest event-loop stall {figures['max_stall_ms']:.1f} ms "
                f"(the loop's thread waited {figures['run_queue_wait_ms']:.0f} ms in all for a CPU) "
                f"(idle CPU {figures['idle_cpu_percent']:.1f}% taken out; {elapsed:.0f} s)"
            )
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
