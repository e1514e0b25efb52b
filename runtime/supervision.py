"""Long-lived tasks and units of work that share one task group, each contained.

An anyio task group ends when any of its children raises: every sibling is cancelled and the group's
owner sees the error. The app's task group holds everything that serves requests (every response's run,
the replicas' lease, the webhook deliverer, the engines' health checks, the sandbox's pool), so one
child's fault would end them all while `/health` still answered. Nothing is started in it directly:

- a *unit of work* (one response's run, one container retired) fails alone: its fault is logged with
  its name and counted, and never reaches the group;
- a *loop* (a task meant to run as long as the app) that raises is started again after a backoff; one
  that keeps failing (`max_faults` within `window_s`) is left stopped, and `stopped()` names it, for
  `/ready` to tell an orchestrator to restart the process.

Cancellation is never caught: the group's own cancel (shutdown) still ends every child.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal

import anyio
from anyio.abc import TaskGroup

logger = logging.getLogger("gateway.supervision")

LoopState = Literal["running", "restarting", "stopped", "ended"]
Faulted = Callable[[str], None]  # called with the task's name on each fault (a metric)


@dataclass
class _Loop:
    state: LoopState = "running"
    faults: deque[float] = field(default_factory=deque)  # when it failed, within the window


class Supervisor:
    def __init__(
        self,
        tasks: TaskGroup,
        faulted: Faulted | None = None,
        max_faults: int = 5,
        window_s: float = 60.0,
        first_backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
    ) -> None:
        self._tasks = tasks
        self._faulted = faulted or (lambda name: None)
        self._max_faults, self._window_s = max_faults, window_s
        self._first_backoff_s, self._max_backoff_s = first_backoff_s, max_backoff_s
        self._loops: dict[str, _Loop] = {}

    def start_soon(self, function: Callable[..., Awaitable[Any]], *args: Any, name: object = None) -> None:
        """A unit of work: its fault is its own (TaskGroup.start_soon's signature, so that a component
        given this instead of the group contains what it starts)."""
        label = str(name) if name is not None else getattr(function, "__qualname__", repr(function))
        self._tasks.start_soon(self._contained, label, function, args, name=name)

    def keep(self, name: str, function: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """A loop that runs as long as the app: started again after a fault, reported by `health()`."""
        if name in self._loops:  # names are unique: a second loop of the same kind gets a number
            name = f"{name}#{sum(1 for known in self._loops if known.split('#')[0] == name) + 1}"
        self._loops[name] = _Loop()
        self._tasks.start_soon(self._supervised, name, function, args, name=name)

    def health(self) -> dict[str, LoopState]:
        return {name: loop.state for name, loop in self._loops.items()}

    def stopped(self) -> list[str]:
        """The loops that failed too often and were not started again."""
        return [name for name, loop in self._loops.items() if loop.state == "stopped"]

    async def _contained(self, label: str, function: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        try:
            await function(*args)
        except Exception:
            logger.exception("%s failed; it alone is affected", label)
            self._faulted(label.split(" ")[0])

    async def _supervised(self, name: str, function: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        loop = self._loops[name]
        backoff = self._first_backoff_s
        while True:
            loop.state = "running"
            try:
                await function(*args)
            except Exception:
                logger.exception("the gateway's task %s failed", name)
                self._faulted(name.split("#")[0])
                now = time.monotonic()
                loop.faults.append(now)
                while loop.faults and loop.faults[0] < now - self._window_s:
                    loop.faults.popleft()
                if len(loop.faults) >= self._max_faults:
                    loop.state = "stopped"
                    logger.critical("the gateway's task %s failed %d times in %g s: left stopped", name, len(loop.faults), self._window_s)
                    return
                loop.state = "restarting"
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff_s)
                continue
            loop.state = "ended"
            return
