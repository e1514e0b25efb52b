"""Webhook delivery (not a timed test; prints figures).

Starts the engine emulator, a receiver (uvicorn, in its own process: it records when each webhook-id
arrived and answers 200) and one gateway on SQLite, each in its own process.

- Latency: `--responses` background responses, `--concurrency` at a time, each reporting its end to one
  endpoint; from the moment its final record (and its delivery) was written to the receiver having it,
  p50 / p95 / max.
- Throughput: `--backlog` deliveries written straight into the outbox while the gateway is down; the
  gateway starts, and its one deliverer sends them: deliveries a second, first arrival to last.
- A dead receiver: 10,000 deliveries to a port nothing listens on (every attempt refused, retried every
  second or two), for `--churn-s` seconds: the gateway's resident memory then, next to the same gateway's
  with an empty outbox, and the attempts it made meanwhile.

Run: .venv/bin/python bench/webhooks.py [--responses 200] [--concurrency 4] [--backlog 5000] [--churn-s 30]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import ROOT, Gateway, free_port, gateway_config, start_emulator, wait_for_port  # noqa: E402

MODEL = "openai/gpt-oss-20b"


def receiver_app() -> Any:
    """The receiver: POST records (webhook-id, arrival time); GET answers what arrived, as JSON."""
    arrivals: list[tuple[str, float]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:
            message = await receive()
            more = message.get("more_body", False)
        if scope["method"] == "POST":
            headers = dict(scope["headers"])
            arrivals.append((headers[b"webhook-id"].decode(), time.time()))
            body = b"ok"
        else:
            body = json.dumps(arrivals).encode()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    return app


def start_receiver(port: int) -> subprocess.Popen[bytes]:
    code = f"import sys; sys.path.insert(0, {str(ROOT)!r}); import uvicorn; from bench.webhooks import receiver_app; "
    code += f"uvicorn.run(receiver_app(), host='127.0.0.1', port={port}, log_level='warning', access_log=False)"
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    wait_for_port(port)
    return process


def arrivals(port: int) -> dict[str, float]:
    return dict(httpx.get(f"http://127.0.0.1:{port}/", timeout=60).json())


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def rss_bytes(gateway: Gateway) -> int:
    assert gateway.proc is not None
    status = Path(f"/proc/{gateway.proc.pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) * 1024


def database_of(config: dict[str, Any]) -> str:
    return str(config["storage"]["path"])


def latency(gateway: Gateway, config: dict[str, Any], receiver_port: int, responses: int, concurrency: int) -> None:
    client = gateway.client()
    endpoint = client.webhooks.create(name="bench", url=f"http://127.0.0.1:{receiver_port}/hook", event_types=["response.completed"])
    ids: list[str] = []
    lock = threading.Lock()

    def worker(count: int) -> None:
        for _ in range(count):
            response = client.responses.create(model=MODEL, input="hi", background=True)
            while client.responses.retrieve(response.id).status not in ("completed", "failed"):
                time.sleep(0.02)
            with lock:
                ids.append(response.id)

    threads = [threading.Thread(target=worker, args=(responses // concurrency,)) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    time.sleep(2)
    arrived = arrivals(receiver_port)
    with sqlite3.connect(database_of(config)) as db:
        written = dict(db.execute("SELECT id, created_at FROM webhook_deliveries WHERE endpoint_id = ?", (endpoint.id,)).fetchall())
    gaps = [(arrived[webhook_id] - at) * 1000 for webhook_id, at in written.items() if webhook_id in arrived]
    print(f"latency: {len(ids)} background responses, {concurrency} at a time; {len(gaps)} of {len(written)} delivered")
    print(f"  end written -> receiver has it: p50 {statistics.median(gaps):.1f} ms, p95 {percentile(gaps, 0.95):.1f} ms, max {max(gaps):.1f} ms")
    client.webhooks.delete(endpoint.id)


def fill_outbox(config: dict[str, Any], endpoint_id: str, count: int, prefix: str) -> None:
    payload = json.dumps(
        {"id": "evt_bench", "object": "event", "created_at": int(time.time()), "type": "response.completed", "data": {"id": "resp_x"}}
    )
    now = time.time()
    rows = [(f"wh_{prefix}{n}", endpoint_id, "default", "response.completed", payload, now, "pending", now) for n in range(count)]
    with sqlite3.connect(database_of(config)) as db:
        db.executemany(
            "INSERT INTO webhook_deliveries (id, endpoint_id, tenant, event_type, payload, created_at, status, next_attempt_at) VALUES (?,?,?,?,?,?,?,?)",
            rows,
        )


def throughput(config: dict[str, Any], tmp: Path, receiver_port: int, backlog: int) -> None:
    gateway = Gateway(config, tmp).start(timeout=60)
    endpoint = gateway.client().webhooks.create(name="backlog", url=f"http://127.0.0.1:{receiver_port}/hook", event_types=["response.completed"])
    gateway.stop()
    fill_outbox(config, endpoint.id, backlog, "t")
    before = set(arrivals(receiver_port))
    gateway = Gateway(config, tmp).start(timeout=60)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        arrived = {webhook_id: at for webhook_id, at in arrivals(receiver_port).items() if webhook_id not in before}
        if len(arrived) >= backlog:
            break
        time.sleep(0.5)
    times = sorted(arrived.values())
    print(f"throughput: {len(arrived)} of {backlog} delivered by one replica (max_concurrent 32)")
    print(f"  {(len(times) - 1) / (times[-1] - times[0]):.0f} deliveries/s (first arrival to last: {times[-1] - times[0]:.1f} s)")
    gateway.stop()


def dead_receiver(emulator_url: str, tmp: Path, receiver_port: int, churn_s: float) -> None:
    dead_port = free_port()
    sections = {
        "allowed_urls": [f"http://127.0.0.1:{receiver_port}/", f"http://127.0.0.1:{dead_port}/"],
        "first_retry_s": 1.0,
        "max_retry_interval_s": 2.0,
    }
    figures = {}
    for backlog in (0, 10_000):
        directory = tmp / f"dead-{backlog}"
        directory.mkdir()
        config = gateway_config(emulator_url, directory, webhooks=sections)
        gateway = Gateway(config, directory).start(timeout=60)
        endpoint = gateway.client().webhooks.create(name="dead", url=f"http://127.0.0.1:{dead_port}/hook", event_types=["response.completed"])
        gateway.stop()
        fill_outbox(config, endpoint.id, backlog, "d")
        gateway = Gateway(config, directory).start(timeout=60)
        started = rss_bytes(gateway)
        samples = []
        deadline = time.monotonic() + churn_s
        while time.monotonic() < deadline:
            time.sleep(1)
            samples.append(rss_bytes(gateway))
        with sqlite3.connect(database_of(config)) as db:
            attempts = db.execute("SELECT COUNT(*) FROM webhook_attempts").fetchone()[0]
            pending = db.execute("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'").fetchone()[0]
        figures[backlog] = (started, samples[-1], max(samples), attempts, pending)
        gateway.stop()
    for backlog, (started, last, peak, attempts, pending) in figures.items():
        print(
            f"dead receiver, {backlog:>6} undelivered: RSS at start {started / 2**20:.1f} MiB, after {churn_s:g} s {last / 2**20:.1f} MiB "
            f"(peak {peak / 2**20:.1f}); {attempts} attempts made, {pending} still pending"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--responses", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--backlog", type=int, default=5000)
    parser.add_argument("--churn-s", type=float, default=30.0)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    emulator = start_emulator(tmp)
    receiver_port = free_port()
    receiver = start_receiver(receiver_port)
    try:
        config = gateway_config(emulator.url, tmp, webhooks={"allowed_urls": [f"http://127.0.0.1:{receiver_port}/"]})
        gateway = Gateway(config, tmp).start(timeout=60)
        try:
            latency(gateway, config, receiver_port, args.responses, args.concurrency)
        finally:
            gateway.stop()
        throughput(config, tmp, receiver_port, args.backlog)
        dead_receiver(emulator.url, tmp, receiver_port, args.churn_s)
    finally:
        receiver.kill()
        emulator.stop()


if __name__ == "__main__":
    main()
