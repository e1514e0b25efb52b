"""A file's text cut into chunks as OpenAI's vector stores cut them: windows of the model's tokens (the
gpt-oss tokenizer, o200k), each overlapping the one before. `auto` is 800 tokens with 400 of overlap.

Everything here runs in a worker process (runtime/isolation.py), bounded in time and memory: the file is
hostile input (a PDF that draws one huge content stream, HTML nested a million deep), and tokenizing
megabytes of text must not hold the event loop's thread either.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import trafilatura
from openai_harmony import HarmonyEncoding

from ..engine import harmony
from ..files.inputs import Refusal, file_text

AUTO_MAX_TOKENS, AUTO_OVERLAP_TOKENS = 800, 400
MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS = 100, 4096
HTML_SUFFIXES = (".html", ".htm")


@dataclass(frozen=True)
class Chunking:
    """A file's chunking strategy (`static` with its sizes; `auto` is static at 800/400)."""

    max_tokens: int = AUTO_MAX_TOKENS
    overlap_tokens: int = AUTO_OVERLAP_TOKENS

    def as_dict(self) -> dict[str, object]:
        static = {"max_chunk_size_tokens": self.max_tokens, "chunk_overlap_tokens": self.overlap_tokens}
        return {"type": "static", "static": static}


@functools.cache
def _encoding() -> HarmonyEncoding:
    return harmony.encoding()  # once per worker process


def file_chunks(name: str, data: bytes, max_chars: int, chunking: Chunking) -> list[str] | Refusal:
    """The chunks of a file's text, or why it has none to give (an empty file has no chunks)."""
    text = file_text(name, data, max_chars)
    if isinstance(text, Refusal):
        return text
    if name.lower().endswith(HTML_SUFFIXES):
        text = trafilatura.extract(text, output_format="markdown", favor_recall=True) or trafilatura.html2txt(text) or ""
    return chunks_of(text, chunking)


def chunks_of(text: str, chunking: Chunking) -> list[str]:
    encoding = _encoding()
    # A `<|...|>` in a file is text, never a special token; long runs are cut first (quadratic in BPE).
    tokens = harmony.encode_text(text)
    step = chunking.max_tokens - chunking.overlap_tokens
    chunks: list[str] = []
    for start in range(0, len(tokens), step):
        chunk = encoding.decode(tokens[start : start + chunking.max_tokens]).strip()
        if chunk:
            chunks.append(chunk)
        if start + chunking.max_tokens >= len(tokens):
            break
    return chunks
