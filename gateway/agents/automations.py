"""Automations: an agent run on a schedule (`periodic`, a cron expression in a time zone) or once (`run_at`),
against a new session each time or an existing one. What they are as kept and shown (openai 3.57
`PeriodicAutomation`, `OneTimeAutomation`, `AutomationInvocation`), how a client's or an agent's request
becomes one, and what firing one does to its schedule. The scheduler (scheduler.py) fires and delivers them."""

from __future__ import annotations

import time
from typing import Any

from ..core.ids import new_id
from ..errors import APIError, bad_request, not_found
from ..protocol import AutomationStatus, InvocationStatus
from ..storage import Tx
from ..storage.automation_store import Automation, Firing, Invocation
from ..storage.file_store import TooMany
from .automation_models import AutomationCreate, AutomationUpdate, ExistingSessionTarget, NewSessionTarget
from .environments import refuse_unsupported
from .models import HostedEnvironment, SelfHostedEnvironment
from .needs import AgentsNeeds
from .objects import no_agent, resolved_agent, shown, unsupported
from .schedule import BadSchedule, Cron
from .vault_use import checked_vaults

# An occurrence fired this late is still fired for itself (and the next ones caught up, one a pass); later than
# this (a gateway that was down), only the latest missed one fires.
MISFIRE_GRACE_S = 10.0
SHOWN_AGENT = ("instructions", "model", "multi_agent", "reasoning", "service_tier", "text", "tools", "compaction", "experimental")


def no_automation(automation_id: str) -> APIError:
    return not_found(f"No automation found with id '{automation_id}'.", param="automation_id")


# As shown


def automation_object(automation: Automation) -> dict[str, Any]:
    body = automation.body
    shown_body: dict[str, Any] = {
        "id": automation.id, "object": "agent.automation", "type": body["type"], "created_at": automation.created_at,
        "created_by": body["created_by"], "metadata": body["metadata"], "name": body["name"], "status": automation.status,
        "pause_reason": automation.pause_reason, "target": _target_object(body["target"]),
    }  # fmt: skip
    if body["type"] == "periodic":
        shown_body.update(expression=body["expression"], timezone=body["timezone"])
    else:
        shown_body["run_at"] = body["run_at"]
    return shown_body


def _target_object(target: dict[str, Any]) -> dict[str, Any]:
    if target["type"] == "existing_session":
        return target
    agent = target.get("agent")
    return {
        "type": "new_session", "agent_id": target.get("agent_id"), "environment": target["environment"], "input": target["input"],
        "metadata": target.get("metadata") or {}, "vault_ids": target.get("vault_ids") or [],
        "agent": {key: value for key, value in shown(agent).items() if key in SHOWN_AGENT} if agent is not None else None,
    }  # fmt: skip


def invocation_object(invocation: Invocation, automation: Automation) -> dict[str, Any]:
    source = {"type": "manual"} if invocation.source == "manual" else {"type": "automation", "automation": automation_object(automation)}
    return {
        "id": invocation.id, "object": "agent.automation.invocation", "automation_id": invocation.automation_id,
        "created_at": invocation.created_at, "status": invocation.status, "scheduled_at": invocation.scheduled_at,
        "session_id": invocation.session_id if invocation.turn_id is not None or invocation.status != InvocationStatus.QUEUED else None,
        "skip_reason": invocation.skip_reason, "error": invocation.error, "source": source,
    }  # fmt: skip


# Made and changed


async def checked_target(services: AgentsNeeds, tenant: str, target: NewSessionTarget | ExistingSessionTarget) -> dict[str, Any]:
    """The target as kept: what it names exists now, and what a new session could not do is refused now
    (not at every invocation); an inline agent is resolved, its credentials sealed."""
    if isinstance(target, ExistingSessionTarget):
        if await services.agents.session(target.session_id, tenant) is None:
            raise not_found(f"No session found with id '{target.session_id}'.", param="target.session_id")
        return target.model_dump()
    if (target.agent is None) == (target.agent_id is None):
        raise bad_request("Give exactly one of agent (inline) and agent_id.", param="target.agent_id")
    kept: dict[str, Any] = {"type": "new_session", "agent_id": target.agent_id, "agent": None}
    kept["vault_ids"] = await checked_vaults(services, tenant, target.vault_ids, "target.vault_ids")
    if target.agent_id is not None and await services.agents.agent(target.agent_id, tenant) is None:
        raise no_agent(target.agent_id, "target.agent_id")
    if target.agent is not None:
        services.engines.route(target.agent.model)
        kept["agent"] = resolved_agent(target.agent, services.sealer, tenant)
    environment = target.environment
    if isinstance(environment, SelfHostedEnvironment):
        raise unsupported("A self_hosted environment (codex exec-server)", "target.environment.type")
    if isinstance(environment, HostedEnvironment):
        refuse_unsupported(environment, "target.environment")
        if services.sandbox is None:
            raise bad_request("Hosted environments need the sandbox, which this gateway does not have.", param="target.environment.type")
    kept["environment"] = environment.model_dump(exclude_none=True)
    kept["input"] = [message.model_dump(exclude_none=True) for message in target.input]
    kept["metadata"] = target.metadata or {}
    return kept


