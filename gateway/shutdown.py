"""Graceful shutdown: on SIGTERM, running responses get `server.shutdown_grace_s` to finish; then each is
stopped and ends with `response.failed`, so every client receives a terminal event. Where replicas share
a database, background runs are handed over instead (`on_begin`: responses/loop/adoption.py)."""

from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Callable, Iterator

import anyio


class Drain:
    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.draining = False
        self._deadline = math.inf
        self._scopes: set[anyio.CancelScope] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._on_begin: list[Callable[[], None]] = []

    def on_begin(self, callback: Callable[[], None]) -> None:
        """Call `callback()` in the loop as draining begins."""
        self._on_begin.append(callback)

    def bind(self) -> None:
        """Remember the event loop, for a signal handler to reach it."""
        self._loop = asyncio.get_running_loop()

    def request(self) -> None:
        """Called from the signal handler (main thread, outside the loop): start draining in the loop."""
        if self._loop is not None and not self.draining:
            self._loop.call_soon_threadsafe(self.begin)

    def begin(self) -> None:
        """Runs as a loop callback (outside any task), so the clock is read from the loop itself: it is
        the clock of anyio's cancel scopes on asyncio."""
        assert self._loop is not None
        self.draining = True
        self._deadline = self._loop.time() + self.grace_s
        for scope in self._scopes:
            scope.deadline = min(scope.deadline, self._deadline)
        for callback in self._on_begin:
            callback()

    @contextlib.contextmanager
    def guard(self) -> Iterator[anyio.CancelScope]:
        """A cancel scope for one response's work, cancelled when the grace period after SIGTERM is over."""
        scope = anyio.CancelScope(deadline=self._deadline)
        self._scopes.add(scope)
        try:
            with scope:
                yield scope
        finally:
            self._scopes.discard(scope)

    def past_grace(self, extra_s: float) -> bool:
        """Whether the grace period after SIGTERM ended more than `extra_s` ago."""
        return self.draining and self._loop is not None and self._loop.time() > self._deadline + extra_s

    @property
    def running(self) -> int:
        return len(self._scopes)
