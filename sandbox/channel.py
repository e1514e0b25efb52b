"""The host's end of the kernel protocol (see kernel.py): one JSON line out, one JSON line back.

Over a subprocess's pipes the reply stream is the kernel's stdout as is; over a Docker attach socket it
is multiplexed (8-byte frame headers: stream type, then the payload length), and only stdout frames
carry replies.
"""

from __future__ import annotations

import json
import secrets
import struct
from dataclasses import dataclass
from typing import Any, AsyncIterator, Literal

import anyio
import anyio.to_thread
from anyio.abc import ByteReceiveStream, ByteSendStream
from anyio.streams.buffered import BufferedByteReceiveStream

from .kernel import MAX_IMAGE_CHARS, MAX_IMAGES

MAX_REPLY_BYTES = 40 * 1024 * 1024  # output is capped by the kernel; images (16 of 8 MiB at most) can be large
INLINE_PARSE_BYTES = 256 * 1024  # larger replies are parsed in a worker thread
STATUSES = {"ready", "ok", "error", "timeout", "restarted", "unknown"}  # unknown: no result kept for a token
REASONS = {"timeout", "killed", "exited", "out_of_memory", "invalid_reply", "interrupted"}
MAX_SHELL_CHUNK_CHARS = 64 * 1024  # one progress line of a shell command: one read of its pipe, decoded
MAX_STALE_LINES = 4096  # replies to an earlier connection's requests skipped before one to this connection's


class KernelDied(Exception):
    """The kernel's channel closed: the process exited or was killed (out of memory, for one)."""


class KernelProtocolError(KernelDied):
    """The kernel said something that is not a reply: the session is not to be trusted and restarts."""


def check_reply(reply: Any, expected_id: int, max_output: int) -> dict[str, Any]:
    """A reply, checked field by field: what reaches the gateway is of the types and sizes it expects."""
    if not isinstance(reply, dict) or reply.get("id") != expected_id or reply.get("status") not in STATUSES:
        raise KernelProtocolError("the kernel's reply has no valid id or status")
    output, images, reason = reply.get("output", ""), reply.get("images", []), reply.get("reason")
    if not isinstance(output, str) or len(output) > max_output + 4096:
        raise KernelProtocolError("the kernel's reply has an invalid output")
    if not isinstance(images, list) or len(images) > MAX_IMAGES or not all(isinstance(i, str) and len(i) <= MAX_IMAGE_CHARS for i in images):
        raise KernelProtocolError("the kernel's reply has invalid images")
    if reply["status"] == "restarted" and reason not in REASONS:
        raise KernelProtocolError("the kernel's reply has an invalid reason")
    return {"status": reply["status"], "output": output, "images": images, "reason": reason}


@dataclass(frozen=True)
class ShellOutput:
    """What a shell command wrote to one stream, as it arrived."""

    stream: Literal["stdout", "stderr"]
    text: str


@dataclass(frozen=True)
class ShellEnd:
    """How a shell command ended: its exit code (None: it ran out of time) and its capped output."""

    exit_code: int | None
    stdout: str
    stderr: str


def check_shell_reply(reply: dict[str, Any], max_output: int) -> ShellOutput | ShellEnd:
    """A line of a shell command's reply, checked field by field (the command runs in the sandbox)."""
    status = reply.get("status")
    if status == "output":
        stream, text = reply.get("stream"), reply.get("data")
        if stream not in ("stdout", "stderr") or not isinstance(text, str) or len(text) > MAX_SHELL_CHUNK_CHARS:
            raise KernelProtocolError("the kernel's shell output is not valid")
        return ShellOutput(stream, text)
    stdout, stderr, code = reply.get("stdout"), reply.get("stderr"), reply.get("exit_code")
    if (
        status not in ("exit", "timeout")
        or not isinstance(stdout, str)
        or len(stdout) > max_output + 4096
        or not isinstance(stderr, str)
        or len(stderr) > max_output + 4096
        or not isinstance(code, int)
        or isinstance(code, bool)
    ):
        raise KernelProtocolError("the kernel's shell reply is not valid")
    return ShellEnd(code if status == "exit" else None, stdout, stderr)


def _encode(request: dict[str, Any]) -> bytes:
    return json.dumps(request).encode() + b"\n"


