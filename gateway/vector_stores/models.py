"""The Vector Stores API's request bodies, field for field as the openai SDK sends them
(`openai/types/vector_store_*_params.py`, `openai/types/vector_stores/*_params.py`)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from ..core.models import Metadata, StrictModel
from .chunking import MAX_CHUNK_TOKENS, MIN_CHUNK_TOKENS, Chunking
from .filters import Filter
from .search import Ranking

MAX_FILE_IDS = 500  # in one create or batch, as OpenAI takes them
MAX_QUERIES, MAX_QUERY_CHARS = 10, 4096
AttributeValues = dict[str, Union[bool, float, str]]


class AutoChunking(StrictModel):
    type: Literal["auto"]

    def chunking(self) -> Chunking:
        return Chunking()


class StaticSizes(StrictModel):
    max_chunk_size_tokens: int = Field(ge=MIN_CHUNK_TOKENS, le=MAX_CHUNK_TOKENS)
    chunk_overlap_tokens: int = Field(ge=0)

    @model_validator(mode="after")
    def _half_at_most(self) -> StaticSizes:
        if self.chunk_overlap_tokens > self.max_chunk_size_tokens // 2:
            raise ValueError("chunk_overlap_tokens must not exceed half of max_chunk_size_tokens")
        return self


class StaticChunking(StrictModel):
    type: Literal["static"]
    static: StaticSizes

    def chunking(self) -> Chunking:
        return Chunking(self.static.max_chunk_size_tokens, self.static.chunk_overlap_tokens)


ChunkingStrategy = Annotated[Union[AutoChunking, StaticChunking], Field(discriminator="type")]


def chunking_of(strategy: AutoChunking | StaticChunking | None) -> Chunking:
    return strategy.chunking() if strategy is not None else Chunking()


class ExpiresAfter(StrictModel):
    anchor: Literal["last_active_at"]
    days: int = Field(ge=1, le=365)


class CreateVectorStore(StrictModel):
    name: str | None = Field(None, max_length=256)
    description: str | None = Field(None, max_length=512)
    file_ids: list[str] | None = Field(None, max_length=MAX_FILE_IDS)
    metadata: Metadata | None = None
    expires_after: ExpiresAfter | None = None
    chunking_strategy: ChunkingStrategy | None = None


class UpdateVectorStore(StrictModel):
    name: str | None = Field(None, max_length=256)
    metadata: Metadata | None = None
    expires_after: ExpiresAfter | None = None


class CreateStoreFile(StrictModel):
    file_id: str = Field(max_length=200)
    attributes: AttributeValues | None = None
    chunking_strategy: ChunkingStrategy | None = None


class UpdateStoreFile(StrictModel):
    attributes: AttributeValues | None


class CreateFileBatch(StrictModel):
    file_ids: list[str] | None = Field(None, min_length=1, max_length=MAX_FILE_IDS)
    files: list[CreateStoreFile] | None = Field(None, min_length=1, max_length=MAX_FILE_IDS)
    attributes: AttributeValues | None = None
    chunking_strategy: ChunkingStrategy | None = None

    @model_validator(mode="after")
    def _one_list(self) -> CreateFileBatch:
        if (self.file_ids is None) == (self.files is None):
            raise ValueError("give exactly one of file_ids and files")
        return self

    def entries(self) -> list[CreateStoreFile]:
        """Each file with its attributes and chunking (a file's own, or the batch's)."""
        if self.files is not None:
            return [
                CreateStoreFile(
                    file_id=each.file_id,
                    attributes=each.attributes if each.attributes is not None else self.attributes,
                    chunking_strategy=each.chunking_strategy or self.chunking_strategy,
                )
                for each in self.files
            ]
        return [
            CreateStoreFile(file_id=file_id, attributes=self.attributes, chunking_strategy=self.chunking_strategy) for file_id in self.file_ids or []
        ]


class HybridSearchWeights(StrictModel):
    embedding_weight: float = Field(ge=0)
    text_weight: float = Field(ge=0)


class RankingOptions(StrictModel):
    """`ranking_options` of a search and of the file_search tool."""

    ranker: Literal["none", "auto", "default-2024-11-15"] | None = None
    score_threshold: float | None = Field(None, ge=0, le=1)
    hybrid_search: HybridSearchWeights | None = None

    def ranking(self) -> Ranking:
        hybrid = self.hybrid_search
        weights = (hybrid.embedding_weight, hybrid.text_weight) if hybrid is not None else (1.0, 1.0)
        return Ranking(self.score_threshold or 0.0, *weights)


def ranking_of(options: RankingOptions | None) -> Ranking:
    return options.ranking() if options is not None else Ranking()


class SearchVectorStore(StrictModel):
    query: Union[str, list[str]]
    filters: Filter | None = None
    max_num_results: int = Field(10, ge=1, le=50)
    ranking_options: RankingOptions | None = None
    # Accepted; the query is searched as written (there is no model here to rewrite it).
    rewrite_query: bool | None = None

    @model_validator(mode="after")
    def _bounded(self) -> SearchVectorStore:
        queries = [self.query] if isinstance(self.query, str) else self.query
        if len(queries) > MAX_QUERIES or any(len(query) > MAX_QUERY_CHARS for query in queries):
            raise ValueError(f"query holds {MAX_QUERIES} queries at most, each of {MAX_QUERY_CHARS} characters at most")
        return self

    def queries(self) -> list[str]:
        queries = [self.query] if isinstance(self.query, str) else self.query
        return [query for query in queries if query.strip()]
