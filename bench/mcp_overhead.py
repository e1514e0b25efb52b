"""Gateway overhead of one MCP call (not a timed test; prints figures).

For stdio and streamable HTTP, the same server (tests/mcp_server.py) is called:
  * directly with the SDK's Client, each call a `tools/call` round trip;
  * through the gateway's path, from the call being issued to its output appended to the dialog as the
    Harmony tool message: MCPConnection.call (kept session), result_text, tool_result.
Calls alternate between the two in blocks so both see the same machine state. Also printed: how many `tools/list`
requests the gateway's connection made over all its calls (1 = listed once, never per call).

Run: .venv/bin/python bench/mcp_overhead.py [--calls 300]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx2
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from connectors.connection import MCPConnection, ServerSpec  # noqa: E402
from connectors.results import result_text  # noqa: E402
from gateway.responses.history.dialog import Dialog, tool_result  # noqa: E402
from tests.conftest import free_port, wait_for_port  # noqa: E402

ARGUMENTS = {"text": "hello from the benchmark"}
BLOCK = 20


async def compare(name: str, spec: ServerSpec, direct_transport, calls: int) -> None:  # type: ignore[no-untyped-def]
    connection = MCPConnection(spec)
    dialog = Dialog()
    direct, gateway = [], []
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(connection.run)
        assert await connection.wait_attempt(20), connection.error
        async with Client(direct_transport()) as client:
            for _ in range(20):  # warm both paths
                await client.call_tool("echo", ARGUMENTS)
                await connection.call("echo", ARGUMENTS)
            # Blocks of calls, alternating: on 2 cores, a call right after one to the other server
            # process would find that process still busy and measure the contention, not the path.
            for _ in range(calls // BLOCK):
                for _ in range(BLOCK):
                    started = time.perf_counter()
                    result = await client.call_tool("echo", ARGUMENTS)
                    direct.append(time.perf_counter() - started)
                    assert result.content[0].text == ARGUMENTS["text"]
                await anyio.sleep(0.01)
                for _ in range(BLOCK):
                    started = time.perf_counter()
                    result = await connection.call("echo", ARGUMENTS)
                    dialog.append(tool_result("bench.echo", "commentary", result_text(result)))
                    gateway.append(time.perf_counter() - started)
                await anyio.sleep(0.01)
        connection.close()
        tasks.cancel_scope.cancel()
    d50, g50 = statistics.median(direct) * 1000, statistics.median(gateway) * 1000
    print(
        f"{name:<16} direct p50 {d50:6.3f} ms   gateway p50 {g50:6.3f} ms   added {g50 - d50:+6.3f} ms   "
        f"tools/list sent: {connection.list_calls} for {calls + 20} calls"
    )


async def main(calls: int) -> None:
    command = (sys.executable, "-m", "tests.mcp_server")
    stdio = ServerSpec("bench", "stdio", command=command, cwd=str(ROOT))
    params = StdioServerParameters(command=command[0], args=list(command[1:]), cwd=str(ROOT))
    await compare("stdio", stdio, lambda: stdio_client(params), calls)

    port = free_port()
    server = subprocess.Popen([*command, "--transport", "streamable-http", "--port", str(port)], cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        http = ServerSpec("bench", "streamable-http", url=url)
        await compare("streamable-http", http, lambda: streamable_http_client(url, http_client=httpx2.AsyncClient()), calls)
    finally:
        server.kill()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    anyio.run(main, parser.parse_args().calls)
