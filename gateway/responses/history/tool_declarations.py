"""The client's tools as the model reads them: one function's declaration, and the tools tool search
loaded, written into the dialog (after the prompt's prefix, which stays as the engine has it cached)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Sequence, Union

from pydantic import Field, TypeAdapter, ValidationError

from connectors.namespaces import reserved_problem

from ...engine.harmony import ToolDescription, ToolNamespaceConfig, declarations_text
from ...errors import bad_request, param_path
from ..shapes.tool_models import CustomTool, FunctionTool, GrammarInput, McpTool, NamespaceFunction, NamespaceTool

Function = Union[FunctionTool, CustomTool, NamespaceFunction]
# An MCP server's loaded tools are named by `server_label` and `allowed_tools` only: their declarations
# come from the request's connected server (mcp.py), never from what a client sends.
LoadedTool = Annotated[Union[FunctionTool, CustomTool, NamespaceTool, McpTool], Field(discriminator="type")]
_LOADED = TypeAdapter(list[LoadedTool])
MAX_LOADED_CHARS = 256 * 1024  # of one search's tool definitions, as JSON: they are rendered on the event loop


def describe(tool: Function) -> ToolDescription:
    """A client tool as the model reads it; a custom tool takes one string."""
    if not isinstance(tool, CustomTool):
        return ToolDescription.new(tool.name, tool.description or "", parameters=tool.parameters)
    description = (tool.description or "") + "\nWrite the input as raw text, not JSON."
    if isinstance(tool.format, GrammarInput):
        kind = "Lark grammar" if tool.format.syntax == "lark" else "regular expression"
        description += f" It must match this {kind}:\n{tool.format.definition}"
    return ToolDescription.new(tool.name, description.strip(), parameters={"type": "string"})


def checked_definitions(tools: list[dict[str, Any]], param: str) -> list[LoadedTool]:
    """Loaded tool definitions a client sent (a `tool_search_output`): functions, custom tools, namespaces
    and MCP servers, checked as the request's own tools are."""
    if len(json.dumps(tools)) > MAX_LOADED_CHARS:
        raise bad_request(f"The tools of {param} are too large (at most {MAX_LOADED_CHARS} characters of JSON).", param=param)
    try:
        checked = _LOADED.validate_python(tools)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = param + param_path(tuple(first["loc"]), tools)  # by the request's path, not the union's members
        raise bad_request(f"Invalid value for '{where}': {first['msg']}.", param=where) from None
    for index, tool in enumerate(checked):
        problem = reserved_problem(tool.name) if isinstance(tool, NamespaceTool) else None
        if problem is not None:
            raise bad_request(f"Invalid namespace in {param}: {problem}.", param=f"{param}.{index}.name")
    return checked


def parsed_definitions(tools: list[dict[str, Any]]) -> list[LoadedTool]:
    """Definitions checked when they were loaded (kept with the conversation)."""
    return _LOADED.validate_python(tools)


def loaded_record(tool: LoadedTool) -> dict[str, Any]:
    """A loaded tool as the dialog keeps it. An MCP server is kept by its label and the tools loaded: a
    client's headers or credentials in a `tool_search_output` are never stored."""
    if isinstance(tool, McpTool):
        allowed = tool.allowed_names()
        return {"type": "mcp", "server_label": tool.server_label} | ({"allowed_tools": sorted(allowed)} if allowed is not None else {})
    return tool.model_dump(mode="json", exclude_none=True, by_alias=True)


def loaded_text(
    tools: Sequence[LoadedTool], servers: Sequence[ToolNamespaceConfig] = (), lead: str = "These tools are loaded and can be called now:"
) -> str:
    """What the model reads when tools are loaded: their declarations, as the developer and system messages
    have them; `servers` are the MCP servers' tools among them, as their servers describe them."""
    functions = [describe(tool) for tool in tools if isinstance(tool, (FunctionTool, CustomTool))]
    namespaces = [ToolNamespaceConfig(name="functions", description=None, tools=functions)] if functions else []
    namespaces += [
        ToolNamespaceConfig(name=tool.name, description=tool.description, tools=[describe(function) for function in tool.tools])
        for tool in tools
        if isinstance(tool, NamespaceTool)
    ]
    namespaces += servers
    if not namespaces:
        return "No tools were loaded."
    return f"{lead}\n\n" + declarations_text(namespaces)
