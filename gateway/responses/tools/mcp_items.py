"""The output items of MCP: a call, a server's listing, and an approval request."""

from __future__ import annotations

import logging
from typing import Any

from ...protocol import EventType, ItemStatus
from ..shapes.items import Event, Events, OutputItem, ToolCallItem
from ..shapes.output_items import McpApprovalRequestShape, McpCallShape, McpListToolsShape

log = logging.getLogger("gateway.tools")


class McpCallOutput(ToolCallItem):
    """A call to `LABEL.TOOL` of an MCP server; its done item carries `output`, or `error` when it failed."""

    type = "mcp_call"
    id_prefix = "mcp"
    input_field = "arguments"
    delta_type = EventType.MCP_CALL_ARGUMENTS_DELTA
    done_type = EventType.MCP_CALL_ARGUMENTS_DONE
    in_progress_type = EventType.MCP_CALL_IN_PROGRESS
    completed_type = EventType.MCP_CALL_COMPLETED
    failed_type = EventType.MCP_CALL_FAILED

    def __init__(self, output_index: int, server_label: str, name: str, approval_request_id: str | None = None) -> None:
        self.server_label = server_label
        self.name = name
        self.approval_request_id = approval_request_id
        self.output: str | None = None
        self.error: dict[str, Any] | None = None  # mcp_tool_execution_error or mcp_protocol_error
        super().__init__(output_index)

    def as_dict(self) -> McpCallShape:
        return {
            "id": self.id,
            "type": "mcp_call",
            "status": self.status,
            "approval_request_id": self.approval_request_id,
            "arguments": self.input_text,
            "error": self.error,
            "name": self.name,
            "output": self.output,
            "server_label": self.server_label,
        }


class McpListToolsOutput(OutputItem):
    """What the model is told of one server's tools; listed once per server per conversation."""

    type = "mcp_list_tools"
    id_prefix = "mcpl"

    def __init__(self, output_index: int, server_label: str) -> None:
        super().__init__(output_index)
        self.server_label = server_label
        self.tools: list[dict[str, Any]] = []
        self.error: str | None = None

    def listed(self, events: Events, tools: list[dict[str, Any]], error: str | None) -> list[Event]:
        added = self.added(events)
        in_progress = self._event(events, EventType.MCP_LIST_TOOLS_IN_PROGRESS)
        self.tools, self.error = tools, error
        self.status = ItemStatus.FAILED if error else ItemStatus.COMPLETED
        outcome = self._event(events, EventType.MCP_LIST_TOOLS_FAILED if error else EventType.MCP_LIST_TOOLS_COMPLETED)
        return [added, in_progress, outcome, self.done(events)]

    def as_dict(self) -> McpListToolsShape:
        item: McpListToolsShape = {"id": self.id, "type": "mcp_list_tools", "server_label": self.server_label, "tools": self.tools}
        if self.error:
            item["error"] = self.error
        return item


class McpApprovalRequestOutput(OutputItem):
    """A call that waits for the user's approval: added and done at once, with its full arguments."""

    type = "mcp_approval_request"
    id_prefix = "mcpr"

    def __init__(self, output_index: int, server_label: str, name: str, arguments: str) -> None:
        super().__init__(output_index)
        self.server_label, self.name, self.arguments = server_label, name, arguments

    def announced(self, events: Events) -> list[Event]:
        added = self.added(events)
        self.status = ItemStatus.COMPLETED
        return [added, self.done(events)]

    def as_dict(self) -> McpApprovalRequestShape:
        return {
            "id": self.id,
            "type": "mcp_approval_request",
            "arguments": self.arguments,
            "name": self.name,
            "server_label": self.server_label,
        }
