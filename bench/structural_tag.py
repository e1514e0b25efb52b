"""Cost of the grammar each engine call is sent with (not a timed test; prints figures).

For 1, 20 and 200 strict functions of three typed parameters each, a strict `text.format` and a python
tool beside them:
  * the gateway's time to make the structural tag: per response (the tools' call shapes made and the tag
    written) and per continuation after a tool's output whose tools did not change (loop/constraint.py
    compares the shapes and keeps the tag);
  * xgrammar's time to compile that tag with gpt-oss's vocabulary (tests/grammar_check.py): what the
    engine spends on it before the call's first token (vLLM caches a compiled grammar by its tag).
Run: .venv/bin/python bench/structural_tag.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.engine.structural_tag import TEXT, CallShape, json_schema  # noqa: E402
from gateway.responses.loop.constraint import TurnConstraint  # noqa: E402
from gateway.responses.shapes.request import ResponsesRequest  # noqa: E402
from tests import grammar_check  # noqa: E402

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False}


def parameters(index: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            f"name_{index}": {"type": "string"},
            "count": {"type": "integer"},
            "unit": {"type": "string", "enum": ["c", "f"]},
        },
        "required": [f"name_{index}", "count", "unit"],
        "additionalProperties": False,
    }


class Shapes:
    """The toolset as the constraint sees it: the call shapes of `count` functions and python, made per
    response as the tools make them (client.py keeps each function's shape for the rest of the run)."""

    def __init__(self, count: int) -> None:
        self.shapes = [CallShape(f"functions.f{index}", json_schema(parameters(index))) for index in range(count)]
        self.shapes.append(CallShape("python", TEXT, any_name=True))

    def call_shapes(self) -> list[CallShape]:
        return list(self.shapes)


def microseconds(samples: list[float]) -> str:
    return f"median {statistics.median(samples) * 1e6:8.1f} µs, p90 {sorted(samples)[int(len(samples) * 0.9)] * 1e6:8.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    request = ResponsesRequest.model_validate(
        {"model": "openai/gpt-oss-20b", "input": "hi", "text": {"format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": True}}}
    )
    for count in (1, 20, 200):
        per_response, per_continuation = [], []
        tag = ""
        for _ in range(args.repeat):
            started = time.perf_counter()
            toolset = Shapes(count)
            constraint = TurnConstraint(request, SimpleNamespace(call_shapes=toolset.call_shapes))  # type: ignore[arg-type]
            tag = constraint.tag(tool_called=False, prefill="") or ""
            per_response.append(time.perf_counter() - started)
            started = time.perf_counter()
            constraint.tag(tool_called=False, prefill="")
            per_continuation.append(time.perf_counter() - started)
        grammar_check.compiled(tag)  # the vocabulary, once
        compiles = []
        for _ in range(3):
            grammar_check.clear_compiler_cache()
            started = time.perf_counter()
            grammar_check.compiled(tag)
            compiles.append(time.perf_counter() - started)
        print(f"{count:4d} functions: tag {len(tag):7d} bytes")
        print(f"      per response      {microseconds(per_response)}")
        print(f"      per continuation  {microseconds(per_continuation)}")
        print(f"      xgrammar compile  median {statistics.median(compiles) * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
