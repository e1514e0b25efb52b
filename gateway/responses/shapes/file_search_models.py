"""The file_search tool's request models (`openai/types/responses/file_search_tool.py`), its named
`tool_choice`, and its call sent back as input (`response_file_search_tool_call_param.py`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from ...core.models import StrictModel
from ...vector_stores.filters import Filter
from ...vector_stores.models import RankingOptions

MAX_STORES = 10  # searched by one tool


class FileSearchTool(StrictModel):
    type: Literal["file_search"]
    vector_store_ids: list[str] = Field(min_length=1, max_length=MAX_STORES)
    max_num_results: int | None = Field(None, ge=1, le=50)
    ranking_options: RankingOptions | None = None
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
