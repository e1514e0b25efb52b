"""`tool_choice`: which tools the model is offered, and which call it must make.

Harmony has no forcing of its own, but the prompt is the gateway's: a forced call is enforced by writing
the start of it (the assistant's channel and recipient, up to `<|message|>` where the tool is named) at
the end of the prompt. A call is forced on every engine turn until the model made one to a declared tool
(a call that was refused, for bad arguments say, does not count).
"""

from __future__ import annotations

from typing import Any

from ..errors import bad_request
from .request import (
    AllowedTools,
    CodeInterpreterTool,
    CustomTool,
    FunctionTool,
    McpTool,
    NamedCodeInterpreter,
    NamedCustom,
    NamedFunction,
    NamedMcp,
    NamedWebSearch,
    NamespaceTool,
    WEB_SEARCH_TYPES,
    WebSearchTool,
)


def offered_tools(tools: list[Any], choice: Any) -> tuple[list[Any], Any]:
    """The tools the model is offered, and the choice that is left: `allowed_tools` narrows the request's
    tools to those it lists and becomes its mode."""
    if not isinstance(choice, AllowedTools):
        return tools, choice
    offered = []
    for index, ref in enumerate(choice.tools):
        match = next((tool for tool in tools if _matches(tool, ref)), None)
        if match is None:
            raise bad_request(
                f"tool_choice.tools[{index}] names no tool of this request.", param=f"tool_choice.tools[{index}]"
            )
        if match not in offered:
            offered.append(match)
    return offered, choice.mode


def _matches(tool: Any, ref: dict[str, Any]) -> bool:
    kind = ref.get("type")
    if isinstance(tool, FunctionTool):
        return kind == "function" and ref.get("name") == tool.name
    if isinstance(tool, CustomTool):
        return kind == "custom" and ref.get("name") == tool.name
    if isinstance(tool, NamespaceTool):
        return kind == "namespace" and ref.get("name") == tool.name
    if isinstance(tool, McpTool):
        return kind == "mcp" and ref.get("server_label") == tool.server_label
    if isinstance(tool, CodeInterpreterTool):
        return kind == "code_interpreter"
    if isinstance(tool, WebSearchTool):
        return kind in WEB_SEARCH_TYPES
    return False


def check_choice(choice: Any, functions: dict[str, Any], servers: dict[str, Any], has_python: bool, has_browser: bool) -> None:
    """A choice that names a tool the request does not have is a 400."""
    if isinstance(choice, NamedFunction) and not isinstance(functions.get(choice.name), FunctionTool):
        raise bad_request(f"tool_choice names '{choice.name}', which is not in tools.", param="tool_choice.name")
    if isinstance(choice, NamedCustom) and not isinstance(functions.get(choice.name), CustomTool):
        raise bad_request(f"tool_choice names the custom tool '{choice.name}', which is not in tools.", param="tool_choice.name")
    if isinstance(choice, NamedMcp):
        server = servers.get(choice.server_label)
        if server is None:
            raise bad_request(f"tool_choice names the MCP server '{choice.server_label}', which is not in tools.", param="tool_choice.server_label")
        if choice.name is not None and server.connection.connected and not server.has_tool(choice.name):
            raise bad_request(f"The MCP server '{choice.server_label}' has no tool '{choice.name}'.", param="tool_choice.name")
    if isinstance(choice, NamedCodeInterpreter) and not has_python:
        raise bad_request("tool_choice is code_interpreter, which is not in tools.", param="tool_choice.type")
    if isinstance(choice, NamedWebSearch) and not has_browser:
        raise bad_request(f"tool_choice is {choice.type}, which is not in tools.", param="tool_choice.type")


def forced_header(choice: Any, functions: dict[str, Any]) -> str | None:
    """The start of the call the model must make, or None when it chooses freely."""
    if isinstance(choice, NamedFunction):
        return f"<|channel|>commentary to=functions.{choice.name} <|constrain|>json<|message|>"
    if isinstance(choice, NamedCustom):
        return f"<|channel|>commentary to=functions.{choice.name}<|message|>"
    if isinstance(choice, NamedMcp):
        if choice.name is None:
            return f"<|channel|>commentary to={choice.server_label}."
        return f"<|channel|>commentary to={choice.server_label}.{choice.name} <|constrain|>json<|message|>"
    if isinstance(choice, NamedCodeInterpreter):
        return "<|channel|>analysis to=python code<|message|>"
    if isinstance(choice, NamedWebSearch):  # the model writes the query
        return "<|channel|>analysis to=browser.search code<|message|>"
    if choice == "required" and functions:  # the model still picks the function
        return "<|channel|>commentary to=functions."
    return None