def _schedule(kind: str, expression: str | None, timezone: str | None, run_at: int | None, now: float) -> tuple[dict[str, Any], float]:
    """The schedule's fields as kept, and when it is first due."""
    if kind == "periodic":
        for name, value in (("expression", expression), ("timezone", timezone)):
            if value is None:
                raise bad_request(f"A periodic automation needs {name}.", param=name)
        if run_at is not None:
            raise bad_request("run_at is for one-time automations (type 'once').", param="run_at")
        assert expression is not None and timezone is not None
        try:
            cron = Cron.parse(expression, timezone)
        except BadSchedule as exc:
            raise bad_request(str(exc), param="timezone" if str(exc).startswith("timezone") else "expression") from None
        return {"expression": cron.expression, "timezone": timezone}, cron.after(now)
    for name, value in (("expression", expression), ("timezone", timezone)):
        if value is not None:
            raise bad_request(f"{name} is for periodic automations.", param=name)
    if run_at is None:
        raise bad_request("A one-time automation needs run_at.", param="run_at")
    if run_at <= now:
        raise bad_request("run_at must be a future Unix timestamp in seconds.", param="run_at")
    return {"run_at": run_at}, float(run_at)


async def create(
    services: AgentsNeeds, tenant: str, body: AutomationCreate, created_by: dict[str, Any], target: dict[str, Any], tx: Tx | None = None
) -> Automation:
    """Kept, active, first due as its schedule says (never invoked at once)."""
    now = time.time()
    schedule, due = _schedule(body.type, body.expression, body.timezone, body.run_at, now)
    kept = {"type": body.type, "name": body.name, "metadata": body.metadata or {}, "target": target, "created_by": created_by, **schedule}
    automation = Automation(new_id("auto"), tenant, int(now), AutomationStatus.ACTIVE, None, due, _session_of(kept), kept)
    try:
        await services.automations.create(automation, services.config.agents.max_automations_per_tenant, tx)
    except TooMany as exc:
        raise bad_request(f"This gateway keeps at most {exc.limit} automations per project.", code="too_many_automations") from None
    return automation


def _session_of(body: dict[str, Any]) -> str | None:
    """The session the list's `session_id` finds it by: the one it targets, or the one whose agent made it."""
    target, made_by = body["target"], body["created_by"]
    return target.get("session_id") or (made_by.get("session_id") if made_by["type"] == "agent" else None)


def updated(automation: Automation, change: AutomationUpdate, target: dict[str, Any] | None, now: float) -> None:
    """`change` applied (within the store's locked change); its next due time follows a new schedule."""
    body = automation.body
    periodic = body["type"] == "periodic"
    if change.run_at is not None and automation.status == AutomationStatus.COMPLETED:
        raise bad_request("run_at can change only before the automation's one-time invocation exists.", param="run_at")
    if periodic and (change.expression is not None or change.timezone is not None) or not periodic and change.run_at is not None:
        expression = change.expression or body.get("expression")
        timezone = change.timezone or body.get("timezone")
        schedule, due = _schedule(body["type"], expression, timezone, change.run_at, now)
        body.update(schedule)
        if automation.status == AutomationStatus.ACTIVE:
            automation.next_run_at = due
    elif change.expression is not None or change.timezone is not None or change.run_at is not None:
        _schedule(body["type"], change.expression, change.timezone, change.run_at, now)  # the 400 naming the wrong field
    if change.name is not None:
        body["name"] = change.name
    if change.metadata is not None:
        body["metadata"] = change.metadata
    if target is not None:
        body["target"] = target
        automation.session_id = _session_of(body)


def paused(automation: Automation) -> None:
    if automation.status == AutomationStatus.COMPLETED:
        raise bad_request("A completed automation cannot be paused.", param="automation_id")
    automation.status, automation.next_run_at = AutomationStatus.PAUSED, None


def resumed(automation: Automation, now: float) -> None:
    """Active again from now on: occurrences missed while paused are not fired."""
    if automation.status == AutomationStatus.COMPLETED:
        raise bad_request("A completed automation cannot be resumed.", param="automation_id")
    body = automation.body
    automation.status, automation.pause_reason = AutomationStatus.ACTIVE, None
    if body["type"] == "periodic":
        automation.next_run_at = Cron.parse(body["expression"], body["timezone"]).after(now)
    else:
        automation.next_run_at = max(float(body["run_at"]), now)


# Fired


def firing(automation: Automation, now: float) -> Firing:
    """What firing a due automation does: the occurrence it fires for (itself when it is late by less than
    MISFIRE_GRACE_S; else the latest one due, missed ones not fired in a burst), when it is next due, and the
    ids its invocation delivers to."""
    body = automation.body
    due = automation.next_run_at if automation.next_run_at is not None else now
    session_id = _delivered_to(automation)
    if body["type"] == "once":
        return Firing(int(body["run_at"]), None, new_id("ainv"), session_id)
    cron = Cron.parse(body["expression"], body["timezone"])
    if now - due <= MISFIRE_GRACE_S:  # late by a moment (a busy machine, a slow pass): this one, the next after it
        return Firing(int(due), cron.after(due), new_id("ainv"), session_id)
    return Firing(int(cron.latest(due, now)), cron.after(now), new_id("ainv"), session_id)


def manual(automation: Automation) -> Invocation:
    session_id = _delivered_to(automation)
    return Invocation(
        new_id("ainv"), automation.id, automation.tenant, int(time.time()), InvocationStatus.QUEUED, "manual", None, None, None, session_id, None
    )


def _delivered_to(automation: Automation) -> str:
    """The session an invocation delivers to: the target's, or a new one's id, chosen now (delivery is idempotent)."""
    target = automation.body["target"]
    return new_id("sess") if target["type"] == "new_session" else str(target["session_id"])
