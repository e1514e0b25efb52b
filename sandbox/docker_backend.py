"""Kernels in hardened Docker containers, through the Docker Engine API.

The `docker` SDK is synchronous: every call runs in a worker thread. The kernel's stdin/stdout are
reached through an attach socket, which is handed to anyio so replies are awaited on the event loop.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine
from urllib.parse import urlsplit

import anyio
import anyio.to_thread
import docker
import docker.errors
from anyio.abc import SocketStream, UNIXSocketStream

from .build import sandbox_sha
from .channel import KernelChannel, KernelDied
from .config import SandboxConfig
from .directory import Directory, Placement
from .kernel import KILL_GRACE_S
from .network import EgressClient, NetworkGrant, environment, new_token

log = logging.getLogger("sandbox.docker")

LABEL = "harmony-gateway.sandbox"
INSTANCE_LABEL = "harmony-gateway.instance"
OWNER_LABEL = "harmony-gateway.owner"  # the gateway replica that started the container
EGRESS_CHECK_S = 5.0  # how often the egress proxy's health is checked
# Processes a runtime itself runs in the container's cgroup, beyond the sandbox's own `pids`: gVisor's
# sentry and gofer are threads there, and a limit that leaves them none brings the whole sandbox down.
RUNTIME_PIDS = {"runsc": 128}


class SandboxUnavailable(Exception):
    """The sandbox cannot run at all (no daemon, no image): the gateway does not start."""


@dataclass(frozen=True)
class Owner:
    """Which gateway replica this is, and how to learn which replicas are alive (the store's leases)."""

    id: str
    live: Callable[[], Awaitable[set[str]]]
    sweep_s: float = 30.0  # how often containers of replicas that are gone are looked for

    @classmethod
    def alone(cls, id: str = "gateway") -> "Owner":
        """A gateway with no other replicas to consider: only its own containers are live."""

        async def live() -> set[str]:
            return {id}

        return cls(id, live)


class DockerKernel:
    def __init__(self, backend: "DockerBackend", container_id: str, channel: KernelChannel, token: str | None = None) -> None:
        self.backend = backend
        self.container_id = container_id
        self.channel = channel
        self.token = token  # its egress proxy password, when it has a network (network.py)

    async def renew(self, grant: NetworkGrant | None) -> None:
        """Register the sandbox's grant with the egress proxy again before a call: a proxy that restarted,
        or a grant that lapsed while the session was idle, has it back."""
        if grant is not None and self.token is not None:
            await self.backend.network.register(self.token, grant, self.backend.grant_ttl_s)

    async def death_reason(self) -> str:
        state = await anyio.to_thread.run_sync(self.backend.wait_stopped, self.container_id)
        if state.get("OOMKilled"):
            return f"it ran out of memory (limit {self.backend.config.memory})"
        if state.get("ExitCode") == 137 and self.backend.config.runtime == "runsc":
            # gVisor kills a sandbox over its memory limit itself, and Docker does not mark it OOM-killed.
            return f"it was killed (code 137); under gVisor that is most likely that it ran out of memory (limit {self.backend.config.memory})"
        if state.get("Running"):
            return "its channel closed"
        return f"it exited with code {state.get('ExitCode')}"

    async def destroy(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.channel.aclose()
            await anyio.to_thread.run_sync(self.backend.remove, self.container_id)
            if self.token is not None:
                await self.backend.forget_grant(self.token)

    async def detach(self) -> None:
        """Close this replica's attach connection; the container and its kernel carry on (its stdin is
        not closed with an attach: see `_start_container`)."""
        with anyio.CancelScope(shield=True):
            await self.channel.aclose()


class DockerBackend:
    data_dir = "/mnt/data"
    isolation = "docker"

    def __init__(self, config: SandboxConfig, owner: Owner | None = None, directory: Directory | None = None) -> None:
        self.config = config
        self.owner = owner or Owner.alone()
        self.directory = directory  # sessions that changed hands belong to their holder, not their starter
        self.labels = {LABEL: "1", INSTANCE_LABEL: config.instance, OWNER_LABEL: self.owner.id}
        self._client: docker.DockerClient | None = None
        self._egress: EgressClient | None = None
        self.egress_healthy: bool | None = None  # None: sandboxes have no network here
        # A grant lapses this long after its last use unless renewed: the session's idle time, and a call's.
        self.grant_ttl_s = config.idle_ttl_s + config.timeout_s + KILL_GRACE_S

    @property
    def network(self) -> EgressClient:
        if self._egress is None:
            network = self.config.network
            if not network.enabled:
                raise SandboxUnavailable("sandboxes have no network on this gateway (sandbox.network.enabled is false)")
            key = network.control_key or os.environ.get("EGRESS_CONTROL_KEY", "") or _read_key(network.control_key_file)
            if len(key) < 16:
                raise SandboxUnavailable("sandbox.network needs the egress proxy's control key (control_key, control_key_file or EGRESS_CONTROL_KEY)")
            self._egress = EgressClient(network, key)
        return self._egress

    async def _egress_answers(self) -> bool:
        try:
            return await self.network.healthy()
        except SandboxUnavailable as exc:  # its key is not there (yet): said once, not every check
            if self.egress_healthy is not False:
                log.warning("%s", exc)
            return False

    async def forget_grant(self, token: str) -> None:
        try:
            await self.network.forget(token)
        except OSError as exc:  # the grant lapses by itself
            log.warning("the egress proxy did not take back a sandbox's grant: %s", exc)

    @property
    def client(self) -> docker.DockerClient:
        assert self._client is not None, "start() first"
        return self._client

    async def start(self) -> None:
        """Check the daemon and the image, and remove what replicas of this instance that are gone left
        behind (never a live replica's: several replicas may share the daemon)."""
        self._client = await anyio.to_thread.run_sync(self._connect)
        await self.remove_orphans()
        if self.config.network.enabled:  # the proxy (and the key it makes) may come up after the gateway
            self.egress_healthy = await self._egress_answers()
            if not self.egress_healthy:
                log.warning("the sandbox egress proxy at %s does not answer yet", self.config.network.control_url)

    async def remove_orphans(self) -> int:
        """Remove the containers of this instance whose replica is no longer alive (its lease ran out). A
        session's container belongs to the replica holding the session; one whose holder is gone is kept
        for its idle time, for another replica to take over when the conversation goes on."""
        live = await self.owner.live()
        placements = await self._placements()
        stale_before = time.time() - self.config.idle_ttl_s

        def orphaned(container: str, starter: str) -> bool:
            placement = placements.get(container)
            if placement is None:
                return starter not in live
            return placement.owner not in live and placement.last_used < stale_before

        removed = await anyio.to_thread.run_sync(self._remove, orphaned)
        await self._drop(removed, placements)
        if removed:
            log.info("removed %d sandbox container(s) left by gateway replicas that are gone", len(removed))
        return len(removed)

    async def _placements(self) -> dict[str, Placement]:
        return await self.directory.placements() if self.directory is not None else {}

    async def _drop(self, removed: list[str], placements: dict[str, Placement]) -> None:
        if self.directory is not None:
            for container in removed:
                if container in placements:
                    await self.directory.drop(container, placements[container].owner)

    def maintenance(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        return [self.sweep_orphans] + ([self.watch_egress] if self.config.network.enabled else [])

    async def watch_egress(self) -> None:
        """Run for the app's lifetime: whether the egress proxy answers, for /ready."""
        while True:
            await anyio.sleep(EGRESS_CHECK_S)
            healthy = await self._egress_answers()
            if healthy != self.egress_healthy:
                log.log(
                    logging.INFO if healthy else logging.WARNING, "the sandbox egress proxy %s", "answers again" if healthy else "does not answer"
                )
            self.egress_healthy = healthy

    @property
    def reattach(self) -> Callable[[str], Awaitable[DockerKernel | None]]:
        return self.attach

    async def attach(self, container_id: str) -> DockerKernel | None:
        """This replica's connection to a running session container another replica started or held;
        None if the container is gone or its kernel does not answer (then it is removed)."""
        try:
            sock = await anyio.to_thread.run_sync(self._attach_socket, container_id)
        except docker.errors.NotFound:
            return None
        if sock is None:
            return None
        try:
            # The kernel may still be running code a replica that stopped had sent it: the ping waits for it.
            return await self._kernel(container_id, sock[0], answer_within_s=self.config.timeout_s + KILL_GRACE_S + 10, token=sock[1])
        except (KernelDied, TimeoutError) as exc:
            log.warning("sandbox container %s does not answer (%s): removed", container_id[:12], exc)
            return None

    def _attach_socket(self, container_id: str) -> tuple[socket.socket, str | None] | None:
        """The container's attach connection, and its egress token if it has a network."""
        api = self.client.api
        state = api.inspect_container(container_id)
        if not state["State"].get("Running") or state["Config"].get("Labels", {}).get(INSTANCE_LABEL) != self.config.instance:
            self.remove(container_id)
            return None
        attached = api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        return _detach_socket(attached), _token_of(state["Config"].get("Env") or [])

    async def sweep_orphans(self) -> None:
        """Run for the app's lifetime: a replica that died leaves its containers to the others."""
        while True:
            await anyio.sleep(self.owner.sweep_s)
            try:
                await self.remove_orphans()
            except Exception as exc:  # the daemon or the database is away for now: next time
                log.warning("looking for orphaned sandbox containers failed: %s", exc)

    def _connect(self) -> docker.DockerClient:
        try:
            client = docker.from_env()
            client.ping()
        except docker.errors.DockerException as exc:
            raise SandboxUnavailable(
                f"sandbox.backend is 'docker' but the Docker daemon is unreachable ({exc}). "
                "Start Docker or set DOCKER_HOST, or use sandbox.backend: local."
            ) from None
        try:
            image = client.images.get(self.config.image)
        except docker.errors.ImageNotFound:
            raise SandboxUnavailable(
                f"the sandbox image {self.config.image!r} does not exist. Build it with: "
                f"gateway sandbox build --tag {self.config.image} [--base IMAGE]"
            ) from None
        built_from = image.labels.get("harmony-gateway.sandbox-sha", "unknown")
        if built_from not in ("unknown", sandbox_sha()):
            log.warning("the sandbox image %s has another kernel than this gateway: rebuild it", self.config.image)
        return client

    async def create(self, network: NetworkGrant | None = None) -> DockerKernel:
        """A kernel in a new container: with no network, or (`network`) on the egress network, its grant
        registered with the proxy before the container starts."""
        if network is None:
            container_id, sock = await anyio.to_thread.run_sync(self._start_container, None)
            return await self._kernel(container_id, sock, answer_within_s=30)
        egress, token = self.network, new_token()
        env = environment(network, token, self.config.network, await egress.ca_pem())
        await egress.register(token, network, self.grant_ttl_s)
        try:
            container_id, sock = await anyio.to_thread.run_sync(self._start_container, env)
        except BaseException:
            await self.forget_grant(token)
            raise
        return await self._kernel(container_id, sock, answer_within_s=30, token=token)

    async def _kernel(self, container_id: str, sock: socket.socket, answer_within_s: float, token: str | None = None) -> DockerKernel:
        """The kernel behind an attach connection, once it answers a ping (else its container is removed)."""
        stream = await _async_stream(sock)
        kernel = DockerKernel(self, container_id, KernelChannel(stream, stream, multiplexed=True), token)
        try:
            with anyio.fail_after(answer_within_s):
                await kernel.channel.request(op="ping")
        except BaseException:
            await kernel.destroy()
            raise
        return kernel

    def _start_container(self, env: list[str] | None) -> tuple[str, socket.socket]:
        """`env` given: the container joins the egress network (its only way out is the proxy)."""
        config, api = self.config, self.client.api
        memory = config.memory
        host_config = api.create_host_config(
            network_mode=config.network.docker_network if env is not None else "none",
            runtime=config.runtime,
            read_only=True,
            tmpfs={
                "/tmp": "rw,nosuid,nodev,size=128m,mode=1777",
                "/mnt/data": "rw,nosuid,nodev,size=256m,mode=1777",
                "/mnt/skills": "rw,nosuid,nodev,size=64m,mode=1777",  # skills the gateway installs (kernel.py)
            },
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            pids_limit=config.pids + RUNTIME_PIDS.get(config.runtime or "", 0),
            mem_limit=memory,
            memswap_limit=memory,  # no swap beyond the memory limit
            nano_cpus=int(config.cpus * 1e9),
            # No docker-init: PID 1 would hold the attach pipes where the user's code could open them
            # (/proc/1/fd). The kernel's supervisor is PID 1, not dumpable, and reaps what code leaves.
            init=False,
            log_config={"type": "none"},  # replies must not pile up in container logs
        )
        spec = api.create_container_config(
            config.image,
            None,
            user="1000:1000",
            stdin_open=True,
            labels=self.labels,
            host_config=host_config,
            network_disabled=env is None,
            environment=env,
        )
        # The SDK sets StdinOnce with stdin_open: the kernel's stdin would close with the first attach, and
        # no other replica could attach to the session later (a detach would end the kernel).
        spec["StdinOnce"] = False
        container_id = api.create_container_from_config(spec)["Id"]
        try:
            api.start(container_id)
            attached = api.attach_socket(container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            return container_id, _detach_socket(attached)
        except BaseException:
            self.remove(container_id)
            raise

    def wait_stopped(self, container_id: str) -> dict[str, Any]:
        """The container's state once it stopped (or after a few seconds of waiting)."""
        state: dict[str, Any] = {}
        for _ in range(20):
            try:
                state = self.client.api.inspect_container(container_id)["State"]
            except docker.errors.NotFound:
                return {}
            if not state.get("Running"):
                break
            time.sleep(0.1)
        return state

    def remove(self, container_id: str) -> None:
        try:
            self.client.api.remove_container(container_id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress
                raise

    def _remove(self, whose: Callable[[str, str], bool]) -> list[str]:
        """Remove the containers of this instance that `whose(container, starter)` picks, where the starter
        is the replica that started it (empty for containers of a version before owners); their ids."""
        filters = {"label": [f"{LABEL}=1", f"{INSTANCE_LABEL}={self.config.instance}"]}
        containers = self.client.api.containers(all=True, filters=filters)
        removed = []
        for container in containers:
            if whose(container["Id"], (container.get("Labels") or {}).get(OWNER_LABEL, "")):
                self.remove(container["Id"])
                removed.append(container["Id"])
        return removed

    async def close(self) -> None:
        """At shutdown: this replica's own containers go; the other replicas', and sessions another
        replica took over, stay."""
        with anyio.CancelScope(shield=True):
            try:
                placements = await self._placements()
            except Exception as exc:
                log.warning("the session directory is unavailable at shutdown (%s): removing what this replica started", exc)
                placements = {}
            me = self.owner.id

            def mine(container: str, starter: str) -> bool:
                placement = placements.get(container)
                return placement.owner == me if placement is not None else starter == me

            removed = await anyio.to_thread.run_sync(self._remove, mine)
            with anyio.move_on_after(2):
                try:
                    await self._drop(removed, placements)
                except Exception:
                    pass
            await anyio.to_thread.run_sync(self.client.close)
            if self._egress is not None:
                await self._egress.aclose()


def _read_key(path: str | None) -> str:
    try:
        return open(path).read().strip() if path else ""
    except OSError as exc:
        raise SandboxUnavailable(f"sandbox.network.control_key_file cannot be read: {exc.strerror}") from None


def _token_of(env: list[str]) -> str | None:
    """The egress token in a container's proxy variable (network.py `environment`), if it has one."""
    for entry in env:
        if entry.startswith("HTTPS_PROXY="):
            return urlsplit(entry.partition("=")[2]).password
    return None


def _detach_socket(attached: Any) -> socket.socket:
    """The attach connection as a socket of our own (the SDK's object belongs to its HTTP response)."""
    raw: socket.socket = getattr(attached, "_sock", attached)
    duplicate = raw.dup()
    attached.close()
    return duplicate


async def _async_stream(sock: socket.socket) -> SocketStream:
    if sock.family == socket.AF_UNIX:
        return await UNIXSocketStream.from_socket(sock)
    return await SocketStream.from_socket(sock)
