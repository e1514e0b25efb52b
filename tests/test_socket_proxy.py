"""The Docker socket proxy of the compose stack: the sandbox works through it, and nothing else does."""

from __future__ import annotations

import copy
import json
import os
import socket
import sys
import time
from typing import Any, Iterator

import anyio
import docker
import docker.errors
import pytest

from gateway.config import SandboxConfig
from runtime.supervision import Supervisor
from sandbox.manager import SandboxManager
from sandbox.proxy_policy import Limits

from .conftest import ROOT, free_port, wait_for_port


@pytest.fixture(scope="module")
def proxy(sandbox_image: str) -> Iterator[str]:
    import subprocess

    port = free_port()
    args = [sys.executable, "-m", "sandbox.socket_proxy", "--listen", f"127.0.0.1:{port}", "--image", sandbox_image]
    process = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield f"tcp://127.0.0.1:{port}"
    assert process.poll() is None, "the proxy died"
    process.kill()
    process.wait()


def test_the_sandbox_works_through_the_proxy(proxy: str, sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", proxy)

    async def main() -> list[str]:
        config = SandboxConfig(image=sandbox_image, pool_size=1, instance=f"test-{os.getpid()}-proxy")
        manager = SandboxManager(config)
        outputs = []
        async with anyio.create_task_group() as tasks:
            await manager.start(Supervisor(tasks))
            for code in ["pow(123, 456, 1000000007)", "x = 5", "x * 2"]:
                outputs.append((await manager.execute("session", code, resumed=False, tenant="t")).output)
            await manager.close()
            tasks.cancel_scope.cancel()
        return outputs

    assert anyio.run(main) == ["565291922\n", "", "10\n"]


HARDENED: dict[str, Any] = dict(
    network_mode="none", read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges"], mem_limit="64m", pids_limit=16
)


@pytest.mark.parametrize(
    "attempt, reason",
    [
        (lambda c, image: c.containers.run(image, ["id"], remove=True), "the field 'Cmd' is not allowed"),
        (lambda c, image: c.containers.list(all=True), "needs a filter on the sandbox label"),
        (lambda c, image: c.images.list(), "GET /images/json"),
        (
            lambda c, image: c.api.create_container(
                image, user="1000", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(binds=["/:/host"], **HARDENED)
            ),
            "'Binds' is not allowed",
        ),
        (
            lambda c, image: c.api.create_container(
                image,
                user="1000",
                labels={"harmony-gateway.sandbox": "1"},
                host_config=c.api.create_host_config(**(HARDENED | {"network_mode": "host"})),
            ),
            "network must be none",
        ),
        (
            lambda c, image: c.api.create_container(
                image, user="0", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(**HARDENED)
            ),
            "other than root",
        ),
        (
            lambda c, image: c.api.create_container(
                "harmony-gateway/base:bookworm",
                user="1000",
                labels={"harmony-gateway.sandbox": "1"},
                host_config=c.api.create_host_config(**HARDENED),
            ),
            "image must be",
        ),
        (
            lambda c, image: c.api.create_container(
                image, user="1000", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(privileged=True, **HARDENED)
            ),
            "'Privileged' is not allowed",
        ),
        (lambda c, image: c.api.exec_create("anything", ["id"]), "POST /containers/anything/exec"),
    ],
)
def test_everything_else_is_refused(proxy: str, sandbox_image: str, attempt: Any, reason: str) -> None:
    client = docker.DockerClient(base_url=proxy)
    with pytest.raises(docker.errors.APIError) as refused:
        attempt(client, sandbox_image)
    assert refused.value.status_code == 403
    assert reason in str(refused.value.explanation)


def test_other_containers_cannot_be_touched(proxy: str, sandbox_image: str) -> None:
    outside = docker.from_env().containers.create(sandbox_image, ["sleep", "60"], network_mode="none")
    try:
        client = docker.DockerClient(base_url=proxy)
        for attempt in (lambda: client.api.inspect_container(outside.id), lambda: client.api.remove_container(outside.id, force=True)):
            with pytest.raises(docker.errors.APIError) as refused:
                attempt()
            assert refused.value.status_code == 403 and "not a sandbox container" in str(refused.value.explanation)
    finally:
        outside.remove(force=True)
    # Gone, it is a 404 as Docker says it: removing a container that vanished meanwhile is not an error.
    for gone in (lambda: client.api.inspect_container(outside.id), lambda: client.api.remove_container(outside.id, force=True)):
        with pytest.raises(docker.errors.NotFound):
            gone()


# -- hostile requests, sent as raw bytes --------------------------------------------------------------------

INSTANCE = f"proxytest-{os.getpid()}"


def good_create(image: str) -> dict[str, Any]:
    """The create body the gateway's docker SDK sends (see DockerBackend._start_container)."""
    return {
        "Hostname": None, "Domainname": None, "ExposedPorts": None, "User": "1000:1000", "Tty": False,
        "OpenStdin": True, "StdinOnce": True, "AttachStdin": True, "AttachStdout": True, "AttachStderr": True,
        "Env": None, "Cmd": None, "Image": image, "Volumes": None, "NetworkDisabled": True, "Entrypoint": None,
        "WorkingDir": None, "NetworkingConfig": None, "MacAddress": None, "StopSignal": None, "Healthcheck": None,
        "StopTimeout": None, "Runtime": None,
        "Labels": {"harmony-gateway.sandbox": "1", "harmony-gateway.instance": INSTANCE},
        "HostConfig": {
            "Memory": 268435456, "MemorySwap": 268435456, "ReadonlyRootfs": True, "NetworkMode": "none",
            "CapDrop": ["ALL"], "SecurityOpt": ["no-new-privileges"], "LogConfig": {"Type": "none", "Config": {}},
            "Tmpfs": {"/tmp": "rw,nosuid,nodev,size=128m,mode=1777"}, "PidsLimit": 64, "Init": True,
            "NanoCpus": 1000000000,
        },
    }  # fmt: skip


def exchange(proxy: str, raw: bytes, idle: float = 1.5) -> bytes:
    """Send raw bytes to the proxy; return what comes back until it closes or goes quiet."""
    host, port = proxy.removeprefix("tcp://").split(":")
    received = b""
    with socket.create_connection((host, int(port)), timeout=idle) as sock:
        sock.sendall(raw)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            received += chunk
    return received


def http(method: str, target: str, body: bytes = b"", *headers: str) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: docker", *headers]
    if body or method == "POST":
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def statuses(answer: bytes) -> list[int]:
    """The status of each response in `answer` (framed by Content-Length); after a 101 the rest is raw."""
    found: list[int] = []
    while answer.startswith(b"HTTP/1.1 "):
        head, _, answer = answer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        found.append(int(lines[0].split(b" ")[1]))
        if found[-1] == 101:
            break
        length = next((int(line.split(b":")[1]) for line in lines if line.lower().startswith(b"content-length:")), 0)
        answer = answer[length:]
    return found


def ours() -> list[dict[str, Any]]:
    """Containers created by these tests, whoever let them through."""
    filters = {"label": [f"harmony-gateway.instance={INSTANCE}"]}
    return docker.from_env().api.containers(all=True, filters=filters)


@pytest.fixture
def no_leftovers() -> Iterator[None]:
    yield
    for container in ours():
        docker.from_env().api.remove_container(container["Id"], force=True)


def _set(path: str, value: Any) -> Any:
    def change(body: dict[str, Any]) -> dict[str, Any]:
        *parents, last = path.split(".")
        target = body
        for name in parents:
            target = target[name]
        target[last] = value
        return body

    return change


def _rename(path: str, new: str) -> Any:
    def change(body: dict[str, Any]) -> dict[str, Any]:
        *parents, last = path.split(".")
        target = body
        for name in parents:
            target = target[name]
        target[new] = target.pop(last)
        return body

    return change


HOSTILE = {
    # Go's decoder matches keys without case: these reach Docker's Privileged, Binds and User.
    "lower-case host keys": lambda b: _set("HostConfig.privileged", True)(_set("HostConfig.binds", ["/:/host"])(_set("user", "0")(b))),
    "lower-case image": _set("image", "harmony-gateway/base:bookworm"),
    "misspelt key alone": _rename("HostConfig.ReadonlyRootfs", "readonlyRootfs"),
    "root as 00": _set("User", "00"),
    "root as 0000:0": _set("User", "0000:0"),
    "seccomp unconfined": _set("HostConfig.SecurityOpt", ["no-new-privileges", "seccomp=unconfined"]),
    "apparmor unconfined": _set("HostConfig.SecurityOpt", ["no-new-privileges", "apparmor=unconfined"]),
    "no pids limit": _set("HostConfig.PidsLimit", -1),
    "another container's pids": _set("HostConfig.PidMode", "container:anything"),
    "another container's ipc": _set("HostConfig.IpcMode", "container:anything"),
    "gpus": _set("HostConfig.DeviceRequests", [{"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}]),
    "tmpfs exec suid": _set("HostConfig.Tmpfs", {"/tmp": "rw,exec,suid,size=10m"}),
    "tmpfs elsewhere": _set("HostConfig.Tmpfs", {"/etc": "rw,nosuid,nodev,size=10m"}),
    "huge shm": _set("HostConfig.ShmSize", 1 << 40),
    "huge memory": _set("HostConfig.Memory", 1 << 50),
    "swap": _set("HostConfig.MemorySwap", -1),
    "cgroup parent": _set("HostConfig.CgroupParent", "/"),
    "oom score": _set("HostConfig.OomScoreAdj", -1000),
    "volumes": _set("Volumes", {"/data": {}}),
    "ulimits": _set("HostConfig.Ulimits", [{"Name": "nproc", "Soft": 999999, "Hard": 999999}]),
    "entrypoint": _set("Entrypoint", ["sh", "-c", "id"]),
    "cmd": _set("Cmd", ["sh", "-c", "id"]),
    "privileged": _set("HostConfig.Privileged", True),
    "capability added": _set("HostConfig.CapAdd", ["SYS_ADMIN"]),
    "host network": _set("HostConfig.NetworkMode", "host"),
    "writable root": _set("HostConfig.ReadonlyRootfs", False),
    "foreign label": _set("Labels", {"harmony-gateway.sandbox": "1", "com.docker.compose.project": "x"}),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_create_bodies_are_refused(proxy: str, sandbox_image: str, no_leftovers: None, name: str) -> None:
    body = json.dumps(HOSTILE[name](copy.deepcopy(good_create(sandbox_image)))).encode()
    answer = exchange(proxy, http("POST", "/v1.45/containers/create", body, "Content-Type: application/json"))
    assert statuses(answer) == [403], answer
    assert ours() == []


def test_duplicate_objects_are_refused(proxy: str, sandbox_image: str, no_leftovers: None) -> None:
    good = json.dumps(good_create(sandbox_image))
    # Go merges the second HostConfig into the first; a proxy reading the first saw only the hardened one.
    evil = good[:-1] + ', "HostConfig": {"Privileged": true, "Binds": ["/:/host"]}}'
    answer = exchange(proxy, http("POST", "/containers/create", evil.encode(), "Content-Type: application/json"))
    assert statuses(answer) == [403] and b"appears twice" in answer
    assert ours() == []


def test_the_forwarded_body_is_the_proxys_own(proxy: str, sandbox_image: str, no_leftovers: None) -> None:
    answer = exchange(proxy, http("POST", "/containers/create", json.dumps(good_create(sandbox_image)).encode()))
    assert statuses(answer) == [201], answer
    (container,) = ours()
    info = docker.from_env().api.inspect_container(container["Id"])
    host = info["HostConfig"]
    assert info["Config"]["User"] == "1000:1000" and info["Config"]["Image"] == sandbox_image
    assert host["ReadonlyRootfs"] is True and host["CapDrop"] == ["ALL"] and host["NetworkMode"] == "none"
    assert host["SecurityOpt"] == ["no-new-privileges"] and host["Privileged"] is False
    assert not host["Binds"] and not host["Mounts"] if "Mounts" in host else not host["Binds"]
    assert host["PidsLimit"] == 64 and host["Memory"] == host["MemorySwap"] == 268435456


def test_every_pipelined_request_is_checked(proxy: str, sandbox_image: str, no_leftovers: None) -> None:
    evil = good_create(sandbox_image)
    evil["HostConfig"]["Privileged"] = True
    pipeline = http("GET", "/_ping") + http("GET", "/containers/json?all=1") + http("POST", "/containers/create", json.dumps(evil).encode())
    answer = exchange(proxy, pipeline)
    assert statuses(answer) == [200, 403, 403], answer


def test_an_upgrade_does_not_open_the_connection(proxy: str, sandbox_image: str, no_leftovers: None) -> None:
    """An Upgrade header on a permitted request used to splice the connection to Docker unchecked."""
    evil = good_create(sandbox_image)
    evil["HostConfig"]["Privileged"] = True
    upgrade = ("Connection: Upgrade", "Upgrade: tcp")
    answer = exchange(proxy, http("GET", "/_ping", b"", *upgrade) + http("POST", "/containers/create", json.dumps(evil).encode()))
    assert statuses(answer) == [403, 403], answer
    assert ours() == []
    # A refused attach (not a sandbox container) with a request pipelined after it.
    outside = docker.from_env().containers.create(sandbox_image, ["sleep", "60"], network_mode="none")
    try:
        pipeline = http("POST", f"/containers/{outside.id}/attach?stream=1&stdin=1", b"", *upgrade) + http("GET", "/containers/json?all=1")
        assert statuses(exchange(proxy, pipeline)) == [403, 403]
    finally:
        outside.remove(force=True)


def test_only_docker_101_to_an_allowed_attach_splices(proxy: str, sandbox_image: str, no_leftovers: None) -> None:
    created = exchange(proxy, http("POST", "/containers/create", json.dumps(good_create(sandbox_image)).encode()))
    container_id = json.loads(created.split(b"\r\n\r\n", 1)[1])["Id"]
    upgrade = ("Connection: Upgrade", "Upgrade: tcp")
    after = http("GET", "/containers/json?all=1")
    answer = exchange(proxy, http("POST", f"/containers/{container_id}/attach?stream=1&stdin=1&stdout=1", b"", *upgrade) + after, idle=1.0)
    # What follows the 101 is the container's stdin, never a request to Docker.
    assert statuses(answer) == [101], answer
    assert b"[{" not in answer


@pytest.mark.parametrize(
    "head",
    [
        "Content-Length: 43\r\nTransfer-Encoding: chunked",
        "Transfer-Encoding: chunked\r\nContent-Length: 43",
        "Content-Length: 5\r\nContent-Length: 43",
    ],
)
def test_smuggling_is_refused(proxy: str, head: str) -> None:
    smuggled = b"0\r\n\r\nGET /containers/json?all=1 HTTP/1.1\r\nHost: d\r\n\r\n"
    answer = exchange(proxy, f"POST /_ping HTTP/1.1\r\nHost: docker\r\n{head}\r\n\r\n".encode() + smuggled)
    assert statuses(answer) == [400], answer


def test_a_bad_connection_does_not_stop_the_proxy(proxy: str) -> None:
    assert exchange(proxy, b"\x00\xff garbage\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert statuses(exchange(proxy, http("GET", "/_ping"))) == [200]


# -- the egress network and the runtime: what the proxy allows for sandboxes with a network policy ----------


@pytest.fixture(scope="module")
def egress_proxy(sandbox_image: str) -> Iterator[tuple[str, str]]:
    """A proxy that allows the egress network (an internal network of this test's) and the runc runtime."""
    import subprocess

    network = f"hg-proxytest-{os.getpid()}"
    docker.from_env().networks.create(network, internal=True)
    port = free_port()
    args = [sys.executable, "-m", "sandbox.socket_proxy", "--listen", f"127.0.0.1:{port}", "--image", sandbox_image]
    process = subprocess.Popen([*args, "--network", network, "--runtime", "runc"], cwd=ROOT, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield f"tcp://127.0.0.1:{port}", network
    process.kill()
    process.wait()
    docker.from_env().networks.get(network).remove()


def networked_create(image: str, network: str) -> dict[str, Any]:
    """The body the gateway sends for a sandbox with a network policy (DockerBackend._start_container)."""
    body = good_create(image)
    body["NetworkDisabled"] = False
    body["Env"] = ["HTTPS_PROXY=http://sandbox:token@egress:3128", "API_KEY=hgsecret_0123"]
    body["HostConfig"] |= {"NetworkMode": network, "Runtime": "runc"}
    return body


def test_a_sandbox_joins_the_egress_network_and_nothing_else(egress_proxy: tuple[str, str], sandbox_image: str, no_leftovers: None) -> None:
    proxy, network = egress_proxy
    answer = exchange(proxy, http("POST", "/containers/create", json.dumps(networked_create(sandbox_image, network)).encode()))
    assert statuses(answer) == [201], answer
    (container,) = ours()
    info = docker.from_env().api.inspect_container(container["Id"])
    assert info["HostConfig"]["NetworkMode"] == network and info["HostConfig"]["Runtime"] == "runc"
    assert list(info["NetworkSettings"]["Networks"]) == [network]
    assert "API_KEY=hgsecret_0123" in info["Config"]["Env"]
    # Without a network, as before: the runtime is still the configured one.
    plain = good_create(sandbox_image)
    plain["HostConfig"]["Runtime"] = "runc"
    assert statuses(exchange(proxy, http("POST", "/containers/create", json.dumps(plain).encode()))) == [201]


EGRESS_HOSTILE = {
    "host network": _set("HostConfig.NetworkMode", "host"),
    "the default bridge": _set("HostConfig.NetworkMode", "bridge"),
    "another network": _set("HostConfig.NetworkMode", "some-other-network"),
    "another container's network": _set("HostConfig.NetworkMode", "container:anything"),
    "another network by its endpoints": _set("NetworkingConfig", {"EndpointsConfig": {"some-other-network": {}}}),
    "network disabled mismatch": _set("NetworkDisabled", True),
    "another runtime": _set("HostConfig.Runtime", "runsc"),
    "no runtime": _set("HostConfig.Runtime", None),
    "env not a list": _set("Env", "A=1"),
    "env without a name": _set("Env", ["=value"]),
    "env too many": _set("Env", [f"V{index}=x" for index in range(65)]),
    "env too long": _set("Env", ["V=" + "x" * 9000]),
}


@pytest.mark.parametrize("name", list(EGRESS_HOSTILE))
def test_the_egress_allowances_cannot_be_bent(egress_proxy: tuple[str, str], sandbox_image: str, no_leftovers: None, name: str) -> None:
    proxy, network = egress_proxy
    body = json.dumps(EGRESS_HOSTILE[name](networked_create(sandbox_image, network))).encode()
    assert statuses(exchange(proxy, http("POST", "/containers/create", body))) == [403]
    assert ours() == []


def test_without_allowances_neither_a_network_nor_a_runtime_passes(proxy: str, sandbox_image: str, no_leftovers: None) -> None:
    for body in (networked_create(sandbox_image, "harmony-egress"), _set("HostConfig.Runtime", "runc")(good_create(sandbox_image))):
        assert statuses(exchange(proxy, http("POST", "/containers/create", json.dumps(body).encode()))) == [403]
    assert ours() == []


@pytest.mark.parametrize("network", ["host", "bridge", "none", "default", "container:x"])
def test_the_egress_network_cannot_be_a_builtin_one(network: str) -> None:
    with pytest.raises(ValueError):
        Limits("image", network=network)
