"""The `browser:` section of the gateway's config: where gpt-oss's browser searches and fetches."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchConfig(_Section):
    """Where `browser.search` goes: a tool of a configured MCP server (`tool_servers`), or DDGS (keyless)."""

    type: Literal["mcp", "ddgs"]
    server: str | None = Field(None, description="mcp: the label of a tool server")
    tool: str = "search"
    query_argument: str = "query"
    count_argument: str | None = Field(None, description="the tool's argument for the number of results, if it has one")
    location_argument: str | None = Field(None, description="the tool's argument for the user's location, if it has one")
    timeout_s: float = Field(20.0, gt=0)


class FetchConfig(_Section):
    """Where `browser.open` gets pages: the gateway's own HTTP client, or a tool of an MCP fetch server."""

    type: Literal["http", "mcp"] = "http"
    server: str | None = Field(None, description="mcp: the label of a tool server")
    tool: str = "fetch"


class BrowserConfig(_Section):
    """gpt-oss's browser tool, offered for the request tools web_search and web_search_preview."""

    search: SearchConfig | None = None  # None: the model can only open pages by URL
    fetch: FetchConfig = FetchConfig()
    # Networks the browser may fetch from although they are not public (loopback, private, link-local);
    # none by default. CIDRs, e.g. "10.0.0.0/8".
    allow_networks: list[str] = []
    max_page_bytes: int = Field(2 * 1024 * 1024, gt=0, le=64 * 1024 * 1024)
    page_timeout_s: float = Field(15.0, gt=0, le=300)
    pages_per_response: int = Field(20, gt=0, le=1000)
    max_results: int = Field(10, gt=0, le=50)
    user_agent: str = "harmony-gateway-browser/0.1"

    @field_validator("allow_networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        import ipaddress

        for network in value:
            ipaddress.ip_network(network, strict=False)  # a ValueError names the bad one
        return value
