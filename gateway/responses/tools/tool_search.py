"""`tool_search`: the request's functions and MCP servers marked `defer_loading` are not declared up front.
The model reads one line for each function (a namespace or a server: its name and description) and a
search function, `tool_search.search`.

Run here (`execution: "server"`), a search streams as a `tool_search_call` and a `tool_search_output`
holding the definitions found; the model reads their declarations in the search's answer, after the
prompt's prefix, so what the engine has cached stays as it is, and they are callable from then on, in
this response and those that continue it (the dialog keeps them). Run by the client, the call ends the
response, and the client's `tool_search_output` brings the definitions (`_read_search_output`)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable, Sequence

import anyio

from connectors.urls import shown

from ...core.ids import new_id
from ...engine.harmony import ToolDescription, ToolNamespaceConfig
from ...errors import bad_request
from ...protocol import ItemStatus
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, Records, tool_call_message, tool_result
from ..history.tool_declarations import checked_definitions, loaded_record, loaded_text, parsed_definitions
from ..shapes.items import Event, Events, OutputItem
from ..shapes.output_items import ToolSearchCallShape, ToolSearchOutputShape
from ..shapes.tool_models import CustomTool, FunctionTool, McpTool, NamespaceTool
from ..shapes.tool_search_models import (
    TOOL_SEARCH_NAMESPACE,
    TOOL_SEARCH_RECIPIENT,
    Execution,
    ToolSearchCallItem,
    ToolSearchOutputItem,
    ToolSearchTool,
)
from .base import AnyTool, Declarations, Tool, ToolContext, owed_output
from .loaded import LoadedTools, UnwrittenLoad
from .mcp import McpServers, loaded_servers
from .tool_search_catalog import Catalog

MAX_QUERY_CHARS = 1000
DESCRIPTION = (
    "More tools are available than are declared here: those listed below are loaded when you search for "
    "them. Search with words for what you need done, or with the exact name of a listed tool or namespace; "
    "the tools found are declared in the answer, and you call them as declared."
)
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What the tool should do, or the name of a listed tool or namespace."}},
    "required": ["query"],
}


class SearchCall(OutputItem):
    type = "tool_search_call"
    id_prefix = "tsc"

    def __init__(self, output_index: int, call_id: str, execution: Execution, arguments: Any) -> None:
        super().__init__(output_index)
        self.call_id, self.execution, self.arguments = call_id, execution, arguments

    def opened(self, events: Events) -> list[Event]:
        return [self.added(events)]

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        self.status = status
        return [self.done(events)]

    def as_dict(self) -> ToolSearchCallShape | ToolSearchOutputShape:  # a result writes its own
        return {
            "id": self.id,
            "type": "tool_search_call",
            "call_id": self.call_id,
            "execution": self.execution,
            "arguments": self.arguments,
            "status": self.status,
        }


class SearchResult(SearchCall):
    """The definitions a search run here loaded (in `tools`)."""

    type = "tool_search_output"
    id_prefix = "tso"

    def as_dict(self) -> ToolSearchOutputShape:
        return {
            "id": self.id,
            "type": "tool_search_output",
            "call_id": self.call_id,
            "execution": self.execution,
            "tools": self.arguments,
            "status": self.status,
        }


def _read_search_call(dialog: Dialog, index: int, item: ToolSearchCallItem, records: Records) -> None:
    if item.call_id is not None and (item.call_id in dialog.answered or item.call_id in dialog.open_calls):
        return  # sent again with the whole thread
    dialog.append(tool_call_message(TOOL_SEARCH_RECIPIENT, item.arguments_text()))
    if item.execution == "client" and item.call_id is not None:
        dialog.open_calls[item.call_id] = TOOL_SEARCH_RECIPIENT
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or SearchCall.fresh_id(), "status": item.status or ItemStatus.COMPLETED})


def _read_search_output(dialog: Dialog, index: int, item: ToolSearchOutputItem, records: Records) -> None:
    """The tools a search loaded: declared to the model where the answer is, callable from then on."""
    tools = checked_definitions(item.tools, f"input[{index}].tools")
    if item.execution == "client":  # the answer to a client's search: matched to its call, like a function's
        if item.call_id is None:
            raise bad_request("A client tool_search_output needs the call_id of its tool_search_call.", param=f"input[{index}].call_id")
        digest = hashlib.sha256(json.dumps(item.tools, sort_keys=True).encode()).hexdigest()
        if dialog.open_calls.pop(item.call_id, None) is None:
            if dialog.answered.get(item.call_id) == digest:
                return  # sent again with the whole thread
            raise bad_request(f"No tool search call found for tool_search_output with call_id {item.call_id}.", param=f"input[{index}].call_id")
        dialog.answered[item.call_id] = digest
    if any(isinstance(tool, McpTool) for tool in tools):
        dialog.tool_state(LoadedTools).unwritten.append(UnwrittenLoad(len(dialog.messages), tools))
    dialog.append(tool_result(TOOL_SEARCH_RECIPIENT, "commentary", loaded_text(tools)))
    dialog.tool_state(LoadedTools).load([loaded_record(tool) for tool in tools])
    record = item.model_dump(exclude_none=True) | {"id": item.id or SearchResult.fresh_id(), "status": item.status or ItemStatus.COMPLETED}
    record["tools"] = [_without_credentials(tool) for tool in item.tools]
    records.append(record)


def _without_credentials(tool: dict[str, Any]) -> dict[str, Any]:
    """A loaded tool as the input items list it: an MCP server's headers, and what its URL may carry of
    credentials, are never stored."""
    if tool.get("type") != "mcp":
        return tool
    kept = {key: value for key, value in tool.items() if key not in ("headers", "authorization")}
    if isinstance(kept.get("server_url"), str):
        kept["server_url"] = shown(kept["server_url"])
    return kept


class ToolSearch(Tool[ToolSearchTool]):
    request_types = (ToolSearchTool,)
    namespaces = frozenset({TOOL_SEARCH_NAMESPACE})
    metric = "tool_search"
    produces = (SearchCall, SearchResult)
    reads = {ToolSearchCallItem: _read_search_call, ToolSearchOutputItem: _read_search_output}
    owes = {"tool_search_call": owed_output("tool_search_output", execution="client")}

    def __init__(self, context: ToolContext, declared: list[ToolSearchTool]) -> None:
        super().__init__(context, declared)
        self.tool = declared[0] if declared else None
        self.catalog = Catalog(context.tools)

    def prepared(self, tools: Sequence[AnyTool]) -> None:
        # What tool search finds of MCP servers is known once they are connected.
        for tool in tools:
            if isinstance(tool, McpServers):
                self.catalog.add_servers(tool.deferred.values())

    @property
    def by_client(self) -> bool:
        return self.tool is not None and self.tool.execution == "client"

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        await super().prepare(dialog, provision)
        for tool in self.declared[1:]:
            raise bad_request("A request has at most one tool_search tool.", param=f"{self.param(tool)}.type")
        if self.tool is None:
            deferred = _first_deferred(self.context.tools)
            if deferred is not None:
                raise bad_request("Tools with defer_loading need a tool_search tool in tools, to be found with.", param=deferred)

    def recipients(self) -> Iterable[str]:
        return self.namespaces if self.tool is not None and self.context.enabled else ()

    def declare(self, declarations: Declarations) -> None:
        if self.tool is None or not self.context.enabled:
            return
        listed = "\n\nTools to find:\n" + "\n".join(self.catalog.lines) if self.catalog.lines else ""
        own = self.tool if self.by_client else None
        function = ToolDescription.new(
            "search",
            (own.description if own and own.description else None) or "Find tools and load them.",
            parameters=(own.parameters if own and own.parameters else None) or PARAMETERS,
        )
        declarations.developer.append(ToolNamespaceConfig(name=TOOL_SEARCH_NAMESPACE, description=DESCRIPTION + listed, tools=[function]))

    def open_call(self, call: ToolCall, name: str) -> OutputItem | None:
        """Claimed as its header arrives; its item comes once its arguments are complete (`written`)."""
        if name != "search":
            call.refuse(f"there is no tool '{call.recipient}'. Call {TOOL_SEARCH_RECIPIENT}.")
            return None
        if not self.by_client and not self.context.budget.take(call):
            return None
        call.claim(self, CallKind.CLIENT if self.by_client else CallKind.HOSTED)
        return None

    async def written(self, call: ToolCall, text: str) -> list[Event]:
        try:
            arguments = json.loads(text)
        except ValueError:
            arguments = None
        if not isinstance(arguments, dict):
            call.invalidate(f"the arguments of {TOOL_SEARCH_RECIPIENT} are not a JSON object. Search again with one.")
            return []
        query = arguments.get("query")
        if not self.by_client and not (isinstance(query, str) and 0 < len(query.strip()) <= MAX_QUERY_CHARS):
            call.invalidate(f"'query' must be a string of 1 to {MAX_QUERY_CHARS} characters. Search again with one.")
            return []
        output, dialog = self.context.output, self.dialog
        execution: Execution = "client" if self.by_client else "server"
        call_id = new_id("call")
        item = call.item = output.add(lambda index: SearchCall(index, call_id, execution, arguments))
        dialog.claim(len(dialog.messages) - 1, item.id)  # the call's message, just appended
        call.arguments = text
        if self.by_client:
            dialog.open_calls[call_id] = TOOL_SEARCH_RECIPIENT  # answered by the client's tool_search_output
            return [*item.opened(output.events), *item.closed(output.events)]
        return item.opened(output.events)  # in progress while the search runs

    async def run(self, call: ToolCall) -> None:
        item = call.item
        assert isinstance(item, SearchCall)
        query = str(item.arguments["query"])
        found = self.catalog.definitions(self.catalog.search(query, self.dialog.tool_state(LoadedTools).recipients))
        tools = parsed_definitions(found)
        servers = loaded_servers(tools, self.catalog.servers)
        # Declarations are rendered (and tokenised) by Harmony: off the event loop.
        text = await anyio.to_thread.run_sync(loaded_text, tools, servers) if found else ""
        self.dialog.tool_state(LoadedTools).load(found)
        output = self.context.output
        result = output.add(lambda index: SearchResult(index, item.call_id, "server", found))
        self.dialog.owner = result.id  # the answer the model reads belongs to the output item
        output.emit([*item.closed(output.events), *result.opened(output.events), *result.closed(output.events)])
        call.output = text or f"No tool that is not loaded yet matches '{query}'. Search with other words, or go on without."


def _first_deferred(tools: list[Any]) -> str | None:
    """Where the first tool marked `defer_loading` is in the request, as a param."""
    for index, tool in enumerate(tools):
        if isinstance(tool, (FunctionTool, CustomTool, McpTool)) and tool.defer_loading:
            return f"tools[{index}].defer_loading"
        if isinstance(tool, NamespaceTool):
            inner = next((place for place, function in enumerate(tool.tools) if function.defer_loading), None)
            if inner is not None:
                return f"tools[{index}].tools[{inner}].defer_loading"
    return None
