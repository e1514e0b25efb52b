"""Kernels in bubblewrap sandboxes, for machines without Docker.

Each session is a `bwrap` sandbox of its own: new user, PID, network, IPC, UTS and cgroup namespaces (no
network at all), the system's /usr read-only and nothing else of the host's files, a private tmpfs /tmp
of a fixed size, and the session's own directory as /mnt/data, the only writable place it can see. The
code runs as uid 1000 inside. When the gateway runs as root, each session also gets a host uid of its
own (from `local_uid_base`), so one session's processes count against its own process limit only and
can signal no other session's; without root, every session runs as the gateway's user and shares its
process limit. Address space, process and core-file limits are set with prlimit.

Weaker than the docker backend in one way that matters: the sandbox shares the host's kernel and sees
its /usr, so an operator trusts the host's kernel with user namespaces and the binaries under /usr.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Coroutine

import anyio
import anyio.to_thread
from anyio.abc import Process

from .channel import KernelChannel
from .config import SandboxConfig
from .docker_backend import SandboxUnavailable
from .network import NetworkGrant

log = logging.getLogger("sandbox.local")

DATA_DIR = "/mnt/data"
SANDBOX_UID = 1000  # the code's uid inside the sandbox, as in the docker image
TMP_BYTES = 128 * 1024 * 1024
SKILLS_BYTES = 64 * 1024 * 1024
_UNITS = {"k": 1024, "m": 1024**2, "g": 1024**3}
# Read-only views of /etc that programs expect; nothing else of /etc is visible.
_ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "alternatives", "mime.types")


def memory_bytes(memory: str) -> int:
    unit = memory[-1].lower()
    return int(memory[:-1]) * _UNITS[unit] if unit in _UNITS else int(memory)


class LocalKernel:
    def __init__(self, backend: "LocalBackend", process: Process, workdir: Path, uid: int | None, channel: KernelChannel) -> None:
        self.backend = backend
        self.process = process
        self.workdir = workdir
        self.uid = uid
        self.channel = channel
        self.container_id = f"pid-{process.pid}"  # no container: named for the logs only

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
            try:
                os.killpg(self.process.pid, signal.SIGKILL)  # bwrap; --die-with-parent takes the sandbox along
            except ProcessLookupError:
                pass
            if self.uid is not None:  # and anything else of the session's own uid, wherever it went
                await anyio.to_thread.run_sync(_kill_all_of, self.uid)
            await self.process.aclose()
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(self.workdir, ignore_errors=True))
            self.backend.release_uid(self.uid)

    async def renew(self, grant: NetworkGrant | None) -> None:
        """Local kernels have no network: nothing to renew."""

    async def detach(self) -> None:
        """A process cannot outlive its gateway, nor be handed to another: it goes."""
        await self.destroy()


class LocalBackend:
    data_dir = DATA_DIR
    isolation = "local"
    egress_healthy: bool | None = None  # its sandboxes never have a network

    def __init__(self, config: SandboxConfig) -> None:
        self.config = config
        self._root: Path | None = None
        self._python = config.local_python or _find_python()
        self._as_root = os.geteuid() == 0
        slots = config.max_sessions + config.pool_size + 4
        self._free_uids = list(range(config.local_uid_base, config.local_uid_base + slots)) if self._as_root else []

    async def start(self) -> None:
        log.warning(
            "sandbox.backend is 'local': Python runs in bubblewrap sandboxes on the host's kernel, which is "
            "weaker isolation than the docker backend%s",
            "" if self._as_root else "; not running as root, so all sessions share one user and its process limit",
        )
        missing = [tool for tool in ("bwrap", "prlimit", "setpriv") if shutil.which(tool) is None]
        if missing:
            raise SandboxUnavailable(f"the local sandbox needs {', '.join(missing)} (Debian: apt-get install bubblewrap util-linux)")
        self._root = Path(tempfile.mkdtemp(prefix=f"hg-sandbox-{self.config.instance}-"))
        self._root.chmod(0o711)  # sessions may reach their own directory and the kernel, and list nothing
        shutil.copy(Path(__file__).with_name("kernel.py"), self._root / "kernel.py")
        (self._root / "kernel.py").chmod(0o644)
        (self._root / "passwd").write_text(f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}::{DATA_DIR}:/bin/sh\n")
        (self._root / "group").write_text(f"sandbox:x:{SANDBOX_UID}:\n")
        for name in ("passwd", "group"):
            (self._root / name).chmod(0o644)
        probe = await self.create()  # fails here, not at the first call, if user namespaces are not allowed
        await probe.destroy()

    def release_uid(self, uid: int | None) -> None:
        if uid is not None:
            self._free_uids.append(uid)

    def _command(self, workdir: Path, uid: int | None) -> list[str]:
        config, root = self.config, self._root
        assert root is not None
        command = ["prlimit", f"--as={memory_bytes(config.memory)}", f"--nproc={config.pids}", "--core=0", "--"]
        if uid is not None:
            command += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        kernel_dir = f"/opt/hg-sandbox-{config.instance}-kernel"
        command += ["bwrap", "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
        # The kernel is PID 1 itself: bwrap's own reaper would hold the protocol pipes where the user's
        # code could open them (/proc/1/fd), so there is none.
        command += ["--as-pid-1"]
        command += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        command += ["--ro-bind", "/usr", "/usr"]
        for name in ("bin", "lib", "lib64", "sbin"):
            path = Path("/") / name
            if path.is_symlink():
                command += ["--symlink", os.readlink(path), str(path)]
            elif path.exists():
                command += ["--ro-bind", str(path), str(path)]
        prefix = _outside_usr(self._python)
        if prefix is not None:  # an interpreter of its own prefix: visible read-only
            command += ["--ro-bind", prefix, prefix]
        for name in _ETC:
            command += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        command += ["--ro-bind", str(root / "passwd"), "/etc/passwd", "--ro-bind", str(root / "group"), "/etc/group"]
        command += ["--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
        command += ["--size", str(SKILLS_BYTES), "--perms", "1777", "--tmpfs", "/mnt/skills"]  # skills the gateway installs
        command += ["--bind", str(workdir), DATA_DIR, "--chdir", DATA_DIR]
        command += ["--ro-bind", str(root / "kernel.py"), f"{kernel_dir}/kernel.py"]
        command += ["--remount-ro", "/"]  # bwrap's root is a tmpfs: nothing but /tmp and /mnt/data is writable
        command += ["--clearenv", "--setenv", "PATH", "/usr/local/bin:/usr/bin:/bin", "--setenv", "HOME", DATA_DIR]
        command += ["--setenv", "MPLBACKEND", "Agg", "--setenv", "LANG", "C.UTF-8"]
        return command + ["--", self._python, f"{kernel_dir}/kernel.py"]

    async def create(self, network: NetworkGrant | None = None) -> LocalKernel:
        assert self._root is not None, "start() first"
        if network is not None:
            raise SandboxUnavailable("network policies need the docker sandbox backend (the local backend's sandboxes have no network)")
        if self._as_root and not self._free_uids:
            raise SandboxUnavailable("no sandbox uid is free (more live kernels than max_sessions + pool_size)")
        uid = self._free_uids.pop(0) if self._as_root else None
        workdir = Path(tempfile.mkdtemp(prefix="session-", dir=self._root))
        try:
            if uid is not None:
                os.chown(workdir, uid, uid)
            workdir.chmod(0o700)
            process = await anyio.open_process(
                self._command(workdir, uid), cwd="/", env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                stderr=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            self.release_uid(uid)
            raise
        assert process.stdin is not None and process.stdout is not None
        kernel = LocalKernel(self, process, workdir, uid, KernelChannel(process.stdin, process.stdout, multiplexed=False))
        try:
            with anyio.fail_after(30):
                await kernel.channel.request(op="ping")
        except BaseException as exc:
            await kernel.destroy()
            if isinstance(exc, Exception):
                raise SandboxUnavailable(f"the local sandbox's kernel did not start ({exc!r})") from None
            raise
        return kernel

    def maintenance(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        return []

    @property
    def reattach(self) -> None:
        return None  # a local kernel is a process of this replica's: it dies with it

    async def close(self) -> None:
        if self._root is not None:
            root = self._root
            await anyio.to_thread.run_sync(lambda: shutil.rmtree(root, ignore_errors=True))


def _kill_all_of(uid: int) -> None:
    """SIGKILL every process of `uid`: kill(-1) as that user reaches exactly its processes."""
    command = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "kill", "-s", "KILL", "-1"]
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)


def _outside_usr(python: str) -> str | None:
    """The installation prefix of an interpreter that does not live under /usr."""
    resolved = Path(python).resolve()
    if resolved.is_relative_to("/usr"):
        return None
    return str(resolved.parent.parent)


def _find_python() -> str:
    """A system interpreter: the sandbox sees /usr and nothing else of the host."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("python3") or "python3"
