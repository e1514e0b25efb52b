"""A skill's bundle: the files of one skill, with a `SKILL.md` at their root whose front matter names the
skill and says what it is for (Agent Skills' format). Read from a zip or from files uploaded one by one,
checked as hostile input: every path relative and plain, no links, the count and the bytes bounded while
they are read (a zip's declared sizes may lie), the front matter small and parsed as plain YAML.

Stored as a zip the gateway writes itself (`zipped`), so what is kept is always in this module's shape.
"""

from __future__ import annotations

import io
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import PurePosixPath

import yaml

MAX_FILES = 256
MAX_BYTES = 8 * 1024 * 1024  # all of a bundle's files together, uncompressed
MAX_PATH_CHARS = 512
MAX_FRONT_MATTER_CHARS = 16 * 1024
NAME = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")  # Agent Skills: lowercase words joined by hyphens
MAX_DESCRIPTION_CHARS = 1024
MANIFEST = "SKILL.md"


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


def from_zip(data: bytes) -> Bundle:
    """A bundle from a zip archive, its files at the root or in one folder."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [info for info in archive.infolist() if not info.is_dir()]
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise BadBundle(f"the upload is not a zip archive ({exc})") from None
    if len(members) > MAX_FILES:
        raise BadBundle(f"the archive holds more than {MAX_FILES} files")
    files: list[tuple[str, bytes]] = []
    left = MAX_BYTES
    for info in members:
        if stat.S_ISLNK(info.external_attr >> 16):
            raise BadBundle(f"'{info.filename[:200]}' is a link; a skill holds plain files only")
        try:
            with archive.open(info) as member:
                content = member.read(left + 1)  # what it really holds, not what it declares
        except (zipfile.BadZipFile, NotImplementedError, RuntimeError, ValueError, OSError, EOFError) as exc:
            raise BadBundle(f"'{info.filename[:200]}' cannot be read from the archive ({exc})") from None
        left -= len(content)
        if left < 0:
            raise BadBundle(f"the skill's files come to more than {MAX_BYTES} bytes")
        files.append((info.filename, content))
    return from_files(files, strip_folder=True)


def from_files(files: list[tuple[str, bytes]], strip_folder: bool = True) -> Bundle:
    """A bundle from files named by their paths (a directory upload); one folder holding them all, as a
    zip of a skill's directory has, is taken away."""
    if len(files) > MAX_FILES:
        raise BadBundle(f"a skill holds at most {MAX_FILES} files")
    if sum(len(content) for _, content in files) > MAX_BYTES:
        raise BadBundle(f"the skill's files come to more than {MAX_BYTES} bytes")
    paths = [_checked_path(name) for name, _ in files]
    if strip_folder and paths and MANIFEST not in paths:
        tops = {path.split("/", 1)[0] for path in paths}
        if len(tops) == 1 and all("/" in path for path in paths):
            paths = [path.split("/", 1)[1] for path in paths]
    found: dict[str, bytes] = {}
    for path, (_, content) in zip(paths, files):
        if path in found:
            raise BadBundle(f"'{path}' is in the skill twice")
        found[path] = content
    if MANIFEST not in found:
        raise BadBundle(f"a skill has a {MANIFEST} at its root")
    name, description = _front_matter(found[MANIFEST])
    return Bundle(name, description, found)


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
