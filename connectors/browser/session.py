"""One conversation's browser: the model's `browser.search`, `browser.open` and `browser.find`.

Every view the model gets is a new cursor, numbered from 0 in the order of the conversation; the model
opens links of earlier views by cursor and id, and cites views as `【CURSOR†L{a}-L{b}】`. Pages keep their
text for the response that fetched them; later responses keep what a citation or a link needs
(`Page.summary`) and fetch a page again to show it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from runtime.cpu import run_cpu

from .backends import BrowserFailure, PageFetcher, SearchBackend
from .pages import Page, find_page, results_page, view

# The browser's functions, and the type of the action a web_search_call shows for each.
ACTIONS = {"search": "search", "open": "open_page", "find": "find_in_page"}
KEPT_PAGES = 64  # pages whose summaries a conversation keeps; older cursors can no longer be opened or cited


@dataclass(frozen=True)
class BrowseOptions:
    """What one request asks of the browser (its web_search tool) within the gateway's limits."""

    view_chars: int = 4000  # how much of a page one view shows (search_context_size)
    max_results: int = 10
    page_budget: int = 20  # pages fetched per response
    allowed_domains: tuple[str, ...] = ()
    location: str | None = None  # user_location, for backends that take it


@dataclass
class BrowserOutcome:
    """A call's result: the text the model reads, and the action the client sees."""

    text: str
    action: dict[str, Any]
    sources: list[str] = field(default_factory=list)  # the result URLs of a search
    failed: bool = False


class BrowserUsageError(Exception):
    """The model used the browser wrongly; the message tells it how to use it rightly."""


