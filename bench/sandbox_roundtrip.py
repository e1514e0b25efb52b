"""Round trip of `print(1)` in the Python sandbox (not a timed test; prints figures), side by side:

  * warm: a second call in a session that already ran code;
  * new session: the first call of a new conversation, its kernel taken from the warm pool;
  * per-call container: the reference tool's approach, create + start + run + remove a container per call;
  * with the sessions' directory (SQLite, as one gateway has it): a warm call, which also marks the session
    busy and idle in the database, and a takeover, two replicas' managers taking turns on one session
    (each call: the directory's claim, an attach to the container, a ping, the run).

Run: .venv/bin/python bench/sandbox_roundtrip.py [--image harmony-gateway/sandbox:latest] [--runs 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import anyio.to_thread
import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.config import SandboxConfig, StorageConfig  # noqa: E402
from gateway.replicas import Replicas  # noqa: E402
from gateway.sandbox_sessions import SessionDirectory  # noqa: E402
from gateway.storage import open_database  # noqa: E402
from gateway.storage.response_store import ResponseStore  # noqa: E402
from runtime.supervision import Supervisor  # noqa: E402
from sandbox.docker_backend import Owner  # noqa: E402
from sandbox.manager import SandboxManager  # noqa: E402


def figures(name: str, seconds: list[float]) -> None:
    ms = sorted(s * 1000 for s in seconds)
    p95 = ms[max(0, int(len(ms) * 0.95) - 1)]
    print(f"{name:<34} p50 {statistics.median(ms):8.1f} ms   p95 {p95:8.1f} ms   (n={len(ms)})")


async def measure(image: str, runs: int) -> None:
    config = SandboxConfig(image=image, pool_size=4, instance="bench", max_sessions=runs + 8)
    manager = SandboxManager(config)
    async with anyio.create_task_group() as tasks:
        await manager.start(Supervisor(tasks))
        while manager.pooled < config.pool_size:  # let the pool fill before measuring
            await anyio.sleep(0.05)

        warm = []
        await manager.execute("warm", "print(1)", resumed=False, tenant="bench")
        for _ in range(runs):
            started = time.perf_counter()
            result = await manager.execute("warm", "print(1)", resumed=True, tenant="bench")
            warm.append(time.perf_counter() - started)
            assert result.output == "1\n", result

        fresh = []
        for number in range(runs):
            while manager.pooled < config.pool_size:  # a new conversation arrives to a full pool
                await anyio.sleep(0.01)
            started = time.perf_counter()
            result = await manager.execute(f"new-{number}", "print(1)", resumed=False, tenant=f"bench-{number}")
            fresh.append(time.perf_counter() - started)
            assert result.output == "1\n", result
        await manager.close()
        tasks.cancel_scope.cancel()

    client = docker.from_env()

    def per_call_container() -> None:
        output = client.containers.run(image, ["python3", "-c", "print(1)"], remove=True, network_mode="none")
        assert output == b"1\n"

    baseline = []
    for _ in range(max(runs // 5, 5)):
        started = time.perf_counter()
        await anyio.to_thread.run_sync(per_call_container)
        baseline.append(time.perf_counter() - started)

    shared_warm, takeover = await measure_shared(image, runs)
    figures("warm session", warm)
    figures("new session (from the warm pool)", fresh)
    figures("per-call container (reference)", baseline)
    figures("warm session, with the directory", shared_warm)
    figures("takeover by another replica", takeover)


async def measure_shared(image: str, runs: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as folder:
        db = open_database(f"sqlite:///{folder}/bench.sqlite3", retry_s=1, pool_size=1)
        await db.start()
        storage = StorageConfig(lease_s=60)
        managers = []
        async with anyio.create_task_group() as tasks:
            for name in ("a", "b"):
                replicas = Replicas(db, ResponseStore(db), storage.model_copy(update={"replica_id": f"bench-{name}"}))
                await replicas.join()
                config = SandboxConfig(image=image, pool_size=1, instance="bench")
                owner = Owner(replicas.id, replicas.live, sweep_s=3600)
                managers.append(SandboxManager(config, owner, SessionDirectory(db, replicas)))
                await managers[-1].start(Supervisor(tasks))
            first, second = managers
            await first.execute("cntr_bench", "x = 0", resumed=False, tenant="bench")
            warm, takeover = [], []
            for _ in range(runs):
                started = time.perf_counter()
                await first.execute("cntr_bench", "x += 1", resumed=True, tenant="bench")
                warm.append(time.perf_counter() - started)
            for number in range(runs):
                manager = managers[number % 2]
                started = time.perf_counter()
                result = await manager.execute("cntr_bench", "x += 1; print(x)", resumed=True, tenant="bench")
                takeover.append(time.perf_counter() - started)
                assert result.output == f"{runs + number + 1}\n", result
            for manager in managers:
                await manager.close()
            tasks.cancel_scope.cancel()
        await db.close()
    return warm, takeover


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="harmony-gateway/sandbox:latest")
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    anyio.run(measure, args.image, args.runs)


if __name__ == "__main__":
    main()
