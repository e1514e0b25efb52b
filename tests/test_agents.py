"""OpenAI's Agents API (`client.beta.agents`) over the gateway's own loop: agents, sessions, input events,
the live event stream, turns and items, driven by the openai SDK itself."""

from __future__ import annotations

import json
import threading
from typing import Any, Iterator

import httpx
import openai
import pytest
from openai.types.beta.agent_session_event import AgentSessionEvent
from openai.types.beta.agent_session_item import AgentSessionItem
from pydantic import TypeAdapter

from .conftest import MODEL, Gateway, Process, emulator_stats
from .test_tracing import Receiver as TraceReceiver

EVENT = TypeAdapter(AgentSessionEvent)
ITEM = TypeAdapter(AgentSessionItem)
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
}
ASK = 'weather in Paris? [call functions.get_weather {"location":"Paris"}]'
NONE: Any = {"type": "none"}


def raw_events(gateway: Gateway, session_id: str, ready: threading.Event, key: str = "unused") -> Iterator[dict[str, Any]]:
    """The session's SSE stream as sent, each event checked against the SDK's own model, until the session
    is idle after a turn's end."""
    ended = False
    headers = {"authorization": f"Bearer {key}"}
    with httpx.stream("GET", f"{gateway.url}/v1/agents/sessions/{session_id}/events", headers=headers, timeout=60) as response:
        assert response.status_code == 200
        ready.set()
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            data = json.loads(line[len("data: ") :])
            EVENT.validate_python(data)  # every field the SDK requires, with the values it allows
            yield data
            ended = ended or data["type"] in ("agent.session.turn.completed", "agent.session.turn.failed", "agent.session.turn.cancelled")
            if ended and data["type"] == "agent.session.idle":
                return


def follow(gateway: Gateway, session_id: str, key: str = "unused") -> tuple[threading.Thread, list[dict[str, Any]]]:
    """Subscribe to the session's events in a thread (subscribed when this returns)."""
    got: list[dict[str, Any]] = []
    ready = threading.Event()
    thread = threading.Thread(target=lambda: got.extend(raw_events(gateway, session_id, ready, key)), daemon=True)
    thread.start()
    assert ready.wait(30)
    return thread, got


def test_agents_are_created_listed_updated_and_deleted(gateway: Gateway) -> None:
    agents = gateway.client().beta.agents
    agent = agents.create(model=MODEL, name="helper", instructions="Be brief.", tools=[WEATHER], metadata={"team": "a"})
    assert agent.object == "agent" and agent.id.startswith("agent_") and agent.model == MODEL
    assert agent.tools[0].type == "function" and agent.tools[0].name == "get_weather"
    assert agent.reasoning.effort is None and agent.text.verbosity == "medium" and agent.service_tier == "auto"
    assert agents.retrieve(agent.id) == agent
    assert agent.id in [listed.id for listed in agents.list()]
    updated = agents.update(agent.id, instructions="Be very brief.")
    assert updated.instructions == "Be very brief." and updated.tools == agent.tools and updated.updated_at > agent.updated_at
    assert agents.delete(agent.id).deleted
    with pytest.raises(openai.NotFoundError):
        agents.retrieve(agent.id)


