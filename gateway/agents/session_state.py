"""What one change to an Agents API session emits, and the pure parts of its turns: what the client owes
(`required_actions`), what it gave as the next run's input, usage summed (turns.py uses them)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..errors import APIError, bad_request
from ..protocol import SessionStatus
from ..storage.agent_store import SessionRecord
from .models import ToolResultInput
from .objects import session_object
from .translate import event

WEBHOOK = {
    SessionStatus.IN_PROGRESS: "agent.session.in_progress",
    SessionStatus.REQUIRES_ACTION: "agent.session.action_required",
    SessionStatus.IDLE: "agent.session.idle",
    SessionStatus.FAILED: "agent.session.failed",
}


class Emitted:
    """What one change to a session emits: its events (written with it) and its webhook."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.frames: list[bytes] = []  # the events as written to the session's log, from number `first_number` on
        self.first_number = 0
        self.webhook: str | None = None
        self.start: list[dict[str, Any]] | None = None  # a run to start once committed, with this input
        self.cancel: str | None = None  # a run to stop once committed
        self.stale = False  # the change found the session moved on: nothing was done
        self.record: SessionRecord | None = None  # the session as the change left it

    def session(self, record: SessionRecord, status: SessionStatus) -> None:
        record.state.status = status
        self.events.append(event(f"agent.session.{status}", session=session_object(record)))
        self.webhook = WEBHOOK[status]


def unknown_call(call_id: str) -> APIError:
    # The SDK's stream helper retries exactly this (its pending-call race): the words are the API's.
    return bad_request(f"Unknown pending tool call: {call_id}", param="events", code="invalid_request_error")


def function_output(result: ToolResultInput) -> dict[str, Any]:
    if result.success:
        output: Any = (
            result.output
            if isinstance(result.output, str) or result.output is None
            else [part.model_dump(exclude_none=True) for part in result.output]
        )
        return {"type": "function_call_output", "call_id": result.call_id, "output": output if output is not None else ""}
    return {"type": "function_call_output", "call_id": result.call_id, "output": f"Error: {result.error or 'the tool failed'}", "unsuccessful": True}


def action_id(action: dict[str, Any]) -> str:
    return str(action.get("call_id") or action.get("request_id"))


def required_actions(output: Sequence[Mapping[str, Any]], turn_id: str) -> list[dict[str, Any]]:
    """What the run stopped for, as the session's `required_actions`: its function calls (the client runs
    them) and its MCP approval requests; a run ends with them, and with nothing else pending."""
    actions: list[dict[str, Any]] = []
    for item in output:
        if item.get("type") == "function_call":
            actions.append(
                {"type": "function_call", "call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"], "turn_id": turn_id}
            )
        elif item.get("type") == "mcp_approval_request":
            request = {
                "type": "mcp_tool_call",
                "name": item.get("name"),
                "server_label": item.get("server_label"),
                "arguments": item.get("arguments"),
            }
            request["message"] = f"Allow {item.get('server_label')}.{item.get('name')}?"
            actions.append({"type": "mcp_approval_request", "request_id": item["id"], "turn_id": turn_id, "request": request})
    return actions


def added(total: dict[str, Any] | None, usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """Token usage summed, as the Agents API's `TokenUsage`."""
    if not usage:
        return total
    total = total or {
        "input_tokens": 0,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 0,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 0,
    }
    total["input_tokens"] += usage.get("input_tokens", 0)
    total["output_tokens"] += usage.get("output_tokens", 0)
    total["total_tokens"] += usage.get("total_tokens", 0)
    total["input_tokens_details"]["cached_tokens"] += (usage.get("input_tokens_details") or {}).get("cached_tokens", 0)
    total["output_tokens_details"]["reasoning_tokens"] += (usage.get("output_tokens_details") or {}).get("reasoning_tokens", 0)
    return total


def turn_error(code: Any) -> str:
    known = {"context_length_exceeded", "max_output_tokens", "rate_limit_exceeded", "server_overloaded", "request_timeout", "invalid_request"}
    return code if code in known else "server_error"
