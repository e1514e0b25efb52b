"""The engine client's CPU per stream chunk (not a timed test; prints figures).

Starts the engine emulator in its own process and reads long streams through `EngineClient` here (and
through `Engines`, as a run does: a stream that goes on where the engine breaks it off),
counting this process's CPU (user + system) per chunk read: connection, HTTP parsing, line splitting,
the chunk's JSON and its `EngineChunk`. With `--against DIR`, the `EngineClient` of another checkout's
`gateway/engine/client.py` (a git worktree of an earlier commit) is read in the same run, interleaved, for a
side-by-side figure.
Run: .venv/bin/python bench/engine_read.py [--tokens 3000] [--rounds 8] [--against /tmp/before]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import statistics
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openai_harmony import Message, Role  # noqa: E402

from gateway.config import EngineConfig  # noqa: E402
from gateway.engine.client import EngineClient
from gateway.engine.completion import Sampling
from gateway.engine.harmony import Preamble, Prompt, render_prompt  # noqa: E402
from gateway.engine.routing import Engines  # noqa: E402
from tests.conftest import start_emulator  # noqa: E402


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _engine_path(checkout: Path) -> Path:
    """The engine client's module in a checkout: gateway/engine/client.py, or before the engine had a
    package of its own, gateway/engine.py."""
    moved = checkout / "gateway/engine/client.py"
    return moved if moved.exists() else checkout / "gateway/engine.py"


def engine_module_of(checkout: Path) -> ModuleType:
    """Another checkout's engine.py, loaded as a module of this gateway package (its imports are of
    modules the two share)."""
    path = _engine_path(checkout)
    name = "gateway.engine._client_before" if path.name == "client.py" else "gateway._engine_before"  # its relative imports resolve here
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


async def read_one(client: Any, prompt: Prompt, tokens: int) -> float:
    """CPU µs per chunk of one stream."""
    started = cpu_seconds()
    stream = await client.generate(prompt, Sampling(max_tokens=tokens + 100))
    chunks = 0
    async for _ in stream:
        chunks += 1
    await stream.aclose()
    return (cpu_seconds() - started) / chunks * 1e6


async def measure(url: str, tokens: int, rounds: int, against: Path | None) -> dict[str, list[float]]:
    text = f"[long {tokens}] [noanalysis]"
    prompt = Prompt.of(render_prompt(Preamble(), [Message.from_role_and_content(Role.USER, text)]))
    clients: dict[str, Any] = {
        "this checkout": EngineClient(EngineConfig(url=url)),
        # What a run reads: the model's engine, whose stream goes on where the engine breaks it off.
        "this checkout, by model (resumable)": Engines([EngineConfig(url=url)]).route(None),
    }
    if against is not None:
        clients[str(against)] = engine_module_of(against).EngineClient(EngineConfig(url=url))
    figures: dict[str, list[float]] = {name: [] for name in clients}
    for client in clients.values():
        await read_one(client, prompt, 100)  # connected, model listed
    for _ in range(rounds):
        for name, client in clients.items():
            figures[name].append(await read_one(client, prompt, tokens))
    for client in clients.values():
        await client.aclose()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=3000, help="tokens per stream")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--against", type=Path, default=None, help="another checkout, read side by side")
    args = parser.parse_args()
    emulator = start_emulator(Path(tempfile.mkdtemp(prefix="bench-")))
    try:
        figures = uvloop.run(measure(emulator.url, args.tokens, args.rounds, args.against))
    finally:
        emulator.stop()
    for name, values in figures.items():
        spread = ", ".join(f"{value:.1f}" for value in values)
        print(f"{name}: {statistics.median(values):.2f} µs of CPU per chunk, median of {len(values)} ({spread})")


if __name__ == "__main__":
    main()
