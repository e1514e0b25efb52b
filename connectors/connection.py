"""One MCP server: a long-lived session kept by a task of its own, reconnected with backoff.

The session is opened once and reused for every call; its tool list is fetched once and again only when
the server sends `notifications/tools/list_changed`. A server that is down, or that dies (a stdio
server exits), does not fail anything else: its tools are unavailable until a reconnection succeeds,
and a call that finds the connection already lost waits for the next one. A call that was sent and
lost its connection before the answer is never sent again (the tool may have run: a tool with side
effects must not run twice); it fails as a protocol error.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx2
from anyio.abc import TaskStatus
from mcp.client.client import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, Tool, ToolListChangedNotification
from opentelemetry import propagate

from .urls import shown

log = logging.getLogger("tools.mcp")

Transport = Literal["stdio", "sse", "streamable-http"]
MAX_BACKOFF_S = 30.0


@dataclass(frozen=True)
class ServerSpec:
    """Where a server is and how to reach it. Headers may hold credentials: never log a spec."""

    label: str
    transport: Transport
    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    timeout_s: float = 30.0

    def where(self) -> str:
        """Where the server is, as logs may say it (a URL's credentials left out)."""
        return self.command[0] if self.transport == "stdio" else shown(self.url or "")


class ToolCallFailed(Exception):
    """The call did not produce a result: timeout, server unavailable, connection lost."""

    def __init__(self, message: str, code: int = CONNECTION_CLOSED) -> None:
        super().__init__(message)
        self.code = code


class MCPConnection:
    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.tools: list[Tool] = []
        self.instructions: str | None = None
        self.error: str | None = "not connected yet"
        self.list_calls = 0  # tools/list requests sent: once per connection and per list_changed
        self.calls_in_flight = 0
        self._client: Client | None = None
        self._attempted = anyio.Event()  # set when a connection attempt ends, connected or not
        self._wake = anyio.Event()
        self._lost = self._stale = self._closing = self._was_connected = False

    @property
    def connected(self) -> bool:
        return self._client is not None

    async def run(self) -> None:
        """Keep a session open until close(); meant to run in a task group for the gateway's lifetime."""
        backoff = 0.5
        while not self._closing:
            self._was_connected = False
            try:
                await self._session()
            except Exception as exc:
                self.error = _describe(exc, self.spec.url)
                log.warning("MCP server %r (%s) unavailable: %s", self.spec.label, self.spec.where(), self.error)
            finally:
                self._client = None
                if not self._was_connected:
                    self._attempt_ended()
            if self._was_connected:
                backoff = 0.5  # it was up: the first retry comes at once
            if self._closing:
                break
            if self._lost:
                self._lost = False
                continue
            with anyio.move_on_after(backoff):
                await self._wake.wait()
            self._wake = anyio.Event()
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _session(self) -> None:
        with anyio.CancelScope() as connecting:
            connecting.deadline = anyio.current_time() + self.spec.timeout_s
            async with Client(self._transport(), message_handler=self._on_message, read_timeout_seconds=self.spec.timeout_s) as client:
                connecting.deadline = math.inf
                self.instructions = client.instructions
                await self._list_tools(client)
                async with anyio.create_task_group() as tasks:
                    # Subscribed before anyone can call: a change made by the first call is not missed.
                    await tasks.start(self._listen_for_changes, client)
                    self._client, self.error = client, None
                    self._was_connected = True
                    self._attempt_ended()
                    log.info("MCP server %r connected: %d tools", self.spec.label, len(self.tools))
                    while not (self._closing or self._lost):
                        await self._wake.wait()
                        self._wake = anyio.Event()
                        if self._stale and not self._closing:
                            self._stale = False
                            await self._list_tools(client)
                    tasks.cancel_scope.cancel()
        if connecting.cancelled_caught:
            raise TimeoutError(f"no answer within {self.spec.timeout_s:g} s")

    def _attempt_ended(self) -> None:
        self._attempted.set()
        self._attempted = anyio.Event()

    async def _list_tools(self, client: Client) -> None:
        self.list_calls += 1
        tools: list[Tool] = []
        cursor = None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tools

    async def _listen_for_changes(self, client: Client, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Servers on the 2026-07-28 protocol announce tool list changes on a `subscriptions/listen`
        stream; older ones send `notifications/tools/list_changed`, which `_on_message` receives.
        Over stdio the stream also tells that the server process is gone: it ends, and the connection is
        marked lost at once, so the next call finds a new session instead of being sent into a dead one.
        (Over HTTP it may end for a read timeout while the server is well.)"""
        started = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                task_status.started()
                started = True
                async for _ in subscription:
                    self._stale = True
                    self._wake.set()
        except ListenNotSupportedError:
            pass
        except Exception as exc:
            log.debug("MCP server %r: change stream ended (%s)", self.spec.label, exc)
        if not started:
            task_status.started()
        elif not self._closing and self.spec.transport == "stdio":
            self._mark_lost(client)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._stale = True
            self._wake.set()

    def _transport(self) -> Any:
        spec = self.spec
        headers = dict(spec.headers)
        if spec.transport == "stdio":
            params = StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]), env=dict(spec.env) or None, cwd=spec.cwd)
            return stdio_client(params)
        assert spec.url is not None
        if spec.transport == "sse":
            return sse_client(spec.url, headers=headers, timeout=spec.timeout_s)
        client = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(spec.timeout_s), event_hooks={"request": [_carry_trace_context]})
        return streamable_http_client(spec.url, http_client=client)

    async def wait_attempt(self, timeout: float) -> bool:
        """Wait (at most `timeout`) until connected or until the current attempt failed; True if connected."""
        if self._client is not None:
            return True
        with anyio.move_on_after(timeout):
            await self._attempted.wait()
        return self._client is not None

    async def call(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        client = self._client
        if client is None and not await self.wait_attempt(self.spec.timeout_s):
            raise ToolCallFailed(f"the MCP server '{self.spec.label}' is unavailable ({self.error})")
        client = self._client
        assert client is not None
        timeout = self.spec.timeout_s
        timed_out = ToolCallFailed(f"the tool did not answer within {timeout:g} s", REQUEST_TIMEOUT)
        self.calls_in_flight += 1
        try:
            # The SDK's own read timeout, and ours around it in case a transport never reports.
            with anyio.fail_after(timeout + 5):
                return await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise timed_out from None
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise timed_out from None
            if exc.code != CONNECTION_CLOSED:
                raise ToolCallFailed(exc.error.message, exc.code) from None
            self._mark_lost(client)
            raise ToolCallFailed(self._lost_message()) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self._mark_lost(client)
            raise ToolCallFailed(self._lost_message()) from None
        finally:
            self.calls_in_flight -= 1

    def _lost_message(self) -> str:
        return f"the connection to the MCP server '{self.spec.label}' was lost during the call; it was not sent again, since the tool may have run"

    def _mark_lost(self, client: Client) -> None:
        if self._client is client:
            log.warning("MCP server %r: connection lost, reconnecting", self.spec.label)
            self._client = None
            self._lost = True
            self._wake.set()

    def close(self) -> None:
        self._closing = True
        self._wake.set()


def _describe(exc: BaseException, url: str | None = None) -> str:
    """What went wrong, as logs and the model may read it: the server's URL, which errors of httpx quote
    whole, with its credentials left out."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner, url) for inner in exc.exceptions)
    text = str(exc) or type(exc).__name__
    if url:
        text = text.replace(url, shown(url))
    return text if len(text) < 300 else text[:300] + "…"


async def _carry_trace_context(request: httpx2.Request) -> None:
    """The calling span's W3C trace context (`traceparent`) in the request's headers, besides the `_meta`
    the mcp SDK writes it into: the SDK posts each request in its caller's context. Without tracing, or
    outside a span, nothing is added."""
    propagate.inject(request.headers)
