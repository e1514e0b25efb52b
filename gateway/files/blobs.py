"""File contents on disk: one immutable file per blob, named by a random token, in the files directory.

A blob is written under a hidden partial name and renamed into place once complete, so a failed or
refused upload leaves nothing a reader could find. Writes are gathered into large chunks and made in
worker threads: the event loop never waits on the disk. Callers get writers and readers, never a path:
where the bytes live is this module's business alone (an object store could take its place).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import time
from pathlib import Path
from typing import AsyncIterator, BinaryIO

import anyio
import anyio.to_thread

log = logging.getLogger("gateway.files")

WRITE_BYTES = 1024 * 1024  # what is gathered before one write
READ_BYTES = 1024 * 1024  # what one read in a worker thread takes
PARTIAL = ".partial-"
STALE_PARTIAL_S = 3600.0  # a partial blob this old belongs to no upload still running, on any replica


class BlobWriter:
    """One blob being written; `commit()` makes it readable, `abort()` (or leaving unfinished) removes it."""

    def __init__(self, blobs: "Blobs") -> None:
        self.name = secrets.token_hex(16)
        self.size = 0
        self._blobs = blobs
        self._partial = blobs.directory / f"{PARTIAL}{self.name}"
        self._file: BinaryIO | None = None
        self._chunks: list[bytes] = []  # written together, without joining them first
        self._buffered = 0
        self._done = False

    async def write(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        self.size += len(data)
        if self._buffered >= WRITE_BYTES:
            await self._flush()

    async def _flush(self) -> None:
        chunks, self._chunks, self._buffered = self._chunks, [], 0
        if self._file is None:
            self._file = await anyio.to_thread.run_sync(self._open)
        await anyio.to_thread.run_sync(self._file.writelines, chunks)

    def _open(self) -> BinaryIO:
        return self._partial.open("xb", buffering=0)

    async def commit(self) -> str:
        await self._flush()
        file, self._file = self._file, None
        assert file is not None

        def finish() -> None:
            file.close()
            os.rename(self._partial, self._blobs._path(self.name))

        await anyio.to_thread.run_sync(finish)
        self._done = True
        return self.name

    async def abort(self) -> None:
        if self._done:
            return
        self._done = True
        file, self._file = self._file, None

        def remove() -> None:
            if file is not None:
                file.close()
            self._partial.unlink(missing_ok=True)

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(remove)


class BlobReader:
    """One blob open for reading: its size, known before any byte is read, and its bytes, read in worker
    threads. Close it (`aclose`, or use `Blobs.open` as a context manager)."""

    def __init__(self, file: BinaryIO, size: int) -> None:
        self.size = size
        self._file = file

    async def read(self, limit: int) -> bytes:
        """The next bytes, `limit` of them unless the blob ends first."""
        return await anyio.to_thread.run_sync(self._file.read, limit)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The rest of the blob, a chunk at a time."""
        while chunk := await self.read(READ_BYTES):
            yield chunk

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self._file.close)

    async def __aenter__(self) -> "BlobReader":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class Blobs:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)

    async def start(self) -> None:
        await anyio.to_thread.run_sync(self._prepare)

    def _prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o700)
        cutoff = time.time() - STALE_PARTIAL_S
        for entry in self.directory.glob(f"{PARTIAL}*"):
            try:
                if entry.stat().st_mtime < cutoff:
                    entry.unlink()
            except OSError:
                pass

    def _path(self, name: str) -> Path:
        assert name.isalnum(), name  # blob names are ours: hex tokens
        return self.directory / name

    def writer(self) -> BlobWriter:
        return BlobWriter(self)

    async def open(self, name: str) -> BlobReader:
        """The blob `name` for reading (`async with await blobs.open(name) as reader`)."""

        def open_file() -> BlobReader:
            file = self._path(name).open("rb")
            return BlobReader(file, os.fstat(file.fileno()).st_size)

        return await anyio.to_thread.run_sync(open_file)

    async def copy(self, name: str) -> str:
        """A new blob with the same content (a hard link: blobs never change once written)."""
        new = secrets.token_hex(16)

        def link() -> None:
            try:
                os.link(self._path(name), self._path(new))
            except OSError:  # a directory that cannot hold links: copy
                shutil.copyfile(self._path(name), self._path(new))

        await anyio.to_thread.run_sync(link)
        return new

    async def remove(self, *names: str) -> None:
        def unlink() -> None:
            for name in names:
                try:
                    self._path(name).unlink(missing_ok=True)
                except OSError as exc:
                    log.warning("could not remove the file blob %s: %s", name, exc)

        if names:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(unlink)
