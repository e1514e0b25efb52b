"""`mcp`: the tools of MCP servers, configured or the request's own, each server declared to the model as a
Harmony namespace named by its `server_label`. Its tools are listed to the client once per conversation
(`mcp_list_tools`); a call runs here (`mcp_call`), or first waits for the user's approval
(`mcp_approval_request`, answered by an `mcp_approval_response` in the next request). A server marked
`defer_loading` is not declared: tool search finds its tools (tool_search.py), and only those it loaded
can be called."""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping, Sequence

import anyio
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from connectors.connection import ToolCallFailed
from connectors.results import result_text
from connectors.servers import EnabledServer, ServerRefused, schema_for_model, tool_listing

from ...engine.harmony import ToolDescription, ToolNamespaceConfig
from ...engine.structural_tag import JSON_OBJECT, CallShape, json_schema
from ...errors import APIError, bad_request
from ...protocol import ItemStatus
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, tool_result
from ..history.tool_declarations import LoadedTool, loaded_text
from ..shapes.input_models import McpApprovalRequestItem, McpApprovalResponseItem, McpCallItem, McpListToolsItem
from ..shapes.items import Event, OutputItem
from ..shapes.request import NamedMcp, ToolChoiceForm
from ..shapes.tool_models import McpTool, RequestTool
from ..shapes.tool_search_models import TOOL_SEARCH_RECIPIENT, is_loaded
from .base import Declarations, Tool, ToolContext, run_call
from .loaded import LoadedTools
from .mcp_history import McpState, PendingApproval, owed_approval, read_approval_request, read_approval_response, read_call, read_listing
from .mcp_items import McpApprovalRequestOutput, McpCallOutput, McpListToolsOutput

log = logging.getLogger("gateway.tools")


