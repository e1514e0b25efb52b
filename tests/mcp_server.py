"""A real MCP server for the tests, written with the mcp SDK, on any of its transports.

Run: python -m tests.mcp_server --transport stdio|sse|streamable-http [--port P] [--name NAME]
"""

from __future__ import annotations

import argparse
import hashlib
import os

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def build(name: str) -> MCPServer:
    server = MCPServer(name, instructions=f"Test tools of the {name} server.")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Digests of the credentials headers this server received (HTTP transports): the test can check
        them without the values appearing in tool output."""
        headers = ctx.headers or {}
        seen = {key.lower(): digest(value) for key, value in headers.items() if key.lower() in ("authorization", "x-tenant")}
        return f"headers={sorted(seen.items())}"

    @server.tool()
    def traceparent(ctx: Context) -> str:
        """The W3C trace context the call's request carried in `_meta` (the client's tracing)."""
        meta = ctx.request_context.meta or {}
        headers = {key.lower(): value for key, value in (ctx.headers or {}).items()}
        return f"traceparent={meta.get('traceparent')} header={headers.get('traceparent')}"

    @server.tool()
    def fail(message: str) -> str:
        """Fail on purpose with the given message."""
        raise ToolError(message)

    @server.tool()
    def crash() -> str:
        """Raise an unexpected exception."""
        raise RuntimeError("boom")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def secret() -> str:
        """A tool that allowed_tools filters out in the tests."""
        return "the secret"

    @server.tool()
    async def grow(ctx: Context) -> str:
        """Add a tool named `extra`, and tell the client that the tool list changed."""

        def extra() -> str:
            """A tool added while the server runs."""
            return "extra here"

        server.add_tool(extra, name="extra")
        await ctx.notify_tools_changed()  # 2026-07-28 clients: their subscriptions/listen stream
        await ctx.session.send_tool_list_changed()  # older clients: the notification
        return "grown"

    tallied = [0]

    @server.tool()
    def tally() -> int:
        """Count one call; the count is the tool's side effect, for tests that must see whether it ran."""
        tallied[0] += 1
        return tallied[0]

    @server.tool()
    async def slow_tally(seconds: float) -> int:
        """Count one call, then take `seconds` to answer: a call with a side effect that is still running."""
        tallied[0] += 1
        await anyio.sleep(seconds)
        return tallied[0]

    @server.tool()
    def tally_count() -> int:
        """How many times `tally` ran."""
        return tallied[0]

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transport", default="stdio", choices=["stdio", "sse", "streamable-http"])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--name", default="test")
    args = parser.parse_args()
    server = build(args.name)
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run(args.transport, host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
