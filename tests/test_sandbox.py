"""The python tool end to end: the model's code runs in a real sandbox (Docker containers, or the local
namespaced backend), its output streams to the client and goes back to the model."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from .conftest import (
    MODEL,
    Gateway,
    Process,
    emulator_stats,
    gateway_config,
    sandbox_containers,
    sandbox_section,
    stream_raw,
    stream_sdk,
)

CODE_TOOL = {"type": "code_interpreter", "container": {"type": "auto"}}
STATE_LOST = "The Python session was restarted"


@pytest.fixture(scope="module", params=["docker", "local"])
def sandboxed(request: pytest.FixtureRequest, emulator: Process, workdir: Path, sandbox_image: str) -> Iterator[Gateway]:
    """The suite on each backend (and under gVisor: test_sandbox_gvisor.py)."""
    yield from sandboxed_gateway(request.param, None, emulator, workdir)


def sandboxed_gateway(backend: str, runtime: str | None, emulator: Process, workdir: Path) -> Iterator[Gateway]:
    instance = f"test-{os.getpid()}-{runtime or backend}"
    config = gateway_config(emulator.url, workdir, sandbox=sandbox_section(backend, instance, runtime=runtime))
    process = Gateway(config, workdir).start()
    process.backend = backend  # type: ignore[attr-defined]
    process.runtime = runtime  # type: ignore[attr-defined]
    process.instance = instance  # type: ignore[attr-defined]
    yield process
    process.stop()
    if backend == "local":  # every kernel went with the gateway, including ones that ignored their timeout
        leftover = subprocess.run(["pgrep", "-f", f"hg-sandbox-{instance}-"], capture_output=True, text=True).stdout
        assert leftover == "", f"local kernels left running: {leftover.split()}"


def run(gateway: Gateway, text: str, **extra: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Stream one request with the python tool; return the final response and the events."""
    body = {"model": MODEL, "input": text, "tools": [CODE_TOOL], "include": ["code_interpreter_call.outputs"]}
    events = stream_raw(gateway, body | extra, timeout=60)
    return events[-1]["response"], events


def calls(response: dict[str, Any]) -> list[dict[str, Any]]:
    return [item for item in response["output"] if item["type"] == "code_interpreter_call"]


def logs(call: dict[str, Any]) -> str:
    return call["outputs"][0]["logs"]


def final_text(response: dict[str, Any]) -> str:
    return response["output"][-1]["content"][0]["text"]


def test_pow_output_reaches_the_client_and_the_model(sandboxed: Gateway, emulator: Process) -> None:
    events = stream_sdk(
        sandboxed.client(), input="[[python pow(123, 456, 1000000007)]]", tools=[CODE_TOOL], include=["code_interpreter_call.outputs"]
    )
    response = events[-1]["response"]
    assert response["status"] == "completed"
    (call,) = calls(response)
    assert call["code"] == "pow(123, 456, 1000000007)"
    assert call["status"] == "completed" and call["container_id"].startswith("cntr_")
    assert logs(call) == "565291922"
    assert final_text(response) == "The tool said: 565291922"
    # The output went back to the model as the python tool's Harmony message.
    assert "<|start|>python to=assistant<|channel|>analysis<|message|>565291922<|end|>" in emulator_stats(emulator)["last_prompt"]
    kinds = [e["type"] for e in events if e.get("item_id") == call["id"]]
    assert kinds[0] == "response.code_interpreter_call.in_progress"
    assert kinds[-3:] == [
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
    ]
    # The python tool was declared with the real limits.
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "## python" in prompt and "time out after 3 seconds" in prompt


def test_a_python_call_sent_back_as_input_is_read(sandboxed: Gateway, emulator: Process) -> None:
    """A client that replays a response's output as input (without previous_response_id) sends its
    code_interpreter_call items back: the model reads the call and what it printed, or is told the output
    was not sent; the items are listed as input."""
    first, _ = run(sandboxed, "[[python print(6 * 7)]]")
    (call,) = calls(first)
    assert logs(call) == "42"
    client = sandboxed.client()
    question = {"role": "user", "content": "[[python print(6 * 7)]]"}
    replayed = client.responses.create(model=MODEL, input=[question, call], tools=[CODE_TOOL], store=True)
    assert replayed.status == "completed"
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "<|start|>assistant to=python<|channel|>analysis code<|message|>print(6 * 7)<|call|>" in prompt
    assert "<|start|>python to=assistant<|channel|>analysis<|message|>42<|end|>" in prompt
    listed = client.responses.input_items.list(replayed.id, order="asc").data
    assert [item.type for item in listed] == ["message", "code_interpreter_call"] and listed[1].id == call["id"]
    # Without its outputs (a response that did not include them), the model is told so.
    bare = call | {"outputs": None}
    assert client.responses.create(model=MODEL, input=[question, bare], tools=[CODE_TOOL]).status == "completed"
    assert "<|message|>[The output of this call was not sent back.]<|end|>" in emulator_stats(emulator)["last_prompt"]


