"""The fixed parts of the streamed Responses protocol, defined once: the events that end a stream, and
how an event is framed as a server-sent event.

Every writer of frames (a run's event log, a replica that ends another's run, a follower that reports an
error) frames through `event_frame`, and every reader that must know where a stream ends asks
`ends_stream`: a client sees exactly one terminal event whichever wrote it. (The per-token deltas are
formatted from prefixes built once per item, items.py: the same frame, made without a dict.)
"""

from __future__ import annotations

from typing import Any

from .jsontext import dumps

# The last event of a response's own stream, one per status it can end in.
RESPONSE_ENDINGS = ("response.completed", "response.incomplete", "response.failed")
# What may end an SSE stream: a response's ending, or an `error` event (a cancelled response followed, a
# store that went away), since OpenAI's stream has no event for those.
STREAM_ENDINGS = (*RESPONSE_ENDINGS, "error")
_ENDING_HEADS = tuple(f"event: {kind}\n".encode() for kind in STREAM_ENDINGS)


def event_frame(event: dict[str, Any]) -> bytes:
    """The SSE frame of one event: `event: TYPE`, `data: JSON`, a blank line."""
    return f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode()


def ends_stream(frame: bytes) -> bool:
    return frame.startswith(_ENDING_HEADS)
