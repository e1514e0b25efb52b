"""Copying files in and out of a session's /mnt/data, over the kernel's channel (kernel.py, `DataFiles`).

The same path serves both backends, and nothing on the host opens a path the sandboxed code controls:
the kernel reads and writes inside the sandbox, and the host only sends and receives bytes. Files move
in chunks, each base64-encoded in a worker thread, so a large file holds up neither the event loop nor
the channel for long.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable, Literal, Protocol

import anyio
import anyio.to_thread

from .channel import KernelChannel, KernelProtocolError

CHUNK_BYTES = 2 * 1024 * 1024
MAX_SKIPPED = 20  # files reported as not kept, per listing
_ERRNOS = re.compile(r"^E[A-Z0-9]{1,15}$")


class TransferFailed(Exception):
    """The kernel could not do it (no space left, not a regular file, ...); `errno` says which."""

    def __init__(self, message: str, errno: str) -> None:
        super().__init__(message)
        self.errno = errno

    @property
    def no_space(self) -> bool:
        return self.errno in ("ENOSPC", "EDQUOT", "EFBIG")


@dataclass(frozen=True)
class FileStat:
    size: int
    mtime_ns: int


@dataclass
class FilesState:
    """What a session's /mnt/data is known to hold: the files copied in (path -> the blob copied), and
    every file as listed after the last execution, to tell what the next one changed."""

    pushed: dict[str, str] = field(default_factory=dict)
    seen: dict[str, FileStat] = field(default_factory=dict)
    listed: bool = False  # `seen` is known
    unkept: set[str] = field(default_factory=set)  # files the model was told are not kept
    skills: dict[str, str] = field(default_factory=dict)  # /mnt/skills: folder -> the version installed there


def valid_path(path: str) -> bool:
    """A path the kernel accepts under /mnt/data: relative, plain names only, UTF-8 (the kernel checks it
    again: it runs alone in the sandbox and cannot import this)."""
    try:
        encoded = path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    parts = path.split("/")
    return 0 < len(encoded) <= 1024 and "\0" not in path and all(part not in ("", ".", "..") and len(part.encode()) <= 255 for part in parts)


@dataclass
class Listing:
    files: dict[str, FileStat]  # path -> its size and time
    skipped: list[tuple[str, str]]  # (path as it can be shown, why it cannot be kept)


async def listing(channel: KernelChannel) -> Listing:
    """Every regular file under /mnt/data (links and special files are not listed), and the files whose
    path cannot be kept (not UTF-8, too long), each skipped alone."""
    reply = _checked(await channel.exchange({"op": "files"}))
    files, skipped = reply.get("files"), reply.get("skipped", [])
    if not isinstance(files, list) or not isinstance(skipped, list):
        raise KernelProtocolError("the kernel's file listing is invalid")
    found: dict[str, FileStat] = {}
    unkept: list[tuple[str, str]] = []
    for entry in skipped[:MAX_SKIPPED]:
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(part, str) for part in entry)):
            raise KernelProtocolError("the kernel's file listing is invalid")
        unkept.append((entry[0][:200], entry[1][:100]))
    for entry in files:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str)):
            raise KernelProtocolError("the kernel's file listing is invalid")
        size, mtime = entry[1], entry[2]
        if not (isinstance(size, int) and isinstance(mtime, int) and size >= 0):
            raise KernelProtocolError("the kernel's file listing is invalid")
        if not valid_path(entry[0]):
            if len(unkept) < MAX_SKIPPED:
                unkept.append((entry[0][:200].encode("utf-8", "replace").decode(), "its path is not one the gateway keeps"))
            continue
        found[entry[0]] = FileStat(size, mtime)
    return Listing(found, unkept)


Root = Literal["data", "skills"]  # /mnt/data, or /mnt/skills


class Source(Protocol):
    """Bytes of a known size read in order (the gateway's stored blobs: gateway/files/blobs.py)."""

    size: int

    async def read(self, limit: int) -> bytes: ...


async def push(channel: KernelChannel, path: str, source: Source, root: Root = "data") -> None:
    """Copy `source` to /mnt/data/`path` (or /mnt/skills/`path`), replacing what was there once it is complete."""
    where = {"root": root} if root != "data" else {}
    sent, first = 0, True
    while True:
        data = await source.read(CHUNK_BYTES)
        sent += len(data)
        last = len(data) < CHUNK_BYTES or sent >= source.size
        chunk = await anyio.to_thread.run_sync(_encode, data)
        _checked(await channel.exchange({"op": "write", "path": path, "data": chunk, "first": first, "last": last, **where}))
        if last:
            return
        first = False


async def install_tree(channel: KernelChannel, folder: str, files: Iterable[tuple[str, Source]]) -> None:
    """Put `files` (relative path, and where its content is read from, one chunk at a time) in
    /mnt/skills/`folder`, replacing whatever was there, and make the folder read-only."""
    await _tree(channel, "clear", folder)
    for path, source in files:
        await push(channel, f"{folder}/{path}", source, root="skills")
    await _tree(channel, "seal", folder)


async def _tree(channel: KernelChannel, op: str, folder: str) -> None:
    _checked(await channel.exchange({"op": op, "path": folder, "root": "skills"}))


async def pull(channel: KernelChannel, path: str, write: Callable[[bytes], Awaitable[None]], max_bytes: int) -> int:
    """Copy /mnt/data/`path` out, chunk by chunk, to `write`; its size. Raises TransferFailed("EFBIG")
    past `max_bytes`."""
    offset = 0
    while True:
        reply = _checked(await channel.exchange({"op": "read", "path": path, "offset": offset, "length": CHUNK_BYTES}))
        data, size = reply.get("data"), reply.get("size")
        if not isinstance(data, str) or not isinstance(size, int):
            raise KernelProtocolError("the kernel's file data is invalid")
        if size > max_bytes or offset + len(data) * 3 // 4 > max_bytes + 3:
            raise TransferFailed(f"the file is larger than {max_bytes} bytes", "EFBIG")
        chunk = await anyio.to_thread.run_sync(_decode, data)
        await write(chunk)
        offset += len(chunk)
        if not chunk or offset >= size:
            return offset


async def delete(channel: KernelChannel, path: str) -> None:
    try:
        _checked(await channel.exchange({"op": "delete", "path": path}))
    except TransferFailed as exc:
        if exc.errno != "ENOENT":
            raise


def _encode(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise KernelProtocolError("the kernel's file data is not base64") from None


def _checked(reply: dict[str, Any]) -> dict[str, Any]:
    status = reply.get("status")
    if status == "ok":
        return reply
    if status == "error":
        errno, message = reply.get("errno"), reply.get("error")
        if isinstance(errno, str) and _ERRNOS.match(errno) and isinstance(message, str):
            raise TransferFailed(message[:200], errno)
    raise KernelProtocolError("the kernel's reply to a file operation is invalid")
