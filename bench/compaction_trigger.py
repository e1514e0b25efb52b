"""Compaction by trigger (Codex's remote compaction; SDK 3.57's `compaction_trigger`): the time from sending
a streamed request whose input is HISTORY tokens of conversation and the trigger, to its `compaction` item
(`response.output_item.done`) and to `response.completed` (not a timed test; prints figures).

Starts the engine emulator and the gateway as separate processes. The history is user and assistant
messages of filler text, as a long Codex thread's; the model's summary is one engine call over all of it
(the emulator writes a short summary at once: what is measured is the gateway's part and the engine's
reading of the prompt as the emulator takes it, not a GPU's prefill).

Run: .venv/bin/python bench/compaction_trigger.py [--history 20000 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.long_context import filler  # noqa: E402
from tests.conftest import Gateway, gateway_config, start_emulator  # noqa: E402

MODEL = "openai/gpt-oss-20b"


def history(tokens: int, seed: int) -> list[dict[str, Any]]:
    """About `tokens` tokens as turns of ~2,000 tokens, the user's and the assistant's in turn."""
    turns = max(tokens // 2000, 1)
    roles = ("user", "assistant")
    return [{"role": roles[turn % 2], "content": filler(tokens // turns, seed + turn)} for turn in range(turns)]


def one(client: openai.OpenAI, items: list[dict[str, Any]]) -> tuple[float, float]:
    """Seconds to the compaction item, and to response.completed."""
    started = time.perf_counter()
    item_at = ended_at = 0.0
    stream = client.responses.create(model=MODEL, input=[*items, {"type": "compaction_trigger"}], store=False, stream=True)
    for event in stream:
        if event.type == "response.output_item.done" and event.item.type == "compaction":
            item_at = time.perf_counter() - started
        if event.type == "response.completed":
            ended_at = time.perf_counter() - started
    assert item_at and ended_at, "no compaction item, or no response.completed"
    return item_at, ended_at


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--history", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        emulator = start_emulator(work)
        gateway = Gateway(gateway_config(emulator.url, work), work).start()
        try:
            client = gateway.client(timeout=600)
            for tokens in args.history:
                one(client, history(tokens, 0))  # warm: the renderer's processes, the emulator's grammar
                timings = [one(client, history(tokens, seed)) for seed in range(1, args.rounds + 1)]
                items = [item for item, _ in timings]
                ends = [end for _, end in timings]
                print(
                    f"history ~{tokens:>7,} tokens: compaction item after {statistics.median(items) * 1000:7.1f} ms "
                    f"(min {min(items) * 1000:.1f}), response.completed after {statistics.median(ends) * 1000:7.1f} ms "
                    f"(median of {args.rounds})"
                )
        finally:
            gateway.stop()
            emulator.stop()


if __name__ == "__main__":
    main()
