"""The tools a request declares (`tools[i]`), one small model per tool type of the SDK's types; a tool type
the gateway does not offer is a 400 naming it."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator

from connectors.namespaces import reserved_problem
from connectors.urls import shown

from ...core.models import StrictModel
from ...files.requested import AutoContainer
from .file_search_models import FileSearchTool
from .shell_models import (
    ApplyPatchTool,
    DirectCallers,
    LocalShellTool,
    ShellTool,
)
from .tool_search_models import ToolSearchTool


class FunctionDefinition(StrictModel):
    """A client-side function, as both APIs describe it."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class FunctionTool(FunctionDefinition):
    type: Literal["function"]
    defer_loading: bool | None = None  # found with the `tool_search` tool, not declared up front
    allowed_callers: DirectCallers | None = None

    @property
    def recipient(self) -> str:
        return f"functions.{self.name}"


class TextInput(StrictModel):
    type: Literal["text"]


class GrammarInput(StrictModel):
    """What a custom tool's input must match: a Lark grammar (LALR) or a regular expression (RE2)."""

    type: Literal["grammar"]
    syntax: Literal["lark", "regex"]
    definition: str = Field(min_length=1, max_length=64 * 1024)


class CustomTool(StrictModel):
    """A client tool that takes raw text, not JSON (Codex's freeform apply_patch is one): declared to the
    model as a function of one string, streamed as a `custom_tool_call`."""

    type: Literal["custom"]
    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    format: Annotated[Union[TextInput, GrammarInput], Field(discriminator="type")] | None = None
    defer_loading: bool | None = None
    allowed_callers: DirectCallers | None = None
    async_: Literal[False] | None = Field(None, alias="async")

    @property
    def recipient(self) -> str:
        return f"functions.{self.name}"


class NamespaceFunction(FunctionDefinition):
    """A function of a `namespace` tool; OpenAI's scheduling options for it are refused by name."""

    type: Literal["function"]
    defer_loading: bool | None = None
    allowed_callers: DirectCallers | None = None
    output_schema: None = None
    async_: Literal[False] | None = Field(None, alias="async")


class NamespaceTool(StrictModel):
    """Functions grouped under a name of their own: declared to the model as a Harmony namespace, called
    as `NAME.function`, answered by the client like any function."""

    type: Literal["namespace"]
    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    description: str = ""
    # Functions, and custom tools (raw text in, called as NAME.tool, streamed as a `custom_tool_call`).
    tools: list[Annotated[Union[NamespaceFunction, CustomTool], Field(discriminator="type")]] = Field(min_length=1)


class CodeInterpreterTool(StrictModel):
    """The Harmony `python` tool, run in the gateway's sandbox. `container` is `{"type": "auto"}` (the
    conversation's container, made when code first runs) or the id of a container (the Containers API)."""

    type: Literal["code_interpreter"]
    container: str | AutoContainer = AutoContainer(type="auto")
    allowed_callers: DirectCallers | None = None


class UserLocation(StrictModel):
    type: Literal["approximate"] | None = None
    city: str | None = Field(None, max_length=200)
    country: str | None = Field(None, max_length=2)
    region: str | None = Field(None, max_length=200)
    timezone: str | None = Field(None, max_length=100)

    def describe(self) -> str | None:
        parts = [part for part in (self.city, self.region, self.country) if part]
        return ", ".join(parts) or None


class SearchFilters(StrictModel):
    allowed_domains: list[Annotated[str, Field(min_length=1, max_length=253)]] | None = Field(None, max_length=100)


WEB_SEARCH_TYPES = ("web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26")


class WebSearchTool(StrictModel):
    """gpt-oss's built-in `browser` (search, open, find), run by the gateway (connectors/browser/)."""

    type: Literal["web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26"]
    search_context_size: Literal["low", "medium", "high"] | None = None
    user_location: UserLocation | None = None
    filters: SearchFilters | None = None
    external_web_access: Literal[True] | None = Field(None, description="cached-only search is not supported")

    def domains(self) -> tuple[str, ...]:
        """The allowed domains, as hosts (OpenAI accepts them with a scheme, which is dropped)."""
        found = self.filters.allowed_domains if self.filters and self.filters.allowed_domains else []
        return tuple(domain.lower().split("://", 1)[-1].split("/", 1)[0].removeprefix("www.") for domain in found)


class ToolNameFilter(StrictModel):
    tool_names: list[str] = []
    read_only: bool | None = None


class ApprovalFilter(StrictModel):
    always: ToolNameFilter | None = None
    never: ToolNameFilter | None = None


class McpTool(StrictModel):
    """An MCP server: a configured one by `server_label` alone, or the request's own at `server_url`
    (only where `mcp.allowed_urls` allows). `headers` go to that server only, never to logs or storage."""

    type: Literal["mcp"]
    server_label: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
    server_url: str | None = None
    server_description: str | None = None
    headers: dict[str, str] | None = None
    authorization: str | None = None
    allowed_tools: list[str] | ToolNameFilter | None = None
    require_approval: Literal["always", "never"] | ApprovalFilter | None = None
    connector_id: None = Field(None, description="connectors are OpenAI's own: not supported")
    defer_loading: bool | None = None  # its tools found with the `tool_search` tool, not declared up front
    allowed_callers: DirectCallers | None = None

    @field_validator("server_label")
    @classmethod
    def _not_reserved(cls, label: str) -> str:
        problem = reserved_problem(label)
        if problem is not None:
            raise ValueError(problem)
        return label

    def allowed_names(self) -> set[str] | None:
        if self.allowed_tools is None:
            return None
        if isinstance(self.allowed_tools, ToolNameFilter):
            return set(self.allowed_tools.tool_names)
        return set(self.allowed_tools)

    def echo(self) -> dict[str, Any]:
        """The tool as the Response object shows it: credentials left out, the URL's among them."""
        shown_url = shown(self.server_url) if self.server_url is not None else None
        return self.model_dump(exclude={"authorization", "connector_id"}) | {"headers": None, "server_url": shown_url}


class UnavailableTool(BaseModel):
    """A tool of OpenAI's that nothing here runs. Refused by name, or dropped with a warning where the
    operator set `server.drop_unavailable_tools` (for clients that always declare them); never declared
    to the model."""

    model_config = ConfigDict(extra="allow")
    type: Literal[
        "computer",
        "computer_use_preview",
        "image_generation",
    ]


RequestTool = Union[
    FunctionTool,
    CustomTool,
    NamespaceTool,
    CodeInterpreterTool,
    McpTool,
    WebSearchTool,
    FileSearchTool,
    ShellTool,
    LocalShellTool,
    ApplyPatchTool,
    ToolSearchTool,
    UnavailableTool,
]
Tool = Annotated[RequestTool, Field(discriminator="type")]
