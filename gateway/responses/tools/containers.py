"""The containers a response's hosted tools run in (the code interpreter, the hosted shell), resolved once
per response: an `auto` container asked for by two tools is the same one, the conversation's, so a file
python writes is there for the shell and the other way round."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from sandbox.network import NetworkAccess

from ...files.network import NetworkAllowlist, access_of
from ...files.requested import AutoContainer
from ...files.service import FileService
from ...files.sync import ContainerSync, open_container
from ..events.citations import container_file_citations


@dataclass
class ContainerUse:
    """A container as one response uses it: its sync once it exists (an auto container is made when code
    first runs in it), its id, and whether the conversation's earlier container had expired."""

    files: FileService
    tenant: str
    sync: ContainerSync | None
    container_id: str
    replaced: bool
    network: NetworkAllowlist | None = None  # an auto container's network policy, for when it is made

    async def made(self) -> ContainerSync:
        """The container's sync, made now if it did not exist yet."""
        if self.sync is None:
            container = await self.files.new_container(self.tenant, "auto", container_id=self.container_id, network=self.network)
            self.sync = ContainerSync(self.files, container, [])
        return self.sync

    def network_access(self) -> NetworkAccess | None:
        """What the container's sandbox reaches, for the tools' descriptions (no secret is opened for it)."""
        if self.sync is not None:
            return access_of(self.sync.container.network_policy)
        if self.network is None:
            return None
        return NetworkAccess(tuple(self.network.allowed_domains), tuple(secret.name for secret in self.network.domain_secrets or []))

    def known_paths(self) -> list[str]:
        return list(self.sync.by_path) if self.sync is not None else []


@dataclass
class ContainerState:
    """The dialog's container: the one the conversation's code and commands ran in, which python and the
    hosted shell go on in (a part of the dialog's state, dialog.py `ToolState`)."""

    container_id: str | None = None

    @classmethod
    def from_json(cls, stored: Mapping[str, Any]) -> ContainerState:
        return cls(stored.get("container_id"))

    def to_json(self) -> dict[str, Any]:
        return {"container_id": self.container_id}

    def copy(self) -> ContainerState:
        return replace(self)


class ResponseContainers:
    def __init__(self, files: FileService, tenant: str) -> None:
        self.files = files
        self.tenant = tenant
        self._named: dict[str, ContainerUse] = {}
        self._auto: ContainerUse | None = None
        # A run adopted from another replica (responses/loop/adoption.py): the auto container it had chosen.
        self.adopted_auto: str | None = None

    @property
    def auto_id(self) -> str | None:
        return self._auto.container_id if self._auto is not None else None

    async def open(self, named: str | AutoContainer, param: str, previous: str | None, provision: bool) -> ContainerUse:
        """The container a tool names, or (auto) the conversation's (`previous`) or a new one, with the
        auto container's `file_ids` copied in (open_container); the same use for every tool that asks."""
        if isinstance(named, str):
            if named not in self._named:
                self._named[named] = await self._open(named, param, previous, provision)
            return self._named[named]
        if self._auto is None:
            self._auto = await self._open(named, param, previous, provision)
        elif named.file_ids and provision:  # a second tool's uploads go into the same container
            existing = await self._auto.made()
            self._auto.sync = (await open_container(self.files, named, param, self.tenant, existing.container.id, provision))[0]
        return self._auto

    @property
    def used(self) -> bool:
        """Whether any tool of the response runs in a container."""
        return self._auto is not None or bool(self._named)

    def annotations(self, text: str) -> list[dict[str, Any]]:
        """The `container_file_citation`s of a finished message: its links to files a container has."""
        return container_file_citations(text, self.container_file) if self.used else []

    def container_file(self, path: str) -> dict[str, Any] | None:
        """A `container_file_citation` (without its indices) for a file the answer links to
        (`sandbox:/mnt/data/PATH`), from the first container that has it; None if none does."""
        uses = [self._auto, *self._named.values()] if self._auto is not None else list(self._named.values())
        for use in uses:
            found = use.sync.by_path.get(path) if use.sync is not None else None
            if found is not None:
                return {"type": "container_file_citation", "container_id": found.container_id, "file_id": found.id, "filename": found.filename}
        return None

    async def _open(self, named: str | AutoContainer, param: str, previous: str | None, provision: bool) -> ContainerUse:
        adopted = self.adopted_auto if previous is None and isinstance(named, AutoContainer) else None
        sync, container_id, replaced = await open_container(self.files, named, param, self.tenant, previous or adopted, provision)
        network = named.network if isinstance(named, AutoContainer) else None
        if adopted is not None and replaced:  # the run had not made it yet: made under the same id when code first runs
            return ContainerUse(self.files, self.tenant, None, adopted, False, network)
        return ContainerUse(self.files, self.tenant, sync, container_id, replaced, network)
