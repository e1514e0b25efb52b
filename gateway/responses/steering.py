"""Steering, the WebSocket mode's beta (`response.steer`): user input sent to a response while it runs.

Accepted, the input is queued for that response (`response.steer.accepted`). The response ends at its
next safe boundary, after a tool's output and before the next engine call, never inside a message, as
`incomplete` with reason `steered` (or as it would have ended, when it answers first), and a successor
response continues it with the input (socket.py). A response that stops for the client's tool output
or approval keeps the input queued (`response.steer.pending`, naming what the client owes) until the
client's next `response.create` continues it, which the input is put in front of. Input that cannot be
committed comes back in `response.steer.failed`. Shapes: the openai SDK's `response_steer_*` types."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from pydantic import Field

from ..core.ids import new_id
from ..core.models import StrictModel
from ..protocol import EventType
from .history.dialog import Dialog
from .shapes.input_models import ContentPart, MessageItem
from .tools.registry import OWED_INPUT


class SteerError(enum.StrEnum):
    """Why steering input was not, or could not be, committed."""

    RESPONSE_NOT_FOUND = "response_not_found"
    INVALID_INPUT = "invalid_input"
    NOT_SUPPORTED = "steering_not_supported"
    TOO_MANY_PENDING = "too_many_pending_steers"
    ALREADY_COMPLETED = "response_already_completed"
    NOT_ACTIVE = "response_not_active"
    SUCCESSOR_FAILED = "successor_creation_failed"


class SteerMessage(StrictModel):
    """Steering takes user messages only: `type`, `role` and `content`."""

    type: Literal["message"] = "message"
    role: Literal["user"]
    content: str | list[ContentPart]


class SteerEvent(StrictModel):
    type: Literal["response.steer"]
    previous_response_id: str = Field(min_length=1, max_length=128)
    input: str | list[SteerMessage] = Field(min_length=1)


@dataclass
class Steer:
    """One accepted submission, queued for the response it names."""

    previous_response_id: str
    input: Any  # as the client sent it: returned as it was when it cannot be committed
    messages: list[MessageItem]
    size: int  # the bytes of the event that brought it: what the socket's bound on queued steering counts
    id: str | None = None

    @classmethod
    def of(cls, event: SteerEvent, raw_input: Any, size: int) -> "Steer":
        if isinstance(event.input, str):
            messages = [MessageItem(role="user", content=event.input)]
        else:
            messages = [MessageItem(role="user", content=message.content) for message in event.input]
        return cls(event.previous_response_id, raw_input, messages, size)

    def accept(self) -> None:
        self.id = new_id("steer")

    def reference(self) -> dict[str, Any]:
        return {"id": self.id, "previous_response_id": self.previous_response_id}


def accepted(steer: Steer) -> dict[str, Any]:
    """The fields of `response.steer.accepted` (socket.py numbers and sends the event)."""
    return {"type": EventType.STEER_ACCEPTED, "steer": steer.reference()}


def pending(steer: Steer, required_input: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": EventType.STEER_PENDING,
        "reason": "waiting_for_required_input",
        "required_input": required_input,
        "steer": steer.reference(),
    }


def failed(steer: Steer | None, previous_response_id: str, raw_input: Any, code: SteerError, message: str) -> dict[str, Any]:
    returned: dict[str, Any] = {"input": raw_input, "previous_response_id": previous_response_id}
    if steer is not None and steer.id is not None:
        returned["id"] = steer.id
    return {
        "type": EventType.STEER_FAILED,
        "error": {"code": code, "message": message, "type": "invalid_request_error"},
        "steer": returned,
    }


def required_input(output: Sequence[Mapping[str, Any]], dialog: Dialog) -> list[dict[str, Any]]:
    """The input stubs of the tool results and approvals a response waits for (only identifying fields),
    as each item's tool says (its `owes`)."""
    stubs: list[dict[str, Any]] = []
    for item in output:
        owed = OWED_INPUT.get(str(item.get("type")))
        stub = owed(item, dialog) if owed is not None else None
        if stub is not None:
            stubs.append(stub)
    return stubs
