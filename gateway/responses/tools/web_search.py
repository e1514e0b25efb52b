"""`web_search`: gpt-oss's built-in `browser` (search, open, find), run by the gateway (tools/browser/) on
gateways with a `browser` section. Each call streams as a `web_search_call`; the pages the model saw stay
in the dialog, for the model to open their links and cite them in later responses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from connectors.browser.session import ACTIONS, BrowseOptions, Browser

from ...engine.harmony import ToolNamespaceConfig
from ...engine.structural_tag import JSON_OBJECT, CallShape
from ...errors import bad_request
from ...protocol import EventType, Include, ItemStatus
from ..events.citations import LINES, Cited, Resolve, UrlCitation
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, Records
from ..shapes.input_models import WebSearchCallItem
from ..shapes.items import Event, Events, OutputItem
from ..shapes.output_items import WebSearchCallShape
from ..shapes.request import NamedWebSearch, ToolChoiceForm
from ..shapes.tool_models import WEB_SEARCH_TYPES, RequestTool, WebSearchTool
from .base import Declarations, Tool, ToolContext, ToolNeeds
from .search_call import SearchCallOutput

VIEW_CHARS = {"low": 2000, "medium": 4000, "high": 8000}  # search_context_size: how much of a page a view shows


@dataclass
class BrowserState:
    """The browser's part of the dialog's state (dialog.py `ToolState`): its pages by cursor, without
    their text (tools/browser/pages.py `Page.summary`), whose links the model opens and cites later."""

    pages: list[dict[str, Any] | None] = field(default_factory=list)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> BrowserState:
        return cls(list(stored.get("browser_pages") or []))

    def to_json(self) -> dict[str, Any]:
        return {"browser_pages": self.pages}

    def copy(self) -> BrowserState:
        return BrowserState(list(self.pages))


class WebSearchCallOutput(SearchCallOutput):
    """A call to gpt-oss's browser (`browser.search|open|find`). Added with its status only when the model
    starts the call; `searching` once its arguments are written and it runs; done with its action."""

    type = "web_search_call"
    id_prefix = "ws"
    in_progress_event = EventType.WEB_SEARCH_CALL_IN_PROGRESS
    searching_event = EventType.WEB_SEARCH_CALL_SEARCHING
    completed_event = EventType.WEB_SEARCH_CALL_COMPLETED

    def __init__(self, output_index: int, function: str, show_sources: bool) -> None:
        super().__init__(output_index)
        self.function = function
        self.show_sources = show_sources  # `include: ["web_search_call.action.sources"]`
        self.action: dict[str, Any] | None = None
        self.sources: list[str] = []

    def finished(self, events: Events, action: dict[str, Any], sources: list[str], failed: bool) -> list[Event]:
        self.action, self.sources = action, sources
        return self.ended(events, failed)

    def as_dict(self) -> WebSearchCallShape:
        item: WebSearchCallShape = {"id": self.id, "type": "web_search_call", "status": self.status}
        if self.status in (ItemStatus.IN_PROGRESS, ItemStatus.SEARCHING):
            return item
        action = dict(self.action or {"type": ACTIONS[self.function]})  # closed before it ran: its kind only
        if action["type"] == "search" and self.show_sources:
            action["sources"] = [{"type": "url", "url": url} for url in self.sources]
        item["action"] = action
        return item


def _read_search_call(dialog: Dialog, index: int, item: WebSearchCallItem, records: Records) -> None:
    # What the browser showed is not kept with the item, and Harmony leaves a past turn's calls out of the
    # prompt anyway (they are analysis): the item is listed, the model reads the answer that cited it.
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or WebSearchCallOutput.fresh_id()})


class WebSearch(Tool[WebSearchTool]):
    request_types = (WebSearchTool,)
    namespaces = frozenset({"browser"})
    includes = (Include.SEARCH_SOURCES,)
    choices = (NamedWebSearch,)
    metric = "browser"
    produces = (WebSearchCallOutput,)
    reads = {WebSearchCallItem: _read_search_call}

    def __init__(self, context: ToolContext, declared: list[WebSearchTool]) -> None:
        super().__init__(context, declared)
        if len(self.declared) > 1:
            raise bad_request("Declare the web_search tool once.", param="tools")
        self.tool: WebSearchTool | None = self.declared[0] if self.declared else None
        self.browser: Browser | None = None  # made in prepare(), from the conversation's pages

    @classmethod
    def available(cls, services: ToolNeeds) -> bool:
        return services.browser is not None

    @staticmethod
    def matches(tool: RequestTool, ref: dict[str, Any]) -> bool:
        return ref.get("type") in WEB_SEARCH_TYPES

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        backends, tool = self.context.services.browser, self.tool
        if tool is None or backends is None:  # a request's web_search without a browser was refused before
            return
        options = BrowseOptions(
            view_chars=VIEW_CHARS[tool.search_context_size or "medium"],
            max_results=backends.config.max_results,
            page_budget=backends.config.pages_per_response,
            allowed_domains=tool.domains(),
            location=tool.user_location.describe() if tool.user_location else None,
        )
        self.browser = Browser(backends.search, backends.fetcher, options, dialog.tool_state(BrowserState).pages)

    def recipients(self) -> Iterable[str]:
        return self.namespaces if self.browser is not None else ()

    def call_shapes(self) -> Iterable[CallShape]:
        # search, open and find, each with a JSON object (the browser reads what it knows of it).
        return [CallShape("browser", JSON_OBJECT, any_name=True)] if self.browser is not None else []

    def check_choice(self, choice: ToolChoiceForm) -> None:
        assert isinstance(choice, NamedWebSearch)
        if self.browser is None:
            raise bad_request(f"tool_choice is {choice.type}, which is not in tools.", param="tool_choice.type")

    def forced_header(self, choice: str | ToolChoiceForm) -> str | None:
        if isinstance(choice, NamedWebSearch):  # the model writes the query
            return "<|channel|>analysis to=browser.search code<|message|>"
        return None

    def declare(self, declarations: Declarations) -> None:
        if self.browser is not None and self.context.enabled:  # declared as gpt-oss was trained: the stock description
            declarations.system.append(ToolNamespaceConfig.browser())

    def citations(self) -> Resolve | None:
        return self.cited if self.browser is not None else None

    def cited(self, cursor: int, locator: str) -> Cited | None:
        """What a citation in the model's answer points to (citations.py): a page's lines, `L{a}-L{b}`."""
        lines = LINES.fullmatch(locator)
        if lines is None or self.browser is None:
            return None
        found = self.browser.cited(cursor, int(lines.group(1)))
        return UrlCitation(*found) if found is not None else None

    def open_call(self, call: ToolCall, name: str) -> OutputItem | None:
        if not self.context.enabled:
            return super().open_call(call, name)
        if name not in ACTIONS:
            call.refuse(f"the browser has no function '{name}'; use browser.search, browser.open or browser.find.")
            return None
        if not self.context.budget.take(call):
            return None
        call.tool_name = name
        sources = self.context.includes(Include.SEARCH_SOURCES)
        item = self.context.output.add(lambda index: WebSearchCallOutput(index, name, sources))
        return call.claim(self, CallKind.HOSTED, item)

    async def written(self, call: ToolCall, text: str) -> list[Event]:
        assert isinstance(call.item, WebSearchCallOutput)
        call.arguments = text
        return call.item.running(self.context.output.events)

    async def resume(self, call: ToolCall) -> None:
        await self.run(call)  # it only reads: asked again

    async def run(self, call: ToolCall) -> None:
        item, browser = call.item, self.browser
        assert isinstance(item, WebSearchCallOutput) and browser is not None  # claimed only with a browser
        outcome = await browser.call(call.tool_name, call.arguments)
        self.dialog.tool_state(BrowserState).pages = browser.summaries()
        call.output = outcome.text
        output = self.context.output
        output.emit(item.finished(output.events, outcome.action, outcome.sources, outcome.failed))
