"""What the Vector Stores API and the file_search tool share: the records (storage/vector_store_store.py),
the chunks and their search (storage/chunk_index.py, search.py), the limits (config `vector_stores:`)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import anyio

from runtime.fair import FairLimiter

from ..config import VectorStoresConfig
from ..errors import bad_request, not_found
from ..files.service import FileService
from ..protocol import IngestStatus
from ..storage import StorageError, TooSlow
from ..storage.chunk_index import ChunkIndex, Scope
from ..storage.file_store import TooMany
from ..storage.vector_store_store import StoreFile, VectorStore, VectorStoreStore
from .filters import Filter, FilterError, attribute_rows, filter_sql
from .models import CreateStoreFile, chunking_of
from .search import Found, Ranking, Searcher

log = logging.getLogger("gateway.vector_stores")

SWEEP_BATCH = 500  # files of expired stores removed in one statement


@dataclass
class VectorStoreService:
    config: VectorStoresConfig
    store: VectorStoreStore
    index: ChunkIndex
    searcher: Searcher
    files: FileService
    searches: FairLimiter = field(init=False)  # tenants in turn, each within its share

    def __post_init__(self) -> None:
        self.searches = FairLimiter(self.config.max_concurrent_searches, self.config.max_searches_per_tenant)

    async def sweep(self) -> None:
        """Run for the app's lifetime: expired stores' files and chunks removed, a batch at a time (the stores
        stay, shown expired, empty)."""
        while True:
            await anyio.sleep(self.config.sweep_interval_s)
            try:
                while await self.store.sweep_expired(time.time(), SWEEP_BATCH) == SWEEP_BATCH:
                    pass
            except StorageError as exc:
                log.warning("removing expired vector stores' files failed; trying again later: %s", exc)

    async def close(self) -> None:
        if self.searcher.embeddings is not None:
            await self.searcher.embeddings.close()

    async def vector_store(self, store_id: str, tenant: str, param: str | None = None) -> VectorStore:
        found = await self.store.get(store_id, tenant)
        if found is None:
            raise not_found(f"No vector store found with id '{store_id}'.", param=param)
        return found

    async def searchable(self, store_ids: list[str], tenant: str, param: str) -> list[VectorStore]:
        """The tenant's stores that may be searched: a 404 for one it does not have, a 400 for one expired."""
        stores = []
        for index, store_id in enumerate(store_ids):
            store = await self.vector_store(store_id, tenant, f"{param}[{index}]")
            if store.expired():
                raise bad_request(f"Vector store '{store_id}' has expired and can no longer be searched.", param=f"{param}[{index}]")
            stores.append(store)
        return stores

    async def add_files(self, store: VectorStore, entries: list[CreateStoreFile], param: str, batch_id: str | None = None) -> list[StoreFile]:
        """Put files of the Files API in the store, to be ingested in the background (ingest.py)."""
        if store.expired():
            raise bad_request(f"Vector store '{store.id}' has expired.", param=param)
        added, rows = [], []
        for index, entry in enumerate(entries):
            where = f"{param}[{index}]" if len(entries) > 1 or batch_id is not None else param
            file = await self.files.file(entry.file_id, store.tenant, param=where)
            try:
                rows.append(attribute_rows(entry.attributes, "attributes"))
            except FilterError as exc:
                raise bad_request(f"Invalid attributes: {exc}.", param=f"{where}.attributes") from None
            chunking = chunking_of(entry.chunking_strategy).as_dict()
            added.append(
                StoreFile(
                    None,
                    store.id,
                    file.id,
                    store.tenant,
                    file.filename,
                    batch_id,
                    int(time.time()),
                    IngestStatus.IN_PROGRESS,
                    None,
                    0,
                    chunking,
                    entry.attributes or {},
                )
            )
        if added:
            try:
                await self.store.attach(added, rows, self.config.max_files_per_store)
            except TooMany as exc:
                raise self.files.too_many(exc, param) from None
        return added

    async def search(
        self, stores: list[VectorStore], queries: list[str], filters: Filter | None, max_results: int, ranking: Ranking, param: str = "filters"
    ) -> list[Found]:
        try:
            sql, params = filter_sql(filters)
        except FilterError as exc:
            raise bad_request(f"Invalid filters: {exc}.", param=param) from None
        store_ids = [store.id for store in stores]
        tenant = stores[0].tenant if stores else ""
        try:
            async with self.searches.slot(tenant):
                found = await self.searcher.search(Scope(store_ids, sql, params), queries, max_results, ranking)
        except TooSlow:
            raise bad_request(
                f"The search took longer than {self.config.search_timeout_s:g} s: narrow its filters or its queries.",
                param=param,
                code="search_too_costly",
            ) from None
        await self.store.touch(store_ids)
        return found