def test_jupyter_semantics(sandboxed: Gateway) -> None:
    code = "import sys\\nprint('out')\\nprint('err', file=sys.stderr)\\n{'a': 1}"
    response, _ = run(sandboxed, f"[[python {code}]][[python 1/0]][[python None]]".replace("\\n", "\n"))
    first, error, empty = calls(response)
    assert logs(first) == "out\nerr\n{'a': 1}"
    assert "Traceback" in logs(error) and "ZeroDivisionError: division by zero" in logs(error)
    assert 'File "<cell>", line 1' in logs(error) and "kernel.py" not in logs(error)
    assert logs(empty) == "[no output]"


def test_state_persists_across_calls_and_turns(sandboxed: Gateway) -> None:
    response, _ = run(sandboxed, "[[python x = 6 * 7]][[python print(x)]]")
    first, second = calls(response)
    assert logs(second) == "42"
    assert first["container_id"] == second["container_id"]
    follow, _ = run(sandboxed, "[[python x + 1]]", previous_response_id=response["id"])
    (third,) = calls(follow)
    assert logs(third) == "43"
    assert third["container_id"] == first["container_id"]
    # Another conversation has its own session.
    other, _ = run(sandboxed, "[[python x]]")
    assert "NameError" in logs(calls(other)[0])
    assert calls(other)[0]["container_id"] != first["container_id"]


def _host_address() -> str:
    """This machine's own address on its main interface: reachable from the host's network namespace,
    listened on by the test (never an address off this machine)."""
    lines = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True, text=True).stdout.splitlines()
    addresses = [line.split()[3].split("/")[0] for line in lines if "docker" not in line.split()[1]]
    return addresses[0] if addresses else "172.17.0.1"


def test_files_persist_in_the_data_directory(sandboxed: Gateway) -> None:
    write = "open('notes.txt', 'w').write('kept')"
    response, _ = run(sandboxed, f"[[python {write}]]")
    follow, _ = run(sandboxed, "[[python import os; print(os.getcwd(), open('notes.txt').read())]]", previous_response_id=response["id"])
    output = logs(calls(follow)[0])
    assert output.endswith("kept")
    if sandboxed.backend == "docker":  # type: ignore[attr-defined]
        assert output.startswith("/mnt/data ")


def test_network_is_unreachable(sandboxed: Gateway) -> None:
    accepted: list[Any] = []
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    threading.Thread(target=accept, daemon=True).start()
    code = (
        "import socket\n"
        f"for address in [('127.0.0.1', {port}), ('172.17.0.1', {port}), ('{_host_address()}', {port})]:\n"
        "    try:\n"
        "        socket.create_connection(address, timeout=2)\n"
        "        print('connected', address)\n"
        "    except OSError as exc:\n"
        "        print('blocked', address, type(exc).__name__)"
    )
    try:
        response, _ = run(sandboxed, f"[[python {code}]]")
    finally:
        listener.close()
    output = logs(calls(response)[0])
    assert output.count("blocked") == 3, output
    assert "connected" not in output
    assert accepted == []


def test_system_paths_are_read_only(sandboxed: Gateway) -> None:
    code = (
        "for path in ['/etc/passwd', '/usr/lib/evil', '/opt/evil', '/bin/evil']:\n"
        "    try:\n"
        "        open(path, 'a').write('x')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, type(exc).__name__)"
    )
    response, _ = run(sandboxed, f"[[python {code}]]")
    output = logs(calls(response)[0])
    assert output.count("refused") == 4, output


