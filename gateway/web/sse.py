"""Server-sent events for the streaming endpoints, on sse-starlette."""

from __future__ import annotations

import logging
import time
from typing import Any, AsyncIterator, Callable

import anyio
from sse_starlette import EventSourceResponse
from starlette.types import Message, Send

log = logging.getLogger("gateway.sse")


class EventStream(EventSourceResponse):
    """sse-starlette's response, with writes bounded by one watchdog per stream instead of a cancel scope
    around every write.

    sse-starlette wraps each send in `anyio.move_on_after(send_timeout)`; profiling the streaming path
    showed that scope (with the async-library lookup behind it) at ~10% of the gateway's CPU. Here a send
    only records when it started, and a watchdog that wakes about once a second ends the response when a
    send has waited longer than `send_timeout` (the client stopped reading), or at all once `give_up()`
    says so (the gateway is shutting down and the grace period is over). Ending it closes the body
    iterator, whose cleanup cancels the run and so aborts the engine request.
    """

    _send_started: float | None = None

    def __init__(self, content: AsyncIterator[bytes], *, send_timeout: float, give_up: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(content, send_timeout=send_timeout, **kwargs)
        self.give_up = give_up

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        self._send_started = time.monotonic()  # a frame each token: anyio's clock is ten times the cost
        try:
            await send(message)
        finally:
            self._send_started = None

    async def _listen_for_exit_signal_with_grace(self) -> None:
        """sse-starlette cuts every stream the moment the server is told to exit; the gateway drains its
        own (gateway/shutdown.py), so this task, which sse-starlette runs for the whole response, is the
        watchdog instead. Returning from it ends the response."""
        assert self.send_timeout is not None
        while True:
            await anyio.sleep(min(1.0, self.send_timeout / 4))
            started = self._send_started
            if started is None:
                continue
            if time.monotonic() - started > self.send_timeout:
                log.warning("the client read nothing for %g s; the stream is closed and its response stopped", self.send_timeout)
                return
            if self.give_up():
                log.warning("the client is still reading after the shutdown grace period; the stream is closed")
                return
