"""A container's files and its python session's /mnt/data, kept in step around each execution.

The store and the blobs are the truth: before code runs, the container's files the session lacks (a new
session, a file added through the API) are copied in, and those deleted through the API are removed.
After it runs, what the code created or changed under /mnt/data becomes the container's files (source
`assistant`), which the client downloads through the Containers API and the answer may cite.
"""

from __future__ import annotations

import logging
import time

from sandbox.channel import KernelChannel, KernelDied
from sandbox.network import NetworkGrant
from sandbox.transfer import FilesState, TransferFailed, delete, listing, pull, push

from ..core.ids import new_id
from ..errors import APIError
from ..storage.file_store import Container, ContainerFile
from .requested import AutoContainer
from .service import FileService

log = logging.getLogger("gateway.files")


async def open_container(
    files: FileService, named: str | AutoContainer, param: str, tenant: str, previous: str | None, provision: bool = True
) -> tuple["ContainerSync | None", str, bool]:
    """The container a code_interpreter tool runs in: the one it names (a 404 if unknown or expired), or,
    for `auto`, the conversation's (`previous`) unless it expired, or a new one. An auto container's
    `file_ids` are copied into it now (once each). Returns its sync (None for an auto container not made
    yet: made when code first runs), its id, and whether the conversation's container expired.

    Without `provision` (counting a prompt's tokens) nothing is created or copied: the uploads are
    checked, and the sync only shows the files the container would hold, for the tool's description."""
    container: Container | None = None
    replaced = False
    if isinstance(named, str):
        container = await files.container(named, tenant, param=param)
    elif previous is not None:
        found = await files.store.get_container(previous, tenant)
        # A container's network policy is its own from when it was made: a request asking another one gets
        # a new container (the conversation's state is lost, as when it expired), never a changed one.
        usable = found is not None and not found.expired() and files.same_network(found, named.network)
        container = found if usable else None
        replaced = container is None
    if isinstance(named, AutoContainer) and named.file_ids and not provision:
        planned = await _planned(files, container, named.file_ids, param, tenant)
        return planned, planned.container.id, replaced
    if isinstance(named, AutoContainer) and named.file_ids:
        if container is None:
            container = await files.new_container(tenant, "auto", network=named.network)
        copied = {file.file_id for file in await files.store.container_files(container.id)}
        for position, file_id in enumerate(named.file_ids):
            upload = await files.file(file_id, tenant, param=f"{param}.file_ids[{position}]")
            if file_id not in copied:
                await files.copy_into(container, upload, param=f"{param}.file_ids[{position}]")
    if container is None:
        return None, new_id("cntr"), replaced
    return ContainerSync(files, container, await files.store.container_files(container.id)), container.id, replaced


async def _planned(files: FileService, container: Container | None, file_ids: list[str], param: str, tenant: str) -> "ContainerSync":
    """What an auto container would hold once its `file_ids` were copied in, made of nothing stored."""
    known = await files.store.container_files(container.id) if container is not None else []
    now = time.time()
    planned = container or Container(new_id("cntr"), tenant, "auto", int(now), now, files.config.container_idle_minutes, None)
    for position, file_id in enumerate(file_ids):
        upload = await files.file(file_id, tenant, param=f"{param}.file_ids[{position}]")
        known.append(ContainerFile(new_id("cfile"), planned.id, tenant, upload.filename, upload.bytes, "user", int(now), "", upload.id))
    return ContainerSync(files, planned, known)


class ContainerSync:
    """One response's use of a container (sandbox/manager.py `SessionFiles`)."""

    def __init__(self, files: FileService, container: Container, known: list[ContainerFile]) -> None:
        self.files = files
        self.container = container
        self.by_path = {file.path: file for file in known}  # what the answer can cite, kept current
        self.notes: list[str] = []  # for the model, after the execution

    def network_grant(self) -> NetworkGrant | None:
        return self.files.network_grant(self.container)

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    async def before(self, channel: KernelChannel, state: FilesState) -> None:
        records = await self.files.store.container_files(self.container.id)
        wanted = {record.path: record for record in records}
        self.by_path = dict(wanted)
        changed = False
        for path in [path for path in state.pushed if path not in wanted]:  # deleted through the API
            await delete(channel, path)
            del state.pushed[path]
            changed = True
        for record in records:
            if state.pushed.get(record.path) == record.blob:
                continue
            try:
                async with await self.files.blobs.open(record.blob) as source:
                    await push(channel, record.path, source)
            except TransferFailed as exc:
                reason = "no space is left in /mnt/data" if exc.no_space else str(exc)
                self.notes.append(f"[The file /mnt/data/{record.path} could not be copied in: {reason}.]")
                continue
            state.pushed[record.path] = record.blob
            changed = True
        if changed or not state.listed:
            state.seen, state.listed = (await listing(channel)).files, True

    async def after(self, channel: KernelChannel, state: FilesState) -> None:
        try:
            found = await listing(channel)
        except (KernelDied, TransferFailed) as exc:
            log.warning("container %s: its files could not be listed: %s", self.container.id, exc)
            return
        now = found.files
        for path, reason in found.skipped:
            if path not in state.unkept:  # told once, not after every execution
                self.notes.append(f"[A file /mnt/data/{path} was not kept: {reason}.]")
        state.unkept = {path for path, _ in found.skipped}
        for path, stat in now.items():
            if state.listed and state.seen.get(path) == stat:
                continue
            try:
                record = await self._keep(channel, path)
            except (APIError, TransferFailed) as exc:
                reason = exc.message if isinstance(exc, APIError) else str(exc)
                self.notes.append(f"[The file /mnt/data/{path} was not kept: {reason}]")
                continue
            state.pushed[path] = record.blob
            self.by_path[path] = record
        state.seen, state.listed = now, True
        await self.files.store.touch_container(self.container.id)

    async def _keep(self, channel: KernelChannel, path: str) -> ContainerFile:
        """The file at `path`, copied out of the session into a container file (the one of that path replaced)."""
        files = self.files
        writer = files.blobs.writer()
        try:
            size = await pull(channel, path, writer.write, files.config.max_file_bytes)
            blob = await writer.commit()
        except BaseException:
            await writer.abort()
            raise
        record = ContainerFile(new_id("cfile"), self.container.id, self.container.tenant, path, size, "assistant", int(time.time()), blob)
        return await files.put(record)