def test_memory_bomb_is_reported_and_the_session_recovers(sandboxed: Gateway) -> None:
    response, _ = run(sandboxed, "[[python keep = 'still here']][[python bomb = bytearray(2 * 1024 ** 3)]][[python print('alive')]]")
    assert response["status"] == "completed"
    _, bomb, after = calls(response)
    if sandboxed.backend == "docker":  # type: ignore[attr-defined]
        # The container's memory limit: the kernel is killed, replaced, and the model is told.
        assert bomb["status"] == "failed"
        assert "ran out of memory" in logs(bomb) and STATE_LOST in logs(bomb)
    else:  # the address-space limit: an ordinary MemoryError
        assert "MemoryError" in logs(bomb)
    assert logs(after) == "alive"
    assert "The tool said: alive" == final_text(response)


def test_infinite_loop_times_out_and_the_session_recovers(sandboxed: Gateway) -> None:
    started = time.monotonic()
    response, _ = run(sandboxed, "[[python y = 5]][[python while True: pass]][[python y]]")
    elapsed = time.monotonic() - started
    _, loop, after = calls(response)
    assert "TimeoutError: the execution was stopped after 3 seconds" in logs(loop)
    assert loop["status"] == "completed"
    assert logs(after) == "5"  # interrupted in place: the state survived
    assert elapsed < 3 + 3


def test_code_that_ignores_the_timeout_is_killed(sandboxed: Gateway) -> None:
    stubborn = "import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\nwhile True: pass"
    started = time.monotonic()
    response, _ = run(sandboxed, f"[[python z = 1]][[python {stubborn}]][[python print('fresh')]]")
    elapsed = time.monotonic() - started
    _, killed, after = calls(response)
    assert killed["status"] == "failed"
    assert "did not stop at the 3 s time limit" in logs(killed) and STATE_LOST in logs(killed)
    assert logs(after) == "fresh"
    assert elapsed < 3 + 3 + 5


def test_fork_bomb_is_contained(sandboxed: Gateway) -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    response, _ = run(
        sandboxed, f"[[python {bomb}]][[python import subprocess; print(subprocess.run(['echo', 'ok'], capture_output=True, text=True).stdout)]]"
    )
    bombed, after = calls(response)
    if sandboxed.runtime == "runsc":  # type: ignore[attr-defined]
        # gVisor's own process limit brings the whole kernel down, which the session survives as a restart.
        assert "TimeoutError" in logs(bombed) or STATE_LOST in logs(bombed), logs(bombed)
    else:
        assert "TimeoutError" in logs(bombed)
    assert logs(after) == "ok"  # the forks were killed: processes can start again
    # The host is unaffected: it can still start processes and the gateway answers.
    assert httpx.get(sandboxed.url + "/health").status_code == 200


def test_large_output_is_truncated(sandboxed: Gateway) -> None:
    response, _ = run(sandboxed, "[[python print('x' * 5_000_000); print('the end')]]")
    output = logs(calls(response)[0])
    assert "[... output truncated:" in output
    assert len(output) < 17000
    assert output.rstrip().endswith("the end")


def test_eight_concurrent_sessions(sandboxed: Gateway) -> None:
    async def one(client: Any, number: int) -> dict[str, Any]:
        code = f"open('mine.txt', 'w').write('{number}')\\nimport os\\nsorted(os.listdir('.')), open('mine.txt').read()"
        response = await client.responses.create(
            model=MODEL, input=f"[[python {code}]]".replace("\\n", "\n"), tools=[CODE_TOOL], include=["code_interpreter_call.outputs"]
        )
        return response.to_dict()

    async def main() -> list[dict[str, Any]]:
        client = sandboxed.async_client(timeout=60)
        return await asyncio.gather(*(one(client, n) for n in range(8)))

    responses = asyncio.run(main())
    containers = set()
    for number, response in enumerate(responses):
        (call,) = calls(response)
        assert logs(call) == f"(['mine.txt'], '{number}')"  # each session sees only its own files
        containers.add(call["container_id"])
    assert len(containers) == 8


def test_non_streaming(sandboxed: Gateway) -> None:
    client = sandboxed.client()
    response = client.responses.create(model=MODEL, input="[[python 2 ** 10]]", tools=[CODE_TOOL], include=["code_interpreter_call.outputs"])
    (call,) = [item for item in response.output if item.type == "code_interpreter_call"]
    assert call.status == "completed" and call.outputs[0].logs == "1024"
    assert response.output_text == "The tool said: 1024"
    # Without the include, as OpenAI answers: no outputs, though the model read them all the same.
    plain = client.responses.create(model=MODEL, input="[[python 2 ** 10]]", tools=[CODE_TOOL])
    (call,) = [item for item in plain.output if item.type == "code_interpreter_call"]
    assert call.status == "completed" and call.outputs is None and plain.output_text == "The tool said: 1024"


