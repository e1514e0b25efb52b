"""MCP's side of the history: its part of the dialog's state (the servers listed to the client, the calls
waiting for approval, the user's decisions), and its items read back as input (mcp.py writes them)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from ...core.ids import new_id
from ...errors import bad_request
from ..history.dialog import Dialog, Records, tool_call_message, tool_result
from ..shapes.input_models import McpApprovalRequestItem, McpApprovalResponseItem, McpCallItem, McpListToolsItem
from .mcp_items import McpCallOutput, McpListToolsOutput


@dataclass
class PendingApproval:
    """An MCP call the model made that waits for the user's `mcp_approval_response`."""

    server_label: str
    name: str
    arguments: str
    recipient: str
    channel: str


@dataclass
class Decision:
    """The user's answer to a pending approval, to be carried out before the model goes on."""

    approval_request_id: str
    pending: PendingApproval
    approve: bool
    reason: str | None


@dataclass
class McpState:
    """MCP's part of the dialog's state (dialog.py `ToolState`)."""

    listed: list[str] = field(default_factory=list)  # servers whose tools were listed to the client (once each)
    pending_approvals: dict[str, PendingApproval] = field(default_factory=dict)  # by approval request id
    # Approval responses of the current request (not stored: carried out by this response).
    decisions: list[Decision] = field(default_factory=list)

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> McpState:
        pending = {key: PendingApproval(**value) for key, value in (stored.get("pending_approvals") or {}).items()}
        return cls(list(stored.get("mcp_listed") or []), pending)

    def to_json(self) -> dict[str, Any]:
        return {"mcp_listed": self.listed, "pending_approvals": {key: asdict(value) for key, value in self.pending_approvals.items()}}

    def copy(self) -> McpState:
        return McpState(list(self.listed), dict(self.pending_approvals), list(self.decisions))


def owed_approval(item: Mapping[str, Any], dialog: Dialog) -> dict[str, Any] | None:
    """An approval request the client has not answered yet is owed its response."""
    if item.get("id") not in dialog.tool_state(McpState).pending_approvals:
        return None
    return {"type": "mcp_approval_response", "approval_request_id": item["id"]}


def read_approval_response(dialog: Dialog, index: int, item: McpApprovalResponseItem, records: Records) -> None:
    """The user's answer to a pending approval: carried out before the model goes on (`before_engine`)."""
    state = dialog.tool_state(McpState)
    pending = state.pending_approvals.pop(item.approval_request_id, None)
    if pending is None:
        raise bad_request(f"No pending MCP approval request with id {item.approval_request_id}.", param=f"input[{index}].approval_request_id")
    state.decisions.append(Decision(item.approval_request_id, pending, item.approve, item.reason))
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or new_id("mcpa")})


def read_approval_request(dialog: Dialog, index: int, item: McpApprovalRequestItem, records: Records) -> None:
    recipient = f"{item.server_label}.{item.name}"
    dialog.append(tool_call_message(recipient, item.arguments))
    dialog.tool_state(McpState).pending_approvals[item.id] = PendingApproval(item.server_label, item.name, item.arguments, recipient, "commentary")
    records.append(item.model_dump())


def read_call(dialog: Dialog, index: int, item: McpCallItem, records: Records) -> None:
    recipient = f"{item.server_label}.{item.name}"
    dialog.append(tool_call_message(recipient, item.arguments))
    result = item.output if item.error is None else f"Error: {item.error}"
    dialog.append(tool_result(recipient, "commentary", result or ""))
    records.append(item.model_dump() | {"id": item.id or McpCallOutput.fresh_id()})


def read_listing(dialog: Dialog, index: int, item: McpListToolsItem, records: Records) -> None:
    listed = dialog.tool_state(McpState).listed
    if item.error is None and item.server_label not in listed:
        listed.append(item.server_label)
    records.append(item.model_dump(exclude_none=True) | {"id": item.id or McpListToolsOutput.fresh_id()})
