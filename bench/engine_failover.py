"""Engines that die mid-answer, and routing by model (not a timed test; prints figures).

  * added time to the next token after an engine dies: a streamed answer (a chunk every 20 ms) whose
    engine is SIGKILLed mid-answer; the gap between the last text delta before the kill and the first
    after it, less the usual gap between deltas, p50 and max over the runs. Two set-ups: two instances
    behind HAProxy hashing on the session header (what the router detects: a refused connection, at
    once), and two URLs of one model given to the gateway (its own failover);
  * routing cost per request: `Engines.route()` for a model's name among 2 and 20 configured models
    (in process), and the gateway's CPU per request with 2 and with 20 models configured.
Run: .venv/bin/python bench/engine_failover.py [--runs 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stream_overhead import cpu_seconds  # noqa: E402
from gateway.config import EngineConfig  # noqa: E402
from gateway.engine.routing import Engines  # noqa: E402
from tests.conftest import MODEL, Gateway, Process, emulator_stats, free_port, gateway_config, start_emulator  # noqa: E402
from tests.servers import HAProxy  # noqa: E402
from tests.stream_checker import check_response_stream, sse_as_it_arrives  # noqa: E402

INPUT = "tell [long 200] [slow 20] [chunk 1]"


def engine_on(port: int, workdir: Path) -> Process:
    return Process([sys.executable, "-m", "tests.emulator", "--port", str(port)], port, "/health", workdir / f"emulator-{port}.log")


def one_kill(gateway_url: str, instances: list[Process], kill_at: int) -> tuple[float, float]:
    """Stream an answer, SIGKILL the instance serving it at delta `kill_at`: (the gap across the kill,
    the median gap between deltas otherwise), in seconds."""
    events: list[dict[str, Any]] = []
    arrivals: list[float] = []
    killed_after = -1
    body = {"model": MODEL, "input": INPUT, "stream": True, "store": False}
    with httpx.stream("POST", gateway_url + "/v1/responses", json=body, timeout=60) as answer:
        for event in sse_as_it_arrives(answer.iter_bytes()):
            events.append(event)
            if event["type"] != "response.output_text.delta":
                continue
            arrivals.append(time.perf_counter())
            if len(arrivals) == kill_at:
                active = [emulator_stats(instance)["active"] for instance in instances]
                killed = instances[active.index(1)]
                assert killed.proc is not None
                killed.proc.kill()
                killed_after = len(arrivals)
    final = check_response_stream(events)
    assert final.status == "completed", final.error
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    across = gaps[killed_after - 1]
    usual = statistics.median(gaps[: killed_after - 1] + gaps[killed_after:])
    killed.proc.wait()  # type: ignore[union-attr]
    killed.start()
    return across, usual


def failover(work: Path, runs: int, routed: bool) -> None:
    instances = [engine_on(free_port(), work).start() for _ in range(2)]
    router = None
    if routed:
        router = HAProxy([i.port for i in instances], work, balance="hdr(x-session-key)\n    hash-type consistent", check="/health").start()
        config = gateway_config(router.url, work, engine={"session_header": "x-session-key"})
    else:
        config = gateway_config("http://unused", work)
        del config["engine"]
        config["engines"] = [{"url": instance.url, "model": MODEL, "health_interval_s": 0.5} for instance in instances]
    gateway = Gateway(config, work).start()
    added = []
    try:
        for run in range(runs):
            across, usual = one_kill(gateway.url, instances, kill_at=20 + 7 * run)
            added.append(across - usual)
            deadline = time.monotonic() + 15
            while httpx.get(gateway.url + "/ready").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.1)
            time.sleep(1.0)  # HAProxy's own check sees it back (inter 500 ms)
    finally:
        gateway.stop()
        if router is not None:
            router.stop()
        for instance in instances:
            instance.stop()
    added_ms = sorted(1000 * value for value in added)
    where = "behind HAProxy (hash on x-session-key)" if routed else "two URLs given to the gateway"
    print(f"{where:42} added time to the next token: p50 {statistics.median(added_ms):6.1f} ms, max {added_ms[-1]:6.1f} ms ({runs} kills)")


def route_cost(models: int) -> float:
    configs = [EngineConfig(url=f"http://127.0.0.1:{9000 + n}", model=f"org/model-{n}", aliases=[f"model-{n}"]) for n in range(models)]
    engines = Engines(configs)
    names = [f"model-{n}" for n in range(models)] + [f"org/model-{n}" for n in range(models)]
    rounds = 200_000
    started = time.perf_counter()
    for index in range(rounds):
        engines.route(names[index % len(names)])
    return (time.perf_counter() - started) / rounds * 1e9


def request_cpu(work: Path, models: int, requests: int = 300) -> float:
    emulator = start_emulator(work)
    config = gateway_config("http://unused", work)
    del config["engine"]
    # Every model served by the one emulator under its own name (it answers for MODEL only): the last is MODEL.
    config["engines"] = [{"url": emulator.url, "model": f"org/model-{n}"} for n in range(models - 1)] + [{"url": emulator.url, "model": MODEL}]
    gateway = Gateway(config, work).start()
    try:
        with httpx.Client(timeout=30) as client:
            for _ in range(20):
                client.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi", "store": False})
            assert gateway.proc is not None
            before = cpu_seconds(gateway.proc.pid)
            for _ in range(requests):
                client.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi", "store": False}).raise_for_status()
            return (cpu_seconds(gateway.proc.pid) - before) / requests * 1000
    finally:
        gateway.stop()
        emulator.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        failover(work, args.runs, routed=True)
        failover(work, args.runs, routed=False)
        for models in (2, 20):
            print(f"route() among {models:2} models: {route_cost(models):6.0f} ns a request")
        for models in (2, 20):
            print(f"gateway CPU per request, {models:2} models configured: {request_cpu(work, models):5.2f} ms")


if __name__ == "__main__":
    main()
