"""The `automations` agent tool: an agent schedules its own wake-ups (an automation that sends its session
instructions, once or on a schedule), lists them and cancels them. The model calls them as functions; the
gateway answers them itself, within the session's change, so the client never owes them.

The arguments are the model's: parsed as hostile input, every mistake answered to the model as an error it
can correct, never a failure of the turn. An agent sees and cancels only its own session's automations."""

from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import APIError
from ..storage import Tx
from ..storage.agent_store import SessionRecord
from .automation_models import AutomationCreate
from .automations import automation_object, create
from .needs import AgentsNeeds
from .wakeup_functions import LIST, SCHEDULE

MAX_ARGUMENTS = 16_384
MAX_LISTED = 50


class _Refused(Exception):
    """What the model asked cannot be done; told to it as it is."""


class _Schedule(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1, max_length=256)
    instructions: str = Field(min_length=1, max_length=32_000)
    delay_seconds: int | None = Field(None, ge=1, le=366 * 86_400)
    run_at: str | None = Field(None, max_length=64)
    expression: str | None = Field(None, max_length=256)
    timezone: str | None = Field(None, max_length=64)


class _Cancel(BaseModel):
    model_config = ConfigDict(extra="ignore")
    automation_id: str = Field(min_length=1, max_length=128)


def has_tool(session: SessionRecord) -> bool:
    return any(tool["type"] == "automations" for tool in session.body["agent"]["tools"])


async def call(services: AgentsNeeds, tx: Tx, session: SessionRecord, action: dict[str, Any]) -> tuple[str, bool]:
    """One of the tool's calls, answered within the session's change: its output, and whether it succeeded."""
    arguments = action.get("arguments") or "{}"
    try:
        if len(arguments) > MAX_ARGUMENTS:
            raise ValueError("the arguments are too long")
        given = json.loads(arguments)
        if action["name"] == SCHEDULE:
            return await _schedule(services, tx, session, _Schedule.model_validate(given), action["call_id"]), True
        if action["name"] == LIST:
            return await _list(services, tx, session), True
        return await _cancel(services, tx, session, _Cancel.model_validate(given).automation_id), True
    except (ValueError, ValidationError) as exc:  # ValidationError and JSON's errors are ValueErrors too
        return f"Error: the arguments are not valid: {str(exc)[:500]}", False
    except APIError as exc:
        return f"Error: {exc.message}", False
    except _Refused as exc:
        return f"Error: {exc}", False


async def _schedule(services: AgentsNeeds, tx: Tx, session: SessionRecord, given: _Schedule, call_id: str) -> str:
    once = given.delay_seconds is not None or given.run_at is not None
    run_at = None
    if given.delay_seconds is not None:
        run_at = int(time.time()) + given.delay_seconds
    elif given.run_at is not None:
        moment = dt.datetime.fromisoformat(given.run_at)
        if moment.tzinfo is None:
            raise _Refused("run_at needs its UTC offset (or Z).")
        run_at = int(moment.timestamp())
    body = AutomationCreate.model_validate({
        "type": "once" if once else "periodic", "name": given.name, "run_at": run_at,
        "expression": given.expression if not once else None, "timezone": given.timezone if not once else None,
        "target": {"type": "existing_session", "session_id": session.id, "instructions": given.instructions},
    })  # fmt: skip
    target = {"type": "existing_session", "session_id": session.id, "instructions": given.instructions}
    created = await create(services, session.tenant, body, {"type": "agent", "session_id": session.id, "tool_call_id": call_id}, target, tx)
    services.scheduler.wake()  # it looks once this change is committed, or within its poll at the latest
    return json.dumps(_brief(automation_object(created)))


async def _list(services: AgentsNeeds, tx: Tx, session: SessionRecord) -> str:
    found = await services.automations.of_session(tx, session.tenant, session.id, MAX_LISTED)
    return json.dumps([_brief(automation_object(automation)) for automation in found])


async def _cancel(services: AgentsNeeds, tx: Tx, session: SessionRecord, automation_id: str) -> str:
    found = await services.automations.automation(automation_id, session.tenant, tx)
    if found is None or found.session_id != session.id:
        raise _Refused(f"this session has no wake-up '{automation_id}'.")
    await services.automations.delete(automation_id, session.tenant, tx)
    return json.dumps({"id": automation_id, "deleted": True})


def _brief(shown: dict[str, Any]) -> dict[str, Any]:
    """What the model is told of one: not its target's session (its own) nor who made it."""
    keys = ("id", "name", "type", "status", "run_at", "expression", "timezone")
    return {key: shown[key] for key in keys if key in shown}
