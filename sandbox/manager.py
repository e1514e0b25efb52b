"""Sandbox sessions: one kernel per conversation, a warm pool, idle reaping, a cap, and recovery.

A session is named by a container id (`cntr_…`) that the conversation keeps across turns. Its
executions run one at a time. A kernel that dies (out of memory, or code that ignored the timeout and
had to be killed) is replaced by a fresh one, and the result says that the session's state was lost.
With the Docker backend and a shared directory (directory.py), a session follows its conversation to
whichever replica gets its next call: that replica takes the session over and attaches to its container.

The warm pool is pool.py; what a backend and its kernels are, backend.py; the tools' descriptions,
descriptions.py.
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Awaitable, Callable, TypeVar

import anyio

from runtime.quota import AllBusy, to_evict
from runtime.supervision import Supervisor

from .backend import BACKEND_ERRORS, Backend, Execution, Kernel, SandboxFull, SessionFiles, ShellCommand
from .channel import KernelChannel, KernelDied, KernelProtocolError, ShellEnd, ShellOutput
from .config import SandboxConfig
from .directory import Directory, SessionBusy, SessionNotFound
from .docker_backend import DockerBackend, Owner, SandboxUnavailable
from .holding import Holder, Session
from .local_backend import LocalBackend
from .network import NetworkGrant
from .pool import KernelPool
from .shell_output import CharacterLimit
from .transfer import FilesState

log = logging.getLogger("sandbox")

# Past the timeout, how long the kernel has to answer (its supervisor kills a stuck worker after 2 s)
# before the whole kernel is replaced.
KILL_GRACE_S = 8.0
# A cancelled call's code or command, interrupted: how long the kernel has to answer (its supervisor kills
# a worker that goes on for 1 s) before the whole kernel is replaced.
INTERRUPT_WAIT_S = 3.0

__all__ = [
    "BACKEND_ERRORS",
    "Execution",
    "ShellCommand",
    "ShellEnd",
    "ShellOutput",
    "SandboxFull",
    "SandboxManager",
    "SandboxUnavailable",
    "SessionBusy",
    "SessionNotFound",
]


T = TypeVar("T")


class SandboxManager:
    def __init__(self, config: SandboxConfig, owner: Owner | None = None, directory: Directory | None = None) -> None:
        self.config = config
        # Only containers outlive the replica that started them: a local kernel is never handed over.
        self.directory = directory if config.backend == "docker" else None
        self.backend: Backend
        if config.backend == "docker":
            self.backend = DockerBackend(config, owner, self.directory)
        else:
            self.backend = LocalBackend(config)
        if self.directory is not None:
            self.directory.on_taken(self._taken)
        self._sessions: dict[str, Session] = {}
        self._pool = KernelPool(self.backend, config.pool_size)
        self._holder = Holder(self.backend, self._pool, self.directory, config.timeout_s + KILL_GRACE_S + 5)
        self._closed = False
        self._tasks: Supervisor | None = None

    @property
    def live_sessions(self) -> int:
        return len(self._sessions)

    @property
    def egress_healthy(self) -> bool | None:
        """Whether the egress proxy answers, as last checked; None where sandboxes have no network."""
        return self.backend.egress_healthy

    @property
    def pooled(self) -> int:
        """Kernels started and waiting for a new session."""
        return len(self._pool)

    async def start(self, tasks: Supervisor) -> None:
        """Check the backend (raises SandboxUnavailable), then keep the pool full and reap idle sessions
        (loops started again after a fault; each session's own work contained: supervision.py)."""
        await self.backend.start()
        config = self.config
        log.info(
            "sandbox ready: %s backend, %s memory, %g CPU, %d processes, %g s per execution, pool of %d",
            self.backend.isolation,
            config.memory,
            config.cpus,
            config.pids,
            config.timeout_s,
            config.pool_size,
        )
        self._pool.refill()
        self._tasks = tasks
        tasks.keep("sandbox_pool", self._pool.keep_full)
        tasks.keep("sandbox_reaper", self._reap_idle)
        for task in self.backend.maintenance():
            tasks.keep("sandbox_maintenance", task)

    async def execute(
        self,
        container_id: str,
        code: str,
        resumed: bool,
        tenant: str,
        *,
        files: SessionFiles | None = None,
        idle_ttl_s: float | None = None,
        token: str | None = None,
        on_cancel: Callable[[Execution], None] | None = None,
        network: NetworkGrant | None = None,
    ) -> Execution:
        """Run code in the tenant's session named `container_id`, starting the session if it is not live.

        `resumed`: the conversation already ran code in this session, so a session that has to be
        started anew (it expired, was evicted, or the gateway restarted) means that its state was lost.
        `files` syncs the session's /mnt/data around the execution; `idle_ttl_s` is how long the session
        lives unused (its container's expiry), never longer than the config's `idle_ttl_s`. `token` names
        the execution, for `collect` on another replica if this one stops while the code runs. Cancelled
        while the code runs, the code is interrupted (the session and its state survive) and `on_cancel`
        gets what it printed. `network`: the container's network policy (none: no network at all).
        """
        result, started = await self._in_session(
            container_id, tenant, files, idle_ttl_s, lambda session: self._run(container_id, session, code, token, on_cancel), network=network
        )
        if started and resumed:
            result.state_lost = True
        return result

    async def collect(
        self,
        container_id: str,
        token: str,
        tenant: str,
        *,
        files: SessionFiles | None = None,
        idle_ttl_s: float | None = None,
        network: NetworkGrant | None = None,
    ) -> Execution | None:
        """The result of the execution named `token` that a replica which stopped had started in this session
        (its kernel ran on, on the shared Docker daemon): taken over once the code ended (the session is
        busy until then), never run again. None when the kernel does not have it: the session's kernel
        is gone, or ran other code since."""
        if self.directory is None:  # kernels live and die with their replica: nothing outlived it
            return None

        async def ask(session: Session) -> Execution | None:
            assert session.kernel is not None
            log.info("sandbox session %s: waiting for the result of %s, which a replica that stopped started", container_id, token)
            max_output = self.config.max_output_bytes
            try:
                with anyio.fail_after(self.config.timeout_s + KILL_GRACE_S):
                    reply = await session.kernel.channel.request(op="result", token=token, max_output=max_output)
            except anyio.get_cancelled_exc_class():  # the adopted run was cancelled: so is the code it waits for
                with anyio.CancelScope(shield=True):
                    await self._interrupt(container_id, session, lambda channel: channel.finish_execution(max_output))
                raise
            except (TimeoutError, KernelDied):
                return None
            if reply["status"] == "unknown":
                return None
            if reply["status"] == "restarted":
                return Execution("restarted", f"{self._restart_reason(reply['reason'])}.", state_lost=True)
            return Execution(reply["status"], reply["output"], reply["images"])

        # No copy in first: the code runs already, and its kernel answers nothing else until it ends (a
        # cancel meanwhile must find this call waiting on the result, to interrupt the code).
        result, started = await self._in_session(container_id, tenant, files, idle_ttl_s, ask, copy_in=False, network=network)
        return None if started else result

    async def shell(
        self,
        container_id: str,
        commands: list[ShellCommand],
        tenant: str,
        on_output: Callable[[int, ShellOutput], None],
        *,
        files: SessionFiles | None = None,
        idle_ttl_s: float | None = None,
        network: NetworkGrant | None = None,
    ) -> list[ShellEnd]:
        """Run shell commands one after another in the tenant's session named `container_id` (its Python
        state is not touched): how each ended. What each writes goes to `on_output(index, output)` as it
        arrives. A kernel that fails mid-command is replaced, and the commands after it do not run. Cancelled,
        the running command is killed with all it started, and the rest do not run."""

        async def run(session: Session) -> list[ShellEnd]:
            ended = []
            for index, command in enumerate(commands):
                end, replaced = await self._run_shell(container_id, session, command, partial(on_output, index))
                ended.append(end)
                if replaced:
                    break
            return ended

        ended, _ = await self._in_session(container_id, tenant, files, idle_ttl_s, run, network=network)
        return ended

    async def _in_session(
        self,
        container_id: str,
        tenant: str,
        files: SessionFiles | None,
        idle_ttl_s: float | None,
        work: Callable[[Session], Awaitable[T]],
        copy_in: bool = True,
        network: NetworkGrant | None = None,
    ) -> tuple[T, bool]:
        """Do `work` in the tenant's session, held by this replica, its files synced around it (with
        `copy_in` false, only copied out after): its result, and whether the session was started for it."""
        while True:
            session = self._sessions.get(container_id)
            if session is not None and session.tenant != tenant:
                raise SessionNotFound(container_id)
            if session is None:
                # Registered before waiting for a kernel, so concurrent starts respect the caps and a
                # second call of the same conversation waits for this one instead of starting its own.
                self._make_room(tenant)
                ttl = min(idle_ttl_s or self.config.idle_ttl_s, self.config.idle_ttl_s)  # the config's bounds every session
                session = self._sessions[container_id] = Session(tenant, time.monotonic(), ttl)
            async with session.lock:
                if session.ended:
                    continue  # evicted, reaped or taken over while we waited: look again
                session.network = network
                try:
                    started = await self._holder.hold(container_id, session)
                    assert session.kernel is not None
                    await session.kernel.renew(network)
                except BaseException:
                    if session.kernel is None and self._sessions.get(container_id) is session:
                        del self._sessions[container_id]
                        session.ended = True
                    raise
                try:
                    if files is not None and copy_in:
                        await files.before(self._files_of(session), session.files)
                    result = await work(session)
                    if files is not None:
                        await files.after(self._files_of(session), session.files)
                finally:
                    session.last_used = time.monotonic()
                    await self._holder.release(container_id, session)
            return result, started

    @staticmethod
    def _files_of(session: Session) -> KernelChannel:
        """The session kernel's channel, with what its /mnt/data holds forgotten if the kernel changed."""
        assert session.kernel is not None
        if session.files_of is not session.kernel:
            session.files, session.files_of = FilesState(), session.kernel
        return session.kernel.channel

    async def end(self, container_id: str, tenant: str) -> None:
        """End the tenant's session now, if it is live here (a deleted container)."""
        session = self._sessions.get(container_id)
        if session is not None and session.tenant == tenant:
            async with session.lock:
                if self._sessions.get(container_id) is session:
                    self._end(container_id)

    def _taken(self, container_id: str, owner: str) -> None:
        """Another replica took the session over: let go of its container now, if this one is idle here
        (one busy here finds out at its next call)."""
        session = self._sessions.get(container_id)
        if self.directory is None or owner == self.directory.owner or session is None or not session.idle:
            return
        del self._sessions[container_id]
        session.ended = True
        kernel, session.kernel = session.kernel, None
        assert kernel is not None and self._tasks is not None
        log.info("sandbox session %s was taken over by replica %s", container_id, owner)
        self._tasks.start_soon(kernel.detach)

    async def _run(
        self, container_id: str, session: Session, code: str, token: str | None, on_cancel: Callable[[Execution], None] | None
    ) -> Execution:
        timeout, max_output = self.config.timeout_s, self.config.max_output_bytes
        assert session.kernel is not None
        try:
            # The kernel's supervisor enforces the limit itself; this is the last resort if it cannot.
            with anyio.fail_after(timeout + KILL_GRACE_S):
                reply = await session.kernel.channel.request(code=code, timeout=timeout, max_output=max_output, **({"token": token} if token else {}))
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                stopped = await self._interrupt(container_id, session, lambda channel: channel.finish_execution(max_output))
            if stopped is not None and on_cancel is not None:
                on_cancel(Execution(stopped["status"], stopped["output"], stopped["images"], state_lost=stopped["status"] == "restarted"))
            raise
        except TimeoutError:
            reason = f"the code did not stop at the {timeout:g} s time limit and the kernel had to be killed"
        except KernelDied as exc:
            reason = (
                f"the Python kernel failed: {exc}"
                if isinstance(exc, KernelProtocolError)
                else (f"the Python kernel died: {await session.kernel.death_reason()}")
            )
        else:
            if reply["status"] != "restarted":
                return Execution(reply["status"], reply["output"], reply["images"])
            # The kernel replaced its worker (died, hung, or answered nonsense): the state is gone.
            log.warning("sandbox session %s: the worker restarted (%s)", container_id, reply["reason"])
            output = reply["output"].rstrip("\n")
            text = f"{output}\n{self._restart_reason(reply['reason'])}." if output else f"{self._restart_reason(reply['reason'])}."
            return Execution("restarted", text, state_lost=True)
        log.warning("sandbox session %s restarts: %s", container_id, reason)
        await self._replace_kernel(session)
        return Execution("restarted", f"{reason}.", state_lost=True)

    async def _run_shell(
        self, container_id: str, session: Session, command: ShellCommand, on_output: Callable[[ShellOutput], None]
    ) -> tuple[ShellEnd, bool]:
        """How the command ended, and whether the kernel had to be replaced (the session's state is gone)."""
        assert session.kernel is not None
        timeout = min(command.timeout_s, self.config.timeout_s) if command.timeout_s is not None else self.config.timeout_s
        limit = CharacterLimit(command.max_output)
        try:
            # The kernel stops the command at its limit itself; this is the last resort if it cannot.
            with anyio.fail_after(timeout + KILL_GRACE_S):
                async for line in session.kernel.channel.shell(command.command, timeout, limit.kernel_bytes(self.config.max_output_bytes)):
                    if isinstance(line, ShellEnd):
                        return limit.end(line), False
                    shown = limit.live(line)
                    if shown is not None:
                        on_output(shown)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._interrupt(container_id, session, lambda channel: channel.finish_shell(limit.kernel_bytes(self.config.max_output_bytes)))
            raise
        except TimeoutError:
            reason = f"the command did not stop at the {timeout:g} s time limit and the sandbox had to be restarted"
        except KernelDied as exc:
            reason = (
                f"the sandbox failed: {exc}" if isinstance(exc, KernelProtocolError) else f"the sandbox died: {await session.kernel.death_reason()}"
            )
        log.warning("sandbox session %s restarts during a shell command: %s", container_id, reason)
        await self._replace_kernel(session)
        return ShellEnd(None, "", f"{reason}; Python's variables and files outside /mnt/data are gone.\n"), True

    async def _interrupt(self, container_id: str, session: Session, finish: Callable[[KernelChannel], Awaitable[T]]) -> T | None:
        """The call was cancelled (its response was, or its client left) while its code or command ran: stop
        that now, and read the kernel's reply to it, so the session is ready for the next call. Python is
        interrupted (KeyboardInterrupt; the kernel and its state survive), a command is killed with all it
        started. A kernel that does not answer in time is replaced (None)."""
        assert session.kernel is not None
        try:
            with anyio.fail_after(INTERRUPT_WAIT_S):
                await session.kernel.channel.interrupt()
                return await finish(session.kernel.channel)
        except (TimeoutError, KernelDied) as exc:
            log.warning(
                "sandbox session %s did not stop when its call was cancelled (%s); its kernel is replaced", container_id, str(exc) or "no answer"
            )
            await self._replace_kernel(session)
            return None

    async def _replace_kernel(self, session: Session) -> None:
        """A new kernel for the session (its state is gone), the old one destroyed."""
        old = session.kernel
        assert old is not None
        session.kernel = await self._pool.take(session.network)
        await old.destroy()

    def _restart_reason(self, reason: str) -> str:
        return {
            "timeout": f"the code did not stop at the {self.config.timeout_s:g} s time limit and its process had to be killed",
            "out_of_memory": f"the Python process ran out of memory (limit {self.config.memory}) and was killed",
            "killed": "the Python process was killed",
            "exited": "the Python process exited",
            "invalid_reply": "the Python process sent an invalid result",
            "interrupted": "the code did not stop when it was interrupted and its process had to be killed",
        }[reason]

    def _make_room(self, tenant: str) -> None:
        """Below both caps, evicting least recently used idle sessions (the tenant's own first) if needed."""
        per_tenant, total = self.config.max_sessions_per_tenant, self.config.max_sessions
        try:
            while (victim := to_evict(self._sessions, tenant, per_tenant, total)) is not None:
                log.info("sandbox session %s evicted (least recently used) to make room", victim)
                self._end(victim)
        except AllBusy as full:
            whose = "this tenant's" if full.per_tenant else "its"
            raise SandboxFull(f"the sandbox has reached {whose} limit of {full.cap} live sessions, all busy; try again later") from None

    def _end(self, container_id: str) -> None:
        session = self._sessions.pop(container_id)
        session.ended = True
        if session.kernel is not None:
            assert self._tasks is not None, "start() first"
            self._tasks.start_soon(self._retire, container_id, session.kernel)

    async def _retire(self, container_id: str, kernel: Kernel) -> None:
        """A session ends here: its container goes, unless another replica has taken the session over."""
        with anyio.CancelScope(shield=True):
            if self.directory is not None:
                try:
                    if not await self.directory.forget(container_id):
                        await kernel.detach()
                        return
                except Exception as exc:  # unsure whose it is: a taker finds it gone and starts anew
                    log.warning("sandbox session %s: the directory is unavailable (%s); its container is removed", container_id, exc)
            await kernel.destroy()

    async def _reap_idle(self) -> None:
        interval = min(max(self.config.idle_ttl_s / 4, 0.2), 30.0)
        while not self._closed:
            await anyio.sleep(interval)
            now = time.monotonic()
            for container_id, session in list(self._sessions.items()):
                if session.last_used < now - session.idle_ttl_s and session.idle:
                    log.info("sandbox session %s ended after %g s idle", container_id, session.idle_ttl_s)
                    self._end(container_id)

    async def close(self) -> None:
        """Remove every kernel: the pool's, the sessions', and (docker) anything else of this instance."""
        self._closed = True
        with anyio.CancelScope(shield=True):
            pool, sessions = self._pool.close(), self._sessions
            self._sessions = {}
            async with anyio.create_task_group() as tasks:
                for kernel in pool:
                    tasks.start_soon(kernel.destroy)
                for container_id, session in sessions.items():
                    if session.kernel is not None:
                        tasks.start_soon(self._retire, container_id, session.kernel)
            await self.backend.close()