def test_max_tool_calls_bounds_the_loop(sandboxed: Gateway, emulator: Process) -> None:
    response, _ = run(sandboxed, "[[python 1]][[python 2]]", max_tool_calls=1)
    assert len(calls(response)) == 1
    assert "limit of 1 tool calls" in final_text(response)


@pytest.fixture(scope="module")
def roomy(emulator: Process, workdir: Path, sandbox_image: str) -> Iterator[Gateway]:
    """A docker gateway with a generous time limit: importing the scientific stack on a loaded 2-core
    machine can take longer than the 3 s the other tests use."""
    instance = f"test-{os.getpid()}-roomy"
    config = gateway_config(emulator.url, workdir, sandbox=sandbox_section("docker", instance, timeout_s=60, pool_size=1))
    process = Gateway(config, workdir).start()
    yield process
    process.stop()


def test_images_from_matplotlib(roomy: Gateway) -> None:
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nprint('plotted')"
    response, _ = run(roomy, f"[[python {code}]]")
    (call,) = calls(response)
    assert call["outputs"][0]["logs"] == "plotted\n[1 image(s) shown to the user]"
    assert call["outputs"][1]["type"] == "image"
    assert call["outputs"][1]["url"].startswith("data:image/png;base64,iVBOR")


def test_scientific_stack_is_installed(roomy: Gateway) -> None:
    code = (
        "import numpy, sympy, pandas\nint(numpy.arange(10).sum()), str(sympy.factor(sympy.Symbol('a')**2 - 1)), len(pandas.DataFrame({'a': [1, 2]}))"
    )
    response, _ = run(roomy, f"[[python {code}]]")
    assert logs(calls(response)[0]) == "(45, '(a - 1)*(a + 1)', 2)"


# -- the session manager's lifecycle, on the docker backend ---------------------------------------------


def test_sessions_expire_and_the_model_is_told(make_gateway: Any, emulator: Process, sandbox_image: str) -> None:
    instance = f"test-{os.getpid()}-ttl"
    gateway = make_gateway(emulator.url, sandbox=sandbox_section("docker", instance, idle_ttl_s=1, pool_size=0))
    response, _ = run(gateway, "[[python v = 'set']]")
    assert len(sandbox_containers(instance)) == 1
    deadline = time.monotonic() + 10
    while sandbox_containers(instance) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sandbox_containers(instance) == []  # reaped after the idle TTL
    follow, _ = run(gateway, "[[python v]]", previous_response_id=response["id"])
    (call,) = calls(follow)
    assert call["container_id"] == calls(response)[0]["container_id"]
    assert STATE_LOST in logs(call) and "NameError" in logs(call)


def test_live_session_cap_evicts_the_least_recently_used_idle_session(make_gateway: Any, emulator: Process, sandbox_image: str) -> None:
    instance = f"test-{os.getpid()}-cap"
    gateway = make_gateway(emulator.url, sandbox=sandbox_section("docker", instance, max_sessions=2, pool_size=0))
    first, _ = run(gateway, "[[python v = 1]]")
    second, _ = run(gateway, "[[python v = 2]]")
    third, _ = run(gateway, "[[python v = 3]]")  # the cap is reached: the first (least recently used) goes
    assert calls(third)[0]["status"] == "completed"
    assert len(sandbox_containers(instance)) <= 2
    kept, _ = run(gateway, "[[python v]]", previous_response_id=second["id"])
    assert logs(calls(kept)[0]) == "2"
    evicted, _ = run(gateway, "[[python v]]", previous_response_id=first["id"])
    assert STATE_LOST in logs(calls(evicted)[0]) and "NameError" in logs(calls(evicted)[0])


def test_busy_sessions_are_not_evicted(make_gateway: Any, emulator: Process, sandbox_image: str) -> None:
    instance = f"test-{os.getpid()}-busy"
    gateway = make_gateway(emulator.url, sandbox=sandbox_section("docker", instance, max_sessions=1, pool_size=0))
    busy = threading.Thread(target=run, args=(gateway, "[[python import time; time.sleep(2.5)]]"))
    busy.start()
    deadline = time.monotonic() + 10
    while not sandbox_containers(instance) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    second, _ = run(gateway, "[[python 2]]")
    busy.join()
    (refused,) = calls(second)
    assert refused["status"] == "failed"
    assert "limit of 1 live sessions, all busy" in logs(refused)
    assert "all busy" in final_text(second)  # the model was told too


