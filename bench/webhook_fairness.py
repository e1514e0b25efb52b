"""Security 5: one tenant's dead webhook receivers against another tenant's webhooks (not a timed test).

Starts the engine emulator, a receiver that answers at once (tenant b's endpoint), a listener that accepts
connections and never answers (tenant a's twenty endpoints), and one gateway on SQLite. Tenant b's figure:
from creating a background response to its `response.completed` webhook arriving, p50 and p99 over
`--rounds` responses, first alone, then while tenant a's flood (`--flood` background responses, twenty
deliveries each, every attempt held for `timeout_s`) is being delivered.

Run: .venv/bin/python bench/webhook_fairness.py [--rounds 20] [--flood 10]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import Gateway, free_port, gateway_config, start_emulator  # noqa: E402
from tests.webhook_receiver import Receiver  # noqa: E402

MODEL = "openai/gpt-oss-20b"
KEYS = [{"key": "sk-a", "tenant": "a"}, {"key": "sk-b", "tenant": "b"}]


def black_hole() -> str:
    """A listener that accepts every connection and never answers: its origin."""
    port = free_port()
    listener = socket.create_server(("127.0.0.1", port))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            connection, _ = listener.accept()
            held.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    return f"http://127.0.0.1:{port}/"


def webhook_latency(http: httpx.Client, receiver: Receiver, rounds: int) -> tuple[float, float]:
    latencies = []
    for n in range(rounds):
        arrived = len(receiver.to("b"))
        started = time.perf_counter()
        response = http.post(
            "/v1/responses", json={"model": MODEL, "input": f"mine {n}", "background": True}, headers={"authorization": "Bearer sk-b"}
        )
        response.raise_for_status()
        receiver.wait_for(arrived + 1, "b", timeout=120)
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    return statistics.median(latencies), latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--flood", type=int, default=10)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="hg-bench-webhook-fairness-"))
    emulator = start_emulator(workdir)
    receiver, hole = Receiver(), black_hole()
    section = {"allowed_urls": [receiver.origin, hole], "timeout_s": 10, "first_retry_s": 1, "poll_interval_s": 0.2}
    gateway = Gateway(gateway_config(emulator.url, workdir, auth={"api_keys": KEYS}, webhooks=section), workdir).start(timeout=60)
    try:
        with httpx.Client(base_url=gateway.url, timeout=60) as http:
            for key, url, count in [("sk-b", receiver.url("b"), 1), ("sk-a", hole + "dead", 20)]:
                for n in range(count):
                    body = {"url": url, "event_types": ["response.completed"], "name": f"endpoint {n}"}
                    http.post("/v1/webhook_endpoints", json=body, headers={"authorization": f"Bearer {key}"}).raise_for_status()
            idle = webhook_latency(http, receiver, args.rounds)
            for n in range(args.flood):
                http.post("/v1/responses", json={"model": MODEL, "input": f"flood {n}", "background": True}, headers={"authorization": "Bearer sk-a"})
            time.sleep(1)  # the flood's first attempts under way
            flooded = webhook_latency(http, receiver, args.rounds)
        print(f"tenant b's webhook, from the request to its arrival, {args.rounds} background responses (ms):")
        print(f"  alone                                          p50 {idle[0]:8.1f}   p99 {idle[1]:8.1f}")
        print(f"  tenant a's {args.flood * 20:4d} deliveries to a dead receiver  p50 {flooded[0]:8.1f}   p99 {flooded[1]:8.1f}")
    finally:
        gateway.stop()
        emulator.stop()
        receiver.stop()


if __name__ == "__main__":
    main()