class KernelChannel:
    def __init__(self, send: ByteSendStream, receive: ByteReceiveStream, multiplexed: bool) -> None:
        self._send = send
        self._receive = BufferedByteReceiveStream(receive)
        self._multiplexed = multiplexed
        self._pending = bytearray()  # demultiplexed stdout not yet split into lines
        self._frame: tuple[int, int] | None = None  # a frame whose header was read and payload not yet
        # Request ids start at random: a reply to another connection's request (a replica that stopped while
        # its code ran, the kernel answering it now) is told apart from this one's, and skipped.
        self._next_id = secrets.randbelow(1 << 48)

    async def request(self, max_output: int = 0, **fields: Any) -> dict[str, Any]:
        """Run code (or ping): the reply, checked as an execution's."""
        reply = await self.exchange({"max_output": max_output, **fields})
        return check_reply(reply, self._next_id, max_output)

    async def exchange(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Send one request and return its reply, for the caller to check field by field (file
        operations: transfer.py). A large request (a file's chunk) is encoded in a worker thread."""
        await self._send_request(fields)
        return await self._reply()

    async def interrupt(self) -> None:
        """Ask the kernel to stop the code or command of the request last sent; its reply comes as usual
        (`finish_execution`, `finish_shell`). Ignored by a kernel with nothing running."""
        try:
            await self._send.send(_encode({"op": "interrupt"}))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise KernelDied(str(exc) or type(exc).__name__) from exc

    async def finish_execution(self, max_output: int) -> dict[str, Any]:
        """The reply to the execution last sent, whose wait was given up (an interrupt was sent since)."""
        return check_reply(await self._reply(), self._next_id, max_output)

    async def finish_shell(self, max_output: int) -> ShellEnd:
        """How the shell command last sent ended, its progress lines skipped (an interrupt was sent since)."""
        while not isinstance(line := check_shell_reply(await self._reply(), max_output), ShellEnd):
            pass
        return line

    async def shell(self, command: str, timeout: float, max_output: int) -> AsyncIterator[ShellOutput | ShellEnd]:
        """Run a shell command: what it writes as it arrives, then how it ended (the last item)."""
        await self._send_request({"op": "shell", "command": command, "timeout": timeout, "max_output": max_output})
        while True:
            line = check_shell_reply(await self._reply(), max_output)
            yield line
            if isinstance(line, ShellEnd):
                return

    async def _send_request(self, fields: dict[str, Any]) -> None:
        self._next_id += 1
        request = {"id": self._next_id, **fields}
        large = sum(len(value) for value in fields.values() if isinstance(value, str)) > INLINE_PARSE_BYTES
        line = await anyio.to_thread.run_sync(_encode, request) if large else _encode(request)
        try:
            await self._send.send(line)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise KernelDied(str(exc) or type(exc).__name__) from exc

    async def _reply(self) -> dict[str, Any]:
        """The next line of the reply to the request last sent, parsed."""
        try:
            for _ in range(MAX_STALE_LINES + 1):
                raw = await self._read_line()
                try:
                    reply = json.loads(raw) if len(raw) <= INLINE_PARSE_BYTES else await anyio.to_thread.run_sync(json.loads, raw)
                except (ValueError, RecursionError):
                    raise KernelProtocolError("the kernel's reply is not JSON") from None
                if not isinstance(reply, dict) or not isinstance(reply.get("id"), int):
                    break
                if reply["id"] == self._next_id:
                    return reply
            raise KernelProtocolError("the kernel's reply has no valid id")
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise KernelDied(str(exc) or type(exc).__name__) from exc
        except anyio.IncompleteRead as exc:
            raise KernelDied("the kernel's output ended mid-reply") from exc
        except anyio.DelimiterNotFound as exc:
            raise KernelProtocolError("the kernel's reply is too large") from exc

    async def _read_line(self) -> bytes:
        if not self._multiplexed:
            return await self._receive.receive_until(b"\n", MAX_REPLY_BYTES)
        while (end := self._pending.find(b"\n")) < 0:
            # Kept across a cancelled read (a cancelled response's wait), so the stream stays in step.
            if self._frame is None:
                header = await self._receive.receive_exactly(8)
                self._frame = header[0], struct.unpack(">I", header[4:])[0]
            stream, size = self._frame
            payload = await self._receive.receive_exactly(size) if size else b""
            self._frame = None
            if stream == 1:
                self._pending += payload
                if len(self._pending) > MAX_REPLY_BYTES:
                    raise KernelProtocolError("the kernel's reply is too large")
        line = bytes(self._pending[:end])
        del self._pending[: end + 1]
        return line

    async def aclose(self) -> None:
        await self._send.aclose()
        await self._receive.aclose()
