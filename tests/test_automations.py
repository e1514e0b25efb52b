"""Automations (`client.beta.agents.automations`): agents run on a schedule or once, against a new session each
time or an existing one, driven by the openai SDK itself; every object checked against the SDK's own types."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import httpx
import openai
import pytest
from openai.types.beta.agents.automation import Automation
from openai.types.beta.agents.automations.automation_invocation import AutomationInvocation
from pydantic import TypeAdapter

from gateway.agents.automations import MISFIRE_GRACE_S

from .conftest import MODEL, Gateway, Process, gateway_config, metric

NONE: Any = {"type": "none"}
AUTOMATION = TypeAdapter(Automation)


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def new_session(text: str, **agent: Any) -> dict[str, Any]:
    return {"type": "new_session", "agent": {"model": MODEL, **agent}, "environment": NONE, "input": [user(text)]}


def until(check: Callable[[], Any], what: str, polls: int = 1200) -> Any:
    """`check()`'s first truthy answer, polled (each poll a request the gateway answers)."""
    for _ in range(polls):
        found = check()
        if found:
            return found
        threading.Event().wait(0.05)
    raise AssertionError(f"never: {what}")


def invocations(client: openai.OpenAI, automation_id: str) -> list[AutomationInvocation]:
    return list(client.beta.agents.automations.invocations.list(automation_id, order="asc", limit=100))


def settled(client: openai.OpenAI, automation_id: str, count: int) -> list[AutomationInvocation]:
    """The automation's first `count` invocations once none of them is queued."""

    def check() -> list[AutomationInvocation] | None:
        found = invocations(client, automation_id)
        return found if len(found) >= count and all(one.status != "queued" for one in found[:count]) else None

    return until(check, f"{count} invocations of {automation_id} settled")


def answer(client: openai.OpenAI, session_id: str) -> str:
    items = client.beta.agents.sessions.items.list(session_id, order="asc").data
    return items[-1].content[0].text  # type: ignore[union-attr]


def test_a_periodic_automation_runs_its_agent_in_a_new_session_each_time(gateway: Gateway) -> None:
    client = gateway.client()
    automations = client.beta.agents.automations
    created = automations.create(
        type="periodic", name="tick", expression="*/2 * * * * *", timezone="Europe/Paris", target=new_session("Report in"), metadata={"k": "v"}
    )
    assert created.object == "agent.automation" and created.status == "active" and created.created_by.type == "developer"
    assert created.type == "periodic" and created.expression == "*/2 * * * * *" and created.timezone == "Europe/Paris"
    assert created.target.type == "new_session" and created.target.agent is not None and created.target.agent.model == MODEL
    assert automations.retrieve(created.id) == created
    ran = settled(client, created.id, 2)
    sessions = [one.session_id for one in ran[:2]]
    assert all(one.status == "completed" and one.source.type == "automation" for one in ran[:2]), ran
    assert len(set(sessions)) == 2 and all(session_id is not None for session_id in sessions)
    assert ran[1].scheduled_at is not None and ran[0].scheduled_at is not None and ran[1].scheduled_at - ran[0].scheduled_at == 2
    for session_id in sessions:
        assert session_id is not None and answer(client, session_id) == "You said: Report in"
    exposition = httpx.get(f"{gateway.url}/metrics").text
    assert (
        metric(exposition, "gateway_automations_total", outcome="fired") >= 2
        and metric(exposition, "gateway_automations_total", outcome="completed") >= 2
    )
    assert metric(exposition, "gateway_automation_delay_seconds_count") >= 2
    paused = automations.pause(created.id)
    assert paused.status == "paused"
    count = len(invocations(client, created.id))
    other = automations.create(type="periodic", name="other", expression="* * * * * *", timezone="UTC", target=new_session("Again"))
    settled(client, other.id, 2)  # two more periods passed: the paused one fired none of them
    assert len(invocations(client, created.id)) == count
    automations.delete(other.id)
    resumed = automations.resume(created.id)
    assert resumed.status == "active" and resumed.pause_reason is None
    settled(client, created.id, count + 1)
    assert automations.delete(created.id).deleted
    with pytest.raises(openai.NotFoundError):
        automations.retrieve(created.id)


