"""The events a webhook carries: which there are, and the body each is sent as.

Endpoints may subscribe to every event type OpenAI's API names (the SDK's `event_types` literals), so a
client written for OpenAI configures its endpoints here unchanged; this gateway emits the four that end a
background response and the five of an Agents API session's state, and `/webhook_event_types` lists only those.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any, Mapping

import orjson
from pydantic import AfterValidator

from ..protocol import ResponseStatus

# The event a background response sends as it ends: `response.` and its status, as OpenAI names them.
_ENDED = (ResponseStatus.COMPLETED, ResponseStatus.FAILED, ResponseStatus.CANCELLED, ResponseStatus.INCOMPLETE)
RESPONSE_ENDED: dict[str, str] = {status.value: f"response.{status.value}" for status in _ENDED}
# What an Agents API session tells as its state changes (gateway/agents/turns.py).
AGENT_SESSION = ["agent.session.created", "agent.session.action_required", "agent.session.in_progress", "agent.session.idle", "agent.session.failed"]
EMITTED: list[str] = [*RESPONSE_ENDED.values(), *AGENT_SESSION]

# Every other type OpenAI's API names (the SDK's `event_types` literals): accepted, never emitted here.
_OTHERS = (
    "batch.completed", "batch.failed", "batch.expired", "batch.cancelled",
    "eval.run.succeeded", "eval.run.failed", "eval.run.canceled",
    "fine_tuning.job.succeeded", "fine_tuning.job.failed", "fine_tuning.job.cancelled",
    "realtime.call.incoming", "video.completed", "video.failed",
    "agent.environment.ready", "agent.environment.failed", "agent.environment.suspended", "agent.environment.expired",
    "safety.alert.created",
)  # fmt: skip
KNOWN = frozenset((*EMITTED, *_OTHERS))


def _known(event_type: str) -> str:
    if event_type not in KNOWN:
        raise ValueError(f"'{event_type[:100]}' is not a webhook event type")
    return event_type


EventType = Annotated[str, AfterValidator(_known)]


def response_event(response: Mapping[str, Any]) -> tuple[str, bytes] | None:
    """A background response that ended: its event's type and body; None for any other response."""
    event_type = RESPONSE_ENDED.get(str(response.get("status")))
    if event_type is None or not response.get("background"):
        return None
    ended_at = response.get("completed_at") or time.time()
    return event_type, event_body(event_type, str(response["id"]), int(ended_at))


def sample_event(event_type: str) -> bytes:
    """What `test` sends: an event of the type asked for, about an object that does not exist."""
    return event_body(event_type, random_id(f"{event_type.split('.')[0]}_test"), int(time.time()))


def event_body(event_type: str, subject_id: str, created_at: int) -> bytes:
    return orjson.dumps({"id": random_id("evt"), "object": "event", "created_at": created_at, "type": event_type, "data": {"id": subject_id}})


def random_id(prefix: str) -> str:
    """An id of its own, never one derived from a response's (core/ids.py derives those while items are made)."""
    return f"{prefix}_{secrets.token_hex(16)}"