def test_warm_pool_orphans_and_shutdown(make_gateway: Any, emulator: Process, sandbox_image: str) -> None:
    import docker

    instance = f"test-{os.getpid()}-life"
    client = docker.from_env()
    labels = {"harmony-gateway.sandbox": "1", "harmony-gateway.instance": instance}
    orphan = client.containers.run(sandbox_image, ["sleep", "600"], detach=True, labels=labels, network_mode="none")
    gateway = make_gateway(emulator.url, sandbox=sandbox_section("docker", instance, pool_size=3))
    deadline = time.monotonic() + 20
    while len(sandbox_containers(instance)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    live = sandbox_containers(instance)
    assert orphan.id not in live  # removed at start-up
    assert len(live) == 3  # the warm pool
    response, _ = run(gateway, "[[python 1]]")
    assert calls(response)[0]["status"] == "completed"
    gateway.stop()
    assert gateway.proc is not None and gateway.proc.returncode in (0, -15)  # uvicorn re-raises SIGTERM
    assert sandbox_containers(instance) == []  # nothing left after shutdown


def test_startup_fails_clearly_without_image_or_daemon(emulator: Process, tmp_path: Path) -> None:
    config = gateway_config(emulator.url, tmp_path, sandbox={"image": "harmony-gateway/no-such-image:1", "instance": "x"})
    gateway = Gateway(config, tmp_path)
    with pytest.raises(RuntimeError, match="gateway sandbox build"):
        gateway.start()
    os.environ["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"
    try:
        with pytest.raises(RuntimeError, match="Docker daemon is unreachable"):
            Gateway(gateway_config(emulator.url, tmp_path, sandbox={"instance": "x"}), tmp_path).start()
    finally:
        del os.environ["DOCKER_HOST"]


def test_code_interpreter_needs_a_sandbox(gateway: Gateway) -> None:
    response = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi", "tools": [CODE_TOOL]})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "tools[0].type" and "not enabled" in error["message"]


@pytest.mark.parametrize(
    "tool, status, param",
    [
        ({"type": "code_interpreter", "container": "cntr_unknown"}, 404, "tools[0].container"),
        ({"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file_1"]}}, 404, "tools[0].container.file_ids[0]"),
        ({"type": "code_interpreter", "container": {"type": "auto", "memory_limit": "64g"}}, 400, "tools[0].container.memory_limit"),
        ({"type": "code_interpreter", "container": {"type": "manual"}}, 400, "tools[0].container"),
    ],
)
def test_bad_code_interpreter_tools(sandboxed: Gateway, tool: dict[str, Any], status: int, param: str) -> None:
    response = httpx.post(sandboxed.url + "/v1/responses", json={"model": MODEL, "input": "hi", "tools": [tool]})
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"].startswith(param)


def test_a_container_id_names_a_live_session(sandboxed: Gateway) -> None:
    response, _ = run(sandboxed, "[[python w = 'shared']]")
    container = calls(response)[0]["container_id"]
    tool = {"type": "code_interpreter", "container": container}
    events = stream_raw(sandboxed, {"model": MODEL, "input": "[[python w]]", "tools": [tool], "include": ["code_interpreter_call.outputs"]})
    (call,) = calls(events[-1]["response"])
    assert call["container_id"] == container and logs(call) == "'shared'"


def test_tool_choice_forces_a_python_call(sandboxed: Gateway) -> None:
    response, _ = run(sandboxed, "answer [code print(6 * 7)]", tool_choice={"type": "code_interpreter"})
    (call,) = calls(response)
    assert call["code"] == "print(6 * 7)" and logs(call) == "42"
    assert final_text(response) == "The tool said: 42"


