"""`open_vector_stores` makes the vector stores at start-up: the chunk index (words always; vectors where an embeddings
endpoint is configured, checked against what the stored vectors were made with), the search, and the
ingestion workers that run for the app's lifetime.
"""

from __future__ import annotations

from typing import Awaitable, Callable

from ..config import GatewayConfig
from ..files.service import FileService
from ..metrics import Metrics
from ..storage import Database
from ..storage.chunk_index import ChunkIndex
from ..storage.vector_store_store import VectorStoreStore
from .embeddings import Embeddings
from .ingest import Ingestor
from .search import Searcher
from .service import VectorStoreService


async def open_vector_stores(
    config: GatewayConfig, database: Database, files: FileService, replica: str, live: Callable[[], Awaitable[set[str]]], metrics: Metrics
) -> tuple[VectorStoreService, Ingestor]:
    """The service and the ingestor (run it as a task); VectorsUnavailable where embeddings are configured
    and the database cannot hold vectors, or holds another model's."""
    section = config.vector_stores
    index = ChunkIndex(database, section.search_timeout_s, section.exact_search_below)
    embeddings = None
    if section.embeddings is not None:
        await index.prepare_vectors(section.embeddings.model, section.embeddings.dimensions)
        embeddings = Embeddings(section.embeddings)
    service = VectorStoreService(section, VectorStoreStore(database), index, Searcher(index, embeddings), files)
    ingestor = Ingestor(section, config.files, database, index, files.blobs, embeddings, replica, live, metrics.chunks_embedded)
    return service, ingestor
