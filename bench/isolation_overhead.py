"""What bounding hostile work costs on benign input (not a timed test; prints figures).

Work whose cost the input decides runs in a worker process (runtime/isolation.py) instead of a worker
thread: a strict function's argument check, and a web page cleaned to text. Each is timed both ways, on
ordinary input, as medians over blocks of calls:
  * thread: `run_cpu(...)`, the path before (unbounded: a hostile input held the CPU lane for minutes);
  * process: `run_isolated(...)`, the path now (time and memory bounded, killed with its response).
Also: the request-time check of a schema (`checked_schema`: its cost bound and compilation, cached per
distinct schema, as clients send the same tools with every request).

Run: .venv/bin/python bench/isolation_overhead.py [--calls 200]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connectors.browser.backends import to_page  # noqa: E402
from gateway.responses.shapes.schemas import _compiled, argument_error, argument_problem, checked_schema  # noqa: E402
from runtime.cpu import run_cpu  # noqa: E402
from runtime.isolation import run_isolated  # noqa: E402

BLOCK = 20
SCHEMA = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "City and country"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "details": {"type": "object", "properties": {"hourly": {"type": "boolean"}, "alerts": {"type": "boolean"}}},
    },
    "required": ["location", "unit"],
    "additionalProperties": False,
}
ARGUMENTS = json.dumps({"location": "Oslo, Norway", "unit": "celsius", "days": 3, "details": {"hourly": True}})


def article() -> str:
    from tests.web_site import FILLER

    paragraphs = "".join(f'<p>Section {n}: {FILLER * 4}See <a href="/articles/lion">the lions</a>.</p>' for n in range(200))
    return f"<html><head><title>A long article</title></head><body><nav>Menu</nav><article>{paragraphs}</article></body></html>"


async def median_ms(calls: int, call: Callable[[], Awaitable[Any]]) -> float:
    await call()  # warm: the worker process started, caches filled
    blocks = []
    for _ in range(max(calls // BLOCK, 1)):
        started = time.perf_counter()
        for _ in range(BLOCK):
            await call()
        blocks.append((time.perf_counter() - started) / BLOCK * 1000)
    return statistics.median(blocks)


async def main(calls: int) -> None:
    canonical = checked_schema(SCHEMA)
    validator = _compiled(canonical)
    html = article()
    started = time.perf_counter()
    for _ in range(1000):
        checked_schema(SCHEMA)
    print(f"request-time schema check (cached)       {(time.perf_counter() - started) * 1000:8.3f} µs per request")
    rows = [
        ("argument check, thread (before)", lambda: run_cpu(argument_error, validator, json.loads(ARGUMENTS))),
        ("argument check, worker process (now)", lambda: run_isolated(5, argument_problem, canonical, ARGUMENTS)),
        (f"page cleaning {len(html) // 1024} KB, thread (before)", lambda: run_cpu(to_page, "http://x/a", "html", html)),
        (f"page cleaning {len(html) // 1024} KB, process (now)", lambda: run_isolated(15, to_page, "http://x/a", "html", html)),
    ]
    for name, call in rows:
        print(f"{name:40s} {await median_ms(calls, call):8.3f} ms per call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    anyio.run(main, parser.parse_args().calls)
