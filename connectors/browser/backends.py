"""Where the browser's searches and pages come from.

Search: a tool of a configured MCP server (any search server: the model's query goes to it), or DDGS, a
keyless metasearch library. Pages: the gateway's own HTTP client behind the address guard, with a size
and a time limit, cleaned to text by trafilatura; or a configured MCP fetch server (the official
`mcp-server-fetch` works), asked only for URLs the guard lets through.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Protocol
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.to_thread
import httpx
import lxml.etree
import lxml.html
import trafilatura

from runtime.cpu import run_cpu
from runtime.isolation import TooCostly, run_isolated
from runtime.numbers import decimal

from ..connection import MCPConnection, ToolCallFailed
from ..results import result_text
from .answers import read_answer, results_of, says_none
from .decoding import ACCEPTED, BoundedDecoder, DecodingFailed, TooLarge
from .guard import AddressPolicy, BlockedURL
from .pages import Page, SearchResult, document_page

MAX_REDIRECTS = 5
_TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "application/json", "text/x-markdown")
_HTML_TYPES = ("text/html", "application/xhtml+xml")


class BrowserFailure(Exception):
    """A search or a page that could not be had; the message says why, for the model."""


class SearchBackend(Protocol):
    async def search(self, query: str, count: int, location: str | None) -> list[SearchResult]: ...


class PageFetcher(Protocol):
    async def fetch(self, url: str) -> Page: ...


# -- search ---------------------------------------------------------------------------------------------------


class McpSearch:
    """A search tool of an MCP server. Its answer is read as results wherever it can be (answers.py):
    structured content, JSON text (also as the SDK wraps it), or text blocks with URLs."""

    def __init__(self, connection: Callable[[], MCPConnection], tool: str, query_argument: str, count_argument: str | None,
                 location_argument: str | None, timeout_s: float) -> None:  # fmt: skip
        self._connection, self.tool, self.timeout_s = connection, tool, timeout_s
        self.query_argument, self.count_argument, self.location_argument = query_argument, count_argument, location_argument

    async def search(self, query: str, count: int, location: str | None) -> list[SearchResult]:
        connection = self._connection()
        arguments: dict[str, Any] = {self.query_argument: query}
        if self.count_argument:
            arguments[self.count_argument] = count
        if self.location_argument and location:
            arguments[self.location_argument] = location
        try:
            with anyio.fail_after(self.timeout_s):
                result = await connection.call(self.tool, arguments)
        except TimeoutError:
            raise BrowserFailure(f"the search server did not answer within {self.timeout_s:g} s") from None
        except ToolCallFailed as exc:
            raise BrowserFailure(f"the search failed ({exc})") from None
        if result.is_error:
            raise BrowserFailure(f"the search failed ({result_text(result)[:300] or 'the server reported an error'})")
        text = result_text(result)
        results = read_answer(result.structured_content, text)
        if not results and not says_none(result.structured_content, text):
            raise BrowserFailure("the search server's answer holds no results the browser can read")
        return results[:count]


class DdgsSearch:
    """DDGS (Dux Distributed Global Search): several public search engines, no key needed."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    async def search(self, query: str, count: int, location: str | None) -> list[SearchResult]:
        def run() -> list[dict[str, Any]]:
            from ddgs import DDGS  # imported when used: a gateway without it configured never loads it

            return DDGS(timeout=int(self.timeout_s)).text(query, max_results=count) or []

        try:
            with anyio.fail_after(self.timeout_s + 1):
                rows = await anyio.to_thread.run_sync(run, abandon_on_cancel=True)
        except TimeoutError:
            raise BrowserFailure(f"the search engines did not answer within {self.timeout_s:g} s") from None
        except Exception as exc:  # the library's own errors: no results, rate limits, network
            raise BrowserFailure(f"the search failed ({type(exc).__name__}: {str(exc)[:200]})") from None
        return results_of(rows)[:count]


# -- pages ----------------------------------------------------------------------------------------------------


