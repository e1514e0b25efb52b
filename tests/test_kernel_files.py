"""The kernel's file operations (sandbox/kernel.py `DataFiles`) on their own, on a real directory: what
the user's code may have left in /mnt/data (links, FIFOs, links to the kernel's own descriptors) is never
followed or read, and a write that fails leaves nothing behind."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

KERNEL = Path(__file__).resolve().parent.parent / "sandbox" / "kernel.py"


def data_files(root: Path) -> Any:
    spec = importlib.util.spec_from_file_location("sandbox_kernel_under_test", KERNEL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DataFiles(str(root))


def write(files: Any, path: str, data: bytes, first: bool = True, last: bool = True) -> dict[str, Any]:
    return files.handle({"op": "write", "path": path, "data": base64.b64encode(data).decode(), "first": first, "last": last})


def test_files_are_written_whole_read_back_and_listed(tmp_path: Path) -> None:
    files = data_files(tmp_path)
    assert write(files, "reports/q1.csv", b"a,b\n", last=False) == {"status": "ok"}
    assert not (tmp_path / "reports" / "q1.csv").exists()  # not there until complete
    assert write(files, "reports/q1.csv", b"1,2\n", first=False) == {"status": "ok"}
    assert (tmp_path / "reports" / "q1.csv").read_bytes() == b"a,b\n1,2\n"
    read = files.handle({"op": "read", "path": "reports/q1.csv", "offset": 4, "length": 10})
    assert base64.b64decode(read["data"]) == b"1,2\n" and read["size"] == 8
    listed = files.handle({"op": "files"})
    assert [entry[:2] for entry in listed["files"]] == [["reports/q1.csv", 8]]
    assert os.listdir(tmp_path / "reports") == ["q1.csv"]


def test_links_and_special_files_are_never_followed(tmp_path: Path) -> None:
    files = data_files(tmp_path)
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.write_text("host secret")
    os.symlink(secret, tmp_path / "link")
    os.symlink("/proc/self/fd/1", tmp_path / "channel")
    os.symlink(tmp_path.parent, tmp_path / "up")
    os.mkfifo(tmp_path / "pipe")
    assert files.handle({"op": "files"})["files"] == []
    for path in ("link", "channel", "up/" + secret.name):
        reply = files.handle({"op": "read", "path": path, "offset": 0, "length": 100})
        assert reply["status"] == "error" and reply["errno"] in ("ELOOP", "ENOTDIR"), (path, reply)
    assert files.handle({"op": "read", "path": "pipe", "offset": 0, "length": 100})["status"] == "error"  # and no hang
    assert write(files, "up/planted", b"x")["status"] == "error"
    assert write(files, "link", b"replaced")["status"] == "ok"  # the link itself is replaced, not its target
    assert secret.read_text() == "host secret" and not (tmp_path / "link").is_symlink()
    for path in ("../escape", "/etc/passwd", "a//b", "./x", ""):
        assert files.handle({"op": "read", "path": path, "offset": 0, "length": 1})["errno"] == "EINVAL"


def test_a_write_that_runs_out_of_space_leaves_nothing(tmp_path: Path) -> None:
    """RLIMIT_FSIZE stands in for a full disk: the write fails part-way (EFBIG), as ENOSPC would."""
    script = f"""
import base64, resource, signal, sys, importlib.util, json
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))
spec = importlib.util.spec_from_file_location("k", {str(KERNEL)!r})
k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k)
files = k.DataFiles({str(tmp_path)!r})
data = base64.b64encode(b"x" * 600).decode()
first = files.handle({{"op": "write", "path": "big.bin", "data": data, "first": True, "last": False}})
second = files.handle({{"op": "write", "path": "big.bin", "data": data, "first": False, "last": True}})
print(json.dumps([first, second]))
"""
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    first, second = json.loads(output)
    assert first == {"status": "ok"}
    assert second["status"] == "error" and second["errno"] == "EFBIG"
    assert os.listdir(tmp_path) == []


def test_a_folder_is_sealed_read_only_and_cleared_without_following_links(tmp_path: Path) -> None:
    files = data_files(tmp_path)
    assert write(files, "skill/SKILL.md", b"# skill")["status"] == "ok"
    assert write(files, "skill/scripts/run.sh", b"echo hi")["status"] == "ok"
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.write_text("keep me")
    outside.chmod(0o644)
    os.symlink(outside, tmp_path / "skill" / "link")
    assert files.handle({"op": "seal", "path": "skill"}) == {"status": "ok"}
    assert (tmp_path / "skill" / "SKILL.md").stat().st_mode & 0o777 == 0o444
    assert (tmp_path / "skill" / "scripts").stat().st_mode & 0o777 == 0o555
    assert outside.stat().st_mode & 0o777 == 0o644  # the link's target is not touched
    assert files.handle({"op": "clear", "path": "skill"}) == {"status": "ok"}
    assert not (tmp_path / "skill").exists() and outside.read_text() == "keep me"
    assert files.handle({"op": "clear", "path": "skill"}) == {"status": "ok"}  # nothing there: nothing to do
    os.symlink(tmp_path.parent, tmp_path / "up")
    assert files.handle({"op": "seal", "path": "up"})["status"] == "error"  # a link is not a folder to walk
