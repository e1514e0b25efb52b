"""The events a webhook carries: which there are, and the body each is sent as.

Endpoints may subscribe to every event type OpenAI's API names (the SDK's `event_types` literals), so a
client written for OpenAI configures its endpoints here unchanged; this gateway emits the four that end a
background response, and `/webhook_event_types` lists only those.
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Literal, Mapping

import orjson

EventType = Literal[
    "batch.completed", "batch.failed", "batch.expired", "batch.cancelled",
    "response.completed", "response.failed", "response.cancelled", "response.incomplete",
    "eval.run.succeeded", "eval.run.failed", "eval.run.canceled",
    "fine_tuning.job.succeeded", "fine_tuning.job.failed", "fine_tuning.job.cancelled",
    "realtime.call.incoming", "video.completed", "video.failed",
    "agent.environment.ready", "agent.environment.failed", "agent.environment.suspended", "agent.environment.expired",
    "agent.session.created", "agent.session.action_required", "agent.session.in_progress", "agent.session.idle",
    "agent.session.failed", "safety.alert.created",
]  # fmt: skip

# A background response's status as it ended, and the event that says so.
RESPONSE_ENDED: dict[str, EventType] = {
    "completed": "response.completed",
    "failed": "response.failed",
    "cancelled": "response.cancelled",
    "incomplete": "response.incomplete",
}
EMITTED: list[str] = list(RESPONSE_ENDED.values())


def response_event(response: Mapping[str, Any]) -> tuple[EventType, bytes] | None:
    """A background response that ended: its event's type and body; None for any other response."""
    event_type = RESPONSE_ENDED.get(str(response.get("status")))
    if event_type is None or not response.get("background"):
        return None
    ended_at = response.get("completed_at") or time.time()
    return event_type, event_body(event_type, str(response["id"]), int(ended_at))


def sample_event(event_type: EventType) -> bytes:
    """What `test` sends: an event of the type asked for, about an object that does not exist."""
    subject = event_type.split(".")[0].replace("fine_tuning", "ftjob").replace("realtime", "rtc").replace("agent", "sess")
    return event_body(event_type, random_id(f"{subject}_test"), int(time.time()))


def event_body(event_type: EventType, subject_id: str, created_at: int) -> bytes:
    return orjson.dumps({"id": random_id("evt"), "object": "event", "created_at": created_at, "type": event_type, "data": {"id": subject_id}})


def random_id(prefix: str) -> str:
    """An id of its own, never one derived from a response's (core/ids.py derives those while items are made)."""
    return f"{prefix}_{secrets.token_hex(16)}"
