"""The host's end of the kernel protocol (see kernel.py): one JSON line out, one JSON line back.

Over a subprocess's pipes the reply stream is the kernel's stdout as is; over a Docker attach socket it
is multiplexed (8-byte frame headers: stream type, then the payload length), and only stdout frames
carry replies.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import anyio
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream

MAX_REPLY_BYTES = 64 * 1024 * 1024  # output is capped by the kernel; images are what can be large


class KernelDied(Exception):
    """The kernel's channel closed: the process exited or was killed (out of memory, for one)."""


class KernelChannel:
    def __init__(self, send: ByteSendStream, receive: ByteReceiveStream, multiplexed: bool) -> None:
        self._send = send
        self._receive = BufferedByteReceiveStream(receive)
        self._multiplexed = multiplexed
        self._pending = bytearray()  # demultiplexed stdout not yet split into lines
        self._next_id = 0

    async def request(self, **fields: Any) -> dict[str, Any]:
        self._next_id += 1
        line = json.dumps({"id": self._next_id, **fields}).encode() + b"\n"
        try:
            await self._send.send(line)
            while True:
                reply = json.loads(await self._read_line())
                if reply.get("id") == self._next_id:
                    return reply
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise KernelDied(str(exc) or type(exc).__name__) from exc
        except anyio.IncompleteRead as exc:
            raise KernelDied("the kernel's output ended mid-reply") from exc

    async def _read_line(self) -> bytes:
        if not self._multiplexed:
            return await self._receive.receive_until(b"\n", MAX_REPLY_BYTES)
        while (end := self._pending.find(b"\n")) < 0:
            header = await self._receive.receive_exactly(8)
            stream, size = header[0], struct.unpack(">I", header[4:])[0]
            payload = await self._receive.receive_exactly(size) if size else b""
            if stream == 1:
                self._pending += payload
                if len(self._pending) > MAX_REPLY_BYTES:
                    raise KernelDied("the kernel's reply is too large")
        line = bytes(self._pending[:end])
        del self._pending[: end + 1]
        return line

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()
