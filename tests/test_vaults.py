"""Vaults and credentials (`client.beta.agents.vaults`): write-only secrets, sealed at rest, never shown or
logged; a static bearer reaching its MCP server and no other; an OAuth credential whose short-lived tokens are
refreshed before each use against a real token endpoint, the MCP server accepting only the newest."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest
from openai.types.beta.agents.vaults.credential import Credential

from .conftest import MODEL, ROOT, Gateway, Process, free_port, gateway_config, wait_for_port
from .mcp_server import digest
from .oauth_mcp_server import CLIENT_ID, CLIENT_SECRET, FIRST_ACCESS, FIRST_REFRESH
from .test_agents import NONE, user
from .test_mcp import MCPProcess
from .test_tracing import Receiver as TraceReceiver

BEARER = "static-bearer-" + hashlib.sha256(b"vault test").hexdigest()[:16]
ENV_SECRET = "env-secret-" + hashlib.sha256(b"vault env").hexdigest()[:16]


class OAuthServer:
    def __init__(self, lifetime_s: float = 30.0, delay_s: float = 0.0) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "tests.oauth_mcp_server", "--port", str(self.port), "--lifetime", str(lifetime_s), "--delay", str(delay_s)]
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port)

    def refreshes(self) -> int:
        return int(httpx.get(f"{self.url}/stats").json()["refreshes"])

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[MCPProcess, MCPProcess, OAuthServer]]:
    first, second, oauth = MCPProcess("streamable-http", name="first"), MCPProcess("streamable-http", name="second"), OAuthServer()
    yield first, second, oauth
    for server in (first, second, oauth):
        server.stop()


@pytest.fixture(scope="module")
def collector() -> Iterator[TraceReceiver]:
    receiver = TraceReceiver()
    yield receiver
    receiver.server.shutdown()


@pytest.fixture(scope="module")
def vault_gateway(
    emulator: Process, tmp_path_factory: pytest.TempPathFactory, servers: tuple[MCPProcess, MCPProcess, OAuthServer], collector: TraceReceiver
) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("vaults")
    allowed = [f"http://127.0.0.1:{server.port}/" for server in servers]
    tracing = {"enabled": True, "endpoint": collector.url, "export_delay_s": 0.2}  # spans kept and exported: none may hold a secret
    gateway = Gateway(gateway_config(emulator.url, workdir, mcp={"allowed_urls": allowed}, tracing=tracing), workdir).start(timeout=60)
    yield gateway
    gateway.stop()


def oauth_auth(oauth: OAuthServer, expires_in_s: float = 1.0) -> dict[str, Any]:
    expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + expires_in_s))
    refresh = {
        "client_id": CLIENT_ID, "refresh_token": FIRST_REFRESH, "token_endpoint": f"{oauth.url}/token",
        "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": CLIENT_SECRET},
    }  # fmt: skip
    return {"type": "mcp_oauth", "access_token": FIRST_ACCESS, "mcp_server_url": f"{oauth.url}/mcp", "expires_at": expires, "refresh": refresh}


def mcp_tool(label: str, url: str) -> dict[str, Any]:
    return {"type": "mcp", "server_label": label, "transport": {"type": "http", "server_url": url}}


def call_approved(client: openai.OpenAI, session_id: str, text: str) -> list[Any]:
    """A turn whose MCP calls are each approved as asked (polled, each poll a request the gateway answers);
    the turn's mcp_call items once the session is idle again."""
    client.beta.agents.sessions.events.create(session_id, events=[{"type": "agent.session.input.message", "input": [user(text)]}])
    for _ in range(1200):
        session = client.beta.agents.sessions.retrieve(session_id)
        if session.status == "idle":  # the turn began as the message was taken: idle again, it ended
            turn = client.beta.agents.sessions.turns.list(session_id).data[0]
            items = client.beta.agents.sessions.turns.items.list(turn.id, session_id=session_id, order="asc").data
            return [item for item in items if item.type == "mcp_call"]
        if session.status == "requires_action":
            approve = {"type": "mcp_tool_call", "decision": "approve"}
            decisions: list[Any] = [
                {"type": "agent.session.input.mcp_approval_request_result", "request_id": action.request_id, "response": approve}
                for action in session.required_actions
                if action.type == "mcp_approval_request"
            ]
            client.beta.agents.sessions.events.create(session_id, events=decisions)
        time.sleep(0.05)
    raise AssertionError("the turn never ended")


