"""The CPU lane: work sent off the event loop runs one piece at a time, in every event loop."""

from __future__ import annotations

import threading
import time

import anyio

from runtime.cpu import run_cpu


def test_cpu_bound_work_runs_one_piece_at_a_time() -> None:
    running, most = 0, 0
    lock = threading.Lock()

    def work(seconds: float) -> float:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(seconds)  # stands for CPU work; sleeping makes an overlap certain to show
        with lock:
            running -= 1
        return seconds

    async def main() -> list[float]:
        results: list[float] = []

        async def one(seconds: float) -> None:
            results.append(await run_cpu(work, seconds))

        async with anyio.create_task_group() as tasks:
            for _ in range(4):
                tasks.start_soon(one, 0.02)
        return results

    assert anyio.run(main) == [0.02] * 4
    assert most == 1
    # A second event loop gets a lane of its own (a limiter is bound to the loop it was made in).
    assert anyio.run(main) == [0.02] * 4
    assert most == 1
