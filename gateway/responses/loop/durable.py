"""A background run's durable side: stored as it starts, journaled while it runs, handed over at shutdown.

Every replica finds a background run in the store from its first moment (`begin`); its events and its
checkpoint are written as it goes (journal.py), a hosted tool call's before the call runs, so that a
replica that adopts the run never makes the call twice (`tool_call`). When this replica shuts down
the run stops at its next clean point, at once while the engine streams and after a tool call in
flight returns, and another replica goes on with it (`hand_over`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from ...core.sealed import Purpose
from ...errors import APIError
from ...storage import StorageError
from ...storage.response_store import TooManyRunning
from ..events.tool_call import CallKind, ToolCall
from .ending import RunEnding
from .journal import Journal
from .needs import ResponsesNeeds
from .run_state import RunState

logger = logging.getLogger("gateway.responses")


class DurableRun:
    def __init__(self, services: ResponsesNeeds, tenant: str, request_json: str, state: RunState, ending: RunEnding) -> None:
        self._services = services
        self._tenant = tenant
        self._request_json = request_json  # the request as it came, sealed in the store for an adopter
        self._state = state
        self._ending = ending
        self.journal: Journal | None = None
        self.scope = anyio.CancelScope()  # cancelled at the clean point where the run stops for another replica
        self._handing_over = False
        self._in_tool = False

    async def begin(self) -> None:
        """Store the run as it starts, for every replica to find: a 429 past the tenant's limit on
        background runs, and failures of the store, are the request's."""
        services = self._services
        try:
            await services.store.begin(
                self._ending.snapshot(), self._state.plan.input_items, self._tenant, services.replicas.id,
                services.config.loop.max_background_per_tenant, services.sealer.seal(self._request_json, Purpose.RUN_REQUEST, self._tenant),
            )  # fmt: skip
        except TooManyRunning as exc:
            raise APIError(
                429, f"You have {exc.limit} background responses running, as many as this gateway runs for one project at once; "
                "wait for one to end (or cancel one).", code="too_many_background_responses",
            ) from None  # fmt: skip

    def start_journal(self, on_taken_over: Callable[[], None]) -> None:
        services, response_id = self._services, self._ending.response["id"]
        self.journal = Journal(
            services.store, response_id, services.replicas.id, self._state.output.log, self._ending.snapshot, self._state.checkpoint, on_taken_over
        )
        services.runs.start(self.journal.run, f"{response_id} journal")

    @asynccontextmanager
    async def tool_call(self, call: ToolCall) -> AsyncIterator[None]:
        """A tool call runs: a hosted call's tokens are written first, and a hand-over waits for it to return.
        From before that write: a hand-over that cut in after the tokens were written, before the call ran,
        would leave the adopter a call it thinks was made, and the model told it was interrupted."""
        self._in_tool = True
        try:
            if self.journal is not None and call.kind is CallKind.HOSTED:
                await self._before_call()
            yield
        finally:
            self._in_tool = False

    async def _before_call(self) -> None:
        """A hosted call's tokens are written before it runs: an adopter then finds the call made, and does
        not make it again."""
        assert self.journal is not None
        try:
            if not await self.journal.flush():  # another replica runs the response now: this run was cancelled
                await anyio.lowlevel.checkpoint()  # and stops here, before the call
        except StorageError as exc:
            logger.warning("response %s: the call's checkpoint was not written (%s); running it anyway", self._ending.response["id"], exc)

    def request_hand_over(self) -> None:
        """This replica shuts down: stop at the next clean point, for another replica to adopt the run."""
        self._handing_over = True
        if not self._in_tool:
            self.scope.cancel()

    def at_clean_point(self) -> None:
        """A tool's output is in the dialog: a clean point to stop at, if this replica is leaving."""
        if self._handing_over:
            self.scope.cancel()

    def handed_over(self, cut_off: bool) -> bool:
        """Whether the run stopped for another replica: at a clean point, or where the grace period cut it off."""
        return self._handing_over and (self.scope.cancelled_caught or cut_off)

    async def hand_over(self) -> None:
        assert self.journal is not None
        services, response_id = self._services, self._ending.response["id"]
        self._ending.counted_elsewhere()  # the adopter counts the run's tokens, these among them
        try:
            with anyio.CancelScope(shield=True):
                if await self.journal.hand_over(lambda: services.replicas.hand_over(response_id)):
                    logger.info("response %s handed over to another replica", response_id)
        finally:
            services.runs.background.pop(response_id, None)
