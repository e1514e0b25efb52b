"""A skill's bundle: the files of one skill, with a `SKILL.md` at their root whose front matter names the
skill and says what it is for (Agent Skills' format). Read from a zip or from files uploaded one by one,
checked as hostile input: every path relative and plain, no links, no path both a file and a folder, the
count and the bytes bounded while they are read (a zip's declared sizes may lie), the front matter small
and parsed as plain YAML.

A zip is checked from its directory first (`Archive`): its members' count, declared sizes, compression
methods (stored and deflate: what bundles need; bzip2 and LZMA are refused) and paths, before anything is
unpacked; only SKILL.md is read then. A skill installed in a container is unpacked from the archive one
chunk at a time as it is copied there (`Archive.open`, read by the shell tool), never whole in the gateway's memory, each
member bounded by what the directory declared.

Stored as a zip the gateway writes itself (`zipped`), so what is kept is always in this module's shape.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import IO

import yaml

MAX_FILES = 256
MAX_BYTES = 8 * 1024 * 1024  # all of a bundle's files together, uncompressed
MAX_PATH_CHARS = 512
MAX_FRONT_MATTER_CHARS = 16 * 1024
NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")  # Agent Skills: lowercase words joined by hyphens
MAX_DESCRIPTION_CHARS = 1024
MANIFEST = "SKILL.md"
METHODS = {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}  # what a bundle needs; bzip2 and LZMA cost far more to unpack


class BadBundle(ValueError):
    """Why the upload is not a skill (a 400)."""


@dataclass(frozen=True)
class Bundle:
    name: str
    description: str
    files: dict[str, bytes]  # relative path -> content; SKILL.md among them

    @property
    def size(self) -> int:
        return sum(len(data) for data in self.files.values())

    def zipped(self) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(self.files):
                archive.writestr(path, self.files[path])
        return out.getvalue()


_MANIFEST_HEAD_BYTES = MAX_FRONT_MATTER_CHARS * 4 + 1024  # the front matter at most, in UTF-8, and its fences
_READ_ERRORS = (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError, OSError, EOFError)


@dataclass(frozen=True)
class Member:
    path: str  # in the skill
    info: zipfile.ZipInfo


class Archive:
    """A skill's zip, held compressed and checked from its directory: members, sizes as declared, paths,
    compression methods, and its SKILL.md's front matter (the one member read now)."""

    def __init__(self, data: bytes) -> None:
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(data))
            infos = [info for info in self._zip.infolist() if not info.is_dir()]
        except (zipfile.BadZipFile, ValueError, OSError) as exc:
            raise BadBundle(f"the upload is not a zip archive ({exc})") from None
        if len(infos) > MAX_FILES:
            raise BadBundle(f"the archive holds more than {MAX_FILES} files")
        for info in infos:
            if stat.S_ISLNK(info.external_attr >> 16):
                raise BadBundle(f"'{info.filename[:200]}' is a link; a skill holds plain files only")
            if info.compress_type not in METHODS:
                raise BadBundle(f"'{info.filename[:200]}' is compressed with a method a skill may not use (only stored and deflate)")
        self.size = sum(info.file_size for info in infos)  # as declared: reading stops there
        if self.size > MAX_BYTES:
            raise BadBundle(f"the skill's files come to more than {MAX_BYTES} bytes")
        paths = _bundle_paths([info.filename for info in infos], strip_folder=True)
        self.members = [Member(path, info) for path, info in zip(paths, infos)]
        manifest = next((member for member in self.members if member.path == MANIFEST), None)
        if manifest is None:
            raise BadBundle(f"a skill has a {MANIFEST} at its root")
        head = self.read(manifest, _MANIFEST_HEAD_BYTES)
        if len(head) < manifest.info.file_size:  # cut where a line ends, never inside a character
            head = head[: head.rfind(b"\n") + 1]
        self.name, self.description = _front_matter(head)

    def read(self, member: Member, limit: int) -> bytes:
        """A member's first `limit` bytes at most (never more than its directory declared)."""
        with self.open(member) as file:
            return file.read(min(limit, member.info.file_size))

    def open(self, member: Member) -> IO[bytes]:
        try:
            return self._zip.open(member.info)
        except _READ_ERRORS as exc:
            raise BadBundle(f"'{member.info.filename[:200]}' cannot be read from the archive ({exc})") from None

    def unpacked(self) -> Bundle:
        """Every file, read whole (an upload, kept as a zip of the gateway's own)."""
        files: dict[str, bytes] = {}
        for member in self.members:
            try:
                files[member.path] = self.read(member, member.info.file_size)
            except _READ_ERRORS as exc:
                raise BadBundle(f"'{member.info.filename[:200]}' cannot be read from the archive ({exc})") from None
        return Bundle(self.name, self.description, files)