def test_a_one_time_automation_fires_once_and_completes(gateway: Gateway) -> None:
    client = gateway.client()
    automations = client.beta.agents.automations
    with pytest.raises(openai.BadRequestError) as refused:
        automations.create(type="once", name="late", run_at=int(time.time()) - 60, target=new_session("Too late"))
    assert refused.value.body["param"] == "run_at"  # type: ignore[index]
    created = automations.create(type="once", name="soon", run_at=int(time.time()) + 1, target=new_session("Wake up"))
    assert created.type == "once" and created.status == "active"
    (ran,) = settled(client, created.id, 1)
    assert ran.status == "completed" and ran.scheduled_at == created.run_at and ran.session_id is not None
    assert answer(client, ran.session_id) == "You said: Wake up"
    assert automations.retrieve(created.id).status == "completed"
    assert automations.invocations.retrieve(ran.id, automation_id=created.id) == ran


def test_an_existing_session_is_sent_the_instructions(gateway: Gateway) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    automations = client.beta.agents.automations
    target = {"type": "existing_session", "session_id": session.id, "instructions": "Check the queue"}
    created = automations.create(type="periodic", name="daily", expression="0 9 * * *", timezone="America/New_York", target=target)
    assert created.target.type == "existing_session" and created.target.session_id == session.id
    assert [listed.id for listed in automations.list(session_id=session.id)] == [created.id]
    manual = automations.invocations.create(created.id)
    assert manual.status == "queued" and manual.source.type == "manual" and manual.scheduled_at is None
    (ran,) = settled(client, created.id, 1)
    assert ran.id == manual.id and ran.status == "completed" and ran.session_id == session.id
    assert answer(client, session.id) == "You said: Check the queue"
    client.beta.agents.sessions.delete(session.id)
    automations.invocations.create(created.id)
    failed = settled(client, created.id, 2)[1]
    assert failed.status == "failed" and failed.error is not None and failed.error.code == "session_not_found"
    after = automations.retrieve(created.id)
    assert after.status == "paused" and after.pause_reason == "target_session_failed"


def test_a_new_sessions_failed_turn_fails_that_invocation_alone(gateway: Gateway) -> None:
    """Each invocation's new session fails (the engine sends garbage): each invocation fails with the turn's
    error, and the automation stays active (only a failed existing target pauses it)."""
    client = gateway.client()
    created = client.beta.agents.automations.create(
        type="periodic", name="broken", expression="* * * * * *", timezone="UTC", target=new_session("[long 40] [chunk 1] [garbage oov]")
    )
    ran = settled(client, created.id, 2)
    assert all(one.status == "failed" and one.error is not None for one in ran[:2]), ran
    after = client.beta.agents.automations.retrieve(created.id)
    assert after.status == "active" and after.pause_reason is None
    client.beta.agents.automations.delete(created.id)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"type": "periodic", "expression": "61 * * * *", "timezone": "UTC"}, "expression"),
        ({"type": "periodic", "expression": "* * *", "timezone": "UTC"}, "expression"),
        ({"type": "periodic", "expression": "0 9 * * *", "timezone": "Mars/Olympus"}, "timezone"),
        ({"type": "periodic", "expression": "0 9 * * *"}, "timezone"),
        ({"type": "once", "run_at": 4102444800, "expression": "0 9 * * *"}, "expression"),
        ({"type": "once"}, "run_at"),
    ],
)
def test_a_bad_schedule_is_a_400_naming_it(gateway: Gateway, body: dict[str, Any], param: str) -> None:
    client = gateway.client()
    with pytest.raises(openai.BadRequestError) as refused:
        client.post("/agents/automations", body={"name": "x", "target": new_session("x"), **body}, cast_to=object)
    assert refused.value.body["param"] == param  # type: ignore[index]


