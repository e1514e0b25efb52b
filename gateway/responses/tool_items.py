"""Output items of the tools the gateway runs itself: `python` (code_interpreter_call) and MCP servers
(mcp_list_tools, mcp_call, mcp_approval_request), with their events in the order `STREAMING.md` fixes."""

from __future__ import annotations

from typing import Any

from tools.browser.session import ACTIONS

from .items import Event, Events, OutputItem, TextItem


class _ToolCallItem(TextItem):
    """A call whose input (code, arguments) streams while the model writes it, then runs in the gateway.

    Events come in three steps: `opened()` when the model starts the call, `written()` when its input is
    complete, `finished()` once it ran. `closed()` ends it without running (cut off, or the response failed).
    """

    part_type = ""
    input_field: str  # the field of the input's `.done` event: code, arguments
    in_progress_type: str
    completed_type: str
    failed_type: str | None = None
    running_status = "in_progress"

    def __init__(self, output_index: int) -> None:
        super().__init__(output_index)
        self.delta_prefix = (
            f'event: {self.delta_type}\ndata: {{"type":"{self.delta_type}","item_id":"{self.id}",'
            f'"output_index":{output_index},"sequence_number":'
        )
        self.input_done = False

    def _input_done(self, events: Events) -> Event:
        self.input_done = True
        return events.make(self.done_type, output_index=self.output_index, item_id=self.id, **{self.input_field: self.text})

    def running(self, events: Events) -> list[Event]:
        return []

    def opened(self, events: Events) -> list[Event]:
        return [self.added(events), self._event(events, self.in_progress_type)]

    def written(self, events: Events) -> list[Event]:
        self.status = self.running_status
        return [self._input_done(events), *self.running(events)]

    def finished(self, events: Events, status: str) -> list[Event]:
        self.status = status
        kind = self.completed_type if status == "completed" else self.failed_type
        return ([self._event(events, kind)] if kind else []) + [self.done(events)]

    def closed(self, events: Events, status: str = "completed") -> list[Event]:
        written = [] if self.input_done else [self._input_done(events)]
        self.status = status
        return written + [self.done(events)]

    @property
    def input_text(self) -> str:
        return self.text if self.input_done else ""


class CodeInterpreterCallOutput(_ToolCallItem):
    """A call to `python`; `interpreting` while the sandbox runs it."""

    type = "code_interpreter_call"
    id_prefix = "ci"
    input_field = "code"
    delta_type = "response.code_interpreter_call_code.delta"
    done_type = "response.code_interpreter_call_code.done"
    in_progress_type = "response.code_interpreter_call.in_progress"
    completed_type = "response.code_interpreter_call.completed"
    running_status = "interpreting"

    def __init__(self, output_index: int, container_id: str, show_outputs: bool = True) -> None:
        self.container_id = container_id
        self.outputs: list[Event] = []
        self.show_outputs = show_outputs  # `include: ["code_interpreter_call.outputs"]`; else null, as OpenAI
        super().__init__(output_index)

    def running(self, events: Events) -> list[Event]:
        return [self._event(events, "response.code_interpreter_call.interpreting")]

    def as_dict(self) -> Event:
        return {
            "id": self.id,
            "type": "code_interpreter_call",
            "status": self.status,
            "code": self.input_text,
            "container_id": self.container_id,
            "outputs": self.outputs if self.show_outputs else None,
        }


class McpCallOutput(_ToolCallItem):
    """A call to `LABEL.TOOL` of an MCP server; its done item carries `output`, or `error` when it failed."""

    type = "mcp_call"
    id_prefix = "mcp"
    input_field = "arguments"
    delta_type = "response.mcp_call_arguments.delta"
    done_type = "response.mcp_call_arguments.done"
    in_progress_type = "response.mcp_call.in_progress"
    completed_type = "response.mcp_call.completed"
    failed_type = "response.mcp_call.failed"

    def __init__(self, output_index: int, server_label: str, name: str, approval_request_id: str | None = None) -> None:
        self.server_label = server_label
        self.name = name
        self.approval_request_id = approval_request_id
        self.output: str | None = None
        self.error: dict[str, Any] | None = None  # mcp_tool_execution_error or mcp_protocol_error
        super().__init__(output_index)

    def as_dict(self) -> Event:
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
        in_progress = self._event(events, "response.mcp_list_tools.in_progress")
        self.tools, self.error = tools, error
        self.status = "failed" if error else "completed"
        outcome = self._event(events, f"response.mcp_list_tools.{self.status}")
        return [added, in_progress, outcome, self.done(events)]

    def as_dict(self) -> Event:
        item: Event = {"id": self.id, "type": "mcp_list_tools", "server_label": self.server_label, "tools": self.tools}
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
        self.status = "completed"
        return [added, self.done(events)]

    def as_dict(self) -> Event:
        return {
            "id": self.id,
            "type": "mcp_approval_request",
            "arguments": self.arguments,
            "name": self.name,
            "server_label": self.server_label,
        }


class WebSearchCallOutput(OutputItem):
    """A call to gpt-oss's browser (`browser.search|open|find`). Added with its status only when the model
    starts the call; `searching` once its arguments are written and it runs; done with its action."""

    type = "web_search_call"
    id_prefix = "ws"

    def __init__(self, output_index: int, function: str, show_sources: bool) -> None:
        super().__init__(output_index)
        self.function = function
        self.show_sources = show_sources  # `include: ["web_search_call.action.sources"]`
        self.action: dict[str, Any] | None = None
        self.sources: list[str] = []

    def opened(self, events: Events) -> list[Event]:
        return [self.added(events), self._event(events, "response.web_search_call.in_progress")]

    def running(self, events: Events) -> list[Event]:
        self.status = "searching"
        return [self._event(events, "response.web_search_call.searching")]

    def finished(self, events: Events, action: dict[str, Any], sources: list[str], failed: bool) -> list[Event]:
        self.action, self.sources = action, sources
        self.status = "failed" if failed else "completed"
        completed = [] if failed else [self._event(events, "response.web_search_call.completed")]
        return completed + [self.done(events)]

    def closed(self, events: Events, status: str = "incomplete") -> list[Event]:
        """Ended without running (the response was cut off or failed)."""
        self.status = status
        return [self.done(events)]

    def as_dict(self) -> Event:
        item: Event = {"id": self.id, "type": "web_search_call", "status": self.status}
        if self.status in ("in_progress", "searching"):
            return item
        action = dict(self.action or {"type": ACTIONS[self.function]})  # closed before it ran: its kind only
        if action["type"] == "search" and self.show_sources:
            action["sources"] = [{"type": "url", "url": url} for url in self.sources]
        return item | {"action": action}