def test_credentials_are_write_only(vault_gateway: Gateway, servers: tuple[MCPProcess, MCPProcess, OAuthServer]) -> None:
    first, _, oauth = servers
    vaults = vault_gateway.client().beta.agents.vaults
    vault = vaults.create(name="  team  ", metadata={"team": "a"})
    assert vault.object == "vault" and vault.name == "team" and vault.metadata == {"team": "a"}
    bearer = vaults.credentials.create(vault.id, name="first", auth={"type": "static_bearer", "token": BEARER, "mcp_server_url": first.url})
    env = vaults.credentials.create(
        vault.id, name="api", auth={"type": "environment_variable", "secret_name": "SERVICE_KEY", "secret_value": ENV_SECRET,
                                    "networking": {"type": "limited", "allowed_hosts": ["API.Example.com"]}},
    )  # fmt: skip
    oauth_credential = vaults.credentials.create(vault.id, name="oauth", auth=oauth_auth(oauth, 3600))
    assert bearer.auth.type == "static_bearer" and bearer.auth.mcp_server_url == first.url
    assert env.auth.type == "environment_variable" and env.auth.networking.type == "limited"
    assert env.auth.networking.allowed_hosts == ["api.example.com"]
    assert oauth_credential.auth.type == "mcp_oauth" and oauth_credential.auth.refresh is not None
    assert oauth_credential.auth.refresh.token_endpoint_auth.type == "client_secret_basic" and oauth_credential.auth.expires_at is not None
    listed = httpx.get(f"{vault_gateway.url}/v1/vaults/{vault.id}/credentials", headers={"authorization": "Bearer unused"}).text
    for secret in (BEARER, ENV_SECRET, FIRST_ACCESS, FIRST_REFRESH, CLIENT_SECRET):
        assert secret not in listed
    assert {Credential.model_validate(item).id for item in json.loads(listed)["data"]} == {oauth_credential.id, env.id, bearer.id}
    rotated = vaults.credentials.update(bearer.id, vault_id=vault.id, auth={"type": "static_bearer", "token": BEARER + "-2"}, metadata={"v": "2"})
    assert rotated.metadata == {"v": "2"} and rotated.auth == bearer.auth
    with pytest.raises(openai.BadRequestError) as refused:
        vaults.credentials.update(bearer.id, vault_id=vault.id, auth={"type": "environment_variable", "secret_value": "x"})
    assert refused.value.body["param"] == "auth.type"  # type: ignore[index]
    vaults.credentials.update(bearer.id, vault_id=vault.id, auth={"type": "static_bearer", "token": BEARER})
    assert vaults.credentials.delete(env.id, vault_id=vault.id).deleted
    assert vaults.update(vault.id, name=None).name is None
    database = Path(vault_gateway.config_path).parent / "responses.sqlite3"
    stored = database.read_bytes()
    log = Path(vault_gateway.log).read_bytes()
    for secret in (BEARER, ENV_SECRET, FIRST_ACCESS, FIRST_REFRESH, CLIENT_SECRET):
        assert secret.encode() not in stored and secret.encode() not in log


