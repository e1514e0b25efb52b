"""The Agents API with tenants, webhooks and a remote MCP server: whose sessions are whose, what a session's
webhooks tell (checked with the SDK's `unwrap`), and an MCP call the client approves."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest

from .conftest import MODEL, Gateway, Process, gateway_config, sandbox_section
from .test_agents import NONE, follow, user, wait_for
from .test_mcp import MCPProcess
from .test_webhooks import webhooks_section
from .webhook_receiver import Receiver

KEYS = [{"key": "sk-one", "tenant": "one"}, {"key": "sk-two", "tenant": "two"}]
SESSION_EVENTS = ["agent.session.created", "agent.session.in_progress", "agent.session.action_required", "agent.session.idle", "agent.session.failed"]
SECRET = "tenant-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def remote() -> Iterator[MCPProcess]:
    server = MCPProcess("streamable-http", name="remote")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def agents_gateway(emulator: Process, tmp_path_factory: pytest.TempPathFactory, receiver: Receiver, remote: MCPProcess) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("agents")
    config = gateway_config(
        emulator.url,
        workdir,
        auth={"api_keys": KEYS},
        webhooks=webhooks_section(receiver),
        mcp={"allowed_urls": [f"http://127.0.0.1:{remote.port}/"]},
    )
    gateway = Gateway(config, workdir).start(timeout=60)
    yield gateway
    gateway.stop()


def client(gateway: Gateway, key: str = "sk-one") -> openai.OpenAI:
    return gateway.client(api_key=key)


def test_another_tenants_agents_and_sessions_are_not_found(agents_gateway: Gateway) -> None:
    mine = client(agents_gateway)
    agent = mine.beta.agents.create(model=MODEL)
    session = mine.beta.agents.sessions.create(agent_id=agent.id, environment=NONE, input="Hello")
    wait_for(mine, session.id, "idle")
    turn = mine.beta.agents.sessions.turns.list(session.id).data[0]
    template = mine.beta.agents.environments.templates.create(name="mine")
    base, headers = f"{agents_gateway.url}/v1/agents", {"authorization": "Bearer sk-two"}
    calls = [
        ("GET", f"/{agent.id}", None), ("POST", f"/{agent.id}", {"name": "mine now"}), ("DELETE", f"/{agent.id}", None),
        ("GET", f"/sessions/{session.id}", None), ("POST", f"/sessions/{session.id}", {"metadata": {"a": "b"}}),
        ("DELETE", f"/sessions/{session.id}", None), ("GET", f"/sessions/{session.id}/turns", None),
        ("GET", f"/sessions/{session.id}/turns/{turn.id}", None), ("GET", f"/sessions/{session.id}/turns/{turn.id}/items", None),
        ("GET", f"/sessions/{session.id}/items", None), ("GET", f"/sessions/{session.id}/events", None),
        ("POST", f"/sessions/{session.id}/events", {"events": [{"type": "agent.session.input.cancel"}]}),
        ("POST", "/sessions", {"agent_id": agent.id, "environment": NONE}),
        ("GET", f"/environments/templates/{template.id}", None), ("POST", f"/environments/templates/{template.id}", {"name": "x"}),
        ("DELETE", f"/environments/templates/{template.id}", None),
        ("POST", "/environments", {"environment": {"type": "openai_hosted", "environment_template_id": template.id}}),
    ]  # fmt: skip
    for method, path, body in calls:
        answer = httpx.request(method, base + path, json=body, headers=headers, timeout=10)
        assert answer.status_code == 404, (method, path, answer.text)
    theirs = client(agents_gateway, "sk-two")
    assert session.id not in [listed.id for listed in theirs.beta.agents.sessions.list()]
    assert agent.id not in [listed.id for listed in theirs.beta.agents.list()]
    assert template.id not in [listed.id for listed in theirs.beta.agents.environments.templates.list()]
    assert mine.beta.agents.sessions.retrieve(session.id).status == "idle"  # nothing they did reached it


def test_webhooks_tell_each_state_a_session_enters(agents_gateway: Gateway, receiver: Receiver) -> None:
    mine = client(agents_gateway)
    path = f"agents-{uuid.uuid4().hex[:8]}"
    endpoint = mine.webhooks.create(name="agents", url=receiver.url(path), event_types=SESSION_EVENTS)  # type: ignore[arg-type]
    tool = {"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {}}}
    session = mine.beta.agents.sessions.create(agent={"model": MODEL, "tools": [tool]}, environment=NONE, input="[call functions.get_weather {}]")
    action = wait_for(mine, session.id, "requires_action").required_actions[0]
    result = {"type": "agent.session.input.tool_result", "turn_id": action.turn_id, "call_id": action.call_id, "success": True, "output": "sunny"}
    mine.beta.agents.sessions.events.create(session.id, events=[result])
    wait_for(mine, session.id, "idle")
    events = [delivery.unwrap(endpoint.signing_secret) for delivery in receiver.wait_for(5, path)]
    assert {event.data.id for event in events} == {session.id}  # each names the session: the client reads it again
    assert sorted(event.type for event in events) == sorted(
        ["agent.session.created", "agent.session.in_progress", "agent.session.action_required", "agent.session.in_progress", "agent.session.idle"]
    )
    mine.webhooks.delete(endpoint.id)


def test_an_mcp_call_waits_for_the_clients_approval(agents_gateway: Gateway, remote: MCPProcess, tmp_path: Path) -> None:
    mine = client(agents_gateway)
    transport = {"type": "http", "server_url": remote.url, "headers": {"X-Tenant": SECRET}}
    agent = mine.beta.agents.create(model=MODEL, tools=[{"type": "mcp", "server_label": "remote", "transport": transport}])
    assert agent.tools[0].transport.headers == {"X-Tenant": "********"}  # kept sealed, shown masked
    session = mine.beta.agents.sessions.create(agent_id=agent.id, environment=NONE)
    thread, got = follow(agents_gateway, session.id, key="sk-one")
    mine.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user("[call remote.whoami {}]")]}])
    action = wait_for(mine, session.id, "requires_action").required_actions[0]
    assert action.type == "mcp_approval_request" and action.request.server_label == "remote" and action.request.name == "whoami"
    decision = {
        "type": "agent.session.input.mcp_approval_request_result",
        "request_id": action.request_id,
        "response": {"type": "mcp_tool_call", "decision": "approve"},
    }
    mine.beta.agents.sessions.events.create(session.id, events=[decision])
    thread.join(60)
    calls = [event["item"] for event in got if event["type"] == "agent.session.turn.item.done" and event["item"]["type"] == "mcp_call"]
    seen = hashlib.sha256(SECRET.encode()).hexdigest()[:12]
    assert len(calls) == 1 and calls[0]["name"] == "whoami" and seen in calls[0]["output"]  # the header reached the server
    stored = httpx.get(f"{agents_gateway.url}/v1/agents/{agent.id}", headers={"authorization": "Bearer sk-one"}).text
    assert SECRET not in stored and SECRET not in json.dumps(got)
    database = Path(agents_gateway.config_path).parent / "responses.sqlite3"
    assert SECRET.encode() not in database.read_bytes()


@pytest.fixture(scope="module")
def hosted_gateway(emulator: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("agents-hosted")
    sandbox = sandbox_section("local", f"agents-{os.getpid()}", timeout_s=10, memory="1g")
    config = gateway_config(emulator.url, workdir, sandbox=sandbox, agents={"max_artifact_bytes_per_tenant": 1000})
    gateway = Gateway(config, workdir).start(timeout=60)
    yield gateway
    gateway.stop()


def test_a_hosted_environments_turn_runs_shell_commands(hosted_gateway: Gateway) -> None:
    sdk = hosted_gateway.client()
    environment: Any = {"type": "openai_hosted", "container_size": "small"}
    session = sdk.beta.agents.sessions.create(agent={"model": MODEL}, environment=environment)
    assert session.environment.type == "openai_hosted" and session.environment.network.access == "disabled"
    commands = ["head -c 2000 /dev/zero > too-big.bin", "printf 'a report' > report.txt", "cat report.txt", "exit 3"]
    ask = f"[[call shell.exec {json.dumps({'commands': commands})}]] [[answer done]]"
    thread, got = follow(hosted_gateway, session.id)
    sdk.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user(ask)]}])
    thread.join(120)
    executions = [event["item"] for event in got if event["type"] == "agent.session.turn.item.done" and event["item"]["type"] == "command_execution"]
    assert [item["command"] for item in executions] == ["\n".join(commands)]
    (execution,) = executions
    assert execution["output"] == "a report" and execution["exit_code"] == 3 and execution["status"] == "failed"
    assert execution["duration_ms"] is not None and execution["cwd"]
    deltas = [event["delta"] for event in got if event["type"] == "agent.output.command_execution_output.delta"]
    assert "".join(deltas) == "a report"
    items = sdk.beta.agents.sessions.items.list(session.id, order="asc").data
    assert [item.type for item in items] == ["message", "command_execution", "message"]
    # The file the turn left is an artifact, kept after its environment's container is gone; the one past the
    # tenant's artifact quota (1000 bytes here) is not kept.
    (artifact,) = sdk.beta.agents.sessions.artifacts.list(session.id).data
    assert artifact.path == "report.txt" and artifact.size_bytes == len("a report") and artifact.turn_id == execution["turn_id"]
    assert artifact.environment_id == session.environment.id
    for container in sdk.containers.list().data:
        sdk.containers.delete(container.id)
    assert sdk.beta.agents.sessions.artifacts.content(artifact.id, session_id=session.id).read() == b"a report"
    assert sdk.beta.agents.sessions.artifacts.retrieve(artifact.id, session_id=session.id) == artifact
    assert sdk.beta.agents.sessions.artifacts.delete(artifact.id, session_id=session.id).deleted
    with pytest.raises(openai.NotFoundError):
        sdk.beta.agents.sessions.artifacts.retrieve(artifact.id, session_id=session.id)


def test_environments_from_templates_with_files_are_shared_by_id(hosted_gateway: Gateway) -> None:
    sdk = hosted_gateway.client()
    envs = sdk.beta.agents.environments
    notes = base64.b64encode(b"remember the milk").decode()
    setup: Any = [{"command": "mkdir -p made && printf ' set' > made/setup.txt"}]
    template = envs.templates.create(name="notes", files=[{"type": "inline", "path": "/workspace/notes.txt", "data": notes}], setup_commands=setup)
    assert template.name == "notes" and template.files[0].type == "inline" and template.files[0].size_bytes == len(b"remember the milk")
    assert envs.templates.update(template.id, name="notes-v2").name == "notes-v2"
    assert template.id in [listed.id for listed in envs.templates.list()]
    environment = envs.create(environment={"type": "openai_hosted", "environment_template_id": template.id})
    assert environment.status == "ready" and [file.path for file in environment.files] == ["/workspace/notes.txt"]
    added = envs.files.create(environment.id, type="inline", path="/workspace/more/extra.txt", data=base64.b64encode(b"and eggs").decode())
    assert added.path == "/workspace/more/extra.txt" and added.size_bytes == len(b"and eggs")
    assert sorted(file.path for file in envs.files.list(environment.id)) == ["/workspace/more/extra.txt", "/workspace/notes.txt"]
    # Two sessions in the one environment: what the first leaves, the second reads.
    ask = f"[[call shell.exec {json.dumps({'commands': ['cat notes.txt more/extra.txt made/setup.txt > both.txt']})}]] [[answer done]]"
    first = sdk.beta.agents.sessions.create(
        agent={"model": MODEL}, environment={"type": "openai_hosted", "environment_id": environment.id}, input=ask
    )
    assert first.environment.id == environment.id
    wait_for(sdk, first.id, "idle")
    ask = f"[[call shell.exec {json.dumps({'commands': ['cat both.txt']})}]] [[answer done]]"
    second = sdk.beta.agents.sessions.create(
        agent={"model": MODEL}, environment={"type": "openai_hosted", "environment_id": environment.id}, input=ask
    )
    wait_for(sdk, second.id, "idle")
    (execution,) = [item for item in sdk.beta.agents.sessions.items.list(second.id).data if item.type == "command_execution"]
    assert execution.output == "remember the milkand eggs set" and execution.exit_code == 0
    with pytest.raises(openai.BadRequestError) as failed:  # a setup command that fails fails the creation
        envs.create(environment={"type": "openai_hosted", "setup_commands": [{"command": "exit 7"}]})  # type: ignore[list-item]
    assert failed.value.body["param"] == "environment.setup_commands[0].command" and "exit code 7" in failed.value.body["message"]
    assert envs.templates.delete(template.id).deleted
    with pytest.raises(openai.NotFoundError):
        envs.create(environment={"type": "openai_hosted", "environment_template_id": template.id})
    bad = httpx.post(
        f"{hosted_gateway.url}/v1/agents/environments/{environment.id}/files", json={"type": "inline", "path": "/etc/passwd", "data": notes}
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "file.path"


def test_a_steer_ends_the_running_run_at_its_next_boundary(hosted_gateway: Gateway) -> None:
    """The run would go on to answer after its command; steered while the command's call is written, it ends
    after the command's output instead, and the turn goes on with the new message."""
    sdk = hosted_gateway.client()
    session = sdk.beta.agents.sessions.create(agent={"model": MODEL}, environment={"type": "openai_hosted"})
    ask = f"[slow@1 40] [[call shell.exec {json.dumps({'commands': ['echo step']})}]] [[answer first plan]]"
    thread, got = follow(hosted_gateway, session.id)
    sdk.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user(ask)]}])
    wait_for(sdk, session.id, "in_progress")
    sdk.beta.agents.sessions.events.create(session.id, events=[{"type": "agent.session.input.message", "input": [user("Actually, stop there.")]}])
    thread.join(120)
    answers = [event["text"] for event in got if event["type"] == "agent.session.turn.output_text.done"]
    assert answers == ["You said: Actually, stop there."]  # never the first plan's answer
    (turn,) = sdk.beta.agents.sessions.turns.list(session.id).data
    assert turn.status == "completed"


