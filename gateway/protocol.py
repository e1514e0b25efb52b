"""The fixed parts of the Responses protocol, defined once: the statuses of a response and of its items,
the `include` values the gateway honours, the events that end a stream, and how an event is framed as a
server-sent event.

Every writer of frames (a run's event log, a replica that ends another's run, a follower that reports an
error) frames through `event_frame`, and every reader that must know where a stream ends asks
`ends_stream`: a client sees exactly one terminal event whichever wrote it. (The per-token deltas are
formatted from prefixes built once per item, items.py: the same frame, made without a dict.)
"""

from __future__ import annotations

import enum
from typing import Any, Mapping

from .jsontext import dumps


class IngestStatus(enum.StrEnum):
    """Where a vector store's file (or a batch of them) stands in its ingestion."""

    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


class ResponseStatus(enum.StrEnum):
    QUEUED = "queued"  # a background response not started yet
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"  # a limit ended it: max_output_tokens, max_turns
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def running(self) -> bool:
        return self in (ResponseStatus.QUEUED, ResponseStatus.IN_PROGRESS)


class ItemStatus(enum.StrEnum):
    IN_PROGRESS = "in_progress"
    INTERPRETING = "interpreting"  # a code_interpreter_call while its code runs
    SEARCHING = "searching"  # a web_search_call while it runs
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"  # cut off: by a limit, or by the response's failure
    FAILED = "failed"


class SessionStatus(enum.StrEnum):
    """An Agents API session's (gateway/agents/)."""

    IDLE = "idle"
    IN_PROGRESS = "in_progress"
    REQUIRES_ACTION = "requires_action"  # waits for the client: a function's result, an MCP approval
    FAILED = "failed"


class AutomationStatus(enum.StrEnum):
    """An Agents API automation's (gateway/agents/automations.py)."""

    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"  # a one-time automation, once fired


class InvocationStatus(enum.StrEnum):
    """An automation invocation's: queued until its turn ends."""

    QUEUED = "queued"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"  # due while the last one was still queued (`pending_delivery`)


