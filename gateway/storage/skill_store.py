"""Skills and their versions: whose they are, what each version is called, and where its bundle is (a
blob). Another tenant's skill is as absent as one that never existed. Versions are numbered from 1 and
never reused; the skill's name and description are its default version's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import Database, Tx
from .file_store import TooMany
from .paging import PageQuery, fetch_page


@dataclass
class Skill:
    id: str
    tenant: str
    name: str
    description: str
    default_version: int
    latest_version: int
    created_at: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "skill", "name": self.name, "description": self.description, "created_at": self.created_at,
            "default_version": str(self.default_version), "latest_version": str(self.latest_version),
        }  # fmt: skip


@dataclass
class SkillVersion:
    id: str
    skill_id: str
    tenant: str
    version: int
    name: str
    description: str
    created_at: int
    bytes: int
    blob: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "object": "skill.version", "skill_id": self.skill_id, "version": str(self.version),
            "name": self.name, "description": self.description, "created_at": self.created_at,
        }  # fmt: skip


_SKILL_COLUMNS = "id, tenant, name, description, default_version, latest_version, created_at"
_VERSION_COLUMNS = "id, skill_id, tenant, version, name, description, created_at, bytes, blob"


class LastVersion(Exception):
    """The version is the skill's default: it cannot be deleted while it is."""


class SkillStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, skill: Skill, first: SkillVersion, max_skills: int) -> None:
        async def work(tx: Tx) -> None:
            await tx.lock(f"skills:{skill.tenant}")
            rows = await tx.fetch("SELECT COUNT(*) FROM skills WHERE tenant = ?", skill.tenant)
            if int(rows[0][0]) >= max_skills:
                raise TooMany("skills", max_skills)
            await tx.execute(f"INSERT INTO skills ({_SKILL_COLUMNS}) VALUES (?,?,?,?,?,?,?)", *_values(skill))
            await tx.execute(f"INSERT INTO skill_versions ({_VERSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", *_values(first))

        await self._db.transaction(work)

    async def add_version(
        self, skill_id: str, tenant: str, make: Callable[[int], SkillVersion], default: bool, max_versions: int
    ) -> SkillVersion | None:
        """A new version, numbered after the latest (`make(number)` builds it); None if the skill is gone."""

        async def work(tx: Tx) -> SkillVersion | None:
            await tx.lock(f"skills:{tenant}")
            rows = await tx.fetch("SELECT latest_version FROM skills WHERE id = ? AND tenant = ?", skill_id, tenant)
            if not rows:
                return None
            counted = await tx.fetch("SELECT COUNT(*) FROM skill_versions WHERE skill_id = ?", skill_id)
            if int(counted[0][0]) >= max_versions:
                raise TooMany("versions of a skill", max_versions)
            version = make(int(rows[0][0]) + 1)
            await tx.execute(f"INSERT INTO skill_versions ({_VERSION_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)", *_values(version))
            await tx.execute("UPDATE skills SET latest_version = ? WHERE id = ?", version.version, skill_id)
            if default:
                await _make_default(tx, skill_id, version)
            return version

        return await self._db.transaction(work)

    async def get(self, skill_id: str, tenant: str) -> Skill | None:
        rows = await self._db.fetch(f"SELECT {_SKILL_COLUMNS} FROM skills WHERE id = ? AND tenant = ?", skill_id, tenant)
        return Skill(*rows[0]) if rows else None

    async def version(self, skill_id: str, tenant: str, number: int) -> SkillVersion | None:
        rows = await self._db.fetch(
            f"SELECT {_VERSION_COLUMNS} FROM skill_versions WHERE skill_id = ? AND tenant = ? AND version = ?", skill_id, tenant, number
        )
        return SkillVersion(*rows[0]) if rows else None

    async def set_default(self, skill_id: str, tenant: str, number: int) -> Skill | None:
        """The skill with `number` as its default; None if the skill or the version is not there."""

        async def work(tx: Tx) -> Skill | None:
            rows = await tx.fetch(
                f"SELECT {_VERSION_COLUMNS} FROM skill_versions WHERE skill_id = ? AND tenant = ? AND version = ?", skill_id, tenant, number
            )
            if not rows:
                return None
            await _make_default(tx, skill_id, SkillVersion(*rows[0]))
            found = await tx.fetch(f"SELECT {_SKILL_COLUMNS} FROM skills WHERE id = ?", skill_id)
            return Skill(*found[0])

        return await self._db.transaction(work)

    async def list_skills(self, tenant: str, page: PageQuery) -> tuple[list[Skill], bool] | None:
        rows = await fetch_page(self._db, "skills", _SKILL_COLUMNS, "tenant = ?", [tenant], page)
        return None if rows is None else ([Skill(*row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def list_versions(self, skill_id: str, tenant: str, page: PageQuery) -> tuple[list[SkillVersion], bool] | None:
        rows = await fetch_page(self._db, "skill_versions", _VERSION_COLUMNS, "skill_id = ? AND tenant = ?", [skill_id, tenant], page, "version")
        return None if rows is None else ([SkillVersion(*row) for row in rows[: page.limit]], len(rows) > page.limit)

    async def delete(self, skill_id: str, tenant: str) -> list[str] | None:
        """Remove the skill and its versions: their blobs; None if it is not there."""

        async def work(tx: Tx) -> list[str] | None:
            if not await tx.fetch("SELECT id FROM skills WHERE id = ? AND tenant = ?", skill_id, tenant):
                return None
            blobs = await tx.fetch("SELECT blob FROM skill_versions WHERE skill_id = ?", skill_id)
            await tx.execute("DELETE FROM skill_versions WHERE skill_id = ?", skill_id)
            await tx.execute("DELETE FROM skills WHERE id = ?", skill_id)
            return [row[0] for row in blobs]

        return await self._db.transaction(work)

    async def delete_version(self, skill_id: str, tenant: str, number: int) -> SkillVersion | None:
        """Remove one version (not the default: LastVersion); None if it is not there."""

        async def work(tx: Tx) -> SkillVersion | None:
            rows = await tx.fetch(
                f"SELECT {_VERSION_COLUMNS} FROM skill_versions WHERE skill_id = ? AND tenant = ? AND version = ?", skill_id, tenant, number
            )
            if not rows:
                return None
            default = await tx.fetch("SELECT default_version FROM skills WHERE id = ?", skill_id)
            if int(default[0][0]) == number:
                raise LastVersion()
            await tx.execute("DELETE FROM skill_versions WHERE skill_id = ? AND version = ?", skill_id, number)
            return SkillVersion(*rows[0])

        return await self._db.transaction(work)


async def _make_default(tx: Tx, skill_id: str, version: SkillVersion) -> None:
    await tx.execute(
        "UPDATE skills SET default_version = ?, name = ?, description = ? WHERE id = ?", version.version, version.name, version.description, skill_id
    )


def _values(record: Any) -> tuple[Any, ...]:
    return tuple(record.__dict__.values())
