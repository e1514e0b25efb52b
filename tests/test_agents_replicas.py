"""The Agents API on two replicas sharing PostgreSQL: a session's events reach a subscriber on any replica,
and a turn outlives the replica that ran it (SIGKILL), its stream going on at the other."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import MODEL, Process
from .test_agents import ASK, EVENT, NONE, WEATHER, follow, user, wait_for
from .test_automations import until
from .test_postgres import postgres  # noqa: F401  (the session's PostgreSQL server)
from .test_replicas import Cluster, cluster, started_cluster  # noqa: F401  (two replicas and their balancer)
from .test_vaults import OAuthServer, call_approved, mcp_tool, oauth_auth

WORDS = 300
EXPECTED = " ".join(f"word{i}" for i in range(WORDS))


def test_a_session_runs_on_one_replica_and_is_followed_on_the_other(cluster: Cluster) -> None:  # noqa: F811
    first, second = cluster.client(0), cluster.client(1)
    agent = first.beta.agents.create(model=MODEL)
    session = second.beta.agents.sessions.create(agent_id=agent.id, environment=NONE)
    thread, got = follow(cluster.replicas[1], session.id)
    first.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user("Hello there")]}])
    thread.join(60)
    assert [event["type"] for event in got][-2:] == ["agent.session.turn.completed", "agent.session.idle"]
    text = "".join(event["delta"] for event in got if event["type"] == "agent.session.turn.output_text.delta")
    assert text == "You said: Hello there"
    assert second.beta.agents.sessions.retrieve(session.id).status == "idle"


@pytest.mark.timeout(180)
def test_a_turn_outlives_the_replica_that_ran_it(cluster: Cluster) -> None:  # noqa: F811
    """SIGKILL of the replica running a session's turn mid-answer: the other adopts the run and takes over
    following it, from the last event the dead one wrote; a subscriber on the other replica sees one turn,
    its answer whole, each delta once."""
    first = cluster.client(0)
    session = first.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    seen: list[dict[str, Any]] = []
    url = f"{cluster.replicas[1].url}/v1/agents/sessions/{session.id}/events"
    with httpx.stream("GET", url, timeout=90) as stream:
        first.beta.agents.sessions.events.create(
            session.id, events=[{"type": "agent.session.input.message", "input": [user(f"[long {WORDS}] [slow 10]")]}]
        )
        killed = False
        for line in stream.iter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[len("data: ") :])
            EVENT.validate_python(event)
            seen.append(event)
            deltas = sum(1 for item in seen if item["type"] == "agent.session.turn.output_text.delta")
            if deltas == 40 and not killed:
                cluster.replicas[0].proc.kill()  # SIGKILL: no shutdown, no last write
                killed = True
            if event["type"] == "agent.session.idle":
                break
    assert killed
    types = [event["type"] for event in seen]
    assert types.count("agent.session.turn.completed") == 1 and types[-1] == "agent.session.idle"
    text = "".join(event["delta"] for event in seen if event["type"] == "agent.session.turn.output_text.delta")
    assert text == EXPECTED
    assert len({event["event_id"] for event in seen}) == len(seen)
    second = cluster.client(1)
    assert wait_for(second, session.id, "idle").usage.output_tokens > 0
    (turn,) = second.beta.agents.sessions.turns.list(session.id).data
    assert turn.status == "completed"
    items = second.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [item.type for item in items] == ["message", "message"] and items[-1].content[0].text == EXPECTED


def test_a_function_turn_through_the_balancer_spans_both_replicas(cluster: Cluster) -> None:  # noqa: F811
    """Each request goes to either replica: the events stream from one, the input and the tool's result land
    on either, the run follows on whichever started it."""
    client = cluster.client()
    agent = client.beta.agents.create(model=MODEL, tools=[WEATHER])
    session = client.beta.agents.sessions.create(agent_id=agent.id, environment=NONE)
    with client.beta.agents.sessions.stream(session.id, input=ASK, tool_handlers={"get_weather": lambda arguments: "18 C and sunny"}) as stream:
        result = stream.get_final_result()
    assert result.messages[-1].content[0].text == "The tool said: 18 C and sunny"
    kinds = [item.type for item in client.beta.agents.sessions.items.list(session.id, order="asc").data]
    assert kinds.count("function_call") == 1 and kinds.count("function_call_output") == 1 and kinds[-1] == "message"


@pytest.mark.timeout(240)
def test_each_period_of_an_automation_fires_once_across_replicas(cluster: Cluster) -> None:  # noqa: F811
    """An automation every two seconds on two replicas, the first SIGKILLed mid-way: every period has exactly
    one invocation (delivered, or skipped while the one before was still queued), no period fires twice, and
    each delivered one made one session."""
    client = cluster.client(1)
    target: Any = {"type": "new_session", "agent": {"model": MODEL}, "environment": NONE, "input": [{"type": "message", **user("Tick")}]}
    automation = client.beta.agents.automations.create(type="periodic", name="tick", expression="*/2 * * * * *", timezone="UTC", target=target)

    def fired(count: int) -> list[Any]:
        return until(lambda: _at_least(client, automation.id, count), f"{count} invocations")

    fired(5)
    cluster.replicas[0].proc.kill()  # SIGKILL: whatever it claimed or was delivering is left mid-way
    fired(12)
    client.beta.agents.automations.pause(automation.id)
    ran = until(lambda: _settled(client, automation.id), "every invocation settled")
    periods = sorted(one.scheduled_at for one in ran)
    assert periods == list(range(periods[0], periods[0] + 2 * len(periods), 2)), periods  # each period once, none missing
    delivered = [one for one in ran if one.status != "skipped"]
    assert all(one.status == "completed" for one in delivered), [(one.status, one.error) for one in delivered]
    assert all(one.skip_reason == "pending_delivery" for one in ran if one.status == "skipped")
    sessions = [one.session_id for one in delivered]
    assert len(set(sessions)) == len(sessions) and len(delivered) >= len(ran) // 2
    made = client.beta.agents.sessions.list(limit=100).data
    assert sorted(session.id for session in made) == sorted(sessions)  # no session made twice or left over


def _invocations(client: Any, automation_id: str) -> list[Any]:
    return list(client.beta.agents.automations.invocations.list(automation_id, limit=100))


def _at_least(client: Any, automation_id: str, count: int) -> list[Any] | None:
    found = _invocations(client, automation_id)
    return found if len(found) >= count else None


def _settled(client: Any, automation_id: str) -> list[Any] | None:
    found = _invocations(client, automation_id)
    return found if all(one.status != "queued" for one in found) else None


@pytest.mark.timeout(180)
def test_two_replicas_refreshing_one_token_at_once_refresh_it_once(emulator: Process, postgres: Any, tmp_path: Path) -> None:  # noqa: F811
    """Two sessions sharing an OAuth credential, a turn started on each replica at the same moment, the
    token about to expire and its endpoint slow: one replica refreshes it, the other waits for its token;
    both MCP calls carry the one new token (the server takes no other)."""
    oauth = OAuthServer(lifetime_s=3600, delay_s=1.0)
    try:
        with started_cluster(emulator, postgres, tmp_path, mcp={"allowed_urls": [f"{oauth.url}/"]}) as pair:
            first, second = pair.client(0), pair.client(1)
            vault = first.beta.agents.vaults.create()
            first.beta.agents.vaults.credentials.create(vault.id, name="oauth", auth=oauth_auth(oauth))
            agent = first.beta.agents.create(model=MODEL, tools=[mcp_tool("secure", f"{oauth.url}/mcp")])
            sessions = [client.beta.agents.sessions.create(agent_id=agent.id, environment=NONE, vault_ids=[vault.id]) for client in (first, second)]
            results: list[Any] = [None, None]
            start = threading.Barrier(2)

            def turn(index: int, client: Any) -> None:
                start.wait()
                results[index] = call_approved(client, sessions[index].id, "[[call secure.whoami {}]]")

            threads = [threading.Thread(target=turn, args=(index, client)) for index, client in enumerate((first, second))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(120)
            assert oauth.refreshes() == 1
            for calls in results:
                assert calls is not None and len(calls) == 1 and calls[0].error is None, calls
            assert results[0][0].output == results[1][0].output  # the same token, a digest of it
    finally:
        oauth.stop()
