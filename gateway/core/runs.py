"""The runs of this process: every door's responses run as tasks of the app, not of the request that
started them, and the background ones are found here by id to be polled, cancelled or handed over."""

from __future__ import annotations

from typing import Any, Callable, Coroutine, Protocol

import anyio

from runtime.supervision import Supervisor

from .admission import Admission


class BackgroundRun(Protocol):
    def hand_over(self) -> None: ...

    def cancel(self) -> None: ...


class Runs:
    """The running responses of this process, each executing as a task of the app's task group (not of
    the request that started it), so that no client, fast, slow or gone, runs or stalls the loop. Each is
    a contained unit of work (runtime/supervision.py): whatever one run raises fails it alone."""

    def __init__(self, tasks: Supervisor, admission: Admission) -> None:
        self._tasks = tasks
        self.admission = admission  # foreground runs, counted per tenant and in all
        # Background responses running here, by response id: what polling, resuming and cancelling find.
        self.background: dict[str, BackgroundRun] = {}

    def start(self, execute: Callable[[], Coroutine[Any, Any, None]], response_id: str) -> None:
        self._tasks.start_soon(execute, name=f"response {response_id}")

    def hand_over(self) -> None:
        """This replica shuts down: each background run stops at its next clean point, for another to adopt."""
        for run in list(self.background.values()):
            run.hand_over()

    async def wait_gone(self) -> None:
        """Until no background run is left here (each ended, or was handed over)."""
        while self.background:
            await anyio.sleep(0.02)

    def cancel(self, response_id: str) -> None:
        """Cancel a background response if it runs here (asked by this replica or another)."""
        run = self.background.get(response_id)
        if run is not None:
            run.cancel()
