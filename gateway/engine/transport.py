"""HTTP/1.1 to the engine: asyncio's transports with httptools' parser (llhttp, uvicorn's), a small pool.

The engine's stream is the gateway's hottest path: one chunk a token. Through httpx a chunk passes httpx,
httpcore, h11 and anyio, each an async layer with its own buffer and checks: about 9 µs of CPU a chunk,
against about 5 µs here (bench/engine_read.py), of a per-token budget of 10. Here the parser calls back
on the connection itself, which queues the body's bytes; a reader wakes once for all that one read brought.

Only what the engine client needs: requests to one origin, responses read whole (bounded) or streamed,
keep-alive connections reused, every wait bounded. The environment's proxy settings do not apply: the
engine is an internal service, and a proxy set for the browser's traffic must not carry it.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from collections import deque
from typing import Mapping, cast

import httptools

MAX_HEAD_BYTES = 64 * 1024  # an engine's response head is a few hundred bytes
MAX_HEADERS = 100
BUFFERED_HIGH = 256 * 1024  # unread body bytes at which the socket stops being read, until half are read
IDLE_POOL_MAX = 64


class EngineHTTPError(Exception):
    """A request to the engine that did not get its whole answer."""


class ConnectFailed(EngineHTTPError):
    pass


class TimedOut(EngineHTTPError):
    pass


class ConnectionClosed(EngineHTTPError):
    """The engine closed the connection (or it broke) before the response ended."""


class ProtocolFault(EngineHTTPError):
    """The engine's answer is not HTTP/1.1 the gateway accepts."""


class _Connection(asyncio.Protocol):
    """One connection and the response being read on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, read_timeout: float) -> None:
        self._loop = loop
        self._read_timeout = read_timeout
        self._transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._last_read = 0.0  # loop time of the last bytes received, for the read timeout
        self._timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self.error: EngineHTTPError | None = None  # why the connection cannot go on
        self.closed = False
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self._keep_alive = False
        self.complete = False  # the response's body ended
        self.received = False  # a byte of the response arrived
        self.idle_since = 0.0

    # -- asyncio.Protocol -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports are not its subclasses

    def data_received(self, data: bytes) -> None:
        self.received = True
        self._last_read = self._loop.time()
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ProtocolFault(f"unreadable HTTP: {exc}"))
            return
        if self.error is not None:  # a parser callback refused what it read
            return
        if self._buffered > BUFFERED_HIGH and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        return False  # close; a response still unfinished fails in connection_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._cancel_timer()
        if not self.complete and self.error is None:
            self.error = ConnectionClosed(str(exc) if exc else "the engine closed the connection")
        self._wake()

    # -- httptools' callbacks ---------------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value)
        if len(self.headers) >= MAX_HEADERS or self._head_bytes > MAX_HEAD_BYTES:
            self._fail(ProtocolFault("the response head is too large"))
            return
        self.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self._keep_alive = self._parser.should_keep_alive()  # asked here: the parser forgets it at the end
        self.head_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self._cancel_timer()

    # -- the client's side ------------------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Write a request and start reading its response."""
        assert self._transport is not None
        self._parser = httptools.HttpResponseParser(self)
        self.status, self.headers, self._head_bytes = 0, [], 0
        self.head_done = self.complete = self.received = False
        self._last_read = self._loop.time()
        self._timer = self._loop.call_later(self._read_timeout, self._check_silence)
        self._transport.write(data)

    async def head(self) -> None:
        while not self.head_done:
            await self._wait()

    async def read(self) -> bytes:
        """The body's next bytes, all that arrived since the last call; b"" at its end."""
        while not self._body:
            if self.complete:
                return b""
            await self._wait()
        data = self._body.popleft() if len(self._body) == 1 else b"".join(self._body)
        self._body.clear()
        self._buffered = 0
        if self._paused and self._transport is not None:
            self._paused = False
            self._last_read = self._loop.time()  # the silence was the reader's, not the engine's
            self._transport.resume_reading()
        return data

    def reusable(self) -> bool:
        return self.complete and not self.closed and self.error is None and self._keep_alive

    def close(self) -> None:
        self._cancel_timer()
        if self._transport is not None:
            self._transport.close()  # what the engine reads as the request aborted
        self.closed = True

    # -- internals --------------------------------------------------------------------------------------

    async def _wait(self) -> None:
        if self.error is not None:
            raise self.error
        waiter = self._waiter = self._loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None
        if self.error is not None:
            raise self.error

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, error: EngineHTTPError) -> None:
        if self.error is None:
            self.error = error
        self.close()
        self._wake()

    def _check_silence(self) -> None:
        """One timer a read-timeout period, not one a read: the engine has been silent too long only if
        nothing arrived since and a reader is waiting (a paused socket is the reader's doing)."""
        self._timer = None
        if self.complete or self.closed:
            return
        silent = self._loop.time() - self._last_read
        if silent < self._read_timeout:
            self._timer = self._loop.call_later(self._read_timeout - silent, self._check_silence)
        elif self._waiter is not None:
            self._fail(TimedOut(f"no data for {self._read_timeout:g} s"))
        else:  # the reader is busy elsewhere: looked at again a period later
            self._timer = self._loop.call_later(self._read_timeout, self._check_silence)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class EngineResponse:
    """A response whose head was read. Read its body once, then it is closed (or `aclose()` it first:
    a body not read to its end closes the connection)."""

    def __init__(self, pool: "EnginePool", connection: _Connection) -> None:
        self._pool = pool
        self._connection: _Connection | None = connection
        self.status = connection.status
        self.headers = connection.headers

    def header(self, name: bytes) -> bytes | None:
        return next((value for key, value in self.headers if key == name), None)

    async def read_some(self) -> bytes:
        """The body's next bytes (all that arrived since the last call); b"" at its end, when the
        connection goes back to the pool."""
        if self._connection is None:
            return b""
        data = await self._connection.read()
        if not data:
            await self.aclose()
        return data

    async def read(self, limit: int) -> bytes:
        """The whole body; more than `limit` bytes is a ProtocolFault."""
        body = bytearray()
        try:
            while data := await self.read_some():
                body += data
                if len(body) > limit:
                    raise ProtocolFault(f"a response body over {limit} bytes")
        finally:
            await self.aclose()
        return bytes(body)

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool.release(connection)


