"""Server-sent events for the streaming endpoints: a small ASGI response of the gateway's own.

The frames come formatted (protocol.py, items.py); this sends them as they come and decides when the
stream ends: when its frames end, when the client disconnects, when a send has waited longer than
`send_timeout` (the client stopped reading), or once `give_up()` says so (the gateway is shutting down and
the grace period is over). Ending early closes the frames' iterator, whose cleanup cancels the run and so
aborts the engine request. One watchdog per stream, waking about once a second, checks the send time: a
cancel scope around every write cost ~10% of the gateway's CPU when profiled (sse-starlette's way). While
nothing is sent for `ping_s`, a comment line keeps proxies from closing the connection.
"""

from __future__ import annotations

import logging
from typing import AsyncIterator, Callable

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

log = logging.getLogger("gateway.sse")

_CLEANUP_TIMEOUT_S = 5.0  # for the frames' iterator to finish its cleanup (cancelling its run)


class EventStream(Response):
    media_type = "text/event-stream"

    def __init__(self, frames: AsyncIterator[bytes], *, send_timeout: float, give_up: Callable[[], bool], ping_s: float = 15.0) -> None:
        # As Starlette's StreamingResponse: no body, so no Content-Length (the stream's end is the body's).
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self.frames, self.send_timeout, self.give_up, self.ping_s = frames, send_timeout, give_up, ping_s
        self._send_started: float | None = None
        self._last_sent = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        if scope.get("method", "GET").upper() == "HEAD":  # headers only: a HEAD must not open a stream
            await send(start)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            await self._close_frames()
            return
        ended = False
        lock = anyio.Lock()  # the pings and the frames share the connection
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._until_disconnected, receive, tasks.cancel_scope)
                tasks.start_soon(self._watchdog, tasks.cancel_scope)
                tasks.start_soon(self._ping, send, lock)
                await self._write(send, lock, start, b"")
                async for frame in self.frames:
                    await self._write(send, lock, None, frame)
                await self._write(send, lock, None, b"", more_body=False)
                ended = True
                tasks.cancel_scope.cancel()
        finally:
            if not ended:
                await self._close_frames()

    async def _write(self, send: Send, lock: anyio.Lock, start: dict[str, object] | None, body: bytes, more_body: bool = True) -> None:
        async with lock:
            self._send_started = anyio.current_time()
            try:
                if start is not None:
                    await send(start)
                else:
                    await send({"type": "http.response.body", "body": body, "more_body": more_body})
            finally:
                self._send_started = None
                self._last_sent = anyio.current_time()

    async def _close_frames(self) -> None:
        aclose = getattr(self.frames, "aclose", None)
        if aclose is not None:
            with anyio.move_on_after(_CLEANUP_TIMEOUT_S, shield=True):
                await aclose()

    async def _until_disconnected(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        scope.cancel()

    async def _watchdog(self, scope: anyio.CancelScope) -> None:
        while True:
            await anyio.sleep(min(1.0, self.send_timeout / 4))
            started = self._send_started
            if started is not None and anyio.current_time() - started > self.send_timeout:
                log.warning("the client read nothing for %g s; the stream is closed and its response stopped", self.send_timeout)
                scope.cancel()
                return
            if started is not None and self.give_up():
                log.warning("the client is still reading after the shutdown grace period; the stream is closed")
                scope.cancel()
                return

    async def _ping(self, send: Send, lock: anyio.Lock) -> None:
        while True:
            await anyio.sleep(self.ping_s)
            if anyio.current_time() - self._last_sent >= self.ping_s:
                await self._write(send, lock, None, b": ping\n\n")