def test_another_tenants_automations_are_not_found(agents_gateway: Gateway) -> None:
    mine, theirs = client(agents_gateway), client(agents_gateway, "sk-two")
    target: Any = {"type": "new_session", "agent": {"model": MODEL}, "environment": NONE, "input": [{"type": "message", **user("hi")}]}
    created = mine.beta.agents.automations.create(type="once", name="mine", run_at=4102444800, target=target)
    for call in (
        lambda: theirs.beta.agents.automations.retrieve(created.id),
        lambda: theirs.beta.agents.automations.pause(created.id),
        lambda: theirs.beta.agents.automations.invocations.create(created.id),
        lambda: theirs.beta.agents.automations.invocations.list(created.id),
        lambda: theirs.beta.agents.automations.delete(created.id),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert created.id not in [listed.id for listed in theirs.beta.agents.automations.list()]
    session = mine.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE)
    with pytest.raises(openai.NotFoundError):  # another tenant's session is no target
        theirs.beta.agents.automations.create(
            type="once", name="x", run_at=4102444800, target={"type": "existing_session", "session_id": session.id, "instructions": "hi"}
        )
    assert mine.beta.agents.automations.delete(created.id).deleted


def test_another_tenants_vaults_and_credentials_are_not_found(agents_gateway: Gateway) -> None:
    mine, theirs = client(agents_gateway), client(agents_gateway, "sk-two")
    vault = mine.beta.agents.vaults.create(name="mine")
    auth: Any = {"type": "static_bearer", "token": SECRET, "mcp_server_url": "https://mcp.example.com/mcp"}
    credential = mine.beta.agents.vaults.credentials.create(vault.id, name="key", auth=auth)
    for call in (
        lambda: theirs.beta.agents.vaults.retrieve(vault.id),
        lambda: theirs.beta.agents.vaults.update(vault.id, name="theirs"),
        lambda: theirs.beta.agents.vaults.credentials.list(vault.id),
        lambda: theirs.beta.agents.vaults.credentials.retrieve(credential.id, vault_id=vault.id),
        lambda: theirs.beta.agents.vaults.credentials.create(vault.id, name="x", auth=auth),
        lambda: theirs.beta.agents.vaults.credentials.delete(credential.id, vault_id=vault.id),
        lambda: theirs.beta.agents.vaults.delete(vault.id),
        lambda: theirs.beta.agents.sessions.create(agent={"model": MODEL}, environment=NONE, vault_ids=[vault.id]),
    ):
        with pytest.raises(openai.NotFoundError):
            call()
    assert vault.id not in [listed.id for listed in theirs.beta.agents.vaults.list()]
    assert mine.beta.agents.vaults.credentials.retrieve(credential.id, vault_id=vault.id).name == "key"
    assert mine.beta.agents.vaults.delete(vault.id).deleted
