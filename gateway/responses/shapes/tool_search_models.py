"""The request's shapes of tool search: the `tool_search` tool, and its calls and outputs as input items,
as the openai SDK writes them (`tool_search_tool_param.py`, `response_tool_search_call.py`,
`response_tool_search_output_item_param.py`); and which recipients a list of loaded tools makes callable."""

from __future__ import annotations

import json
from typing import Any, Iterable, Literal

from pydantic import Field

from ...core.models import StrictModel

TOOL_SEARCH_NAMESPACE = "tool_search"  # the Harmony recipient of the model's searches: tool_search.search
TOOL_SEARCH_RECIPIENT = f"{TOOL_SEARCH_NAMESPACE}.search"
MAX_LOADED_TOOLS = 100  # tool definitions in one tool_search_output
Execution = Literal["server", "client"]


class ToolSearchTool(StrictModel):
    """Search over the request's tools marked `defer_loading`: run here (`server`) or by the client, with
    the function the client describes (`description`, `parameters`)."""

    type: Literal["tool_search"]
    execution: Execution = "server"
    description: str | None = Field(None, max_length=4096)
    parameters: dict[str, Any] | None = None


class ToolSearchCallItem(StrictModel):
    """A search the model made, sent back (with the whole thread, or a client-run one)."""

    type: Literal["tool_search_call"]
    arguments: Any = None
    id: str | None = None
    call_id: str | None = None
    execution: Execution = "server"
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    created_by: str | None = None

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


class ToolSearchOutputItem(StrictModel):
    """The tools a search loaded: a client's answer to its `tool_search_call`, or a server search sent back.
    The definitions are checked as the request's own tools are (tools/tool_search.py)."""

    type: Literal["tool_search_output"]
    tools: list[dict[str, Any]] = Field(max_length=MAX_LOADED_TOOLS)
    id: str | None = None
    call_id: str | None = None
    execution: Execution = "server"
    status: Literal["in_progress", "completed", "incomplete"] | None = None
    created_by: str | None = None


def loaded_recipients(tools: Iterable[dict[str, Any]]) -> set[str]:
    """What loaded tool definitions make callable: `functions.NAME`, `NAMESPACE.NAME`, and `LABEL.*` for an
    MCP server loaded whole."""
    found: set[str] = set()
    for tool in tools:
        kind = tool.get("type")
        if kind in ("function", "custom"):
            found.add(f"functions.{tool.get('name')}")
        elif kind == "namespace":
            found |= {f"{tool.get('name')}.{inner.get('name')}" for inner in tool.get("tools") or ()}
        elif kind == "mcp":
            allowed = tool.get("allowed_tools")
            label = tool.get("server_label")
            found |= {f"{label}.{name}" for name in allowed} if isinstance(allowed, list) else {f"{label}.*"}
    return found


def is_loaded(recipient: str, loaded: set[str]) -> bool:
    return recipient in loaded or f"{recipient.partition('.')[0]}.*" in loaded
