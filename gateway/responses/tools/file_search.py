"""`file_search`: the request's vector stores, searched by the model (gateway/vector_stores/).

Declared to gpt-oss as a built-in namespace beside its browser, `file_search`, with one function,
`msearch({"queries": [...]})`: several queries at once, as the model rephrases a question more than one
way, and one call's worth of engine turns. Its results read like the browser's search results: each a
numbered source, `【N†FILENAME】` over its text, and the model cites one as it cites a page, `【N†FILENAME】`,
which becomes a `file_citation` of the answer. Numbers go on across the response's searches (the dialog's
state keeps them), so a citation always names one passage.

Each call streams as a `file_search_call`: in progress when the model starts it, searching once its
queries are written, completed with its queries (and its results, with `include: ["file_search_call.results"]`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

import orjson

from connectors.browser.pages import plain_brackets

from ...engine.harmony import ToolDescription, ToolNamespaceConfig
from ...engine.structural_tag import CallShape, json_schema
from ...errors import APIError, bad_request
from ...protocol import EventType, Include, ItemStatus
from ...storage.vector_store_store import VectorStore
from ...vector_stores.filters import FilterError, filter_sql
from ...vector_stores.models import ranking_of
from ...vector_stores.search import Found
from ..events.citations import Cited, FileCitation, Resolve
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, Records
from ..shapes.file_search_models import FileSearchCallItem, FileSearchTool, NamedFileSearch
from ..shapes.items import Event, Events, OutputItem
from ..shapes.output_items import FileSearchCallShape
from ..shapes.request import ToolChoiceForm
from .base import Declarations, Tool, ToolContext
from .search_call import SearchCallOutput

NAMESPACE, FUNCTION = "file_search", "msearch"
MAX_QUERIES, MAX_QUERY_CHARS = 5, 1000
DEFAULT_RESULTS = 10  # OpenAI's default for the tool
SHOWN_CHARS = 24_000  # of the results' text, for one call: the model's context is not the files'
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"queries": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_QUERIES}},
    "required": ["queries"],
    "additionalProperties": False,
}
DESCRIPTION = (
    "Search the files the user provided. Call msearch with one to five queries, each complete on its own "
    "(rephrase the question more than one way when that helps). Results are numbered passages. Cite a passage "
    "you use as 【N†FILENAME】, exactly as its result is headed, right after the sentence it supports."
)


@dataclass
class FileSearchState:
    """The file_search part of the dialog's state (dialog.py `ToolState`): the passages shown, by number."""

    sources: list[dict[str, str]] = field(default_factory=list)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> FileSearchState:
        return cls(list(stored.get("file_search_sources") or []))

    def to_json(self) -> dict[str, Any]:
        return {"file_search_sources": self.sources}

    def copy(self) -> FileSearchState:
        return FileSearchState(list(self.sources))


class FileSearchCallOutput(SearchCallOutput):
    type = "file_search_call"
    id_prefix = "fs"
    in_progress_event = EventType.FILE_SEARCH_CALL_IN_PROGRESS
    searching_event = EventType.FILE_SEARCH_CALL_SEARCHING
    completed_event = EventType.FILE_SEARCH_CALL_COMPLETED

    def __init__(self, output_index: int, show_results: bool) -> None:
        super().__init__(output_index)
        self.show_results = show_results  # `include: ["file_search_call.results"]`
        self.queries: list[str] = []
        self.results: list[dict[str, Any]] = []

    def finished(self, events: Events, queries: list[str], results: list[dict[str, Any]], failed: bool) -> list[Event]:
        self.queries, self.results = queries, results
        return self.ended(events, failed)

    def as_dict(self) -> FileSearchCallShape:
        shown = self.show_results and self.status == ItemStatus.COMPLETED
        return {"id": self.id, "type": "file_search_call", "status": self.status, "queries": self.queries, "results": self.results if shown else None}


def _read_file_search_call(dialog: Dialog, index: int, item: FileSearchCallItem, records: Records) -> None:
    # As the browser's calls: listed, while the model reads the answer that cited them.
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or FileSearchCallOutput.fresh_id()})