def test_one_call_at_a_time_in_a_session(sandboxed: Gateway) -> None:
    """Two responses on one container: their calls run one after the other, never at once."""
    response, _ = run(sandboxed, "[[python import time]]")
    container = calls(response)[0]["container_id"]
    tool = {"type": "code_interpreter", "container": container}
    code = "s = time.time(); time.sleep(0.8); print(s, time.time())"
    results: list[Any] = []

    def one() -> None:
        body = {"model": MODEL, "input": f"[[python {code}]]", "tools": [tool], "include": ["code_interpreter_call.outputs"]}
        events = stream_raw(sandboxed, body, timeout=60)
        results.append(logs(calls(events[-1]["response"])[0]))

    threads = [threading.Thread(target=one) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    (a_start, a_end), (b_start, b_end) = sorted(tuple(map(float, text.split())) for text in results)
    assert a_end <= b_start, (a_start, a_end, b_start, b_end)


def test_containers_are_created_hardened(sandboxed: Gateway) -> None:
    """What the daemon was asked for, read back from the container itself."""
    if sandboxed.backend != "docker":  # type: ignore[attr-defined]
        pytest.skip("Docker containers only; the local backend's isolation is tested by what code can see")
    import docker
    import docker.errors

    run(sandboxed, "[[python 1]]")
    client = docker.from_env().api
    inspected = 0
    for container in sandbox_containers(sandboxed.instance):  # type: ignore[attr-defined]
        try:
            attrs = client.inspect_container(container)
        except docker.errors.NotFound:  # a session's container removed since it was listed
            continue
        inspected += 1
        host = attrs["HostConfig"]
        assert host["ReadonlyRootfs"] is True
        assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
        assert host["Privileged"] is False
        assert any(option.replace("=", ":") in ("no-new-privileges", "no-new-privileges:true") for option in host["SecurityOpt"])
        assert host["NetworkMode"] == "none"
        assert host["Memory"] > 0 and host["MemorySwap"] == host["Memory"] and host["PidsLimit"] > 0
        user = attrs["Config"]["User"].split(":")[0]
        assert user.isdigit() and int(user) != 0
    assert inspected


# -- hostile code: the channel, the capture, and (local) what a session can see ------------------------------

FORGE = (
    "import os\n"
    # Request 3 of a pooled kernel (ping, keep, this): a reply the host would take for this call's.
    'ok = b\'{"id": 3, "status": "ok", "output": "FORGED", "images": []}\\n\'\n'
    'bad = b\'{"id": 3, "status": "ok", "output": 5, "images": 7}\\n\' + b\'x\' * (70 * 1024 * 1024)\n'
    "reached = []\n"
    "for pid in os.listdir('/proc'):\n"
    "    if pid.isdigit() and int(pid) != os.getpid():\n"
    "        for fd in range(0, 16):\n"
    "            for payload in (ok, bad):\n"
    "                try:\n"
    "                    with open(f'/proc/{pid}/fd/{fd}', 'wb') as sink:\n"
    "                        sink.write(payload)\n"
    "                    reached.append((pid, fd))\n"
    "                except OSError:\n"
    "                    pass\n"
    "for fd in range(3, 64):  # last: the worker's own result socket\n"
    "    try:\n"
    "        os.write(fd, bad[:100])\n"
    "        reached.append(fd)\n"
    "    except OSError:\n"
    "        pass\n"
    "print('reached', reached)"
)


def test_forged_kernel_replies_never_break_the_stream(sandboxed: Gateway) -> None:
    """User code used to write replies into the kernel's protocol pipe: a 500, a cut stream, or a 60 s hang."""
    started = time.monotonic()
    response, _ = run(sandboxed, f"[[python keep = 'k']][[python {FORGE}]][[python 6 * 7]]")
    assert response["status"] == "completed"  # stream_raw checked the stream: one terminal event
    _, forged, after = calls(response)
    assert "FORGED" not in logs(forged)
    # Either the worker's own result socket took the forgery (the session restarts) or nothing did.
    assert forged["status"] in ("completed", "failed")
    if forged["status"] == "failed":
        # gVisor (Debian's 2022 build) lets code write to the kernel's own stdout, which runc's non-dumpable
        # PID 1 keeps closed: the gateway finds the reply malformed and starts the session anew.
        reasons = ("invalid result", "the kernel's reply is too large") if sandboxed.runtime == "runsc" else ("invalid result",)  # type: ignore[attr-defined]
        assert any(reason in logs(forged) for reason in reasons) and STATE_LOST in logs(forged), logs(forged)
    assert logs(after) == "42"
    assert time.monotonic() - started < 30


def test_huge_output_is_capped_where_it_is_written(sandboxed: Gateway) -> None:
    """~140 MB of output used to fill the capture file's tmpfs and kill the kernel."""
    code = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(140): sys.stdout.write(chunk)\nprint('the end')"
    response, _ = run(sandboxed, f"[[python keep = 7]][[python {code}]][[python keep]]")
    _, flood, after = calls(response)
    assert flood["status"] == "completed"
    assert "[... output truncated:" in logs(flood) and logs(flood).rstrip().endswith("the end")
    assert logs(after) == "7"  # the session survived


def test_output_after_a_full_tmp_arrives(sandboxed: Gateway) -> None:
    fill = (
        "chunk = b'0' * (1 << 20)\n"
        "with open('/tmp/fill', 'wb') as sink:\n"
        "    try:\n"
        "        while True: sink.write(chunk)\n"
        "    except OSError as exc: print('full:', exc.errno)\n"
        "print('y' * 50_000)\n"
        "print('still talking')"
    )
    response, _ = run(sandboxed, f"[[python keep = 8]][[python {fill}]][[python keep]]")
    _, filled, after = calls(response)
    assert "full: 28" in logs(filled) and logs(filled).rstrip().endswith("still talking")
    assert logs(after) == "8"


@pytest.fixture(scope="module")
def local_only(emulator: Process, workdir: Path, sandbox_image: str) -> Iterator[Gateway]:
    instance = f"test-{os.getpid()}-bwrap"
    config = gateway_config(emulator.url, workdir, sandbox=sandbox_section("local", instance, pool_size=2, timeout_s=4))
    process = Gateway(config, workdir).start()
    process.instance = instance  # type: ignore[attr-defined]
    yield process
    process.stop()
    assert list(Path(tempfile.gettempdir()).glob(f"hg-sandbox-{instance}-*")) == [], "session files were left on disk"


def test_local_sessions_see_only_their_own_files(local_only: Gateway, workdir: Path) -> None:
    secret, _ = run(local_only, "[[python open('secret.txt', 'w').write('mine'); open('/tmp/t', 'w').write('tmp')]]")
    probe = (
        "import os, glob\n"
        "print(os.getuid(), sorted(os.listdir('/')), os.listdir('.'), os.listdir('/tmp'))\n"
        f"print([p for p in ('{workdir}/responses.sqlite3', '/root', '/home', '/var', '/work', '/etc/shadow') if os.path.exists(p)])\n"
        "print(glob.glob('/tmp/*') + glob.glob('/mnt/*') + glob.glob('/opt/*/*'))"
    )
    other, _ = run(local_only, f"[[python {probe}]]")
    lines = logs(calls(other)[0]).splitlines()
    assert lines[0] == "1000 ['bin', 'dev', 'etc', 'lib', 'lib64', 'mnt', 'opt', 'proc', 'sbin', 'tmp', 'usr'] [] []", lines
    # /mnt/skills is a tmpfs of the session's own (skills the gateway installs), empty until it installs one.
    expected = f"['/mnt/data', '/mnt/skills', '/opt/hg-sandbox-{local_only.instance}-kernel/kernel.py']"  # type: ignore[attr-defined]
    assert lines[1] == "[]" and lines[2] == expected, lines


def test_a_fork_bomb_does_not_starve_other_local_sessions(local_only: Gateway) -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    bombing = threading.Thread(target=run, args=(local_only, f"[[python {bomb}]]"))
    bombing.start()
    time.sleep(1.5)  # the bomb has used up its own process limit by now
    try:
        response, _ = run(local_only, "[[python import subprocess; print(subprocess.run(['echo', 'ok'], capture_output=True, text=True).stdout)]]")
    finally:
        bombing.join()
    assert logs(calls(response)[0]) == "ok"


def test_outputs_always_shown_where_the_operator_says(make_gateway: Any, emulator: Process) -> None:
    """`server.always_include_code_outputs` keeps outputs on every call, for clients that expect them."""
    instance = f"test-{os.getpid()}-outputs"
    gateway = make_gateway(emulator.url, server={"always_include_code_outputs": True}, sandbox=sandbox_section("local", instance, pool_size=0))
    response = gateway.client().responses.create(model=MODEL, input="[[python 6 * 7]]", tools=[CODE_TOOL])
    (call,) = [item for item in response.output if item.type == "code_interpreter_call"]
    assert call.outputs is not None and call.outputs[0].logs == "42"
