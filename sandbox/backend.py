"""What the manager asks of a backend (Docker, local) and its kernels, and what an execution or a shell
command gives back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Coroutine, Protocol

import docker.errors

from .channel import KernelChannel, KernelDied
from .directory import SessionBusy
from .docker_backend import SandboxUnavailable
from .network import NetworkGrant
from .transfer import FilesState


class Kernel(Protocol):
    channel: KernelChannel
    container_id: str

    async def death_reason(self) -> str: ...

    async def destroy(self) -> None: ...

    async def detach(self) -> None:
        """Let go of the kernel, which another replica now holds (where a backend cannot, destroy it)."""

    async def renew(self, grant: NetworkGrant | None) -> None:
        """Before a call: the sandbox's network grant registered again (a no-op without a network)."""


class Backend(Protocol):
    @property
    def data_dir(self) -> str | None: ...  # where a session's files are, inside its sandbox

    @property
    def isolation(self) -> str: ...

    async def start(self) -> None: ...

    async def create(self, network: NetworkGrant | None = None) -> Kernel: ...

    async def close(self) -> None: ...

    # Optional capabilities, None or empty where a backend has none (instead of asking which backend it is).
    def maintenance(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """Tasks the backend runs for as long as the sandbox does."""
        ...

    @property
    def egress_healthy(self) -> bool | None:
        """Whether the egress proxy answers, as last checked (None: its sandboxes have no network)."""
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
