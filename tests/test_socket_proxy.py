"""The Docker socket proxy of the compose stack: the sandbox works through it, and nothing else does."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import anyio
import docker
import docker.errors
import pytest

from gateway.config import SandboxConfig
from sandbox.manager import SandboxManager

from .conftest import ROOT, free_port, wait_for_port


@pytest.fixture(scope="module")
def proxy(sandbox_image: str) -> Iterator[str]:
    import subprocess

    port = free_port()
    args = [sys.executable, "-m", "sandbox.socket_proxy", "--listen", f"127.0.0.1:{port}", "--image", sandbox_image]
    process = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.DEVNULL)
    wait_for_port(port)
    yield f"tcp://127.0.0.1:{port}"
    process.kill()
    process.wait()


def test_the_sandbox_works_through_the_proxy(proxy: str, sandbox_image: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", proxy)

    async def main() -> list[str]:
        config = SandboxConfig(image=sandbox_image, pool_size=1, instance=f"test-{os.getpid()}-proxy")
        manager = SandboxManager(config)
        outputs = []
        async with anyio.create_task_group() as tasks:
            await manager.start(tasks)
            for code in ["pow(123, 456, 1000000007)", "x = 5", "x * 2"]:
                outputs.append((await manager.execute("session", code, resumed=False)).output)
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
        (lambda c, image: c.containers.run(image, ["id"], remove=True), "the sandbox label is missing"),
        (lambda c, image: c.containers.list(all=True), "needs a filter on the sandbox label"),
        (lambda c, image: c.images.list(), "GET /images/json"),
        (lambda c, image: c.api.create_container(image, user="1000", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(binds=["/:/host"], **HARDENED)), "mounts and devices"),
        (lambda c, image: c.api.create_container(image, user="1000", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(**(HARDENED | {"network_mode": "host"}))), "network must be none"),
        (lambda c, image: c.api.create_container(image, user="0", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(**HARDENED)), "must not be root"),
        (lambda c, image: c.api.create_container("harmony-gateway/base:bookworm", user="1000", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(**HARDENED)), "image must be"),
        (lambda c, image: c.api.create_container(image, user="1000", labels={"harmony-gateway.sandbox": "1"}, host_config=c.api.create_host_config(privileged=True, **HARDENED)), "privileged"),
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
