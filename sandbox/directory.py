"""Which gateway replica holds each python session, where several replicas share one Docker daemon.

A session (`cntr_…`, kept by its conversation) is one container. The directory, shared by the replicas
(the gateway keeps it in its database), maps the session to its container and to the one replica that
owns it now. A replica that gets a call for a session another replica holds takes it over: it becomes
the owner, attaches to the same container, and the kernel's state carries on; the replica it took the
session from detaches. Ownership changes only between executions: a session busy running code on one
replica is not taken until that call ends (or its replica is gone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol


@dataclass(frozen=True)
class Placement:
    """A session as the directory has it."""

    container: str  # the Docker container that runs its kernel
    owner: str  # the replica that holds it
    generation: int  # goes up each time the session changes hands
    last_used: float  # when its last execution ended (epoch seconds)


class SessionNotFound(Exception):
    """No session of this tenant has that container id (another tenant's is not found either)."""


class SessionBusy(Exception):
    """Another live replica is running code in the session right now."""


class SessionTaken(Exception):
    """Another replica registered a session under the same id first."""


class Directory(Protocol):
    owner: str  # this replica

    async def acquire(self, session_id: str, tenant: str, busy_s: float) -> Placement | None:
        """Make this replica the session's owner, busy for up to `busy_s`; None if there is no such session.
        Raises SessionNotFound (another tenant's) or SessionBusy."""

    async def register(self, session_id: str, tenant: str, container: str, busy_s: float) -> int:
        """Record a new session held here, busy; its generation. Raises SessionTaken."""

    async def release(self, session_id: str, container: str) -> None:
        """The execution ended: the session is idle, in `container` (a kernel that died was replaced)."""

    async def forget(self, session_id: str) -> bool:
        """Remove the session if this replica still owns it: whether it did (then its container goes)."""

    async def placements(self) -> dict[str, Placement]:
        """Every session, by container."""

    async def drop(self, container: str, owner: str) -> None:
        """Remove the entry of a container that was removed, if `owner` still holds it."""

    def on_taken(self, handler: Callable[[str, str], None]) -> None:
        """Call `handler(session_id, new_owner)` whenever a session changes hands."""