@pytest.mark.parametrize(
    "body, param",
    [
        ({"tools": [{"type": "computer_use"}]}, "tools[0].type"),
        ({"tools": [{"type": "programmatic_tool_calling", "enabled": True}]}, "tools[0].type"),
        ({"multi_agent": {"enabled": True}}, "multi_agent"),
        ({"tools": [{"type": "mcp", "server_label": "fs", "transport": {"type": "stdio", "command": "x", "cwd": "/"}}]}, "tools[0].transport.type"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_what_the_gateway_cannot_do_is_a_400_naming_it(gateway: Gateway, body: dict[str, Any], param: str) -> None:
    answer = httpx.post(f"{gateway.url}/v1/agents", json={"model": MODEL, **body})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"] == param


@pytest.mark.parametrize(
    "body, param",
    [
        ({"events": []}, "events"),
        ({"events": [{"type": "agent.session.input.bogus"}]}, "events[0]"),
        ({"events": [{"type": "agent.session.input.message", "input": []}]}, "events[0].input"),
        ({"events": [{"type": "agent.session.input.computer_use_approval_request_result", "request_id": "r", "response": {}}]}, "events"),
        ({"events": [{"type": "agent.session.input.tool_result", "turn_id": "turn_x", "call_id": "call_x", "success": True}]}, "events"),
    ],
)
def test_bad_input_events_are_a_400_naming_them(gateway: Gateway, body: dict[str, Any], param: str) -> None:
    session = gateway.client().beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    answer = httpx.post(f"{gateway.url}/v1/agents/sessions/{session.id}/events", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["param"].startswith(param)
    assert gateway.client().beta.agents.sessions.retrieve(session.id).status == "idle"


def test_a_turn_streams_as_the_sdk_types_it(gateway: Gateway) -> None:
    client = gateway.client()
    agent = client.beta.agents.create(model=MODEL, instructions="Be brief.")
    session = client.beta.agents.sessions.create(agent_id=agent.id, environment=NONE, metadata={"user": "u1"})
    assert session.status == "idle" and session.agent.id == agent.id and session.environment.type == "none"
    with client.beta.agents.sessions.stream(session.id, input="Hello there") as stream:
        events = list(stream)
    types = [event.type for event in events]
    assert types[:3] == ["agent.session.turn.created", "agent.session.turn.in_progress", "agent.session.in_progress"]
    assert types[-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    assert "agent.session.turn.output_text.delta" in types and len({event.event_id for event in events}) == len(events)
    text = "".join(event.delta for event in events if event.type == "agent.session.turn.output_text.delta")
    assert text == "You said: Hello there"
    turn_id = events[0].turn_id
    assert all(getattr(event, "turn_id", turn_id) == turn_id for event in events)
    turns = client.beta.agents.sessions.turns.list(session.id)
    assert [turn.id for turn in turns] == [turn_id] and turns.data[0].status == "completed" and turns.data[0].usage.output_tokens > 0
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [(item.type, item.role) for item in items] == [("message", "user"), ("message", "assistant")]
    assert items[1].phase == "final_answer" and items[1].content[0].text == text
    after = client.beta.agents.sessions.retrieve(session.id)
    assert after.status == "idle" and after.usage is not None and after.usage.total_tokens > 0


def test_the_conversation_goes_on_across_turns(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    for said in ("First thing", "Second thing"):
        with client.beta.agents.sessions.stream(session.id, input=said) as stream:
            result = stream.get_final_result()
        assert result.messages[-1].content[0].text == f"You said: {said}"
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 2


def test_the_stream_helper_runs_local_tool_handlers(gateway: Gateway) -> None:
    client = gateway.client()
    agent = client.beta.agents.create(model=MODEL, tools=[WEATHER])
    session = client.beta.agents.sessions.create(agent_id=agent.id, environment=NONE)
    asked: list[dict[str, Any]] = []

    def weather(arguments: dict[str, Any]) -> str:
        asked.append(arguments)
        return "18 C and sunny"

    with client.beta.agents.sessions.stream(session.id, input=ASK, tool_handlers={"get_weather": weather}) as stream:
        result = stream.get_final_result()
    assert asked == [{"location": "Paris"}]
    assert result.messages[-1].content[0].text == "The tool said: 18 C and sunny"
    items = client.beta.agents.sessions.items.list(session.id, order="asc").data
    kinds = [item.type for item in items]
    assert kinds.count("function_call") == 1 and kinds.count("function_call_output") == 1 and kinds[-1] == "message"
    for item in items:
        ITEM.validate_python(item.model_dump())


def test_a_function_call_waits_for_its_result_as_a_required_action(gateway: Gateway) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL, "tools": [WEATHER]}, environment=NONE)
    thread, got = follow(gateway, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user(ASK)]}])
    waiting = wait_for(client, session.id, "requires_action")
    action = waiting.required_actions[0]
    assert action.type == "function_call" and action.name == "get_weather" and json.loads(action.arguments) == {"location": "Paris"}
    turn = client.beta.agents.sessions.turns.retrieve(action.turn_id, session_id=session.id)
    assert turn.status == "waiting"
    # A result for a call it did not make: the API's words, which the SDK's helper knows.
    with pytest.raises(openai.BadRequestError) as refused:
        result(client, session.id, action.turn_id, "call_unknown", "x")
    assert refused.value.body["message"] == "Unknown pending tool call: call_unknown"
    key = "result-1"
    result(client, session.id, action.turn_id, action.call_id, "18 C and sunny", key)
    result(client, session.id, action.turn_id, action.call_id, "18 C and sunny", key)  # the same key: taken once
    with pytest.raises(openai.BadRequestError):  # without a key, a call answered already is not pending
        result(client, session.id, action.turn_id, action.call_id, "18 C and sunny")
    thread.join(60)
    types = [event["type"] for event in got]
    assert "agent.session.requires_action" in types and types[-1] == "agent.session.idle"
    final = [event for event in got if event["type"] == "agent.session.turn.output_text.done"][-1]
    assert final["text"] == "The tool said: 18 C and sunny"
    assert client.beta.agents.sessions.retrieve(session.id).required_actions == []


def test_input_with_the_same_idempotency_key_starts_one_turn(gateway: Gateway) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    message: Any = [{"type": "agent.session.input.message", "input": [user("once")]}]
    client.beta.agents.sessions.events.create(session.id, events=message, idempotency_key="k1")
    wait_for(client, session.id, "idle")
    client.beta.agents.sessions.events.create(session.id, events=message, idempotency_key="k1")  # a retry: nothing new
    assert client.beta.agents.sessions.retrieve(session.id).status == "idle"
    client.beta.agents.sessions.events.create(session.id, events=message, idempotency_key="k2")
    wait_for(client, session.id, "idle")
    assert len(client.beta.agents.sessions.turns.list(session.id).data) == 2


def test_a_cancel_ends_the_turn(gateway: Gateway) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    thread, got = follow(gateway, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user("[stall 2] go on")]}])
    wait_for(client, session.id, "in_progress")
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.cancel"}])
    thread.join(60)
    assert [event["type"] for event in got][-2:] == ["agent.session.turn.cancelled", "agent.session.idle"]
    assert client.beta.agents.sessions.turns.list(session.id).data[0].status == "cancelled"


