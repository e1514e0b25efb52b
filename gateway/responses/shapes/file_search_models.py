"""The file_search tool's request models (`openai/types/responses/file_search_tool.py`), its named
`tool_choice`, and its call sent back as input (`response_file_search_tool_call_param.py`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ...core.models import StrictModel
from ...vector_stores.filters import Filter
from ...vector_stores.search import Ranking

MAX_STORES = 10  # searched by one tool


class HybridSearchWeights(StrictModel):
    embedding_weight: float = Field(ge=0)
    text_weight: float = Field(ge=0)


class FileSearchRanking(StrictModel):
    ranker: Literal["none", "auto", "default-2024-11-15"] | None = None
    score_threshold: float | None = Field(None, ge=0, le=1)
    hybrid_search: HybridSearchWeights | None = None

    def ranking(self) -> Ranking:
        hybrid = self.hybrid_search
        weights = (hybrid.embedding_weight, hybrid.text_weight) if hybrid is not None else (1.0, 1.0)
        return Ranking(self.score_threshold or 0.0, *weights)


def ranking_of(options: FileSearchRanking | None) -> Ranking:
    return options.ranking() if options is not None else Ranking()


class FileSearchTool(StrictModel):
    type: Literal["file_search"]
    vector_store_ids: list[str] = Field(min_length=1, max_length=MAX_STORES)
    max_num_results: int | None = Field(None, ge=1, le=50)
    ranking_options: FileSearchRanking | None = None
    filters: Filter | None = None


class NamedFileSearch(StrictModel):
    """Search the files first (the model writes the queries)."""

    type: Literal["file_search"]


class FileSearchCallItem(StrictModel):
    """A file search sent back as it came (clients that replay a response's output as input)."""

    type: Literal["file_search_call"]
    id: str | None = None
    queries: list[str] | None = None
    status: str | None = None
    results: list[dict[str, Any]] | None = None
