"""The MCP servers a gateway knows: configured ones, connected at start-up, and request-level ones,
connected on first use, reused across responses and closed after they sit idle.

A request's `{"type": "mcp", ...}` tool becomes an `EnabledServer`: the connection plus what this
request may use of it (`allowed_tools`) and which calls need the user's approval.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Union

import anyio
from mcp_types import Tool

from runtime.quota import AllBusy, to_evict
from runtime.supervision import Supervisor

from .config import MCPConfig, ToolServerConfig
from .connection import MCPConnection, ServerSpec
from .urls import is_allowed

log = logging.getLogger("tools.mcp")


class ServerRefused(Exception):
    """The request names a server it may not use; `param` says which field."""

    def __init__(self, message: str, param: str, status: int = 400) -> None:
        super().__init__(message)
        self.message, self.param, self.status = message, param, status


@dataclass
class _RequestServer:
    """A request-level server's kept session: whose it is and when a request last used it."""

    connection: MCPConnection
    tenant: str
    last_used: float

    @property
    def idle(self) -> bool:
        return self.connection.calls_in_flight == 0


class NameList(Protocol):
    @property
    def tool_names(self) -> list[str]: ...


class ApprovalRule(Protocol):
    """OpenAI's filter form of `require_approval` (the operator's config or the request's tool)."""

    @property
    def never(self) -> NameList | None: ...


Approval = Union[Literal["always", "never"], ApprovalRule, None]


class RequestedServer(Protocol):
    """What a request's `mcp` tool says (the gateway's request model), read here."""

    @property
    def server_label(self) -> str: ...
    @property
    def server_url(self) -> str | None: ...
    @property
    def server_description(self) -> str | None: ...
    @property
    def headers(self) -> dict[str, str] | None: ...
    @property
    def authorization(self) -> str | None: ...
    @property
    def require_approval(self) -> Approval: ...
    def allowed_names(self) -> set[str] | None: ...


def needs_approval(rule: Approval, name: str) -> bool:
    """OpenAI's `require_approval`: "always", "never", or a filter of tool names (unlisted tools need it)."""
    if rule is None or rule == "never":
        return False
    if rule == "always":
        return True
    if rule.never is not None and name in rule.never.tool_names:
        return False
    return True


@dataclass
class EnabledServer:
    label: str
    connection: MCPConnection
    allowed: set[str] | None  # None: every tool the server lists
    approval_rules: list[Approval]  # the operator's and the request's `require_approval`; either may require it
    description: str | None = None

    def tools(self) -> list[Tool]:
        tools = self.connection.tools
        return tools if self.allowed is None else [tool for tool in tools if tool.name in self.allowed]

    def about(self) -> str:
        """What the model is told the server is for."""
        return self.description or self.connection.instructions or f"Tools of the {self.label} server."

    def has_tool(self, name: str) -> bool:
        return any(tool.name == name for tool in self.tools())

    def needs_approval(self, name: str) -> bool:
        return any(needs_approval(rule, name) for rule in self.approval_rules)


def _spec(server: ToolServerConfig) -> ServerSpec:
    command = tuple(server.command or ()) + tuple(server.args)
    return ServerSpec(
        label=server.label,
        transport=server.transport,
        command=command,
        env=tuple(server.env.items()),
        cwd=server.cwd,
        url=server.url,
        headers=tuple(server.headers.items()),
        timeout_s=server.timeout_s,
    )