def test_a_message_mid_turn_steers_it(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL, "tools": [WEATHER]}, environment=NONE)
    thread, got = follow(gateway, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user("[slow 40] " + ASK)]}])
    wait_for(client, session.id, "in_progress")
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user("Actually, use Celsius.")]}])
    waiting = wait_for(client, session.id, "requires_action")
    action = waiting.required_actions[0]
    result(client, session.id, action.turn_id, action.call_id, "18 C")
    thread.join(60)
    turns = client.beta.agents.sessions.turns.list(session.id).data
    assert len(turns) == 1 and turns[0].status == "completed"
    users = [item for item in client.beta.agents.sessions.items.list(session.id, order="asc").data if item.type == "message" and item.role == "user"]
    assert [item.content[0].text for item in users][-1] == "Actually, use Celsius."
    assert "Actually, use Celsius." in [event for event in got if event["type"] == "agent.session.turn.output_text.done"][-1]["text"]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "input_text", "text": text}]}


def result(client: openai.OpenAI, session_id: str, turn_id: str, call_id: str, output: str, key: str | None = None) -> None:
    event = {"type": "agent.session.input.tool_result", "turn_id": turn_id, "call_id": call_id, "success": True, "output": output}
    client.beta.agents.sessions.events.create(session_id, events=[event], **({"idempotency_key": key} if key else {}))


def wait_for(client: openai.OpenAI, session_id: str, status: str) -> Any:
    """The session once it has this status: polled, each poll a request the gateway answers."""
    for _ in range(600):
        session = client.beta.agents.sessions.retrieve(session_id)
        if session.status == status:
            return session
        threading.Event().wait(0.05)
    raise AssertionError(f"the session never became {status}: {session.status}")


