"""Sandbox sessions: one kernel per conversation, a warm pool, idle reaping, a cap, and recovery.

A session is named by a container id (`cntr_…`) that the conversation keeps across turns. Its
executions run one at a time. A kernel that dies (out of memory, or code that ignored the timeout and
had to be killed) is replaced by a fresh one, and the result says that the session's state was lost.
With the Docker backend and a shared directory (directory.py), a session follows its conversation to
whichever replica gets its next call: that replica takes the session over and attaches to its container.

(Longer than one sitting on purpose: the pool, the caps, idle reaping and recovery all act on the same
table of sessions, and split apart each would reach into the others' state.)
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Awaitable, Callable, Coroutine, Protocol, TypeVar

import anyio
import docker.errors
from opentelemetry import trace

from runtime.quota import AllBusy, to_evict
from runtime.supervision import Supervisor

from .channel import KernelChannel, KernelDied, KernelProtocolError, ShellEnd, ShellOutput
from .config import SandboxConfig
from .directory import Directory, Placement, SessionBusy, SessionNotFound, SessionTaken
from .docker_backend import DockerBackend, Owner, SandboxUnavailable
from .local_backend import LocalBackend
from .shell_output import CharacterLimit
from .transfer import FilesState

log = logging.getLogger("sandbox")
_tracer = trace.get_tracer("harmony-gateway")

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


class Kernel(Protocol):
    channel: KernelChannel
    container_id: str

    async def death_reason(self) -> str: ...

    async def destroy(self) -> None: ...

    async def detach(self) -> None:
        """Let go of the kernel, which another replica now holds (where a backend cannot, destroy it)."""


class Backend(Protocol):
    @property
    def data_dir(self) -> str | None: ...  # where a session's files are, inside its sandbox

    @property
    def isolation(self) -> str: ...

    async def start(self) -> None: ...

    async def create(self) -> Kernel: ...

    async def close(self) -> None: ...

    # Optional capabilities, None or empty where a backend has none (instead of asking which backend it is).
    def maintenance(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """Tasks the backend runs for as long as the sandbox does."""
        ...

    @property
    def reattach(self) -> Callable[[str], Awaitable[Kernel | None]] | None:
        """Attach to the kernel of a container another replica started (None: kernels die with their replica)."""
        ...


class SessionFiles(Protocol):
    """Keeps a session's /mnt/data in step with its container's files (gateway/files/sync.py): copies
    them in before an execution and takes what the code wrote after it. `state` is what this kernel's
    /mnt/data is known to hold; it starts empty whenever the session gets another kernel."""

    async def before(self, channel: KernelChannel, state: FilesState) -> None: ...

    async def after(self, channel: KernelChannel, state: FilesState) -> None: ...


class SandboxFull(Exception):
    """The cap on live sessions (in all, or the tenant's) is reached and every session is busy."""


# What a backend raises when it cannot start or reach a kernel: the call fails, the response goes on.
BACKEND_ERRORS = (SandboxUnavailable, KernelDied, OSError, TimeoutError, docker.errors.DockerException, SessionBusy)


@dataclass
class Execution:
    status: str  # ok | error | timeout | restarted
    output: str
    images: list[str] = field(default_factory=list)  # base64 PNG
    state_lost: bool = False  # the session restarted (kernel died, or it had expired): variables are gone


@dataclass(frozen=True)
class ShellCommand:
    """One command of a shell call, with the limits the call asks for (the config's bound them)."""

    command: str
    timeout_s: float | None = None
    max_output: int | None = None  # characters of each stream kept


T = TypeVar("T")


@dataclass
class _Session:
    tenant: str
    last_used: float
    idle_ttl_s: float
    kernel: Kernel | None = None  # None until its first call starts or attaches one
    files: FilesState = field(default_factory=FilesState)
    files_of: Kernel | None = None  # the kernel whose /mnt/data `files` describes
    generation: int = 0  # the directory's generation of the session when this replica attached to it
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one execution at a time; held while starting
    ended: bool = False  # evicted, reaped or taken over: a caller holding it must look again

    @property
    def idle(self) -> bool:
        return self.kernel is not None and not self.lock.locked()


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
        self._sessions: dict[str, _Session] = {}
        self._pool: list[Kernel] = []
        self._filling = 0
        self._refill = anyio.Event()
        self._closed = False
        self._tasks: Supervisor | None = None

    @property
    def live_sessions(self) -> int:
        return len(self._sessions)

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
        self._refill.set()
        self._tasks = tasks
        tasks.keep("sandbox_pool", self._keep_pool_full)
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
    ) -> Execution:
        """Run code in the tenant's session named `container_id`, starting the session if it is not live.

        `resumed`: the conversation already ran code in this session, so a session that has to be
        started anew (it expired, was evicted, or the gateway restarted) means that its state was lost.
        `files` syncs the session's /mnt/data around the execution; `idle_ttl_s` is how long the session
        lives unused (its container's expiry), never longer than the config's `idle_ttl_s`. `token` names
        the execution, for `collect` on another replica if this one stops while the code runs. Cancelled
        while the code runs, the code is interrupted (the session and its state survive) and `on_cancel`
        gets what it printed.
        """
        result, started = await self._in_session(
            container_id, tenant, files, idle_ttl_s, lambda session: self._run(container_id, session, code, token, on_cancel)
        )
        if started and resumed:
            result.state_lost = True
        return result

    async def collect(
        self, container_id: str, token: str, tenant: str, *, files: SessionFiles | None = None, idle_ttl_s: float | None = None
    ) -> Execution | None:
        """The result of the execution named `token` that a replica which stopped had started in this session
        (its kernel ran on, on the shared Docker daemon): taken over once the code ended (the session is
        busy until then), never run again. None when the kernel does not have it: the session's kernel
        is gone, or ran other code since."""
        if self.directory is None:  # kernels live and die with their replica: nothing outlived it
            return None

        async def ask(session: _Session) -> Execution | None:
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
        result, started = await self._in_session(container_id, tenant, files, idle_ttl_s, ask, copy_in=False)
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
    ) -> list[ShellEnd]:
        """Run shell commands one after another in the tenant's session named `container_id` (its Python
        state is not touched): how each ended. What each writes goes to `on_output(index, output)` as it
        arrives. A kernel that fails mid-command is replaced, and the commands after it do not run. Cancelled,
        the running command is killed with all it started, and the rest do not run."""

        async def run(session: _Session) -> list[ShellEnd]:
            ended = []
            for index, command in enumerate(commands):
                end, replaced = await self._run_shell(container_id, session, command, partial(on_output, index))
                ended.append(end)
                if replaced:
                    break
            return ended

        ended, _ = await self._in_session(container_id, tenant, files, idle_ttl_s, run)
        return ended

    async def _in_session(
        self,
        container_id: str,
        tenant: str,
        files: SessionFiles | None,
        idle_ttl_s: float | None,
        work: Callable[[_Session], Awaitable[T]],
        copy_in: bool = True,
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
                session = self._sessions[container_id] = _Session(tenant, time.monotonic(), ttl)
            async with session.lock:
                if session.ended:
                    continue  # evicted, reaped or taken over while we waited: look again
                try:
                    started = await self._hold(container_id, session)
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
                    await self._release(container_id, session)
            return result, started

    @staticmethod
    def _files_of(session: _Session) -> KernelChannel:
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

    async def _hold(self, container_id: str, session: _Session) -> bool:
        """Make sure this replica holds the session and has its kernel: attached, or started (True)."""
        directory = self.directory
        if directory is None:
            if session.kernel is not None:
                return False
            session.kernel = await self._take_kernel()
            return True
        busy_s = self.config.timeout_s + KILL_GRACE_S + 5  # an execution's longest time, with a margin
        while True:
            placement = await self._acquire(directory, container_id, session.tenant, busy_s)
            kernel = session.kernel
            if placement is not None and kernel is not None and placement.generation == session.generation:
                return False  # held here all along
            if kernel is not None:  # another replica used the session since: this channel is stale
                session.kernel = None
                await kernel.detach()
            if placement is not None:
                reattach = self.backend.reattach
                assert reattach is not None  # placements are made only where kernels outlive their replica
                attached = await reattach(placement.container)
                if attached is not None:
                    session.kernel, session.generation = attached, placement.generation
                    return False
                await directory.forget(container_id)  # its container is gone: the session starts anew
            kernel = await self._take_kernel()
            try:
                session.generation = await directory.register(container_id, session.tenant, kernel.container_id, busy_s)
            except SessionTaken:  # another replica started it at the same moment: use theirs
                await kernel.destroy()
                continue
            except BaseException:
                await kernel.destroy()
                raise
            session.kernel = kernel
            return True

    async def _acquire(self, directory: Directory, container_id: str, tenant: str, busy_s: float) -> Placement | None:
        """The session's placement, once no other replica is running code in it (waiting at most `busy_s`)."""
        deadline = time.monotonic() + busy_s
        while True:
            try:
                return await directory.acquire(container_id, tenant, busy_s)
            except SessionBusy:
                if time.monotonic() >= deadline:
                    raise
                await anyio.sleep(0.1)

    async def _release(self, container_id: str, session: _Session) -> None:
        if self.directory is None or session.kernel is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self.directory.release(container_id, session.kernel.container_id)
            except Exception as exc:  # the busy mark runs out by itself
                log.warning("sandbox session %s: could not mark it idle: %s", container_id, exc)

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
        self, container_id: str, session: _Session, code: str, token: str | None, on_cancel: Callable[[Execution], None] | None
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
        self, container_id: str, session: _Session, command: ShellCommand, on_output: Callable[[ShellOutput], None]
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

    async def _interrupt(self, container_id: str, session: _Session, finish: Callable[[KernelChannel], Awaitable[T]]) -> T | None:
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

    async def _replace_kernel(self, session: _Session) -> None:
        """A new kernel for the session (its state is gone), the old one destroyed."""
        old = session.kernel
        assert old is not None
        session.kernel = await self._take_kernel()
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

    async def _take_kernel(self) -> Kernel:
        self._refill.set()
        if self._pool:
            return self._pool.pop()
        # Started on demand: the call waits for it, so it is a span of its own under the call's (tracing).
        with _tracer.start_as_current_span("sandbox.start", attributes={"sandbox.backend": type(self.backend).__name__}):
            return await self.backend.create()

    async def _keep_pool_full(self) -> None:
        while not self._closed:
            await self._refill.wait()
            self._refill = anyio.Event()
            while not self._closed and len(self._pool) < self.config.pool_size:
                try:
                    kernel = await self.backend.create()
                except Exception as exc:  # the next take creates directly and reports the error
                    log.error("could not start a sandbox for the pool: %s", exc)
                    await anyio.sleep(5)
                    break
                if self._closed:
                    await kernel.destroy()
                    return
                self._pool.append(kernel)

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
        self._refill.set()
        with anyio.CancelScope(shield=True):
            pool, sessions = self._pool, self._sessions
            self._pool, self._sessions = [], {}
            async with anyio.create_task_group() as tasks:
                for kernel in pool:
                    tasks.start_soon(kernel.destroy)
                for container_id, session in sessions.items():
                    if session.kernel is not None:
                        tasks.start_soon(self._retire, container_id, session.kernel)
            await self.backend.close()


MAX_NAMED_FILES = 50


def describe_python_tool(config: SandboxConfig, data_dir: str | None, files_there: list[str] | None = None) -> str:
    """The python tool's description for the model, stating the real limits and the files it has."""
    files = (
        f"Files written to '{data_dir}' persist for the session."
        if data_dir
        else "Files written to the current working directory persist for the session."
    )
    files += _files_there(data_dir, files_there)
    return (
        "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. "
        "This tool should be used for internal reasoning, but not for code that is intended to be visible to the user "
        "(e.g. when creating plots, tables, or files).\n\n"
        "When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook "
        "environment: variables and imports persist between calls, the value of the last expression is shown, and "
        "stdout, stderr and tracebacks are returned. python will respond with the output of the execution or time out "
        f"after {config.timeout_s:g} seconds. {files} Internet access for this session is disabled. "
        f"Output beyond {config.max_output_bytes} bytes is truncated."
    )


def describe_shell_tool(config: SandboxConfig, data_dir: str | None, files_there: list[str] | None = None) -> str:
    """The hosted shell's description for the model: where commands run, their limits, the files there."""
    place = data_dir or "the working directory"
    files = _files_there(data_dir, files_there)
    return (
        "Use this tool to run shell commands in a sandboxed Linux container, when running a command is the best way "
        "to do what is asked. Each command runs in bash, one after another, in "
        f"{place}, where files persist for the session and are shared with the python tool.{files} "
        "Each command's stdout, stderr and exit code come back in the tool's answer. "
        f"A command may run for at most {config.timeout_s:g} seconds (timeout_ms may ask for less), and output "
        f"beyond {config.max_output_bytes} bytes per stream is truncated. Internet access is disabled."
    )


def _files_there(data_dir: str | None, files_there: list[str] | None) -> str:
    """The tools' words on the session's files: which are there, and how to give the user one."""
    if not data_dir:
        return ""
    words = ""
    if files_there:
        named = ", ".join(f"{data_dir}/{path}" for path in files_there[:MAX_NAMED_FILES])
        more = f" and {len(files_there) - MAX_NAMED_FILES} more" if len(files_there) > MAX_NAMED_FILES else ""
        words = f" The user's files are there: {named}{more}."
    return words + f" To give the user a file, save it under {data_dir} and link to it as sandbox:{data_dir}/NAME."
