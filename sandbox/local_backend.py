"""Kernels as subprocesses in fresh Linux namespaces, for machines without Docker.

Weaker isolation than a container: a new network namespace (no network at all), a new PID namespace
with its own /proc (the kernel sees and kills only its own processes), resource limits (address space,
processes, no core files) and, when the gateway runs as root, an unprivileged user. The file system is
the host's, read-only to that user except for the session's own directory.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import anyio
from anyio.abc import Process

from gateway.config import SandboxConfig

from .channel import KernelChannel
from .docker_backend import SandboxUnavailable

log = logging.getLogger("sandbox.local")

NOBODY = 65534
_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}


def memory_bytes(memory: str) -> int:
    unit = memory[-1].lower()
    return int(memory[:-1]) * _UNITS[unit] if unit in _UNITS else int(memory)


class LocalKernel:
    def __init__(self, process: Process, workdir: Path, channel: KernelChannel) -> None:
        self.process = process
        self.workdir = workdir
        self.channel = channel

    async def death_reason(self) -> str:
        with anyio.move_on_after(2):
            await self.process.wait()
        code = self.process.returncode
        if code is None:
            return "its channel closed"
        return f"it was killed by signal {-code}" if code < 0 else f"it exited with code {code}"

    async def destroy(self) -> None:
        with anyio.CancelScope(shield=True):
            await self.channel.aclose()
            # The whole process group: `unshare --kill-child` alone does not reach the kernel once setpriv
            # has changed its user (that resets the parent-death signal), and code that ignores its
            # timeout would spin on. The kernel is PID 1 of its namespace, so its forks go with it.
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await self.process.aclose()
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.workdir, ignore_errors=True))


class LocalBackend:
    data_dir = None  # the session's own working directory
    isolation = "local"

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._root: Path | None = None
        self._python = config.local_python or _find_python()

    async def start(self) -> None:
        log.warning(
            "sandbox.backend is 'local': Python runs in Linux namespaces with resource limits, "
            "which is weaker isolation than the docker backend"
        )
        missing = [tool for tool in ("prlimit", "unshare", "setpriv") if shutil.which(tool) is None]
        if missing:
            raise SandboxUnavailable(f"the local sandbox needs util-linux's {', '.join(missing)}")
        self._root = Path(tempfile.mkdtemp(prefix=f"hg-sandbox-{self.config.instance}-"))
        self._root.chmod(0o755)
        shutil.copy(Path(__file__).with_name("kernel.py"), self._root / "kernel.py")
        (self._root / "kernel.py").chmod(0o644)
        probe = await self.create()  # fails here, not at the first call, if namespaces are not allowed
        await probe.destroy()

    def _command(self) -> list[str]:
        config = self.config
        limits = [
            "prlimit",
            f"--as={memory_bytes(config.memory)}",
            f"--nproc={config.pids}",
            "--core=0",
            "--",
        ]
        if os.geteuid() == 0:
            isolate = ["unshare", "--net", "--pid", "--mount", "--mount-proc", "--fork", "--kill-child", "--"]
            isolate += ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        else:
            isolate = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--mount", "--mount-proc"]
            isolate += ["--fork", "--kill-child", "--"]
        assert self._root is not None
        return limits + isolate + [self._python, str(self._root / "kernel.py")]

    async def create(self) -> LocalKernel:
        assert self._root is not None, "start() first"
        workdir = Path(tempfile.mkdtemp(prefix="session-", dir=self._root))
        if os.geteuid() == 0:
            os.chown(workdir, NOBODY, NOBODY)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "MPLBACKEND": "Agg", "LANG": "C.UTF-8"}
        process = await anyio.open_process(
            self._command(), cwd=workdir, env=env, stderr=subprocess.DEVNULL, start_new_session=True
        )
        assert process.stdin is not None and process.stdout is not None
        kernel = LocalKernel(process, workdir, KernelChannel(process.stdin, process.stdout, multiplexed=False))
        try:
            with anyio.fail_after(30):
                await kernel.channel.request(op="ping")
        except BaseException as exc:
            await kernel.destroy()
            if isinstance(exc, Exception):
                raise SandboxUnavailable(f"the local sandbox's kernel did not start ({exc!r})") from None
            raise
        return kernel

    async def close(self) -> None:
        if self._root is not None:
            root = self._root
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))


def _find_python() -> str:
    """A system interpreter: the gateway's own may live where an unprivileged user cannot reach it."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("python3") or "python3"
