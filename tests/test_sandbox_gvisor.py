"""The sandbox suite (test_sandbox.py's tests on a gateway) again, on Docker under gVisor (`sandbox.runtime:
runsc`), where the daemon has it (README: gVisor; scripts/register-runsc); skipped with the reason where not.
A module of its own, run after the local backend's tests: gVisor's sandboxes outlive their tests' timing."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Iterator

import pytest

from . import test_sandbox as suite
from .conftest import Gateway, Process, docker_runtimes

# Every test of the suite that runs on its gateway, collected here too, on this module's gateway.
for _name, _test in inspect.getmembers(suite, inspect.isfunction):
    if _name.startswith("test_") and "sandboxed" in inspect.signature(_test).parameters:
        globals()[_name] = _test


@pytest.fixture(scope="module")
def sandboxed(emulator: Process, workdir: Path, sandbox_image: str) -> Iterator[Gateway]:
    if "runsc" not in docker_runtimes():
        pytest.skip("the Docker daemon has no runsc runtime (README: gVisor)")
    yield from suite.sandboxed_gateway("docker", "runsc", emulator, workdir)
