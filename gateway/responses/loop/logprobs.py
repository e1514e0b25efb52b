"""Log probabilities of the answer's tokens, as OpenAI reports them: per token its text, bytes, logprob
and the most likely alternatives. vLLM sends them per generated token (with token ids, not text); only
the tokens of a visible message's content are reported, never Harmony's headers or the reasoning.

Asking for logprobs costs per-token work (the parser is fed one token at a time, to know which tokens
are content), so it is done only for requests that ask.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

from ...engine.completion import EngineChunk, TokenLogprob
from ...engine.harmony import encoding
from ...engine.parser import HarmonyStreamParser, MessageFinished, MessageStarted, ParsedEvent
from ...engine.vocab import token_bytes

MAX_TOP_LOGPROBS = 20  # OpenAI's bound, on both APIs

_table_lock = threading.Lock()
_table: list[bytes] | None = None  # every ordinary token's bytes by id, once logprobs were first asked for


@dataclass(slots=True)
class ContentLogprob:
    """The logprob entry of one content token, placed before the text delta that token produced."""

    entry: dict[str, Any]


def load_vocabulary() -> None:
    """Build the token table, once per process (call it in a worker thread before the first use)."""
    global _table
    with _table_lock:
        if _table is None:
            _table = token_bytes()


@functools.lru_cache(maxsize=65536)
def _token(token_id: int) -> tuple[str, list[int]]:
    table = _table
    assert table is not None, "load_vocabulary() runs before the first logprobs are reported"
    raw = table[token_id] if token_id < len(table) and table[token_id] else encoding().decode([token_id]).encode()
    return raw.decode("utf-8", errors="replace"), list(raw)


def _entry(token_id: int, logprob: float, top: list[tuple[int, float]], count: int) -> dict[str, Any]:
    text, raw = _token(token_id)
    alternatives = []
    for other, value in sorted(top, key=lambda pair: -pair[1])[:count]:
        other_text, other_raw = _token(other)
        alternatives.append({"token": other_text, "logprob": value, "bytes": other_raw})
    return {"token": text, "logprob": logprob, "bytes": raw, "top_logprobs": alternatives}


def parse_with_logprobs(parser: HarmonyStreamParser, chunk: EngineChunk, count: int) -> list[ParsedEvent | ContentLogprob]:
    """The chunk's parsed events, with each content token's logprob entry just before its text."""
    events: list[ParsedEvent | ContentLogprob] = []
    logprobs: list[TokenLogprob | None] = chunk.logprobs or []
    for position, token in enumerate(chunk.token_ids):
        parsed = parser.feed([token])
        structural = any(type(event) in (MessageStarted, MessageFinished) for event in parsed)
        known = logprobs[position] if position < len(logprobs) else None
        if parser.in_content and not structural and known is not None:
            events.append(ContentLogprob(_entry(token, known.logprob, known.top, count)))
        events.extend(parsed)
    return events
