"""`gateway sandbox build`: the sandbox image, from any Python base image, without network in the build.

The wheels are downloaded on the host for the base image's Python version and machine, then installed
from the build context: containers may not reach the package index the way the host does.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import docker
import docker.errors

HERE = Path(__file__).parent
DEFAULT_BASE = "python:3.12-slim"
DEFAULT_TAG = "harmony-gateway/sandbox:latest"
_CONTEXT_FILES = ("Dockerfile", "requirements.txt", "kernel.py")


class BuildError(Exception):
    pass


def sandbox_sha() -> str:
    """Identifies what goes into the image, so a stale image can be told from a current one."""
    digest = hashlib.sha256()
    for name in _CONTEXT_FILES:
        digest.update((HERE / name).read_bytes())
    return digest.hexdigest()[:16]


ROOT = HERE.parent
EGRESS_TAG = "harmony-gateway/egress:latest"
# The egress proxy's image context: its files at their places in the repository (egress/Dockerfile).
_EGRESS_FILES = ("egress/Dockerfile", "egress/requirements.txt", "egress/__init__.py", "egress/__main__.py", "egress/addon.py",
                 "egress/control.py", "egress/grants.py", "runtime/__init__.py", "runtime/addresses.py", "runtime/domains.py")  # fmt: skip


def egress_sha() -> str:
    digest = hashlib.sha256()
    for name in _EGRESS_FILES:
        digest.update((ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def base_python(client: docker.DockerClient, base: str) -> tuple[str, str]:
    """(version like '3.11', machine like 'x86_64') of the base image's python3."""
    try:
        client.images.get(base)
    except docker.errors.ImageNotFound:
        print(f"pulling {base} ...", file=sys.stderr)
        try:
            client.images.pull(base)
        except docker.errors.APIError as exc:
            raise BuildError(
                f"base image {base!r} is not available and could not be pulled ({exc.explanation}). "
                "Without a registry, make one with scripts/make-base-image and pass --base harmony-gateway/base:bookworm."
            ) from exc
    probe = "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.machine())"
    output = client.containers.run(base, ["python3", "-c", probe], remove=True, network_mode="none")
    version, machine = output.decode().split()
    return version, machine


def download_wheels(target: Path, version: str, machine: str, requirements: list[str]) -> None:
    """Wheels of `requirements` (pip arguments) and pip itself, for another Python version and machine.
    A dependency published only as source (mitmproxy's pyperclip) is built into a wheel here first: pure
    Python, so the host's build serves any Python 3."""
    platforms = [f"manylinux{tag}_{machine}" for tag in ("2014", "_2_17", "_2_28")] + ["any"]
    command = [
        sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
        "--only-binary=:all:", "--python-version", version, "--implementation", "cp", "--dest", str(target),
        *[arg for platform in platforms for arg in ("--platform", platform)],
        *requirements, "pip",
    ]  # fmt: skip
    result = subprocess.run(command + ["--find-links", str(target)], capture_output=True, text=True)
    for _ in range(8):  # each round builds one more source-only dependency
        source_only = re.search(r"No matching distribution found for (\S+)", result.stderr)
        if result.returncode == 0 or source_only is None:
            break
        built = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(target), source_only.group(1)]
        if subprocess.run(built, capture_output=True).returncode != 0:
            break
        result = subprocess.run(command + ["--find-links", str(target)], capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"downloading the image's wheels failed:\n{result.stderr.strip()}")


def docker_client() -> docker.DockerClient:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        raise BuildError(f"the Docker daemon is not reachable: {exc}") from exc
    return client


def build(base: str = DEFAULT_BASE, tag: str = DEFAULT_TAG) -> str:
    """Build the image; return its id. Progress goes to stderr."""
    client = docker_client()
    version, machine = base_python(client, base)
    print(f"base {base}: Python {version} on {machine}; downloading wheels ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="sandbox-build-") as context:
        root = Path(context)
        for name in _CONTEXT_FILES:
            shutil.copy(HERE / name, root / name)  # not HERE itself: its wheels/ may hold another Python's
        (root / "wheels").mkdir(exist_ok=True)
        download_wheels(root / "wheels", version, machine, ["-r", str(HERE / "requirements.txt")])
        print(f"building {tag} ...", file=sys.stderr)
        return _build(client, context, "Dockerfile", tag, {"BASE_IMAGE": base, "SANDBOX_SHA": sandbox_sha()})


def build_egress(base: str = DEFAULT_BASE, tag: str = EGRESS_TAG) -> str:
    """Build the egress proxy's image; return its id."""
    client = docker_client()
    version, machine = base_python(client, base)
    print(f"base {base}: Python {version} on {machine}; downloading wheels ...", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="egress-build-") as context:
        root = Path(context)
        for name in _EGRESS_FILES:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, root / name)
        (root / "egress" / "wheels").mkdir()
        download_wheels(root / "egress" / "wheels", version, machine, ["-r", str(ROOT / "egress" / "requirements.txt")])
        print(f"building {tag} ...", file=sys.stderr)
        return _build(client, context, "egress/Dockerfile", tag, {"BASE_IMAGE": base, "EGRESS_SHA": egress_sha()})


def _build(client: docker.DockerClient, context: str, dockerfile: str, tag: str, buildargs: dict[str, str]) -> str:
    try:
        image, _ = client.images.build(path=context, dockerfile=dockerfile, tag=tag, buildargs=buildargs, rm=True, forcerm=True, network_mode="none")
    except docker.errors.BuildError as exc:
        log = "".join(entry.get("stream", "") for entry in exc.build_log)
        raise BuildError(f"the image build failed: {exc.msg}\n{log[-4000:]}") from exc
    image_id: str = image.id
    return image_id
