"""What one hosted shell command adds to the command itself, on a warm session (not a timed test; prints
figures). Side by side, for each sandbox backend:

  * the command itself: `bash -c true` started and waited for by a plain subprocess on this machine;
  * a ping: the kernel's round trip with no work (the channel's floor);
  * one shell command: `true` through the manager (the session held, the kernel's shell op, its stray
    scan, the reply checked), what a hosted `shell_call` costs beyond the model's turn;
  * with the files synced: the same, with a container's files listed before and after (as a response runs it).

Run: .venv/bin/python bench/shell_latency.py [--image harmony-gateway/sandbox:latest] [--runs 100]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

import anyio
import anyio.to_thread

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.supervision import Supervisor  # noqa: E402
from sandbox.config import SandboxConfig  # noqa: E402
from sandbox.manager import SandboxManager, ShellCommand  # noqa: E402
from sandbox.transfer import FilesState, listing  # noqa: E402


def figures(name: str, seconds: list[float]) -> float:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[max(0, int(len(ms) * 0.95) - 1)]
    print(f"  {name:<30} p50 {statistics.median(ms):7.2f} ms   p95 {p95:7.2f} ms   (n={len(ms)})")
    return statistics.median(ms)


async def timed(runs: int, step: Callable[[], Awaitable[object]]) -> list[float]:
    await step()  # warm
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        await step()
        seconds.append(time.perf_counter() - started)
    return seconds


class ListFiles:
    """A session's files listed around the command, as a response's container sync does."""

    async def before(self, channel: object, state: FilesState) -> None:
        await listing(channel)  # type: ignore[arg-type]

    async def after(self, channel: object, state: FilesState) -> None:
        await listing(channel)  # type: ignore[arg-type]


async def backend(name: str, image: str, runs: int) -> None:
    manager = SandboxManager(SandboxConfig(backend=name, image=image, pool_size=1, instance="bench-shell"))  # type: ignore[arg-type]
    async with anyio.create_task_group() as tasks:
        await manager.start(Supervisor(tasks))
        print(f"{name} backend:")
        bash = await timed(runs, lambda: anyio.to_thread.run_sync(lambda: subprocess.run(["/bin/bash", "-c", "true"], check=True)))
        itself = figures("bash -c true (the command)", bash)
        await manager.execute("cntr_bench", "1", False, "bench")  # the session, started

        async def ping() -> object:
            session = manager._sessions["cntr_bench"]  # the bench reaches in for the floor only
            assert session.kernel is not None
            return await session.kernel.channel.exchange({"op": "ping"})

        figures("kernel ping", await timed(runs, ping))
        one = [ShellCommand("true")]
        shell = figures("one shell command", await timed(runs, lambda: manager.shell("cntr_bench", one, "bench", lambda i, o: None)))
        synced = figures(
            "with the files listed", await timed(runs, lambda: manager.shell("cntr_bench", one, "bench", lambda i, o: None, files=ListFiles()))
        )
        print(f"  added beyond the command: {shell - itself:.2f} ms ({synced - itself:.2f} ms with the files listed)")
        await manager.close()
        tasks.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="harmony-gateway/sandbox:latest")
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--backends", default="docker,local")
    args = parser.parse_args()
    for name in args.backends.split(","):
        anyio.run(backend, name, args.image, args.runs)


if __name__ == "__main__":
    main()