class TurnStatus(enum.StrEnum):
    """An Agents API session's turn's."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    WAITING = "waiting"  # for the client, as its session's `requires_action`
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def ended(self) -> bool:
        return self in (TurnStatus.COMPLETED, TurnStatus.FAILED, TurnStatus.CANCELLED)


class Include(enum.StrEnum):
    """What `include` may ask for. Each value is honoured by the part that owns it: the tools' own values
    are listed by their tools (responses/tools/registry.py derives the accepted set)."""

    ENCRYPTED_REASONING = "reasoning.encrypted_content"
    LOGPROBS = "message.output_text.logprobs"
    CODE_OUTPUTS = "code_interpreter_call.outputs"
    SEARCH_SOURCES = "web_search_call.action.sources"
    FILE_SEARCH_RESULTS = "file_search_call.results"


class EventType(enum.StrEnum):
    """Every event type a response streams, as OpenAI names it: the one spelling the gateway writes and reads."""

    CREATED = "response.created"
    IN_PROGRESS = "response.in_progress"
    COMPLETED = "response.completed"
    INCOMPLETE = "response.incomplete"
    FAILED = "response.failed"
    ERROR = "error"
    OUTPUT_ITEM_ADDED = "response.output_item.added"
    OUTPUT_ITEM_DONE = "response.output_item.done"
    ANNOTATION_ADDED = "response.output_text.annotation.added"
    CODE_INTERPRETER_CALL_COMPLETED = "response.code_interpreter_call.completed"
    CODE_INTERPRETER_CALL_IN_PROGRESS = "response.code_interpreter_call.in_progress"
    CODE_INTERPRETER_CALL_INTERPRETING = "response.code_interpreter_call.interpreting"
    CODE_INTERPRETER_CALL_CODE_DELTA = "response.code_interpreter_call_code.delta"
    CODE_INTERPRETER_CALL_CODE_DONE = "response.code_interpreter_call_code.done"
    CONTENT_PART_ADDED = "response.content_part.added"
    CONTENT_PART_DONE = "response.content_part.done"
    CUSTOM_TOOL_CALL_INPUT_DELTA = "response.custom_tool_call_input.delta"
    CUSTOM_TOOL_CALL_INPUT_DONE = "response.custom_tool_call_input.done"
    FUNCTION_CALL_ARGUMENTS_DELTA = "response.function_call_arguments.delta"
    FUNCTION_CALL_ARGUMENTS_DONE = "response.function_call_arguments.done"
    MCP_CALL_COMPLETED = "response.mcp_call.completed"
    MCP_CALL_FAILED = "response.mcp_call.failed"
    MCP_CALL_IN_PROGRESS = "response.mcp_call.in_progress"
    MCP_CALL_ARGUMENTS_DELTA = "response.mcp_call_arguments.delta"
    MCP_CALL_ARGUMENTS_DONE = "response.mcp_call_arguments.done"
    MCP_LIST_TOOLS_IN_PROGRESS = "response.mcp_list_tools.in_progress"
    MCP_LIST_TOOLS_COMPLETED = "response.mcp_list_tools.completed"
    MCP_LIST_TOOLS_FAILED = "response.mcp_list_tools.failed"
    OUTPUT_TEXT_DELTA = "response.output_text.delta"
    OUTPUT_TEXT_DONE = "response.output_text.done"
    QUEUED = "response.queued"
    REASONING_TEXT_DELTA = "response.reasoning_text.delta"
    REASONING_TEXT_DONE = "response.reasoning_text.done"
    REASONING_SUMMARY_PART_ADDED = "response.reasoning_summary_part.added"
    REASONING_SUMMARY_TEXT_DELTA = "response.reasoning_summary_text.delta"
    REASONING_SUMMARY_TEXT_DONE = "response.reasoning_summary_text.done"
    REASONING_SUMMARY_PART_DONE = "response.reasoning_summary_part.done"
    SHELL_CALL_COMMAND_ADDED = "response.shell_call_command.added"
    SHELL_CALL_COMMAND_DELTA = "response.shell_call_command.delta"
    SHELL_CALL_COMMAND_DONE = "response.shell_call_command.done"
    SHELL_CALL_OUTPUT_CONTENT_DELTA = "response.shell_call_output_content.delta"
    SHELL_CALL_OUTPUT_CONTENT_DONE = "response.shell_call_output_content.done"
    WEB_SEARCH_CALL_COMPLETED = "response.web_search_call.completed"
    FILE_SEARCH_CALL_COMPLETED = "response.file_search_call.completed"
    FILE_SEARCH_CALL_IN_PROGRESS = "response.file_search_call.in_progress"
    FILE_SEARCH_CALL_SEARCHING = "response.file_search_call.searching"
    WEB_SEARCH_CALL_IN_PROGRESS = "response.web_search_call.in_progress"
    WEB_SEARCH_CALL_SEARCHING = "response.web_search_call.searching"
    COMPACTION_COMPACTING = "response.compaction.compacting"
    # The WebSocket mode's steering (responses/steering.py).
    STEER_ACCEPTED = "response.steer.accepted"
    STEER_PENDING = "response.steer.pending"
    STEER_FAILED = "response.steer.failed"


# The last event of a response's own stream, one per status it can end in.
RESPONSE_ENDINGS = (EventType.COMPLETED, EventType.INCOMPLETE, EventType.FAILED)
_ENDING_OF = {ResponseStatus.COMPLETED: EventType.COMPLETED, ResponseStatus.INCOMPLETE: EventType.INCOMPLETE, ResponseStatus.FAILED: EventType.FAILED}


def ending_event(status: str) -> EventType:
    """The event a response's stream ends with, for the status it ended in (not `cancelled`: see below)."""
    return _ENDING_OF[ResponseStatus(status)]


def terminal_event(status: str, response: Mapping[str, Any]) -> tuple[EventType, dict[str, Any]]:
    """The last event of a response's stream, as its type and fields (the sequence number is the writer's):
    its ending, with the Response; for a cancelled one, an error event, since OpenAI's stream has no
    cancelled event (whoever ended it: its run, or a replica that ended another's)."""
    if status == ResponseStatus.CANCELLED:
        return EventType.ERROR, {"code": "response_cancelled", "message": "The response was cancelled.", "param": None}
    return ending_event(status), {"response": response}


# What may end an SSE stream: a response's ending, or an `error` event (a cancelled response followed, a
# store that went away), since OpenAI's stream has no event for those.
STREAM_ENDINGS = (*RESPONSE_ENDINGS, EventType.ERROR)
_ENDING_HEADS = tuple(f"event: {kind}\n".encode() for kind in STREAM_ENDINGS)


def event_frame(event: dict[str, Any]) -> bytes:
    """The SSE frame of one event: `event: TYPE`, `data: JSON`, a blank line."""
    return f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode()


def ends_stream(frame: bytes) -> bool:
    return frame.startswith(_ENDING_HEADS)
