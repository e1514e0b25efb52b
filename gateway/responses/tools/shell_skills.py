"""Skills in the hosted shell's container (`environment.skills`): each one found (a skill of the Skills API
at a version, or a zipped bundle sent inline) and checked when the request is prepared, installed
read-only under /mnt/skills/NAME before the commands run (once per session and version), and listed to
the model by name, description and path, so it reads the whole SKILL.md with the shell when it needs it.

A skill is never whole in the gateway's memory: an inline bundle is checked from its zip's directory
(gateway/skills/bundle.py), a stored one by its record, and each is unpacked a chunk at a time as it is
copied into the container, one skill after another. What one request may install is bounded
(`MAX_REQUEST_BYTES`), by the sizes the directories declare, which reading never goes past."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from functools import partial
from typing import IO, Awaitable, Callable

from runtime.cpu import run_cpu
from sandbox.backend import SessionFiles
from sandbox.channel import KernelChannel
from sandbox.transfer import FilesState, TransferFailed, install_tree

from ...errors import bad_request
from ...skills.bundle import Archive, BadBundle, Member
from ...skills.service import SkillService
from ..shapes.shell_models import InlineSkill, SkillReference

SKILLS_DIR = "/mnt/skills"
MAX_REQUEST_BYTES = 32 * 1024 * 1024  # the skills of one request together, unpacked


@dataclass(frozen=True)
class ContainerSkill:
    name: str
    description: str
    version: str  # what is installed: the version's id, or a digest of an inline bundle
    size: int  # its files' bytes, unpacked, as its archive declares them
    archive: Callable[[], Awaitable[Archive]]  # opened when it is installed

    @property
    def path(self) -> str:
        return f"{SKILLS_DIR}/{self.name}"


async def find_skills(skills: SkillService, tenant: str, requested: list[SkillReference | InlineSkill], param: str) -> list[ContainerSkill]:
    """The request's skills, checked; a 4xx naming the one that is not a skill here, or that takes the
    request past what it may install."""
    found: list[ContainerSkill] = []
    for index, skill in enumerate(requested):
        where = f"{param}[{index}]"
        if isinstance(skill, SkillReference):
            version = await skills.version(skill.skill_id, tenant, skill.version, param=where)
            found.append(ContainerSkill(version.name, version.description, version.id, version.bytes, partial(skills.archive, version)))
        else:
            archive = await _inline(skill, f"{where}.source.data")
            digest = "inline-" + hashlib.sha256(skill.source.data.encode()).hexdigest()
            found.append(ContainerSkill(archive.name, archive.description, digest, archive.size, partial(_ready, archive)))
        names = [each.name for each in found]
        if names.count(names[-1]) > 1:
            raise bad_request(f"Two skills of the request are named '{names[-1]}'.", param=where)
        if sum(each.size for each in found) > MAX_REQUEST_BYTES:
            raise bad_request(f"The request's skills come to more than {MAX_REQUEST_BYTES} bytes unpacked.", param=where, code="skills_too_large")
    return found


async def _ready(archive: Archive) -> Archive:
    return archive


async def _inline(skill: InlineSkill, param: str) -> Archive:
    try:
        return await run_cpu(_checked, skill.source.data)
    except binascii.Error:
        raise bad_request("The inline skill's data is not base64.", param=param) from None
    except BadBundle as exc:
        raise bad_request(f"The inline skill is not a skill: {exc}.", param=param, code="invalid_skill") from None


def _checked(data: str) -> Archive:
    return Archive(base64.b64decode(data, validate=True))


def skill_line(name: str, description: str, path: str) -> str:
    """How the model is told of one skill, in the container or on the client's machine."""
    return f"- {name}: {description} (read {path}/SKILL.md before using it)"


def describe_skills(skills: list[ContainerSkill]) -> str:
    """What the model is told of the skills: each one's name, what it is for, and where its SKILL.md is."""
    if not skills:
        return ""
    listed = "\n".join(skill_line(skill.name, skill.description, skill.path) for skill in skills)
    return f"\n\nSkills are installed in the container, read-only; read a skill's SKILL.md when a task calls for it:\n{listed}"


class MemberSource:
    """One file of a skill's archive, unpacked a chunk at a time in the CPU lane as it is copied (a
    `sandbox.transfer.Source`); never more than the archive's directory declared."""

    def __init__(self, archive: Archive, member: Member) -> None:
        self.archive, self.member = archive, member
        self.size = member.info.file_size
        self._file: IO[bytes] | None = None

    async def read(self, limit: int) -> bytes:
        try:
            if self._file is None:
                self._file = self.archive.open(self.member)
            return await run_cpu(self._file.read, limit)
        except (BadBundle, OSError, ValueError, EOFError, RuntimeError) as exc:
            raise TransferFailed(f"the skill's archive is damaged ({str(exc)[:200]})", "EIO") from None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class WithSkills:
    """A session's files (sandbox/manager.py `SessionFiles`) with the skills installed first."""

    def __init__(self, skills: list[ContainerSkill], files: SessionFiles) -> None:
        self.skills = skills
        self.files = files
        self.notes: list[str] = []  # for the model: skills that could not be installed

    async def before(self, channel: KernelChannel, state: FilesState) -> None:
        for skill in self.skills:
            if state.skills.get(skill.name) == skill.version:
                continue
            state.skills.pop(skill.name, None)
            try:
                await _install(channel, skill)
            except (TransferFailed, BadBundle) as exc:
                self.notes.append(f"[The skill {skill.name} could not be installed: {exc}.]")
                continue
            state.skills[skill.name] = skill.version
        await self.files.before(channel, state)

    async def after(self, channel: KernelChannel, state: FilesState) -> None:
        await self.files.after(channel, state)


async def _install(channel: KernelChannel, skill: ContainerSkill) -> None:
    """One skill, opened (a stored one's zip read now, compressed) and unpacked into its folder file by file."""
    archive = await skill.archive()
    sources = [MemberSource(archive, member) for member in archive.members]
    try:
        await install_tree(channel, skill.name, ((member.path, source) for member, source in zip(archive.members, sources)))
    finally:
        for source in sources:
            source.close()