class EnginePool:
    """Connections to the engine's origin: at most `max_connections` in use, idle ones kept a while."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        connect_timeout: float,
        read_timeout: float,
        max_connections: int,
        keepalive_expiry: float,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"the engine URL must be http(s)://host[:port][/path], not {url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._prefix = parts.path.rstrip("/")
        authority = parts.netloc.rpartition("@")[2]
        fixed = {"host": authority, "user-agent": "harmony-gateway", **{k.lower(): v for k, v in headers.items()}}
        self._fixed_head = _header_lines(fixed)
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._keepalive_expiry = keepalive_expiry
        self._slots = asyncio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self.opened = 0  # connections made, over the pool's life

    async def request(self, method: str, path: str, *, headers: Mapping[str, str] | None = None, body: bytes = b"") -> EngineResponse:
        """Send a request and read its response's head."""
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._fixed_head}"
        if headers:
            head += _header_lines(headers)
        if body or method not in ("GET", "HEAD"):
            head += f"content-length: {len(body)}\r\n"
        return await self._exchange((head + "\r\n").encode("latin-1") + body)

    async def _exchange(self, data: bytes) -> EngineResponse:
        if self._slots.locked():
            try:
                async with asyncio.timeout(self._read_timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise TimedOut("every connection to the engine stayed busy") from None
        else:
            await self._slots.acquire()
        try:
            return await self._send(data)
        except BaseException:
            self._slots.release()
            raise

    async def _send(self, data: bytes) -> EngineResponse:
        for attempt in range(2):
            connection, reused = self._take_idle(), True
            if connection is None:
                connection, reused = await self._connect(), False
            self._busy.add(connection)
            connection.send(data)
            try:
                await connection.head()
            except ConnectionClosed:
                self._busy.discard(connection)
                connection.close()
                # A kept-alive connection the engine closed just as the request went: nothing of it was
                # read, so it goes once more on a new connection.
                if reused and not connection.received and attempt == 0:
                    continue
                raise
            except BaseException:
                self._busy.discard(connection)
                connection.close()
                raise
            return EngineResponse(self, connection)
        raise AssertionError("unreachable")

    def _take_idle(self) -> _Connection | None:
        now = asyncio.get_running_loop().time()
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and now - connection.idle_since < self._keepalive_expiry:
                return connection
            connection.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, connection = await loop.create_connection(
                    lambda: _Connection(loop, self._read_timeout),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl else None,
                )
        except TimeoutError:
            raise ConnectFailed(f"no connection within {self._connect_timeout:g} s") from None
        except OSError as exc:
            raise ConnectFailed(exc.strerror or str(exc) or type(exc).__name__) from None
        self.opened += 1
        return connection

    def release(self, connection: _Connection) -> None:
        """A response ended or given up: its connection back to the idle ones, or closed."""
        if connection not in self._busy:
            return
        self._busy.discard(connection)
        self._slots.release()
        if connection.reusable() and len(self._idle) < IDLE_POOL_MAX:
            connection.idle_since = asyncio.get_running_loop().time()
            self._idle.append(connection)
        else:
            connection.close()

    async def aclose(self) -> None:
        for connection in [*self._idle, *self._busy]:
            connection.close()
        self._idle.clear()
        self._busy.clear()


def _header_lines(headers: Mapping[str, str]) -> str:
    for text in (*headers, *headers.values()):
        if "\r" in text or "\n" in text or "\0" in text:
            raise ValueError("a header name or value holds a line break")  # the gateway's own values: a bug
    return "".join(f"{name}: {value}\r\n" for name, value in headers.items())
