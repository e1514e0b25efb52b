"""The compose stack, built here from a local base image and run with the engine emulator in vLLM's
place: a streaming request with a python call and an MCP call through the published port, then down."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any

import httpx
import openai
import pytest

from .conftest import MODEL, ROOT, base_image, free_port, sandbox_containers
from .stream_checker import check_response_stream

KEY = "sk-compose-test"


def _compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return ["docker", "compose"]


@pytest.mark.timeout(1800)
def test_compose_stack_end_to_end(sandbox_image: str) -> None:
    subprocess.run([str(ROOT / "scripts" / "build-images"), base_image()], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    port = free_port()
    env = os.environ | {"GATEWAY_PORT": str(port), "GATEWAY_API_KEYS": KEY, "SANDBOX_NETWORK": "true"}
    compose = [*_compose_command(), "-p", f"hgtest{os.getpid()}", "-f", "compose.yaml", "-f", "tests/compose.emulator.yaml"]

    def run(*args: str) -> None:
        subprocess.run([*compose, *args], check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    url = f"http://127.0.0.1:{port}"
    try:
        run("up", "-d", "--no-deps", "--no-build", "sandbox-image", "docker-proxy", "egress", "emulator")
        run("up", "-d", "--no-deps", "--no-build", "gateway")
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/ready", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the stack did not become ready"
            time.sleep(1)

        assert httpx.post(url + "/v1/responses", json={"model": MODEL, "input": "hi"}).status_code == 401
        client = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0, timeout=120)
        tools: list[Any] = [{"type": "code_interpreter", "container": {"type": "auto"}}, {"type": "mcp", "server_label": "time"}]
        stream = client.responses.create(
            model=MODEL,
            input='[[python pow(123, 456, 1000000007)]][[call time.get_current_time {"timezone": "UTC"}]]',
            tools=tools,
            include=["code_interpreter_call.outputs"],
            stream=True,
        )
        events = [event.to_dict() for event in stream]
        response = check_response_stream(events)
        assert response.status == "completed"
        kinds = [item.type for item in response.output]
        assert kinds.index("mcp_list_tools") < kinds.index("code_interpreter_call") < kinds.index("mcp_call")
        python = next(item for item in response.output if item.type == "code_interpreter_call")
        assert python.outputs[0].logs == "565291922"
        mcp = next(item for item in response.output if item.type == "mcp_call")
        assert '"timezone": "UTC"' in mcp.output
        assert sandbox_containers("compose"), "the python call ran in a sandbox container of the stack"
        # A sandbox with a network policy reaches what it allows through the stack's egress proxy, and no more.
        shell = {
            "type": "shell",
            "environment": {"type": "container_auto", "network_policy": {"type": "allowlist", "allowed_domains": ["engine.test"]}},
        }
        commands = ["curl -fsS -o /dev/null -w %{http_code} http://engine.test:8000/health", "curl -fsS http://example.com/"]
        answer = client.responses.create(model=MODEL, input=f"[[call shell.exec {json.dumps({'commands': commands})}]]", tools=[shell])
        reached, refused = next(item for item in answer.output if item.type == "shell_call_output").output
        assert reached.outcome.type == "exit" and reached.outcome.exit_code == 0 and reached.stdout == "200", reached  # type: ignore[union-attr]
        assert refused.outcome.type == "exit" and refused.outcome.exit_code != 0 and "403" in refused.stderr, refused  # type: ignore[union-attr]
    finally:
        run("down", "-v")
    assert sandbox_containers("compose") == []  # the gateway removed its sandboxes when it stopped
