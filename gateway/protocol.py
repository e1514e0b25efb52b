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
from typing import Any

from .jsontext import dumps


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


class Include(enum.StrEnum):
    """What `include` may ask for. Each value is honoured by the part that owns it: the tools' own values
    are listed by their tools (responses/tools/registry.py derives the accepted set)."""

    ENCRYPTED_REASONING = "reasoning.encrypted_content"
    LOGPROBS = "message.output_text.logprobs"
    CODE_OUTPUTS = "code_interpreter_call.outputs"
    SEARCH_SOURCES = "web_search_call.action.sources"

class EventType(enum.StrEnum):
    """The events a reader of a response's log acts on (Chat Completions, followers, replicas)."""

    CREATED = "response.created"
    IN_PROGRESS = "response.in_progress"
    COMPLETED = "response.completed"
    INCOMPLETE = "response.incomplete"
    FAILED = "response.failed"
    ERROR = "error"
    OUTPUT_ITEM_ADDED = "response.output_item.added"
    OUTPUT_ITEM_DONE = "response.output_item.done"
    ANNOTATION_ADDED = "response.output_text.annotation.added"


# The last event of a response's own stream, one per status it can end in.
RESPONSE_ENDINGS = (EventType.COMPLETED, EventType.INCOMPLETE, EventType.FAILED)
# What may end an SSE stream: a response's ending, or an `error` event (a cancelled response followed, a
# store that went away), since OpenAI's stream has no event for those.
STREAM_ENDINGS = (*RESPONSE_ENDINGS, EventType.ERROR)
_ENDING_HEADS = tuple(f"event: {kind}\n".encode() for kind in STREAM_ENDINGS)


def event_frame(event: dict[str, Any]) -> bytes:
    """The SSE frame of one event: `event: TYPE`, `data: JSON`, a blank line."""
    return f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode()


def ends_stream(frame: bytes) -> bool:
    return frame.startswith(_ENDING_HEADS)