class McpServers(Tool[McpTool]):
    request_types = (McpTool,)
    choices = (NamedMcp,)
    metric = "mcp"
    produces = (McpCallOutput, McpListToolsOutput, McpApprovalRequestOutput)
    reads = {
        McpApprovalResponseItem: read_approval_response,
        McpApprovalRequestItem: read_approval_request,
        McpCallItem: read_call,
        McpListToolsItem: read_listing,
    }
    owes = {"mcp_approval_request": owed_approval}

    @classmethod
    def carried_out(cls, dialog: Dialog) -> str | None:
        # An approval response runs (or refuses) the call it answers: only a response does that.
        return "mcp_approval_response" if dialog.tool_state(McpState).decisions else None

    def __init__(self, context: ToolContext, declared: list[McpTool]) -> None:
        super().__init__(context, declared)
        self.servers: dict[str, EnabledServer] = {}
        self.deferred: dict[str, EnabledServer] = {}  # found with tool search, not declared
        self._shapes: dict[str, tuple[Any, CallShape]] = {}  # each listed tool's grammar, with the tool it was made of
        self._to_list: list[EnabledServer] = []

    @staticmethod
    def matches(tool: RequestTool, ref: dict[str, Any]) -> bool:
        assert isinstance(tool, McpTool)
        return ref.get("type") == "mcp" and ref.get("server_label") == tool.server_label

    async def prepare(self, dialog: Dialog, provision: bool) -> None:
        """Connect the request's servers (errors here are HTTP errors)."""
        await super().prepare(dialog, provision)
        registry, tenant = self.context.services.mcp, self.context.tenant
        for tool in self.declared:
            param = self.param(tool)
            if tool.server_label in self.servers:
                raise bad_request(f"Two mcp tools are labelled '{tool.server_label}'.", param=f"{param}.server_label")
            try:
                server = await registry.enable(tool, self.index(tool), tenant)
            except ServerRefused as exc:
                code = "rate_limit_exceeded" if exc.status == 429 else "invalid_value"
                raise APIError(exc.status, exc.message, param=exc.param, code=code) from None
            self.servers[tool.server_label] = server
            if tool.defer_loading:
                self.deferred[tool.server_label] = server
            if tool.server_label not in dialog.tool_state(McpState).listed or not server.connection.connected:
                self._to_list.append(server)
        self._write_loads(dialog)
        for decision in dialog.tool_state(McpState).decisions:
            if decision.pending.server_label not in self.servers:
                raise bad_request(
                    f"The approval response {decision.approval_request_id} is for the MCP server "
                    f"'{decision.pending.server_label}', which is not in this request's tools.",
                    param="tools",
                )

    def _write_loads(self, dialog: Dialog) -> None:
        """The searches' answers in the input that loaded MCP tools: the model reads the tools as the
        request's server declares them."""
        loaded = dialog.tool_state(LoadedTools)
        for load in loaded.unwritten:
            for tool in load.tools:
                if isinstance(tool, McpTool) and tool.server_label not in self.servers:
                    raise bad_request(
                        f"A tool_search_output in input loads tools of the MCP server '{tool.server_label}', which is not in this request's tools.",
                        param="input",
                    )
            text = loaded_text(load.tools, loaded_servers(load.tools, self.servers))
            dialog.messages[load.message] = tool_result(TOOL_SEARCH_RECIPIENT, "commentary", text)
        loaded.unwritten = []

    def recipients(self) -> Iterable[str]:
        return self.servers

    def call_shapes(self) -> Iterable[CallShape]:
        """A connected server's tools by name, their arguments held to the tool's input schema (a deferred
        server's once loaded); a server that is not connected answers any name (refused, the model told)."""
        if not self.context.enabled:
            return ()
        loaded = self.dialog.tool_state(LoadedTools).recipients
        shapes: list[CallShape] = []
        for label, server in self.servers.items():
            if not server.connection.connected:
                shapes.append(CallShape(label, JSON_OBJECT, any_name=True))
                continue
            for tool in server.tools():
                recipient = f"{label}.{tool.name}"
                if label in self.deferred and not is_loaded(recipient, loaded):
                    continue
                cached = self._shapes.get(recipient)
                if cached is None or cached[0] is not tool:  # made once per listing (loop/constraint.py keeps the grammar)
                    schema = tool.input_schema if isinstance(tool.input_schema, dict) and tool.input_schema.get("type") == "object" else None
                    cached = self._shapes[recipient] = (tool, CallShape(recipient, json_schema(schema) if schema is not None else JSON_OBJECT))
                shapes.append(cached[1])
        return shapes

    def check_choice(self, choice: ToolChoiceForm) -> None:
        assert isinstance(choice, NamedMcp)
        server = self.servers.get(choice.server_label)
        if server is None:
            raise bad_request(f"tool_choice names the MCP server '{choice.server_label}', which is not in tools.", param="tool_choice.server_label")
        if choice.name is not None and server.connection.connected and not server.has_tool(choice.name):
            raise bad_request(f"The MCP server '{choice.server_label}' has no tool '{choice.name}'.", param="tool_choice.name")
        if choice.server_label in self.deferred and not self._any_loaded(choice.server_label, choice.name):
            raise bad_request(
                f"tool_choice names the MCP server '{choice.server_label}', which is deferred (defer_loading) and none of whose "
                "tools named there is loaded yet: use auto or required, and let the model find it with tool_search.",
                param="tool_choice",
            )

    def _any_loaded(self, label: str, name: str | None) -> bool:
        loaded = self.dialog.tool_state(LoadedTools).recipients
        if name is not None:
            return is_loaded(f"{label}.{name}", loaded)
        return f"{label}.*" in loaded or any(recipient.partition(".")[0] == label for recipient in loaded)

    def forced_header(self, choice: str | ToolChoiceForm) -> str | None:
        if not isinstance(choice, NamedMcp):
            return None
        if choice.name is None:
            return f"<|channel|>commentary to={choice.server_label}."
        return f"<|channel|>commentary to={choice.server_label}.{choice.name} <|constrain|>json<|message|>"

    def declare(self, declarations: Declarations) -> None:
        if not self.context.enabled:
            return
        for label, server in self.servers.items():
            if server.connection.connected and label not in self.deferred:
                declarations.system.append(server_namespace(server))

    # -- before the first engine call: listings, and the calls the user approved or denied --------------------

    @property
    def work_before_engine(self) -> bool:
        return bool(self._to_list or self.dialog.tool_state(McpState).decisions)

    async def before_engine(self) -> None:
        output, dialog = self.context.output, self.dialog
        state = dialog.tool_state(McpState)
        for server in self._to_list:
            item = output.add(lambda index: McpListToolsOutput(index, server.label))  # noqa: B023 (called at once)
            error = None if server.connection.connected else f"MCP server unavailable: {server.connection.error}"
            listing = [tool_listing(tool) for tool in server.tools()] if error is None else []
            if error is None and server.label not in state.listed:
                state.listed.append(server.label)
            output.emit(item.listed(output.events, listing, error))
        decisions, state.decisions = state.decisions, []
        for decision in decisions:
            pending = decision.pending
            if not decision.approve:
                reason = f" Reason: {decision.reason}" if decision.reason else ""
                dialog.append(tool_result(pending.recipient, pending.channel, f"The user denied this call.{reason}"))
                continue
            request_id = decision.approval_request_id
            approved = output.add(lambda index: McpCallOutput(index, pending.server_label, pending.name, request_id))  # noqa: B023 (called at once)
            dialog.owner = approved.id
            call = ToolCall(pending.recipient, pending.channel, tool_name=pending.name)
            call.claim(self, CallKind.HOSTED, approved)
            output.emit([*approved.opened(output.events), approved.delta(output.events, pending.arguments), *approved.written(output.events)])
            await run_call(call, self.context.services.metrics)
            dialog.append(tool_result(call.recipient, call.channel, call.output or ""))

    # -- the model's calls ----------------------------------------------------------------------------------

    def open_call(self, call: ToolCall, name: str) -> OutputItem | None:
        label = call.recipient.partition(".")[0]
        server = self.servers[label]
        if not self.context.enabled:
            return super().open_call(call, name)
        if not (server.connection.connected and server.has_tool(name)):
            state = "is unavailable" if not server.connection.connected else f"has no tool named '{name}'"
            call.refuse(f"the '{label}' server {state}.")
            return None
        if label in self.deferred and not is_loaded(call.recipient, self.dialog.tool_state(LoadedTools).recipients):
            call.refuse(f"'{call.recipient}' is not loaded: find it with {TOOL_SEARCH_RECIPIENT} first, then call it.")
            return None
        if not self.context.budget.take(call):
            return None
        call.tool_name = name
        if server.needs_approval(name):
            return call.claim(self, CallKind.APPROVAL)  # no item until the arguments are complete
        item = self.context.output.add(lambda index: McpCallOutput(index, label, name))
        return call.claim(self, CallKind.HOSTED, item)

    async def written(self, call: ToolCall, text: str) -> list[Event]:
        item, events = call.item, self.context.output.events
        call.arguments = text
        if not _is_json_object(text):
            call.invalidate("the arguments are not a valid JSON object. Call the tool again with a JSON object.")
            if isinstance(item, McpCallOutput):
                item.error = protocol_error(INVALID_PARAMS, "The arguments are not a valid JSON object.")
                return item.written(events) + item.finished(events, ItemStatus.FAILED)
            return []
        if isinstance(item, McpCallOutput):
            return item.written(events)  # open while it runs
        label = call.recipient.partition(".")[0]
        request = self.context.output.add(lambda index: McpApprovalRequestOutput(index, label, call.tool_name, text))
        self.dialog.claim(len(self.dialog.messages) - 1, request.id)  # the call's message, just appended
        self.dialog.tool_state(McpState).pending_approvals[request.id] = PendingApproval(
            label, call.tool_name, text, call.recipient, call.channel or "commentary"
        )
        return request.announced(events)

    async def run(self, call: ToolCall) -> None:
        item = call.item
        assert isinstance(item, McpCallOutput)
        server = self.servers[item.server_label]
        try:
            result = await server.connection.call(call.tool_name, json.loads(item.text))
            text = result_text(result)
            if result.is_error:  # the tool ran and reported a failure
                content = [block.model_dump(mode="json", exclude_none=True) for block in result.content]
                item.error = {"type": "mcp_tool_execution_error", "content": content}
                text = f"Error: {text or 'the tool reported an error.'}"
            else:
                item.output = text
        except ToolCallFailed as exc:
            item.error, text = protocol_error(exc.code, str(exc)), f"Error: {exc}"
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # a fault in the SDK or the server's answer: the call failed, the response goes on
            log.exception("MCP call %s.%s failed", item.server_label, item.name)
            item.error = protocol_error(INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            text = f"Error: the call failed ({type(exc).__name__})."
        call.output = text
        output = self.context.output
        output.emit(item.finished(output.events, ItemStatus.FAILED if item.error else ItemStatus.COMPLETED))


def server_namespace(server: EnabledServer, names: set[str] | None = None) -> ToolNamespaceConfig:
    """A server's tools (those named, or all) as the model reads them: a namespace named by its label."""
    tools = [tool for tool in server.tools() if names is None or tool.name in names]
    described = [ToolDescription.new(t.name, t.description or "", parameters=schema_for_model(t.input_schema)) for t in tools]
    return ToolNamespaceConfig(name=server.label, description=server.about(), tools=described)


def loaded_servers(tools: Sequence[LoadedTool], servers: Mapping[str, EnabledServer]) -> list[ToolNamespaceConfig]:
    """The MCP servers' tools among loaded tools, declared by their connected servers."""
    return [server_namespace(servers[tool.server_label], tool.allowed_names()) for tool in tools if isinstance(tool, McpTool)]


def protocol_error(code: int, message: str) -> dict[str, Any]:
    """An `mcp_call.error` for a call that did not produce a tool result."""
    return {"type": "mcp_protocol_error", "code": code, "message": message}


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
