"""Chunks without vectors embedded in the background: those ingested before an embeddings endpoint was
configured, and every chunk once the model changed (chunk_index.py drops another model's vectors).

Each replica makes one pass over them in seq order, a batch at a time, and stops: a chunk ingested meanwhile
comes with its vector. Replicas passing together may embed a batch twice; only the first write lands. A batch
the endpoint keeps refusing is skipped after a few tries (its chunks are still found by words), so one
unembeddable chunk cannot stop the rest.
"""

from __future__ import annotations

import logging
from typing import Callable

import anyio

from ..storage import StorageError
from ..storage.chunk_index import ChunkIndex
from .embeddings import Embeddings, EmbeddingsFailed

log = logging.getLogger("gateway.vector_stores")

TRIES = 3
RETRY_S = 2.0


async def embed_missing(index: ChunkIndex, embeddings: Embeddings, batch: int, counted: Callable[[str, int], None]) -> None:
    """`counted(outcome, chunks)`: embedded, or skipped."""
    after = 0
    while True:
        try:
            chunks = await index.unembedded(after, batch)
        except StorageError as exc:
            log.warning("cannot look for chunks to embed: %s", exc)
            await anyio.sleep(RETRY_S)
            continue
        if not chunks:
            return
        counted(await _embedded(index, embeddings, chunks), len(chunks))
        after = chunks[-1][0]


async def _embedded(index: ChunkIndex, embeddings: Embeddings, chunks: list[tuple[int, str]]) -> str:
    for attempt in range(1, TRIES + 1):
        try:
            vectors = await embeddings.embed([text for _, text in chunks])
            await index.add_vectors([(seq, vector) for (seq, _), vector in zip(chunks, vectors)])
            return "embedded"
        except (StorageError, EmbeddingsFailed) as exc:
            if attempt == TRIES:
                log.error("embedding chunks %d to %d failed %d times, skipped (found by words only): %s", chunks[0][0], chunks[-1][0], attempt, exc)
                break
            log.warning("embedding chunks %d to %d failed for now: %s", chunks[0][0], chunks[-1][0], exc)
            await anyio.sleep(RETRY_S * attempt)
    return "skipped"
