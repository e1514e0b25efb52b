"""Skills in the hosted shell's container (`environment.skills`): each one found (a skill of the Skills API
at a version, or a zipped bundle sent inline) when the request is prepared, installed read-only under
/mnt/skills/NAME before the commands run (once per session and version), and listed to the model by name,
description and path, so it reads the whole SKILL.md with the shell when it needs it."""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass

from runtime.cpu import run_cpu
from sandbox.channel import KernelChannel
from sandbox.manager import SessionFiles
from sandbox.transfer import FilesState, TransferFailed, install_tree

from ...errors import bad_request
from ...skills.bundle import BadBundle, Bundle, from_zip
from ...skills.service import SkillService
from ..shell_models import InlineSkill, SkillReference

SKILLS_DIR = "/mnt/skills"


@dataclass(frozen=True)
class ContainerSkill:
    bundle: Bundle
    version: str  # what is installed: the version's id, or a digest of an inline bundle

    @property
    def path(self) -> str:
        return f"{SKILLS_DIR}/{self.bundle.name}"


async def find_skills(skills: SkillService, tenant: str, requested: list[SkillReference | InlineSkill], param: str) -> list[ContainerSkill]:
    """The request's skills, read and checked; a 4xx naming the one that is not a skill here."""
    found: list[ContainerSkill] = []
    for index, skill in enumerate(requested):
        where = f"{param}[{index}]"
        if isinstance(skill, SkillReference):
            version = await skills.version(skill.skill_id, tenant, skill.version, param=where)
            found.append(ContainerSkill(await skills.bundle(version), version.id))
        else:
            found.append(ContainerSkill(await _inline(skill, f"{where}.source.data"), "inline-" + hashlib.sha256(skill.source.data.encode()).hexdigest()))
        names = [each.bundle.name for each in found]
        if names.count(names[-1]) > 1:
            raise bad_request(f"Two skills of the request are named '{names[-1]}'.", param=where)
    return found


async def _inline(skill: InlineSkill, param: str) -> Bundle:
    try:
        return await run_cpu(_unpacked, skill.source.data)
    except binascii.Error:
        raise bad_request("The inline skill's data is not base64.", param=param) from None
    except BadBundle as exc:
        raise bad_request(f"The inline skill is not a skill: {exc}.", param=param, code="invalid_skill") from None


def _unpacked(data: str) -> Bundle:
    return from_zip(base64.b64decode(data, validate=True))


def skill_line(name: str, description: str, path: str) -> str:
    """How the model is told of one skill, in the container or on the client's machine."""
    return f"- {name}: {description} (read {path}/SKILL.md before using it)"


def describe_skills(skills: list[ContainerSkill]) -> str:
    """What the model is told of the skills: each one's name, what it is for, and where its SKILL.md is."""
    if not skills:
        return ""
    listed = "\n".join(skill_line(skill.bundle.name, skill.bundle.description, skill.path) for skill in skills)
    return f"\n\nSkills are installed in the container, read-only; read a skill's SKILL.md when a task calls for it:\n{listed}"


class WithSkills:
    """A session's files (sandbox/manager.py `SessionFiles`) with the skills installed first."""

    def __init__(self, skills: list[ContainerSkill], files: SessionFiles) -> None:
        self.skills = skills
        self.files = files
        self.notes: list[str] = []  # for the model: skills that could not be installed

    async def before(self, channel: KernelChannel, state: FilesState) -> None:
        for skill in self.skills:
            if state.skills.get(skill.bundle.name) == skill.version:
                continue
            state.skills.pop(skill.bundle.name, None)
            try:
                await install_tree(channel, skill.bundle.name, skill.bundle.files)
            except TransferFailed as exc:
                self.notes.append(f"[The skill {skill.bundle.name} could not be installed: {exc}.]")
                continue
            state.skills[skill.bundle.name] = skill.version
        await self.files.before(channel, state)

    async def after(self, channel: KernelChannel, state: FilesState) -> None:
        await self.files.after(channel, state)