def test_an_agent_schedules_its_own_wake_up(gateway: Gateway) -> None:
    """The automations tool: the model's call answered by the gateway (the client owes nothing), the
    automation made by the agent for its own session, which is woken with the instructions when it is due."""
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL, "tools": [{"type": "automations"}]}, environment=NONE)
    assert session.agent.tools[0].type == "automations"
    schedule = '[call functions.schedule_wakeup {"name":"recheck","instructions":"Look again","delay_seconds":1}]'
    with client.beta.agents.sessions.stream(session.id, input=f"Remind yourself {schedule}") as stream:
        events = list(stream)
    assert "agent.session.requires_action" not in [event.type for event in events]
    (made,) = client.beta.agents.automations.list(session_id=session.id).data
    assert made.type == "once" and made.name == "recheck" and made.created_by.type == "agent"
    assert made.created_by.session_id == session.id and made.target.type == "existing_session" and made.target.instructions == "Look again"
    outputs = [item for item in client.beta.agents.sessions.items.list(session.id, order="asc").data if item.type == "function_call_output"]
    assert len(outputs) == 1 and made.id in str(outputs[0].output)
    (ran,) = settled(client, made.id, 1)
    assert ran.status == "completed" and ran.session_id == session.id
    assert answer(client, session.id) == "You said: Look again"
    # A call the model got wrong is answered to the model as an error it can correct; the turn goes on.
    wrong = '[call functions.schedule_wakeup {"name":"x","instructions":"y","run_at":"tomorrow"}]'
    with client.beta.agents.sessions.stream(session.id, input=f"Again {wrong}") as stream:
        assert [event.type for event in stream][-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    last_output = [item for item in client.beta.agents.sessions.items.list(session.id, order="asc").data if item.type == "function_call_output"][-1]
    assert str(last_output.output).startswith("Error:")
    cancel = f'[call functions.cancel_wakeup {{"automation_id":"{made.id}"}}]'
    with client.beta.agents.sessions.stream(session.id, input=f"Stop {cancel}") as stream:
        list(stream)
    assert client.beta.agents.automations.list(session_id=session.id).data == []


def test_a_gateway_down_across_due_times_fires_once_when_back(emulator: Process, tmp_path: Path) -> None:
    """Killed (SIGKILL) with an automation due every second, started again after several were missed: the
    latest missed occurrence fires once, the others are not fired in a burst, and it goes on from there."""
    config = gateway_config(emulator.url, tmp_path)
    first = Gateway(config, tmp_path).start()
    again = None
    try:
        client = first.client()
        created = client.beta.agents.automations.create(
            type="periodic", name="tick", expression="* * * * * *", timezone="UTC", target=new_session("Tick")
        )
        settled(client, created.id, 1)
        assert first.proc is not None
        first.proc.kill()
        down_at = time.time()
        # What is under test is the time itself: down longer than the misfire grace, several occurrences missed.
        until(lambda: time.time() - down_at > MISFIRE_GRACE_S + 3, "occurrences missed past the grace", polls=4000)
        again = Gateway(config, tmp_path).start()
        back_at = int(time.time())
        later = again.client()
        # The one under way at the kill is delivered, followed on (after the dead process's lease) or, killed
        # before its run's first checkpoint, failed alone: until then each occurrence is skipped, and then one
        # completes again.
        ran = until(lambda: _completed_after(later, created.id, back_at), "an invocation completed once back", polls=2400)
        periods = [one.scheduled_at for one in ran]
        assert len(periods) == len(set(periods))  # no occurrence twice
        missed = [period for period in range(int(down_at) + 1, back_at - 1) if period not in periods]
        assert len(missed) >= 2, (periods, down_at, back_at)  # missed occurrences were not fired in a burst
        later.beta.agents.automations.delete(created.id)
    finally:
        first.stop()
        if again is not None:
            again.stop()


def _completed_after(client: openai.OpenAI, automation_id: str, since: int) -> list[AutomationInvocation] | None:
    found = invocations(client, automation_id)
    return found if any(one.status == "completed" and one.created_at >= since for one in found) else None