@pytest.mark.parametrize(
    "auth, param",
    [
        ({"type": "static_bearer", "token": "t", "mcp_server_url": "http://10.0.0.1/mcp"}, "auth.mcp_server_url"),
        ({"type": "environment_variable", "secret_name": "PATH", "secret_value": "v", "networking": {"type": "unrestricted"}}, "auth.secret_name"),
        ({"type": "environment_variable", "secret_name": "CODEX_X", "secret_value": "v", "networking": {"type": "unrestricted"}}, "auth.secret_name"),
        (
            {
                "type": "environment_variable",
                "secret_name": "K",
                "secret_value": "v",
                "networking": {"type": "limited", "allowed_hosts": ["*.example.com"]},
            },
            "auth.networking.allowed_hosts[0]",
        ),
        ({"type": "environment_variable", "secret_name": "K", "secret_value": "a\nb", "networking": {"type": "unrestricted"}}, "auth.secret_value"),
        ({"type": "mcp_oauth", "access_token": "t", "mcp_server_url": "https://mcp.example.com/", "expires_at": "soon"}, "auth.expires_at"),
    ],
)
def test_a_bad_credential_is_a_400_naming_it(vault_gateway: Gateway, auth: dict[str, Any], param: str) -> None:
    vaults = vault_gateway.client().beta.agents.vaults
    vault = vaults.create()
    with pytest.raises(openai.BadRequestError) as refused:
        vaults.credentials.create(vault.id, name="bad", auth=auth)  # type: ignore[arg-type]
    assert refused.value.body["param"] == param  # type: ignore[index]


def test_a_static_bearer_reaches_its_server_and_no_other(
    vault_gateway: Gateway, servers: tuple[MCPProcess, MCPProcess, OAuthServer], collector: TraceReceiver
) -> None:
    first, second, _ = servers
    client = vault_gateway.client()
    vault = client.beta.agents.vaults.create()
    client.beta.agents.vaults.credentials.create(vault.id, name="first", auth={"type": "static_bearer", "token": BEARER, "mcp_server_url": first.url})
    agent = {"model": MODEL, "tools": [mcp_tool("first", first.url), mcp_tool("second", second.url)]}
    session = client.beta.agents.sessions.create(agent=agent, environment=NONE, vault_ids=[vault.id])
    assert session.vault_ids == [vault.id]
    calls = call_approved(client, session.id, "[[call first.whoami {}]] [[call second.whoami {}]]")
    outputs = {call.server_label: call.output for call in calls}
    assert digest(f"Bearer {BEARER}") in str(outputs["first"])
    assert outputs["second"] == "headers=[]"  # another server: no credential at all
    # Nowhere else: not in the session's items or kept traces, the spans exported, the database or the log.
    shown = json.dumps([item.model_dump() for item in client.beta.agents.sessions.items.list(session.id).data])
    traces = json.dumps([trace.model_dump() for trace in client.beta.agents.sessions.traces.list(session.id).data])
    assert traces != "[]" and BEARER not in shown + traces + json.dumps(collector.spans, default=str)
    stored = (Path(vault_gateway.config_path).parent / "responses.sqlite3").read_bytes()
    assert BEARER.encode() not in stored and BEARER.encode() not in Path(vault_gateway.log).read_bytes()
    with pytest.raises(openai.NotFoundError):
        client.beta.agents.sessions.create(agent=agent, environment=NONE, vault_ids=["vault_missing"])


def test_oauth_tokens_are_refreshed_before_each_use(vault_gateway: Gateway, servers: tuple[MCPProcess, MCPProcess, OAuthServer]) -> None:
    """Each run finds the token about to expire (its 30 s lifetime under the 60 s refresh margin): refreshed at
    the token endpoint before each (a turn here is two runs: the call, then the rest after its approval), the
    refresh token rotating, the server accepting the newest token only."""
    _, _, oauth = servers
    client = vault_gateway.client()
    vault = client.beta.agents.vaults.create()
    credential = client.beta.agents.vaults.credentials.create(vault.id, name="oauth", auth=oauth_auth(oauth))
    session = client.beta.agents.sessions.create(
        agent={"model": MODEL, "tools": [mcp_tool("secure", f"{oauth.url}/mcp")]}, environment=NONE, vault_ids=[vault.id]
    )
    before = oauth.refreshes()
    for turn in range(3):
        (call,) = call_approved(client, session.id, "[[call secure.whoami {}]]")
        assert call.error is None and str(call.output).startswith("token="), call
        assert oauth.refreshes() == before + 2 * (turn + 1)
    shown = client.beta.agents.vaults.credentials.retrieve(credential.id, vault_id=vault.id)
    assert shown.auth.type == "mcp_oauth" and shown.auth.expires_at is not None and shown.updated_at >= credential.updated_at