class MCPServers:
    def __init__(self, tool_servers: list[ToolServerConfig], config: MCPConfig) -> None:
        self.config = config
        self.configured = {server.label: server for server in tool_servers}
        self.connections = {label: MCPConnection(_spec(server)) for label, server in self.configured.items()}
        self._requested: dict[str, _RequestServer] = {}
        self._tasks: Supervisor | None = None

    async def start(self, tasks: Supervisor) -> None:
        """Connect every configured server at once; wait a little for them, never fail on one that is down."""
        self._tasks = tasks
        for label, connection in self.connections.items():
            tasks.keep(f"mcp_server {label}", connection.run)
        async with anyio.create_task_group() as waiting:
            for connection in self.connections.values():
                waiting.start_soon(connection.wait_attempt, self.config.connect_wait_s)
        tasks.keep("mcp_idle_sessions", self._close_idle)

    def health(self) -> dict[str, bool]:
        return {label: connection.connected for label, connection in self.connections.items()}

    async def enable(self, tool: RequestedServer, index: int, tenant: str) -> EnabledServer:
        """The server a request's mcp tool names, connected (or known to be unavailable)."""
        param = f"tools[{index}]"
        if tool.server_url is None:
            server = self.configured.get(tool.server_label)
            if server is None:
                raise ServerRefused(
                    f"No MCP server labelled '{tool.server_label}' is configured; give server_url for one of your own.",
                    f"{param}.server_label",
                )
            connection = self.connections[tool.server_label]
            allowed = tool.allowed_names()
            if server.allowed_tools is not None:
                allowed = set(server.allowed_tools) if allowed is None else allowed & set(server.allowed_tools)
            rules = [server.require_approval, tool.require_approval]
        else:
            connection = self._request_server(tool, param, tenant)
            allowed = tool.allowed_names()
            # As in OpenAI's API, a request's own server asks for approval unless told otherwise.
            rules = [tool.require_approval if tool.require_approval is not None else "always"]
        await connection.wait_attempt(self.config.connect_wait_s)
        return EnabledServer(tool.server_label, connection, allowed, rules, tool.server_description)

    def _request_server(self, tool: RequestedServer, param: str, tenant: str) -> MCPConnection:
        url = tool.server_url
        assert url is not None
        if tool.server_label in self.configured:
            raise ServerRefused(f"server_label '{tool.server_label}' is a configured server's.", f"{param}.server_label")
        if not url.startswith(("http://", "https://")):
            raise ServerRefused("server_url must be an http(s) URL.", f"{param}.server_url")
        if not is_allowed(url, self.config.allowed_urls):
            raise ServerRefused("server_url is not allowed by this gateway's mcp.allowed_urls.", f"{param}.server_url")
        headers = dict(tool.headers or {})
        if tool.authorization:
            headers["Authorization"] = f"Bearer {tool.authorization}"
        # Sessions are shared by one tenant's requests with the same label, URL and credentials, and only by those.
        key = hashlib.sha256(repr((tenant, tool.server_label, url, sorted(headers.items()))).encode()).hexdigest()
        entry = self._requested.get(key)
        if entry is None:
            self._make_room(tenant, param)
            transport: Literal["sse", "streamable-http"] = "sse" if url.rstrip("/").endswith("/sse") else "streamable-http"
            spec = ServerSpec(tool.server_label, transport, url=url, headers=tuple(headers.items()), timeout_s=30.0)
            entry = _RequestServer(MCPConnection(spec), tenant, time.monotonic())
            self._requested[key] = entry
            assert self._tasks is not None, "start() first"
            self._tasks.start_soon(entry.connection.run, name=f"mcp_session {tool.server_label}")
        entry.last_used = time.monotonic()
        return entry.connection

    def _make_room(self, tenant: str, param: str) -> None:
        """Below both caps on kept request-level sessions, closing least recently used idle ones if needed."""
        per_tenant, total = self.config.max_request_servers_per_tenant, self.config.max_request_servers
        try:
            while (key := to_evict(self._requested, tenant, per_tenant, total)) is not None:
                self._requested.pop(key).connection.close()
        except AllBusy:
            raise ServerRefused(
                "Too many MCP servers of your own are in use at once; try again when a call has finished.",
                f"{param}.server_url",
                status=429,
            ) from None

    @property
    def request_sessions(self) -> int:
        return len(self._requested)

    async def _close_idle(self) -> None:
        ttl = self.config.request_server_ttl_s
        while True:
            await anyio.sleep(min(ttl / 4, 30.0))
            deadline = time.monotonic() - ttl
            for key, entry in list(self._requested.items()):
                if entry.last_used < deadline and entry.idle:
                    del self._requested[key]
                    entry.connection.close()

    def close(self) -> None:
        for connection in [*self.connections.values(), *(entry.connection for entry in self._requested.values())]:
            connection.close()
        self._requested.clear()


def tool_listing(tool: Tool) -> dict[str, Any]:
    """A tool as an `mcp_list_tools` item lists it."""
    annotations = tool.annotations.model_dump(exclude_none=True) if tool.annotations else None
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "annotations": annotations,
    }


def schema_for_model(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema without `title`s, which Harmony's renderer would show as noise."""

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if not (k == "title" and isinstance(v, str))}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    cleaned: dict[str, Any] = clean(schema)
    return cleaned
