"""xgrammar, the grammar engine vLLM uses, over gpt-oss's vocabulary: compiles a structural tag as vLLM
would and says whether a completion's tokens are ones it lets through.

Tests only: xgrammar imports torch, which the gateway never needs (it only writes the tag's JSON). The
vocabulary is the o200k Harmony one the gateway already has (gateway/engine/vocab.py): the tiktoken ranks'
bytes, and Harmony's special tokens as their text, as vLLM's tokenizer gives them to xgrammar.
"""

from __future__ import annotations

import base64
import functools
import importlib.util
import threading
from typing import Any

from gateway.engine import harmony
from gateway.engine.vocab import VOCAB_FILE, ensure_vocabulary

VOCABULARY_SIZE = 201088
STOP_TOKEN_IDS = (harmony.RETURN, 200012, 199999)  # <|return|>, <|call|>, <|endoftext|>


class InvalidTag(ValueError):
    """vLLM's 400: the tag is not one xgrammar compiles."""


_lock = threading.Lock()


def available() -> bool:
    """Whether xgrammar is installed here (the test venv has it; the gateway's image, where the compose test
    runs the emulator, does not: there the emulator is an engine without structured outputs)."""
    return importlib.util.find_spec("xgrammar") is not None


def warm() -> None:
    """Load xgrammar and the vocabulary ahead of the first request (seconds: torch is imported)."""
    if available():
        _compiler()


def _compiler() -> Any:
    with _lock:  # one load, however many requests arrive while it runs
        return _load()


@functools.cache
def _load() -> Any:
    import xgrammar

    ranks: dict[int, bytes] = {}
    with open(ensure_vocabulary() / VOCAB_FILE, "rb") as file:
        for line in file:
            token, rank = line.split()
            ranks[int(rank)] = base64.b64decode(token)
    encoding = harmony.encoding()
    special = range(min(STOP_TOKEN_IDS), VOCABULARY_SIZE)
    vocabulary = [ranks.get(i) or (encoding.decode([i]).encode() if i in special else b"") for i in range(VOCABULARY_SIZE)]
    info = xgrammar.TokenizerInfo(vocabulary, vocab_type=xgrammar.VocabType.RAW, vocab_size=VOCABULARY_SIZE, stop_token_ids=list(STOP_TOKEN_IDS))
    return xgrammar.GrammarCompiler(info)


@functools.lru_cache(maxsize=256)
def compiled(tag: str) -> Any:
    try:
        return _compiler().compile_structural_tag(tag)
    except Exception as exc:  # xgrammar raises several kinds for a tag it cannot read
        raise InvalidTag(str(exc)) from None


def accepts(tag: str, tokens: list[int]) -> bool:
    """Whether the tag lets the model write `tokens` (ended by a stop token, or cut short by max_tokens)."""
    import xgrammar

    matcher = xgrammar.GrammarMatcher(compiled(tag))
    for token in tokens:
        if not matcher.accept_token(token):
            return False
        if matcher.is_terminated():
            return True
    return True


def clear_compiler_cache() -> None:
    """Forget every compiled grammar (xgrammar keeps its own cache too): for timing a compile."""
    compiled.cache_clear()
    _compiler().clear_cache()