class HttpFetcher:
    """Pages fetched by the gateway: every hop checked by the address guard, at most `max_bytes` read,
    all within `timeout_s`; HTML cleaned to text, plain text as it is, other types refused."""

    def __init__(self, policy: AddressPolicy, max_bytes: int, timeout_s: float, user_agent: str) -> None:
        self.policy, self.max_bytes, self.timeout_s = policy, max_bytes, timeout_s
        headers = {
            "User-Agent": user_agent,
            "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
            "Accept-Encoding": ACCEPTED,  # the encodings decoding.py undoes, bounded
        }
        # trust_env off: a proxy from the environment would fetch what the guard did not check.
        self._http = httpx.AsyncClient(follow_redirects=False, trust_env=False, headers=headers, timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def fetch(self, url: str) -> Page:
        try:
            with anyio.fail_after(self.timeout_s):
                kind, text, final_url = await self._download(url)
        except TimeoutError:
            raise BrowserFailure(f"the page did not load within {self.timeout_s:g} s") from None
        except BlockedURL as exc:
            raise BrowserFailure(str(exc)) from None
        except DecodingFailed as exc:
            raise BrowserFailure(str(exc)) from None
        except TooLarge:
            raise BrowserFailure(f"the page is larger than the browser's limit of {self.max_bytes} bytes") from None
        except (httpx.HTTPError, httpx.InvalidURL, UnicodeError, ValueError) as exc:
            # A page names any URL it likes (a redirect to `http:127.0.0.1:1/x`, a host that is not IDNA):
            # whatever the URL parser or the connection refuses fails the call, never the response.
            raise BrowserFailure(f"the page could not be fetched ({type(exc).__name__}: {str(exc)[:200]})") from None
        try:  # a page chooses how long its cleaning takes: a worker process bounds it (isolation.py)
            return await run_isolated(self.timeout_s, to_page, final_url, kind, text)
        except TooCostly as exc:
            raise BrowserFailure(f"the page could not be read: {exc}") from None

    async def _download(self, url: str) -> tuple[str, str, str]:
        for _ in range(MAX_REDIRECTS + 1):
            target = await self.policy.check(url)
            request = self._http.build_request(
                "GET", target.connect_url, headers={"Host": target.host_header}, extensions={"sni_hostname": target.host}
            )
            response = await self._http.send(request, stream=True)
            try:
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    continue
                if response.status_code >= 400:
                    raise BrowserFailure(f"the server answered HTTP {response.status_code}")
                content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                kind = "html" if content_type in _HTML_TYPES else "text" if content_type in _TEXT_TYPES or content_type.startswith("text/") else None
                if kind is None:
                    raise BrowserFailure(f"the page is not text or HTML (it is {content_type or 'of no declared type'})")
                declared = response.headers.get("content-length", "")
                if (decimal(declared) or 0) > self.max_bytes:
                    raise BrowserFailure(f"the page is larger than the browser's limit of {self.max_bytes} bytes")
                decoder = BoundedDecoder(response.headers.get("content-encoding", ""), self.max_bytes)
                body = bytearray()
                async for chunk in response.aiter_raw():
                    body += decoder.feed(chunk)
                return kind, body.decode(response.charset_encoding or "utf-8", errors="replace"), url
            finally:
                await response.aclose()
        raise BrowserFailure(f"the page redirected more than {MAX_REDIRECTS} times")


def to_page(url: str, kind: str, text: str) -> Page:
    """A fetched document as a page (CPU-bound: run off the event loop)."""
    if kind != "html":
        return document_page(url, urlsplit(url).path.rsplit("/", 1)[-1] or url, text)
    try:
        tree = lxml.html.document_fromstring(text)
    except (lxml.etree.ParserError, ValueError):
        return document_page(url, url, "")
    # The page's <title> is read directly: trafilatura's metadata extraction (dates, authors) costs more
    # than cleaning the text itself.
    title = " ".join((tree.findtext(".//title") or "").split()) or url
    markdown = trafilatura.extract(text, url=url, output_format="markdown", include_links=True, include_images=False, favor_recall=True)
    if not markdown:
        markdown = trafilatura.html2txt(text) or ""
    return document_page(url, title, markdown)


class McpFetcher:
    """Pages fetched by an MCP server's tool (`url`, `max_length`), for URLs the guard lets through. The
    server fetches on its own: redirects it follows are not checked here, so give it a network that
    reaches only what the browser may open."""

    _CONTENTS = re.compile(r"^Contents of [^\n]*:\n")

    def __init__(self, connection: Callable[[], MCPConnection], tool: str, policy: AddressPolicy, max_chars: int, timeout_s: float) -> None:
        self._connection, self.tool, self.policy, self.max_chars, self.timeout_s = connection, tool, policy, max_chars, timeout_s

    async def fetch(self, url: str) -> Page:
        try:
            await self.policy.check(url)
        except BlockedURL as exc:
            raise BrowserFailure(str(exc)) from None
        connection = self._connection()
        try:
            with anyio.fail_after(self.timeout_s):
                result = await connection.call(self.tool, {"url": url, "max_length": self.max_chars})
        except TimeoutError:
            raise BrowserFailure(f"the page did not load within {self.timeout_s:g} s") from None
        except ToolCallFailed as exc:
            raise BrowserFailure(f"the page could not be fetched ({exc})") from None
        text = result_text(result)
        if result.is_error:
            raise BrowserFailure(f"the page could not be fetched ({text[:300] or 'the server reported an error'})")
        text = self._CONTENTS.sub("", text, count=1)
        heading = re.search(r"^#{1,2} (.+)$", text, re.MULTILINE)
        return await run_cpu(document_page, url, heading.group(1).strip() if heading else url, text)
