"""Skills as the API and the hosted shell use them: a bundle checked and kept (its zip a blob, its record in
the store), a version found by its number, `latest` or the default, and its bundle read back."""

from __future__ import annotations

import time

from runtime.cpu import run_cpu

from ..core.ids import new_id
from ..errors import APIError, bad_request, not_found
from ..files.blobs import Blobs
from ..storage.file_store import TooMany
from ..storage.skill_store import Skill, SkillStore, SkillVersion
from .bundle import MAX_BYTES, Archive, BadBundle, Bundle, from_files, from_zip

MAX_SKILLS_PER_TENANT = 200
MAX_VERSIONS = 100
MAX_UPLOAD_BYTES = MAX_BYTES + 1024 * 1024  # a bundle's files, and the form around them


class SkillService:
    def __init__(self, store: SkillStore, blobs: Blobs) -> None:
        self.store = store
        self.blobs = blobs

    async def create(self, tenant: str, bundle: Bundle) -> Skill:
        blob, size = await self._keep(bundle)
        now, skill_id = int(time.time()), new_id("skill")
        skill = Skill(skill_id, tenant, bundle.name, bundle.description, 1, 1, now)
        try:
            await self.store.create(skill, self._version(skill_id, tenant, 1, bundle, blob, size), MAX_SKILLS_PER_TENANT)
        except BaseException as exc:
            await self.blobs.remove(blob)
            if isinstance(exc, TooMany):
                raise _too_many(exc) from None
            raise
        return skill

    async def add_version(self, skill_id: str, tenant: str, bundle: Bundle, default: bool) -> SkillVersion:
        blob, size = await self._keep(bundle)
        try:
            added = await self.store.add_version(
                skill_id, tenant, lambda number: self._version(skill_id, tenant, number, bundle, blob, size), default, MAX_VERSIONS
            )
        except BaseException as exc:
            await self.blobs.remove(blob)
            if isinstance(exc, TooMany):
                raise _too_many(exc) from None
            raise
        if added is None:
            await self.blobs.remove(blob)
            raise skill_not_found(skill_id)
        return added

    async def skill(self, skill_id: str, tenant: str, param: str | None = None) -> Skill:
        found = await self.store.get(skill_id, tenant)
        if found is None:
            raise skill_not_found(skill_id, param)
        return found

    async def version(self, skill_id: str, tenant: str, version: str | None, param: str | None = None) -> SkillVersion:
        """A version by its number, `latest`, or (None) the skill's default."""
        skill = await self.skill(skill_id, tenant, param)
        if version is None:
            number = skill.default_version
        elif version == "latest":
            number = skill.latest_version
        elif version.isascii() and version.isdigit() and len(version) <= 9:
            number = int(version)
        else:
            raise bad_request(f"A skill version is a positive integer or 'latest', not '{version[:50]}'.", param=param and f"{param}.version")
        found = await self.store.version(skill_id, tenant, number)
        if found is None:
            raise not_found(f"Skill '{skill_id}' has no version {number}.", param=param and f"{param}.version")
        return found

    async def archive(self, version: SkillVersion) -> Archive:
        """A kept version's zip, read back compressed (its files were checked when it was made; they are
        unpacked as they are installed)."""
        async with await self.blobs.open(version.blob) as reader:
            data = await reader.read(reader.size)
        return await run_cpu(Archive, data)

    async def _keep(self, bundle: Bundle) -> tuple[str, int]:
        data = await run_cpu(bundle.zipped)
        writer = self.blobs.writer()
        try:
            await writer.write(data)
            return await writer.commit(), bundle.size
        except BaseException:
            await writer.abort()
            raise

    @staticmethod
    def _version(skill_id: str, tenant: str, number: int, bundle: Bundle, blob: str, size: int) -> SkillVersion:
        return SkillVersion(new_id("skillver"), skill_id, tenant, number, bundle.name, bundle.description, int(time.time()), size, blob)


async def read_bundle(files: list[tuple[str, str, bytes]]) -> Bundle:
    """The bundle a form's files make: one zip, or the files of a directory by their paths (a 400 if not)."""
    if not files:
        raise bad_request("Missing required parameter: 'files'.", param="files", code="missing_required_parameter")
    try:
        if len(files) == 1 and (files[0][1].lower().endswith(".zip") or files[0][2].startswith(b"PK\x03\x04")):
            return await run_cpu(from_zip, files[0][2])
        return await run_cpu(from_files, [(filename, content) for _, filename, content in files])
    except BadBundle as exc:
        raise bad_request(f"The files are not a skill: {exc}.", param="files", code="invalid_skill") from None


def skill_not_found(skill_id: str, param: str | None = None) -> APIError:
    return not_found(f"No skill with id '{skill_id[:100]}'.", param=param and f"{param}.skill_id")


def _too_many(exc: TooMany) -> APIError:
    return bad_request(f"This gateway keeps at most {exc.limit} {exc.what} per tenant.", code=f"too_many_{exc.what.split()[0]}")
