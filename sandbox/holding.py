"""Where a session's kernel is, and who holds it: with a shared directory (directory.py), the replica that
gets a conversation's next call takes its session over and attaches to its container, or starts one."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import anyio

from .backend import Backend, Kernel
from .directory import Directory, Placement, SessionBusy, SessionTaken
from .network import NetworkGrant
from .pool import KernelPool
from .transfer import FilesState

log = logging.getLogger("sandbox")


@dataclass
class Session:
    tenant: str
    last_used: float
    idle_ttl_s: float
    network: NetworkGrant | None = None  # its container's network policy, as its latest call gave it
    kernel: Kernel | None = None  # None until its first call starts or attaches one
    files: FilesState = field(default_factory=FilesState)
    files_of: Kernel | None = None  # the kernel whose /mnt/data `files` describes
    generation: int = 0  # the directory's generation of the session when this replica attached to it
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one execution at a time; held while starting
    ended: bool = False  # evicted, reaped or taken over: a caller holding it must look again

    @property
    def idle(self) -> bool:
        return self.kernel is not None and not self.lock.locked()


class Holder:
    """Holds a session's kernel for this replica: attached, or started from the pool."""

    def __init__(self, backend: Backend, pool: KernelPool, directory: Directory | None, busy_s: float) -> None:
        self.backend = backend
        self._pool = pool
        self.directory = directory
        self._busy_s = busy_s  # an execution's longest time, with a margin

    async def hold(self, container_id: str, session: Session) -> bool:
        """Make sure this replica holds the session and has its kernel: attached, or started (True)."""
        directory = self.directory
        if directory is None:
            if session.kernel is not None:
                return False
            session.kernel = await self._pool.take(session.network)
            return True
        busy_s = self._busy_s
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
            kernel = await self._pool.take(session.network)
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

    async def release(self, container_id: str, session: Session) -> None:
        if self.directory is None or session.kernel is None:
            return
        with anyio.CancelScope(shield=True):
            try:
                await self.directory.release(container_id, session.kernel.container_id)
            except Exception as exc:  # the busy mark runs out by itself
                log.warning("sandbox session %s: could not mark it idle: %s", container_id, exc)
