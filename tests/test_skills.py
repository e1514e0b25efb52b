"""Skills (`/v1/skills`) through the openai SDK: a bundle uploaded as a zip or as a directory's files, its
versions, its content; bundles that are not skills refused with nothing kept; tenants apart."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Iterator

import openai
import pytest

from .conftest import Gateway, Process, gateway_config

MANIFEST = b"---\nname: pdf-forms\ndescription: Fill in PDF forms\n  from a template.\n---\n# Filling forms\nRun scripts/fill.py.\n"
SCRIPT = b"print('filled')\n"


def zipped(entries: dict[str, bytes], link: str | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
        if link is not None:
            info = zipfile.ZipInfo(link)
            info.external_attr = 0o120777 << 16  # a symbolic link, as zip keeps one
            archive.writestr(info, "/etc/passwd")
    return out.getvalue()


@pytest.fixture(scope="module")
def skilled(emulator: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("skills")
    keys = [{"key": "alice-key", "tenant": "alice"}, {"key": "bob-key", "tenant": "bob"}]
    process = Gateway(gateway_config(emulator.url, workdir, auth={"api_keys": keys}), workdir).start()
    process.workdir = workdir  # type: ignore[attr-defined]
    yield process
    process.stop()


def test_a_skill_its_versions_and_its_content(skilled: Gateway) -> None:
    alice, bob = skilled.client(api_key="alice-key"), skilled.client(api_key="bob-key")
    skill = alice.skills.create(files=("pdf-forms.zip", zipped({"pdf-forms/SKILL.md": MANIFEST, "pdf-forms/scripts/fill.py": SCRIPT})))
    assert (skill.object, skill.name, skill.description) == ("skill", "pdf-forms", "Fill in PDF forms from a template.")
    assert skill.default_version == skill.latest_version == "1" and skill.id.startswith("skill_")
    # A second version, uploaded as a directory's files, made the default.
    changed = MANIFEST.replace(b"Fill in PDF forms", b"Fill in and sign PDF forms")
    second = alice.skills.versions.create(skill.id, files=[("pdf-forms/SKILL.md", changed), ("pdf-forms/scripts/fill.py", SCRIPT)], default=True)
    assert (second.object, second.version, second.skill_id) == ("skill.version", "2", skill.id)
    found = alice.skills.retrieve(skill.id)
    assert (found.default_version, found.latest_version, found.description) == ("2", "2", "Fill in and sign PDF forms from a template.")
    assert [version.version for version in alice.skills.versions.list(skill.id, order="asc")] == ["1", "2"]
    assert alice.skills.versions.retrieve("1", skill_id=skill.id).description == "Fill in PDF forms from a template."
    # The content is the bundle, as a zip of its files.
    content = zipfile.ZipFile(io.BytesIO(alice.skills.content.retrieve(skill.id).read()))
    assert sorted(content.namelist()) == ["SKILL.md", "scripts/fill.py"] and content.read("SKILL.md") == changed
    old = zipfile.ZipFile(io.BytesIO(alice.skills.versions.content.retrieve("1", skill_id=skill.id).read()))
    assert old.read("SKILL.md") == MANIFEST
    # The default back to 1; the default cannot be deleted, another version can.
    assert alice.skills.update(skill.id, default_version="1").default_version == "1"
    with pytest.raises(openai.BadRequestError):
        alice.skills.versions.delete("1", skill_id=skill.id)
    assert alice.skills.versions.delete("2", skill_id=skill.id).deleted
    with pytest.raises(openai.NotFoundError):
        alice.skills.versions.retrieve("2", skill_id=skill.id)
    # Another tenant's skill is as absent as one that never was.
    assert [each.id for each in alice.skills.list()] == [skill.id] and list(bob.skills.list()) == []
    for call in (lambda: bob.skills.retrieve(skill.id), lambda: bob.skills.delete(skill.id), lambda: bob.skills.content.retrieve(skill.id)):
        with pytest.raises(openai.NotFoundError):
            call()
    assert alice.skills.delete(skill.id).deleted
    with pytest.raises(openai.NotFoundError):
        alice.skills.retrieve(skill.id)


BOMB = zipped({"SKILL.md": MANIFEST, "zeros.bin": b"\0" * (64 * 1024 * 1024)})


@pytest.mark.parametrize(
    ("upload", "says"),
    [
        (("notes.zip", zipped({"README.md": b"# no manifest"})), "SKILL.md"),
        (("evil.zip", zipped({"SKILL.md": MANIFEST, "../../etc/cron.d/x": b"boom"})), "not a plain relative path"),
        (("link.zip", zipped({"SKILL.md": MANIFEST}, link="scripts/passwd")), "link"),
        (("bomb.zip", BOMB), "more than"),
        (("plain.zip", zipped({"SKILL.md": b"# a title, no front matter"})), "front matter"),
        (("name.zip", zipped({"SKILL.md": b"---\nname: PDF Forms!\ndescription: x\n---\n"})), "name"),
        (("yaml.zip", zipped({"SKILL.md": b"---\nname: [unclosed\ndescription: x\n---\n"})), "YAML"),
        (("broken.zip", b"PK\x03\x04 not really"), "not a zip"),
    ],
)
def test_bundles_that_are_not_skills_are_refused_and_nothing_is_kept(skilled: Gateway, upload: tuple[str, bytes], says: str) -> None:
    client = skilled.client(api_key="alice-key")
    directory: Path = skilled.workdir / "files"  # type: ignore[attr-defined]
    before = sorted(os.listdir(directory)) if directory.exists() else []
    with pytest.raises(openai.BadRequestError) as raised:
        client.skills.create(files=upload)
    assert raised.value.param == "files" and says in raised.value.message, raised.value.message
    assert list(client.skills.list()) == []
    assert (sorted(os.listdir(directory)) if directory.exists() else []) == before
    assert len(BOMB) < 200_000  # the bomb is small on the wire


def test_an_upload_too_large_is_refused_while_it_streams(skilled: Gateway) -> None:
    client = skilled.client(api_key="alice-key")
    with pytest.raises(openai.APIStatusError) as raised:
        client.skills.create(files=("big.zip", os.urandom(10 * 1024 * 1024)))
    assert raised.value.status_code == 413
    with pytest.raises(openai.BadRequestError) as paths:
        client.skills.create(files=[("SKILL.md", MANIFEST), ("/etc/passwd", b"x")])
    assert "not a plain relative path" in paths.value.message
