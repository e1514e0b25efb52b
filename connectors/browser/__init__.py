"""gpt-oss's built-in browser tool (`browser.search`, `browser.open`, `browser.find`), run by the gateway.

`pages.py` is what the model sees, `session.py` one conversation's browsing, `backends.py` where searches
and pages come from, `guard.py` which addresses may be fetched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..connection import MCPConnection
from ..servers import MCPServers
from .backends import DdgsSearch, HttpFetcher, McpFetcher, McpSearch, PageFetcher, SearchBackend
from .config import BrowserConfig
from .guard import AddressPolicy


@dataclass
class BrowserBackends:
    """The gateway's search and fetch backends, made once at start-up and shared by every response."""

    config: BrowserConfig
    search: SearchBackend | None
    fetcher: PageFetcher

    async def aclose(self) -> None:
        if isinstance(self.fetcher, HttpFetcher):
            await self.fetcher.aclose()


def make_backends(config: BrowserConfig, mcp: MCPServers) -> BrowserBackends:
    policy = AddressPolicy(config.allow_networks)
    search: SearchBackend | None = None
    if config.search is not None and config.search.type == "mcp":
        search = McpSearch(
            _connection(mcp, config.search.server), config.search.tool, config.search.query_argument,
            config.search.count_argument, config.search.location_argument, config.search.timeout_s,
        )  # fmt: skip
    elif config.search is not None:
        search = DdgsSearch(config.search.timeout_s)
    fetcher: PageFetcher
    if config.fetch.type == "mcp":
        fetcher = McpFetcher(
            _connection(mcp, config.fetch.server), config.fetch.tool, policy, min(config.max_page_bytes, 999_999), config.page_timeout_s
        )
    else:
        fetcher = HttpFetcher(policy, config.max_page_bytes, config.page_timeout_s, config.user_agent)
    return BrowserBackends(config, search, fetcher)


def _connection(mcp: MCPServers, label: str | None) -> Callable[[], MCPConnection]:
    """The configured server's connection, looked up when used (the config check made sure it exists)."""
    return lambda: mcp.connections[label or ""]
