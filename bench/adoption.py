"""Background runs that outlive their replica (not a timed test; prints figures).

Starts PostgreSQL, the engine emulator and two gateway replicas, each in its own process.

- Adoption: a background response streams a long answer on replica A while a client follows it on
  replica B; A is killed (SIGKILL). Reported, over `--trials`: the time from the kill to the first event
  of the adopter that the follower receives, next to the lease (the target is lease + 1 s at most), and
  whether the follower's stream is whole (no gap, no repeat, one terminal event, the answer complete).
- Drain: replica A runs `--agents` background responses (long answers) and is stopped with SIGTERM; the
  time until its process exits, and whether every response then completes on B.

Run: .venv/bin/python bench/adoption.py [--trials 5] [--lease 2] [--agents 32]
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402
from tests.servers import PostgresServer  # noqa: E402
from tests.stream_checker import check_response_stream  # noqa: E402

MODEL = "openai/gpt-oss-20b"
WORDS = 600
ANSWER = f"[long {WORDS}] [slow 10]"
KEY = base64.b64encode(bytes(range(32))).decode()


def follow(url: str, response_id: str, arrivals: list[tuple[float, dict[str, Any]]]) -> None:
    with httpx.stream("GET", f"{url}/v1/responses/{response_id}", params={"stream": "true"}, timeout=120) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                arrivals.append((time.monotonic(), json.loads(line[6:])))


def adoption_trial(config: dict[str, Any], tmp: Path, survivor: Gateway) -> tuple[float, bool]:
    doomed = Gateway(config, tmp).start(timeout=60)
    created = httpx.post(f"{doomed.url}/v1/responses", json={"model": MODEL, "input": ANSWER, "background": True}, timeout=30).json()
    arrivals: list[tuple[float, dict[str, Any]]] = []
    reader = threading.Thread(target=follow, args=(survivor.url, created["id"], arrivals))
    reader.start()
    time.sleep(1.0)
    assert doomed.proc is not None
    doomed.proc.kill()
    killed_at = time.monotonic()
    reader.join(120)
    # The adopter's first event: the one it went on at, as its log says.
    found = re.search(rf"response {created['id']} adopted by .* going on at event (\d+)", survivor.log.read_text())
    first = int(found.group(1)) if found else len(arrivals)
    after = [at for at, event in arrivals if event["sequence_number"] >= first]
    final = check_response_stream([event for _, event in arrivals])
    whole = final.status == "completed" and final.output_text == " ".join(f"word{i}" for i in range(WORDS))
    return (after[0] - killed_at if after else float("inf")), whole


def drain_trial(config: dict[str, Any], tmp: Path, survivor: Gateway, agents: int) -> tuple[float, int]:
    stopping = Gateway(config, tmp).start(timeout=60)
    ids = [
        httpx.post(f"{stopping.url}/v1/responses", json={"model": MODEL, "input": ANSWER, "background": True}, timeout=30).json()["id"]
        for _ in range(agents)
    ]
    time.sleep(1.0)
    assert stopping.proc is not None
    began = time.monotonic()
    stopping.proc.send_signal(signal.SIGTERM)
    stopping.proc.wait(60)
    drained = time.monotonic() - began
    completed = 0
    for response_id in ids:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = httpx.get(f"{survivor.url}/v1/responses/{response_id}", timeout=30).json()["status"]
            if status not in ("queued", "in_progress"):
                completed += status == "completed"
                break
            time.sleep(0.2)
    return drained, completed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--agents", type=int, default=32)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-adoption-"))
    postgres = PostgresServer().start()
    emulator = start_emulator(tmp)
    config = gateway_config(
        emulator.url, tmp, storage={"url": postgres.new_database(), "lease_s": args.lease}, server={"reasoning_key": KEY},
        loop={"max_background_per_tenant": max(args.agents, 32)},
    )  # fmt: skip
    survivor = Gateway(config, tmp).start(timeout=60)
    try:
        latencies, whole = [], 0
        for _ in range(args.trials):
            latency, ok = adoption_trial(config, tmp, survivor)
            latencies.append(latency)
            whole += ok
        print(f"lease {args.lease:g} s; kill -> first event of the adopter, over {args.trials} trials:")
        print(f"  median {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s (target: lease + 1 s = {args.lease + 1:g} s)")
        print(f"  streams whole (no gap, no repeat, one terminal event, the answer complete): {whole}/{args.trials}")
        drained, completed = drain_trial(config, tmp, survivor, args.agents)
        print(
            f"SIGTERM with {args.agents} running agents: drained in {drained:.2f} s (target: under 5 s); {completed}/{args.agents} completed on the other replica"
        )
    finally:
        survivor.stop()
        emulator.stop()
        postgres.stop()


if __name__ == "__main__":
    main()