def from_zip(data: bytes) -> Bundle:
    """A bundle from a zip archive, its files at the root or in one folder."""
    return Archive(data).unpacked()


def from_files(files: list[tuple[str, bytes]], strip_folder: bool = True) -> Bundle:
    """A bundle from files named by their paths (a directory upload); one folder holding them all, as a
    zip of a skill's directory has, is taken away."""
    if len(files) > MAX_FILES:
        raise BadBundle(f"a skill holds at most {MAX_FILES} files")
    if sum(len(content) for _, content in files) > MAX_BYTES:
        raise BadBundle(f"the skill's files come to more than {MAX_BYTES} bytes")
    paths = _bundle_paths([name for name, _ in files], strip_folder)
    found = dict(zip(paths, (content for _, content in files)))
    if MANIFEST not in found:
        raise BadBundle(f"a skill has a {MANIFEST} at its root")
    name, description = _front_matter(found[MANIFEST])
    return Bundle(name, description, found)


def _bundle_paths(names: list[str], strip_folder: bool) -> list[str]:
    """The files' paths in the skill, checked: plain and relative, each once, none both a file and the
    folder of another (`x` and `x/y` cannot both be installed); one folder holding them all is taken away."""
    paths = [_checked_path(name) for name in names]
    if strip_folder and paths and MANIFEST not in paths:
        tops = {path.split("/", 1)[0] for path in paths}
        if len(tops) == 1 and all("/" in path for path in paths):
            paths = [path.split("/", 1)[1] for path in paths]
    seen: set[str] = set()
    for path in paths:
        if path in seen:
            raise BadBundle(f"'{path[:200]}' is in the skill twice")
        seen.add(path)
    folders = {str(parent) for path in paths for parent in PurePosixPath(path).parents if str(parent) != "."}
    clash = next((path for path in paths if path in folders), None)
    if clash is not None:
        raise BadBundle(f"'{clash[:200]}' is both a file and a folder of the skill")
    return paths


def _checked_path(name: str) -> str:
    if not name or len(name) > MAX_PATH_CHARS or "\\" in name or "\0" in name:
        raise BadBundle(f"'{name[:200]}' is not a file path a skill may hold")
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("..", ".", "") for part in name.split("/")):
        raise BadBundle(f"'{name[:200]}' is not a plain relative path")
    return str(path)


def _front_matter(manifest: bytes) -> tuple[str, str]:
    """The skill's name and description, from SKILL.md's YAML front matter (`---` lines around it)."""
    try:
        text = manifest.decode("utf-8")
    except UnicodeDecodeError:
        raise BadBundle(f"{MANIFEST} is not UTF-8") from None
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or lines[0].strip() != "---":
        raise BadBundle(f"{MANIFEST} starts with front matter between '---' lines, naming the skill and describing it")
    end = next((index for index, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    header = "\n".join(lines[1:end]) if end is not None else ""
    if end is None or len(header) > MAX_FRONT_MATTER_CHARS:
        raise BadBundle(f"{MANIFEST}'s front matter has no closing '---' within {MAX_FRONT_MATTER_CHARS} characters")
    try:
        fields = yaml.safe_load(header)
    except yaml.YAMLError as exc:
        raise BadBundle(f"{MANIFEST}'s front matter is not valid YAML ({str(exc)[:200]})") from None
    if not isinstance(fields, dict):
        raise BadBundle(f"{MANIFEST}'s front matter is not a mapping")
    name, description = fields.get("name"), fields.get("description")
    if not isinstance(name, str) or not NAME.match(name):
        raise BadBundle(f"{MANIFEST}'s 'name' is lowercase letters, digits and hyphens, at most 64")
    if not isinstance(description, str) or not description.strip() or len(description) > MAX_DESCRIPTION_CHARS:
        raise BadBundle(f"{MANIFEST}'s 'description' says what the skill does, in at most {MAX_DESCRIPTION_CHARS} characters")
    return name, " ".join(description.split())
