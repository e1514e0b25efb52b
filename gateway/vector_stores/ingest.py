"""Ingestion: the files added to vector stores read, chunked, embedded and indexed, in the background.

Each replica runs `ingest_concurrency` workers. A worker claims the oldest file waiting (chunk_index.py
`claim`: nobody's, or a replica's whose lease ran out, so a replica killed mid-file has its files taken
over), reads it within its bounds, extracts and chunks its text in a worker process, embeds the chunks
where an embeddings endpoint is configured, and writes them in one step fenced by its claim: a file
cancelled, removed or taken over meanwhile is left as it is. A file that cannot be read fails alone,
with `last_error`; the next one goes on.
"""

from __future__ import annotations

import logging
from typing import Awaitable, Callable

import anyio

from runtime.cpu import run_cpu
from runtime.isolation import TooCostly, run_isolated

from ..config import FilesConfig, VectorStoresConfig
from ..files.blobs import Blobs
from ..files.inputs import Refusal, read_bounded
from ..storage import Database, StorageError
from ..storage.chunk_index import ChunkIndex, Written
from ..storage.vector_store_store import INGEST_CHANNEL, StoreFile
from .chunking import Chunking, file_chunks
from .embeddings import Embeddings, EmbeddingsFailed
from .reembed import embed_missing

log = logging.getLogger("gateway.vector_stores")

POLL_S = 2.0  # idle workers look again this often (files of a replica that died wait no longer than its lease)


class Ingestor:
    def __init__(
        self,
        config: VectorStoresConfig,
        files: FilesConfig,
        db: Database,
        index: ChunkIndex,
        blobs: Blobs,
        embeddings: Embeddings | None,
        replica: str,
        live: Callable[[], Awaitable[set[str]]],
        embedded: Callable[[str, int], None],
    ) -> None:
        self.config, self.files = config, files
        self.index, self.blobs, self.embeddings = index, blobs, embeddings
        self.replica, self.live, self.embedded = replica, live, embedded
        self._waiting = anyio.Event()
        db.listen(INGEST_CHANNEL, lambda _: self._waiting.set())

    async def run(self) -> None:
        """Run for the app's lifetime."""
        async with anyio.create_task_group() as workers:
            for _ in range(self.config.ingest_concurrency):
                workers.start_soon(self._worker)
            if self.index.indexable:
                workers.start_soon(self.index.keep_index)
            if self.embeddings is not None and self.index.vectors:
                assert self.config.embeddings is not None
                workers.start_soon(embed_missing, self.index, self.embeddings, self.config.embeddings.batch_size, self.embedded)

    async def _worker(self) -> None:
        while True:
            try:
                claimed = await self.index.claim(self.replica, await self.live())
            except StorageError as exc:
                log.warning("cannot look for files to ingest: %s", exc)
                claimed = None
            if claimed is None:
                with anyio.move_on_after(POLL_S):
                    await self._waiting.wait()
                if self._waiting.is_set():
                    self._waiting = anyio.Event()
                continue
            file, blob = claimed
            try:
                await self.ingest(file, blob)
            except StorageError as exc:  # let it go: this or another replica takes it again
                log.warning("ingesting %s failed for now: %s", file.id, exc)
                with anyio.CancelScope(shield=True), anyio.move_on_after(POLL_S):
                    await self.index.release(file, self.replica)
                await anyio.sleep(POLL_S)
            except Exception:  # a fault of the gateway's own: this file fails, the others go on
                log.exception("ingesting %s failed", file.id)
                await self.index.fail(file, self.replica, "server_error", "The file could not be indexed (an error of the gateway's).")

    async def ingest(self, file: StoreFile, blob: str | None) -> None:
        if blob is None:
            await self.index.fail(file, self.replica, "invalid_file", "The file was deleted before it could be read.")
            return
        chunks = await self._chunks(file, blob)
        if isinstance(chunks, Refusal):
            await self.index.fail(file, self.replica, chunks.code, chunks.message)
            return
        vectors = None
        if self.embeddings is not None and self.index.vectors and chunks:
            try:
                vectors = await self.embeddings.embed(chunks)
            except EmbeddingsFailed as exc:
                await self.index.fail(file, self.replica, "server_error", str(exc))
                return
        usage = await run_cpu(_bytes_of, chunks)  # megabytes of text: not on the event loop
        outcome = await self.index.complete(file, self.replica, Written(chunks, vectors, usage), self.config.tenant_quota_bytes)
        log.info("vector store %s: file %s %s (%d chunks)", file.vector_store_id, file.id, outcome, len(chunks))

    async def _chunks(self, file: StoreFile, blob: str) -> list[str] | Refusal:
        """The file's chunks, or why it has none: read within its bounds, cut in a worker process."""
        config = self.config
        pdf, data = await read_bounded(self.blobs, blob, self.files.max_input_pdf_bytes, config.max_file_chars * 4)
        if data is None:
            limit = self.files.max_input_pdf_bytes if pdf else config.max_file_chars * 4
            return Refusal("invalid_file", f"The file is larger than {limit} bytes, the most indexed here for a file of its kind.")
        static = file.chunking.get("static") or {}
        chunking = Chunking(static.get("max_chunk_size_tokens", 800), static.get("chunk_overlap_tokens", 400))
        try:
            chunks = await run_isolated(
                config.ingest_timeout_s, file_chunks, file.filename, data, config.max_file_chars, chunking, tenant=file.tenant, background=True
            )
        except TooCostly as exc:
            return Refusal("invalid_file", f"The file's text could not be extracted: {exc}.")
        if isinstance(chunks, Refusal) and chunks.code not in ("unsupported_file", "invalid_file"):
            return Refusal("invalid_file", chunks.message)  # last_error's codes are OpenAI's three
        return chunks


def _bytes_of(chunks: list[str]) -> int:
    return sum(len(chunk.encode()) for chunk in chunks)
