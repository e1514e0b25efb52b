"""uvicorn's HTTP protocol with one addition: a request's head must arrive within a time limit.

uvicorn closes idle keep-alive connections, but a connection that sends part of a request head (or
nothing at all) is kept forever, so a few thousand of them exhaust the server (slowloris). The timer
runs from the connection's start, and again from the end of each response with no request waiting,
until the next request's head is complete. It is added to httptools' protocol (uvicorn's fast default)
and to h11's, used where httptools is not installed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

MAX_HEAD_BYTES = 64 * 1024  # a request line and headers larger than this are refused


class _HeadTimer:
    header_timeout_s = 10.0
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    _head_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()


class H11HeaderTimeout(_HeadTimer, H11Protocol):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle:  # a request's head arrived
            self._disarm()

    def on_response_complete(self) -> None:
        self._arm()  # before a pipelined request is handled, which disarms it again
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def _httptools_protocol() -> type[Any] | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is not installed
        return None

    class HttpToolsHeaderTimeout(_HeadTimer, HttpToolsProtocol):
        _head_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            self._head_bytes = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            self._count(len(url))
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            self._count(len(name) + len(value))
            super().on_header(name, value)

        def _count(self, size: int) -> None:
            # httptools bounds no head; raising here makes uvicorn answer 400 and close the connection.
            self._head_bytes += size
            if self._head_bytes > MAX_HEAD_BYTES:
                raise ValueError("request head too large")

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.pipeline and not self.transport.is_closing():  # nothing waits: the next head is timed
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HttpToolsHeaderTimeout


def with_header_timeout(seconds: float) -> type[Any]:
    base = _httptools_protocol() or H11HeaderTimeout
    return type(base.__name__, (base,), {"header_timeout_s": seconds})