class Browser:
    def __init__(self, search: SearchBackend | None, fetcher: PageFetcher, options: BrowseOptions,
                 kept: list[dict[str, Any] | None] | None = None) -> None:  # fmt: skip
        self.search_backend, self.fetcher, self.options = search, fetcher, options
        self.pages: list[Page | None] = [Page.from_summary(summary) if summary else None for summary in kept or []]
        self._fetched: dict[str, Page] = {}  # this response's pages by URL: opened again without fetching
        self.fetches = 0

    # -- the model's calls ----------------------------------------------------------------------------------

    async def call(self, function: str, arguments_json: str) -> BrowserOutcome:
        action: dict[str, Any] = {"type": ACTIONS.get(function, function)}
        try:
            arguments = json.loads(arguments_json or "{}")
            if not isinstance(arguments, dict):
                raise ValueError("not an object")
        except ValueError:
            return BrowserOutcome("Error: the arguments are not a JSON object.", action, failed=True)
        try:
            if function == "search":
                return await self._search(arguments, action)
            if function == "open":
                return await self._open(arguments, action)
            if function == "find":
                return await self._find(arguments, action)
            return BrowserOutcome(f"Error: the browser has no function `{function}`; use search, open or find.", action, failed=True)
        except (BrowserUsageError, BrowserFailure) as exc:
            return BrowserOutcome(f"Error: {exc}", action, failed=True)

    async def _search(self, arguments: dict[str, Any], action: dict[str, Any]) -> BrowserOutcome:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise BrowserUsageError("`query` must be a non-empty string")
        action["query"] = query
        if self.search_backend is None:
            raise BrowserFailure("no search backend is configured on this gateway; open pages by URL instead")
        count = min(_integer(arguments, "topn", self.options.max_results), self.options.max_results)
        results = await self.search_backend.search(query, max(count, 1), self.options.location)
        results = [result for result in results if self._allowed(result.url)]
        page = results_page(query, results)
        cursor = self._add(page)
        return BrowserOutcome(self._show(page, cursor, 0, -1), action, sources=[result.url for result in results])

    async def _open(self, arguments: dict[str, Any], action: dict[str, Any]) -> BrowserOutcome:
        if arguments.get("view_source"):
            raise BrowserUsageError("`view_source` is not supported by this browser")
        target = arguments.get("id", -1)
        loc, num_lines = _integer(arguments, "loc", -1), _integer(arguments, "num_lines", -1)
        if isinstance(target, str):
            url = action["url"] = target
            page = await self._page_at_url(url, refresh=True)
        else:
            base = self._page(_integer(arguments, "cursor", -1))
            link = _integer(arguments, "id", -1)
            if link >= 0:
                if link not in base.links:
                    raise BrowserUsageError(f"invalid link id `{link}`; the page's links are `【ID†...】`")
                url = action["url"] = base.links[link]
                page = await self._page_at_url(url, refresh=False)
            else:  # scroll the page to `loc`
                url, page = base.url, base
                action["url"] = url
                if not page.lines:  # kept from an earlier response without its text
                    if page.kind != "page":
                        raise BrowserUsageError("that view is from an earlier response; search again")
                    page = await self._page_at_url(page.url, refresh=False)
        if loc >= len(page.lines):
            raise BrowserUsageError(f"invalid location `{loc}`: the page's last line is {len(page.lines) - 1}")
        cursor = self._add(page)
        return BrowserOutcome(self._show(page, cursor, max(loc, 0), num_lines), action)

    async def _find(self, arguments: dict[str, Any], action: dict[str, Any]) -> BrowserOutcome:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise BrowserUsageError("`pattern` must be a non-empty string")
        page = self._page(_integer(arguments, "cursor", -1))
        action |= {"url": page.url, "pattern": pattern}
        if page.kind != "page":
            raise BrowserUsageError("`find` works on opened pages, not on search or find results")
        if not page.lines:
            page = await self._page_at_url(page.url, refresh=False)
        found = await run_cpu(find_page, page, pattern)  # a page may have tens of thousands of lines
        cursor = self._add(found)
        return BrowserOutcome(self._show(found, cursor, 0, -1), action)

    # -- pages and cursors ----------------------------------------------------------------------------------

    async def _page_at_url(self, url: str, refresh: bool) -> Page:
        if not refresh and url in self._fetched:
            return self._fetched[url]
        if not self._allowed(url):
            raise BrowserUsageError(f"`{url[:200]}` is outside the domains this search may use ({', '.join(self.options.allowed_domains)})")
        if self.fetches >= self.options.page_budget:
            raise BrowserFailure(f"the budget of {self.options.page_budget} pages for this response is spent; answer with what you have")
        self.fetches += 1
        page = await self.fetcher.fetch(url)
        self._fetched[url] = page
        return page

    def _page(self, cursor: int) -> Page:
        if not self.pages:
            raise BrowserUsageError("no page is open yet; search or open a URL first")
        index = len(self.pages) - 1 if cursor < 0 else cursor
        if index >= len(self.pages):
            raise BrowserUsageError(f"cursor `{cursor}` is out of range: the cursors are 0 to {len(self.pages) - 1}")
        page = self.pages[index]
        if page is None:
            raise BrowserUsageError(f"cursor `{cursor}` is too old to be opened again")
        return page

    def _add(self, page: Page) -> int:
        self.pages.append(page)
        return len(self.pages) - 1

    def _show(self, page: Page, cursor: int, loc: int, num_lines: int) -> str:
        return view(page, cursor, loc, num_lines, self.options.view_chars)

    def _allowed(self, url: str) -> bool:
        if not self.options.allowed_domains:
            return True
        host = (urlsplit(url).hostname or "").lower()
        return any(host == domain or host.endswith("." + domain) for domain in self.options.allowed_domains)

    # -- what outlives the response -------------------------------------------------------------------------

    def cited(self, cursor: int, line: int) -> tuple[str, str] | None:
        """The (url, title) that a citation of `cursor` at `line` points to; None if there is no such view."""
        if not 0 <= cursor < len(self.pages):
            return None
        page = self.pages[cursor]
        if page is None:
            return None
        url, title = page.source_of(line)
        return (url, title) if url else None

    def summaries(self) -> list[dict[str, Any] | None]:
        """The pages for the dialog's state; the oldest beyond KEPT_PAGES are dropped (their cursors stay)."""
        keep_from = max(0, len(self.pages) - KEPT_PAGES)
        return [page.summary() if page is not None and index >= keep_from else None for index, page in enumerate(self.pages)]


def _integer(arguments: dict[str, Any], name: str, default: int) -> int:
    value = arguments.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BrowserUsageError(f"`{name}` must be a number")
    return int(value)
