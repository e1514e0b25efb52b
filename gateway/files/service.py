"""What the Files and Containers APIs and the code_interpreter tool share: the records (storage/file_store.py), the
bytes (blobs.py), the limits (config `files:`), and the rules that tie them together."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import anyio
from starlette.requests import Request

from sandbox.local_backend import memory_bytes
from sandbox.network import NetworkGrant

from ..config import FilesConfig
from ..core.ids import new_id
from ..core.sealed import Sealer
from ..errors import APIError, not_found
from ..storage import Conflict, StorageError
from ..storage.file_store import Container, ContainerFile, ContainerFull, ContainerGone, FileStore, QuotaExceeded, StoredFile, TooMany
from .blobs import Blobs
from .network import NetworkAllowlist, grant_of, sealed_policy
from .upload import Upload, read_upload

log = logging.getLogger("gateway.files")

SWEEP_S = 60.0


@dataclass
class FileService:
    config: FilesConfig
    store: FileStore
    blobs: Blobs
    sealer: Sealer  # seals containers' domain secrets (network.py)
    # Bytes of uploads still arriving on this replica, per tenant: they take disk space before they are
    # stored, so they count toward the quota too (8 uploads held open must not pass it together).
    _arriving: dict[str, int] = field(default_factory=dict)

    # -- uploads --------------------------------------------------------------------------------------------

    async def receive(self, request: Request, tenant: str) -> Upload:
        """A multipart upload (upload.py), its file refused at the byte that passes the size limit or the
        tenant's quota: what the tenant stores, with its other uploads in flight, and this one so far."""
        config = self.config
        stored = await self.store.usage(tenant)
        counted = 0

        def room(adding: int) -> bool:
            nonlocal counted
            counted += adding
            self._arriving[tenant] = self._arriving.get(tenant, 0) + adding
            return stored + self._arriving[tenant] <= config.tenant_quota_bytes

        try:
            return await read_upload(
                request, self.blobs, "file", config.max_file_bytes, config.upload_idle_timeout_s, room, self.quota_exceeded("file")
            )
        finally:
            left = self._arriving.get(tenant, 0) - counted
            if left > 0:
                self._arriving[tenant] = left
            else:
                self._arriving.pop(tenant, None)

    async def file(self, file_id: str, tenant: str, param: str | None = None) -> StoredFile:
        found = await self.store.get_file(file_id, tenant)
        if found is None:
            raise not_found(f"No such File object: {file_id}.", param=param)
        return found

    @staticmethod
    def too_many(exc: TooMany, param: str | None = None) -> APIError:
        return APIError(
            400, f"You hold {exc.limit} {exc.what} already, as many as this gateway keeps for one project; delete some first.",
            param=param, code="too_many_" + exc.what.replace(" ", "_"),
        )  # fmt: skip

    def quota_exceeded(self, param: str | None = None) -> APIError:
        return APIError(
            413, f"This upload would pass your storage quota of {self.config.tenant_quota_bytes} bytes; delete files first.",
            param=param, code="storage_quota_exceeded",
        )  # fmt: skip

    # -- containers -----------------------------------------------------------------------------------------

    async def container(self, container_id: str, tenant: str, param: str | None = None) -> Container:
        """The tenant's live container; a 404 for one that is unknown, another tenant's, or expired."""
        found = await self.store.get_container(container_id, tenant)
        if found is None:
            raise not_found(f"Container '{container_id}' not found.", param=param)
        if found.expired():
            raise not_found(
                f"Container '{container_id}' expired after {found.idle_minutes} minutes without use, and its files "
                'are gone. Create a new container (or use {"type": "auto"}) and upload the files again.',
                param=param,
            )
        return found

    async def new_container(
        self,
        tenant: str,
        name: str,
        idle_minutes: int | None = None,
        memory_limit: str | None = None,
        container_id: str | None = None,
        network: NetworkAllowlist | None = None,
    ) -> Container:
        """A new container; `network`, checked already (network.py `checked_policy`), is its network policy."""
        now = time.time()
        minutes = idle_minutes or self.config.container_idle_minutes
        policy = sealed_policy(network, self.sealer, tenant)
        container = Container(container_id or new_id("cntr"), tenant, name, int(now), now, minutes, memory_limit, network_policy=policy)
        try:
            await self.store.create_container(container, self.config.max_containers_per_tenant)
        except TooMany as exc:
            raise self.too_many(exc) from None
        return container

    def network_grant(self, container: Container) -> NetworkGrant | None:
        """What the container's sandbox may reach, its domain secrets opened; None: no network."""
        return grant_of(container.network_policy, self.sealer, container.tenant)

    def same_network(self, container: Container, asked: NetworkAllowlist | None) -> bool:
        """Whether the container's network policy is the one asked for: the same domains, the same secrets."""
        grant = self.network_grant(container)
        if grant is None or asked is None:
            return grant is None and asked is None
        secrets = {(secret.domain, secret.name, secret.value) for secret in asked.domain_secrets or []}
        return grant.allowed_domains == tuple(asked.allowed_domains) and secrets == {(s.domain, s.name, s.value) for s in grant.secrets}

    async def copy_into(self, container: Container, file: StoredFile, param: str | None = None) -> ContainerFile:
        """An uploaded file, copied into the container as /mnt/data/FILENAME (replacing one of that name)."""
        blob = await self.blobs.copy(file.blob)
        record = ContainerFile(new_id("cfile"), container.id, container.tenant, file.filename, file.bytes, "user", int(time.time()), blob, file.id)
        return await self.put(record, param)

    async def put(self, record: ContainerFile, param: str | None = None) -> ContainerFile:
        """Record a container file whose blob is written; on refusal the blob is removed (nothing is left)."""
        config = self.config
        try:
            replaced = await self.store.put_container_file(record, config.tenant_quota_bytes, config.max_container_bytes, config.max_container_files)
        except BaseException as exc:  # refused or failed: the blob goes, whatever the reason
            await self.blobs.remove(record.blob)
            refusal = self._refusal(exc, record, param)
            if refusal is None:
                raise
            raise refusal from None
        if replaced is not None:
            await self.blobs.remove(replaced)
        return record

    def _refusal(self, exc: BaseException, record: ContainerFile, param: str | None) -> APIError | None:
        """The client's error for a container file the store refused; None for a failure of another kind."""
        config = self.config
        if isinstance(exc, QuotaExceeded):
            return self.quota_exceeded(param)
        if isinstance(exc, ContainerGone):
            return not_found(f"Container '{record.container_id}' was deleted.", param=param)
        if isinstance(exc, Conflict):  # the same path written twice at once
            return APIError(409, f"The file {record.path[:200]} is being written by another request.", param=param, code="conflict")
        if isinstance(exc, ContainerFull):
            return APIError(
                400,
                f"Container '{record.container_id}' is out of space: its files may hold {config.max_container_bytes} bytes "
                f"in {config.max_container_files} files at most. Delete files from it first.",
                param=param, code="container_full",
            )  # fmt: skip
        return None

    async def delete_container(self, container_id: str, tenant: str) -> bool:
        blobs = await self.store.delete_container(container_id, tenant)
        if blobs is None:
            return False
        await self.blobs.remove(*blobs)
        return True

    async def sweep(self) -> None:
        """Run for the app's lifetime: remove expired uploads, and expire containers idle past their time."""
        while True:
            await anyio.sleep(SWEEP_S)
            try:
                now = time.time()
                await self.blobs.remove(*await self.store.expire_files(now))
                expired, blobs = await self.store.expire_containers(now)
                await self.blobs.remove(*blobs)
                if expired:
                    log.info("%d container(s) expired", len(expired))
            except StorageError as exc:
                log.warning("removing expired files failed; trying again later: %s", exc)


def check_memory_limit(limit: str | None, sandbox_memory: str, param: str) -> None:
    """A container's `memory_limit`: every sandbox here has the configured one, so only it may be named."""
    if limit is not None and memory_bytes(limit) != memory_bytes(sandbox_memory):
        raise APIError(
            400, f"This gateway's sandboxes all have the memory limit {sandbox_memory}; memory_limit may only name it.",
            param=param, code="invalid_value",
        )  # fmt: skip