class FileSearch(Tool[FileSearchTool]):
    request_types = (FileSearchTool,)
    namespaces = frozenset({NAMESPACE})
    includes = (Include.FILE_SEARCH_RESULTS,)
    choices = (NamedFileSearch,)
    metric = "file_search"
    produces = (FileSearchCallOutput,)
    reads = {FileSearchCallItem: _read_file_search_call}

    def __init__(self, context: ToolContext, declared: list[FileSearchTool]) -> None:
        super().__init__(context, declared)
        if len(self.declared) > 1:
            raise bad_request("Declare the file_search tool once (it takes several vector_store_ids).", param="tools")
        self.tool: FileSearchTool | None = self.declared[0] if self.declared else None
        self.stores: list[VectorStore] = []

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        tool = self.tool
        if tool is None:
            return
        param = self.param(tool)
        try:
            filter_sql(tool.filters)
        except FilterError as exc:
            raise bad_request(f"Invalid filters: {exc}.", param=f"{param}.filters") from None
        service = self.context.services.vector_stores
        self.stores = await service.searchable(tool.vector_store_ids, self.context.tenant, f"{param}.vector_store_ids")

    def recipients(self) -> Iterable[str]:
        return self.namespaces if self.tool is not None else ()

    def call_shapes(self) -> Iterable[CallShape]:
        return [CallShape(f"{NAMESPACE}.{FUNCTION}", json_schema(PARAMETERS))] if self.tool is not None else []

    def check_choice(self, choice: ToolChoiceForm) -> None:
        if self.tool is None:
            raise bad_request("tool_choice is file_search, which is not in tools.", param="tool_choice.type")

    def forced_header(self, choice: str | ToolChoiceForm) -> str | None:
        if isinstance(choice, NamedFileSearch):  # the model writes the queries
            return f"<|channel|>analysis to={NAMESPACE}.{FUNCTION} <|constrain|>json<|message|>"
        return None

    def declare(self, declarations: Declarations) -> None:
        if self.tool is not None and self.context.enabled:
            function = ToolDescription.new(
                FUNCTION, "Search the files with one or more queries; returns the passages that match best.", parameters=PARAMETERS
            )
            declarations.system.append(ToolNamespaceConfig(name=NAMESPACE, description=DESCRIPTION, tools=[function]))

    def citations(self) -> Resolve | None:
        return self.cited if self.tool is not None else None

    def cited(self, number: int, locator: str) -> Cited | None:
        """A passage's citation (citations.py): its number, and the filename it was shown under."""
        sources = self.dialog.tool_state(FileSearchState).sources
        if not 0 <= number < len(sources) or locator.strip() != plain_brackets(sources[number]["filename"]):
            return None
        return FileCitation(sources[number]["file_id"], sources[number]["filename"])

    def open_call(self, call: ToolCall, name: str) -> OutputItem | None:
        if not self.context.enabled or self.tool is None:
            return super().open_call(call, name)
        if name != FUNCTION:
            call.refuse(f"file_search has no function '{name}'; use {NAMESPACE}.{FUNCTION}.")
            return None
        if not self.context.budget.take(call):
            return None
        call.tool_name = name
        shown = self.context.includes(Include.FILE_SEARCH_RESULTS)
        item = self.context.output.add(lambda index: FileSearchCallOutput(index, shown))
        return call.claim(self, CallKind.HOSTED, item)

    async def written(self, call: ToolCall, text: str) -> list[Event]:
        assert isinstance(call.item, FileSearchCallOutput)
        call.arguments = text
        return call.item.running(self.context.output.events)

    async def resume(self, call: ToolCall) -> None:
        await self.run(call)  # it only reads: searched again

    async def run(self, call: ToolCall) -> None:
        item, tool = call.item, self.tool
        assert isinstance(item, FileSearchCallOutput) and tool is not None
        output = self.context.output
        queries = _queries(call.arguments or "")
        if isinstance(queries, str):
            call.output = f"Error: {queries}"
            output.emit(item.finished(output.events, [], [], failed=True))
            return
        service, limit = self.context.services.vector_stores, tool.max_num_results or DEFAULT_RESULTS
        try:
            found = await service.search(self.stores, queries, tool.filters, limit, ranking_of(tool.ranking_options))
        except APIError as exc:  # a search past its time limit: the call fails, the model is told why
            if exc.code != "search_too_costly":
                raise
            call.output = f"Error: {exc.message}"
            output.emit(item.finished(output.events, queries, [], failed=True))
            return
        call.output = self._shown(queries, found)
        results = [
            {"file_id": f.chunk.file_id, "filename": f.chunk.filename, "score": f.score, "text": f.chunk.text, "attributes": f.chunk.attributes}
            for f in found
        ]
        output.emit(item.finished(output.events, queries, results, failed=False))

    def _shown(self, queries: list[str], found: list[Found]) -> str:
        """The results as the model reads them: numbered passages, within SHOWN_CHARS in all."""
        state = self.dialog.tool_state(FileSearchState)
        lines = [f"Results for: {plain_brackets(' | '.join(queries))}"]
        budget = SHOWN_CHARS
        for each in found:
            if budget <= 0:
                break
            text = plain_brackets(each.chunk.text[:budget])  # a file cannot forge a citation
            budget -= len(text)
            number = len(state.sources)
            state.sources.append({"file_id": each.chunk.file_id, "filename": each.chunk.filename})
            lines.append(f"\n【{number}†{plain_brackets(each.chunk.filename)}】\n{text}")
        if not found:
            lines.append("No passage of the files matches.")
        return "\n".join(lines)


def _queries(arguments: str) -> list[str] | str:
    """The call's queries, or what is wrong with them (the model is told, and may try again)."""
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return 'the arguments are not JSON: write {"queries": ["...", "..."]}.'
    raw = parsed.get("queries", parsed.get("query")) if isinstance(parsed, dict) else None
    raw = [raw] if isinstance(raw, str) else raw
    if not isinstance(raw, list) or not raw or not all(isinstance(query, str) for query in raw):
        return 'give "queries", a list of one to five strings.'
    queries = [query.strip()[:MAX_QUERY_CHARS] for query in raw if query.strip()][:MAX_QUERIES]
    return queries or "every query is empty."
