"""Automations' costs (not a timed test; prints figures).

Starts PostgreSQL, the engine emulator and one gateway on PostgreSQL (where replicas share the scheduler's
table), then:
  * the scheduler's standing cost: the gateway's CPU seconds and PostgreSQL's committed transactions per
    minute with no automation, then with 10,000 scheduled ones (daily, none due in the window);
  * the firing delay, from an occurrence's due time to its invocation being queued (the gateway's own
    `gateway_automation_delay_seconds` histogram: p50 and p99 as its bucket bounds, and the mean), with
    automations due every second beside the 10,000.
Run: .venv/bin/python bench/automations.py [--automations 10000] [--window 60] [--every-second 10]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import asyncpg
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stream_overhead import cpu_seconds  # noqa: E402
from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402
from tests.servers import PostgresServer  # noqa: E402

MODEL = "openai/gpt-oss-20b"
TARGET = {
    "type": "new_session",
    "agent": {"model": MODEL},
    "environment": {"type": "none"},
    "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[noanalysis] ok"}]}],
}


async def commits(database_url: str) -> int:
    connection = await asyncpg.connect(database_url)
    try:
        return int(await connection.fetchval("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"))
    finally:
        await connection.close()


async def standing_cost(pid: int, database_url: str, window_s: float) -> tuple[float, float]:
    """CPU seconds and committed transactions per minute, measured over `window_s` of an idle gateway."""
    cpu, xacts, started = cpu_seconds(pid), await commits(database_url), time.perf_counter()
    await asyncio.sleep(window_s)
    elapsed = time.perf_counter() - started
    return (cpu_seconds(pid) - cpu) * 60 / elapsed, (await commits(database_url) - xacts) * 60 / elapsed


async def create_many(client: httpx.AsyncClient, url: str, count: int, body: dict[str, object], concurrency: int = 8) -> list[str]:
    made: list[str] = []
    queue = iter(range(count))

    async def worker() -> None:
        for index in queue:
            answer = await client.post(url + "/v1/agents/automations", json={**body, "name": f"a{index}"})
            answer.raise_for_status()
            made.append(answer.json()["id"])

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return made


def delay_quantiles(exposition: str) -> tuple[float, float, float, int]:
    """p50 and p99 (as the histogram's bucket bounds), the mean, and the count of firing delays."""
    buckets: list[tuple[float, float]] = []
    total = count = 0.0
    for line in exposition.splitlines():
        if line.startswith("gateway_automation_delay_seconds_bucket"):
            bound = line.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if bound == "+Inf" else float(bound), float(line.rsplit(" ", 1)[1])))
        elif line.startswith("gateway_automation_delay_seconds_sum"):
            total = float(line.rsplit(" ", 1)[1])
        elif line.startswith("gateway_automation_delay_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])

    def bound(q: float) -> float:
        return next(upper for upper, seen in buckets if seen >= q * count)

    return bound(0.5), bound(0.99), total / count if count else 0.0, int(count)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--automations", type=int, default=10_000)
    parser.add_argument("--window", type=float, default=60.0, help="seconds each standing cost is measured over")
    parser.add_argument("--every-second", type=int, default=10, help="automations due every second, for the firing delay")
    parser.add_argument("--firing", type=float, default=30.0, help="seconds the every-second automations run")
    parser.add_argument("--idle-only", action="store_true", help="only the idle gateway's standing cost (runs on a gateway without automations too)")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds let pass after the creations (PostgreSQL's autovacuum)")
    args = parser.parse_args()
    postgres = PostgresServer().start()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        emulator = start_emulator(tmp)
        database = postgres.new_database()
        config = gateway_config(emulator.url, tmp, storage={"url": database}, agents={"max_automations_per_tenant": args.automations + 1000})
        gateway = Gateway(config, tmp).start(timeout=60)
        try:
            assert gateway.proc is not None
            pid = gateway.proc.pid
            async with httpx.AsyncClient(timeout=60) as client:
                await asyncio.sleep(5)  # start-up's own work done
                idle_cpu, idle_xacts = await standing_cost(pid, database, args.window)
                if args.idle_only:
                    print(f"idle gateway, per minute ({args.window:.0f} s): {idle_cpu:.2f} CPU s/min, {idle_xacts:.0f} transactions/min")
                    return
                started = time.perf_counter()
                daily = {"type": "periodic", "expression": "0 3 * * *", "timezone": "Europe/Paris", "target": TARGET}
                await create_many(client, gateway.url, args.automations, daily)
                made_s = time.perf_counter() - started
                await asyncio.sleep(args.settle)
                loaded_cpu, loaded_xacts = await standing_cost(pid, database, args.window)
                every = {"type": "periodic", "expression": "* * * * * *", "timezone": "UTC", "target": TARGET}
                ticking = await create_many(client, gateway.url, args.every_second, every)
                await asyncio.sleep(args.firing)
                for automation_id in ticking:
                    await client.post(f"{gateway.url}/v1/agents/automations/{automation_id}/pause")
                p50, p99, mean, fired = delay_quantiles((await client.get(gateway.url + "/metrics")).text)
        finally:
            gateway.stop()
            emulator.stop()
            postgres.stop()
    print(f"scheduler standing cost, per minute ({args.window:.0f} s windows, PostgreSQL):")
    print(f"  no automations:           {idle_cpu:6.2f} CPU s/min  {idle_xacts:7.0f} transactions/min")
    print(f"  {args.automations:,} scheduled:       {loaded_cpu:6.2f} CPU s/min  {loaded_xacts:7.0f} transactions/min")
    print(f"  (created through the API in {made_s:.1f} s; measured {args.settle:.0f} s after)")
    print(f"firing delay, due time to invocation queued ({fired} firings of {args.every_second} every-second automations):")
    print(f"  p50 <= {p50 * 1000:.1f} ms   p99 <= {p99 * 1000:.1f} ms   mean {mean * 1000:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
