"""Cancelling a response stops the tool it is running: a python loop is interrupted (the kernel and its
variables survive, the call's item ends `incomplete` with what the code printed), a shell command is
killed with all it started, within a second; and the same when a client leaves a foreground response.
On both sandbox backends, against real kernels."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Iterator

import httpx
import pytest

from .conftest import MODEL, Gateway, Process, gateway_config, sandbox_section

TICKS = 12  # seconds the loops would run, a line a second
CANCEL_AFTER_S = 3


@pytest.fixture(scope="module", params=["docker", "local"])
def sandboxed(request: pytest.FixtureRequest, emulator: Process, tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp(f"cancel-{request.param}")
    sandbox = sandbox_section(request.param, f"cancel-{os.getpid()}-{request.param}", timeout_s=30)
    process = Gateway(gateway_config(emulator.url, workdir, sandbox=sandbox), workdir).start()
    yield process
    process.stop()


def python(code: str) -> str:
    return f"[[python {code}]]"


def shell(commands: list[str]) -> str:
    return f"[[call shell.exec {json.dumps({'commands': commands})}]]"


PYTHON_LOOP = python(
    "import time\nfor i in range(%d):\n    open('/tmp/py_ticks', 'a').write(f'{i}\\n')\n    print('tick', i, flush=True)\n    time.sleep(1)" % TICKS
)
SHELL_LOOP = shell([f"for i in $(seq {TICKS}); do echo $i >> /tmp/sh_ticks; echo line $i; sleep 1; done"])
COUNT = python(
    "import time, os\ntime.sleep(2)\nprint(*[len(open(p).read().split()) if os.path.exists(p) else 0 for p in ('/tmp/py_ticks', '/tmp/sh_ticks')], kept)"
)


def tools(container: str | dict[str, Any]) -> list[dict[str, Any]]:
    environment = {"type": "container_reference", "container_id": container} if isinstance(container, str) else {"type": "container_auto"}
    return [{"type": "code_interpreter", "container": container}, {"type": "shell", "environment": environment}]


def wait_until_running(client: Any, response_id: str, kind: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        response = client.responses.retrieve(response_id, include=["code_interpreter_call.outputs"]).model_dump()
        item = next((item for item in response["output"] if item["type"] == kind), None)
        if item is not None:
            return item
        time.sleep(0.05)
    raise AssertionError(f"no {kind} started")


def test_cancel_interrupts_python_and_kills_the_shell_command(sandboxed: Gateway) -> None:
    client = sandboxed.client()
    first = client.responses.create(model=MODEL, input=python("kept = 41\nprint('ready')"), tools=tools({"type": "auto"}))
    container = next(item for item in first.output if item.type == "code_interpreter_call").container_id  # type: ignore[union-attr]
    for loop, kind in [(PYTHON_LOOP, "code_interpreter_call"), (SHELL_LOOP, "shell_call")]:
        running = client.responses.create(model=MODEL, input=loop, tools=tools(container), background=True, include=["code_interpreter_call.outputs"])
        wait_until_running(client, running.id, kind)
        time.sleep(CANCEL_AFTER_S)
        started = time.monotonic()
        assert client.responses.cancel(running.id).status == "cancelled"
        ended = client.responses.retrieve(running.id, include=["code_interpreter_call.outputs"]).model_dump()
        assert time.monotonic() - started < 5
        if kind == "code_interpreter_call":
            (call,) = [item for item in ended["output"] if item["type"] == kind]
            assert call["status"] == "incomplete"
            logs = call["outputs"][0]["logs"]
            assert "tick 0" in logs and "KeyboardInterrupt" in logs, logs
        else:
            (output,) = [item for item in ended["output"] if item["type"] == "shell_call_output"]
            assert output["status"] == "incomplete"
    # The container answers the next call, its variables kept; neither loop wrote past the cancel.
    counted = client.responses.create(model=MODEL, input=COUNT, tools=tools(container), include=["code_interpreter_call.outputs"])
    call = next(item for item in counted.output if item.type == "code_interpreter_call")
    py_lines, sh_lines, kept = map(int, call.outputs[0].logs.split("\n")[0].split())  # type: ignore[union-attr]
    assert kept == 41 and 1 <= py_lines <= CANCEL_AFTER_S + 1 and 1 <= sh_lines <= CANCEL_AFTER_S + 1, (py_lines, sh_lines)


def test_a_client_that_leaves_stops_the_tool(sandboxed: Gateway) -> None:
    client = sandboxed.client()
    first = client.responses.create(
        model=MODEL, input=python("kept = 41\nopen('/tmp/py_ticks', 'w').close()\nopen('/tmp/sh_ticks', 'w').close()"), tools=tools({"type": "auto"})
    )
    container = next(item for item in first.output if item.type == "code_interpreter_call").container_id  # type: ignore[union-attr]
    for loop, running in [(PYTHON_LOOP, "response.code_interpreter_call.interpreting"), (SHELL_LOOP, "response.shell_call_output_content.delta")]:
        body = {"model": MODEL, "input": loop, "tools": tools(container), "stream": True}
        with httpx.Client(timeout=30) as http:
            with http.stream("POST", f"{sandboxed.url}/v1/responses", json=body) as stream:
                lines = stream.iter_lines()  # kept: a generator dropped mid-stream closes the connection
                for line in lines:
                    if running in line:
                        break
                time.sleep(CANCEL_AFTER_S)
    counted = client.responses.create(model=MODEL, input=COUNT, tools=tools(container), include=["code_interpreter_call.outputs"])
    call = next(item for item in counted.output if item.type == "code_interpreter_call")
    py_lines, sh_lines, kept = map(int, call.outputs[0].logs.split("\n")[0].split())  # type: ignore[union-attr]
    assert kept == 41 and 1 <= py_lines <= CANCEL_AFTER_S + 1 and 1 <= sh_lines <= CANCEL_AFTER_S + 1, (py_lines, sh_lines)