def test_a_session_created_with_a_stream_streams_its_first_turn(gateway: Gateway) -> None:
    client = gateway.client()
    stream = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE, input="Hi there", stream=True)
    events = list(stream)
    assert events[0].type == "agent.session.created" and events[0].session.status == "idle"
    assert [event.type for event in events][-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    assert "".join(event.delta for event in events if event.type == "agent.session.turn.output_text.delta") == "You said: Hi there"


def test_sessions_are_updated_listed_and_deleted(gateway: Gateway) -> None:
    client = gateway.client()
    agent = client.beta.agents.create(model=MODEL)
    kept = client.beta.agents.sessions.create(agent_id=agent.id, environment=NONE, metadata={"user": "ann"})
    other = client.beta.agents.sessions.create(agent_id=agent.id, environment=NONE, metadata={"user": "bo"})
    updated = client.beta.agents.sessions.update(kept.id, metadata={"user": "ann", "stage": "2"}, agent={"reasoning": {"effort": "high"}})
    assert updated.metadata == {"user": "ann", "stage": "2"} and updated.agent.reasoning.effort == "high"
    listed = client.beta.agents.sessions.list(agent_id=agent.id)
    assert {session.id for session in listed} == {kept.id, other.id}
    assert [session.id for session in client.beta.agents.sessions.list(agent_id=agent.id, metadata={"user": "bo"})] == [other.id]
    assert client.beta.agents.sessions.delete(other.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.retrieve(other.id)
    with pytest.raises(openai.BadRequestError):  # both an agent and its id
        client.beta.agents.sessions.create(agent_id=agent.id, agent={"model": MODEL}, environment=NONE)
    answer = httpx.post(
        f"{gateway.url}/v1/agents/sessions", json={"agent_id": agent.id, "environment": {"type": "self_hosted", "workspace_directory": "/w"}}
    )
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "environment.type"


def test_each_tenants_bounds_hold(make_gateway: Any, emulator: Process) -> None:
    bounded = make_gateway(emulator.url, agents={"max_agents_per_tenant": 1, "max_running_sessions_per_tenant": 1})
    client = bounded.client()
    client.beta.agents.create(model=MODEL)
    with pytest.raises(openai.BadRequestError) as refused:
        client.beta.agents.create(model=MODEL)
    assert refused.value.code == "too_many_agents"
    busy = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE, input="[stall 2] hold on")
    wait_for(client, busy.id, "in_progress")
    second = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    with pytest.raises(openai.RateLimitError):
        client.beta.agents.sessions.events.create(second.id, events=[{"type": "agent.session.input.message", "input": [user("me too")]}])
    client.beta.agents.sessions.events.create(busy.id, events=[{"type": "agent.session.input.cancel"}])
    wait_for(client, busy.id, "idle")
    client.beta.agents.sessions.events.create(second.id, events=[{"type": "agent.session.input.message", "input": [user("me too")]}])
    assert wait_for(client, second.id, "idle").usage is not None


def test_reasoning_is_shown_by_its_summary_when_the_agent_asks_for_one(gateway: Gateway) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL, "reasoning": {"summary": "auto"}}, environment=NONE)
    thread, got = follow(gateway, session.id)
    client.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user("What is 2+2?")]}])
    thread.join(60)
    types = [event["type"] for event in got]
    for kind in ("part.added", "text.delta", "text.done", "part.done"):
        assert f"agent.session.turn.reasoning_summary_{kind}" in types
    (reasoning,) = [event["item"] for event in got if event["type"] == "agent.session.turn.item.done" and event["item"]["type"] == "reasoning"]
    assert reasoning["summary"][0]["text"].startswith("**Working it out**") and "content" not in reasoning
    streamed = "".join(event["delta"] for event in got if event["type"] == "agent.session.turn.reasoning_summary_text.delta")
    assert streamed == reasoning["summary"][0]["text"]


def test_a_session_deleted_mid_turn_stops_its_run(gateway: Gateway, emulator: Process) -> None:
    client = gateway.client()
    aborted = emulator_stats(emulator)["aborted"]
    session = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE, input="[stall 2] wait")
    running = wait_for(client, session.id, "in_progress")
    assert client.beta.agents.sessions.delete(running.id).deleted
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.retrieve(session.id)
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.turns.list(session.id)
    for _ in range(200):  # the engine request is aborted: the run stopped
        if emulator_stats(emulator)["aborted"] > aborted:
            break
        threading.Event().wait(0.05)
    assert emulator_stats(emulator)["aborted"] > aborted


def test_each_run_of_a_turn_is_a_trace_kept_with_its_session(make_gateway: Any, emulator: Process) -> None:
    collector = TraceReceiver()
    traced = make_gateway(emulator.url, tracing={"enabled": True, "endpoint": collector.url, "export_delay_s": 0.2})
    client = traced.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL, "tools": [WEATHER]}, environment=NONE, input=ASK)
    action = wait_for(client, session.id, "requires_action").required_actions[0]
    result(client, session.id, action.turn_id, action.call_id, "18 C")
    wait_for(client, session.id, "idle")
    traces = client.beta.agents.sessions.traces.list(session.id, order="asc").data
    assert len(traces) == 2  # the turn's two runs: the call, then the answer
    for trace in traces:
        spans = [span for resource in trace.otlp["resourceSpans"] for scope in resource["scopeSpans"] for span in scope["spans"]]
        names = {span["name"].split(" ")[0] for span in spans}
        assert {"agent_turn", "invoke_agent", "text_completion"} <= names
        root = next(span for span in spans if span["name"].startswith("agent_turn"))
        assert root["traceId"] == trace.id and len(root["spanId"]) == 16 and "parentSpanId" not in root
        assert all(span["traceId"] == trace.id for span in spans)
    # The same spans go to the collector as well, as before (batched: waited for).
    for _ in range(200):
        if {span["trace_id"] for span in collector.named("agent_turn")} >= {trace.id for trace in traces}:
            break
        threading.Event().wait(0.05)
    assert {span["trace_id"] for span in collector.named("agent_turn")} >= {trace.id for trace in traces}
    collector.server.shutdown()


def test_without_tracing_no_trace_is_kept(gateway: Gateway) -> None:
    client = gateway.client()
    session = client.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE, input="hi")
    wait_for(client, session.id, "idle")
    assert client.beta.agents.sessions.traces.list(session.id).data == []
