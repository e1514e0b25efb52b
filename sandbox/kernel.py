"""The in-sandbox kernel: a stateful Python namespace with Jupyter semantics, driven over stdin/stdout.

Runs inside the sandbox (container or namespaced subprocess), standard library only. The host writes
one JSON request per line and reads one JSON reply per line:

    {"id": 1, "op": "ping"}                                   -> {"id": 1, "status": "ready", "pid": ...}
    {"id": 2, "code": "...", "timeout": 10, "max_output": N}  -> {"id": 2, "status": "ok" | "error" | "timeout",
                                                                   "output": "...", "images": [base64 PNG, ...]}

What the code prints goes to file descriptors 1 and 2, which point at one capture file, so Python
prints, subprocesses and C libraries all land in it in the order they were written. The protocol
uses private duplicates of the original stdin/stdout that child processes do not inherit.
"""

from __future__ import annotations

import ast
import base64
import io
import json
import os
import signal
import sys
import tempfile
import traceback

KERNEL_PID = os.getpid()
CELL = "<cell>"


class ExecutionTimeout(BaseException):
    """Raised in the user's code when its time is up. A BaseException, so `except Exception` does not catch it."""


class _FdWriter(io.TextIOBase):
    """sys.stdout / sys.stderr: unbuffered writes to a file descriptor, so their order is kept."""

    def __init__(self, fd: int, name: str) -> None:
        self._fd = fd
        self.name = name

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "backslashreplace")
        while data:
            data = data[os.write(self._fd, data) :]
        return len(text)


def _on_alarm(signum: int, frame: object) -> None:
    raise ExecutionTimeout()


class Kernel:
    def __init__(self) -> None:
        # Private copies of the protocol channels (os.dup makes them non-inheritable).
        self.requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
        self.replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        capture_fd, _ = tempfile.mkstemp(prefix="kernel-output-")
        os.dup2(capture_fd, 1)
        os.dup2(capture_fd, 2)
        os.close(capture_fd)
        sys.stdin = open(os.devnull, encoding="utf-8")
        sys.stdout = _FdWriter(1, "<stdout>")
        sys.stderr = _FdWriter(2, "<stderr>")
        self.namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.cmdline = _cmdline(KERNEL_PID)

    def serve(self) -> None:
        for line in self.requests:
            request = json.loads(line)
            if request.get("op") == "ping":
                reply = {"id": request["id"], "status": "ready", "pid": KERNEL_PID}
            else:
                reply = {"id": request["id"], **self.execute(request["code"], request["timeout"], request["max_output"])}
            self.replies.write(json.dumps(reply) + "\n")
            self.replies.flush()

    def execute(self, code: str, timeout: float, max_output: int) -> dict[str, object]:
        os.ftruncate(1, 0)
        os.lseek(1, 0, os.SEEK_SET)
        status = "ok"
        try:
            self._run(code, timeout)
        except ExecutionTimeout:
            status = "timeout"
            sys.stderr.write(f"\nTimeoutError: the execution was stopped after {timeout:g} seconds.\n")
        except BaseException as exc:  # the user's exception, shown as Jupyter shows it
            status = "error"
            _print_traceback(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        _kill_strays(self.cmdline, everything=status == "timeout")
        images = _figures()
        return {"status": status, "output": _read_capture(max_output), "images": images}

    def _run(self, code: str, timeout: float) -> None:
        # Earlier code may have replaced the handler or blocked the signal.
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGALRM])
        signal.setitimer(signal.ITIMER_REAL, timeout)
        tree = ast.parse(code, CELL)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        try:
            exec(compile(tree, CELL, "exec"), self.namespace)
            if last is not None:
                value = eval(compile(last, CELL, "eval"), self.namespace)
                if value is not None:
                    self.namespace["_"] = value
                    sys.stdout.write(repr(value) + "\n")
        finally:
            if os.getpid() != KERNEL_PID:  # a fork of the user's code: it must not print or reply
                os._exit(0)


def _print_traceback(exc: BaseException) -> None:
    """The traceback without the kernel's own frames."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != CELL:
        tb = tb.tb_next
    if isinstance(exc, SyntaxError):
        tb = None
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))


def _read_capture(max_output: int) -> str:
    """What the execution wrote; past `max_output` bytes, its head and tail around a truncation marker."""
    size = os.lseek(1, 0, os.SEEK_END)
    if size <= max_output:
        return os.pread(1, size, 0).decode("utf-8", "replace")
    tail_size = min(max_output // 4, 2048)
    head = os.pread(1, max_output - tail_size, 0).decode("utf-8", "ignore")
    tail = os.pread(1, tail_size, size - tail_size).decode("utf-8", "ignore")
    omitted = size - max_output
    return f"{head}\n[... output truncated: {omitted} bytes omitted of {size} ...]\n{tail}"


def _figures() -> list[str]:
    """Open matplotlib figures as base64 PNGs (then closed, as a notebook shows each once)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    images = []
    try:
        for number in pyplot.get_fignums():
            buffer = io.BytesIO()
            pyplot.figure(number).savefig(buffer, format="png")
            images.append(base64.b64encode(buffer.getvalue()).decode())
    finally:
        pyplot.close("all")
    return images


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read()
    except OSError:
        return b""


def _kill_strays(kernel_cmdline: bytes, everything: bool) -> None:
    """Kill forks of the kernel left running by the user's code (a fork bomb); after a timeout, every
    other process of the sandbox. Repeated until a scan finds none, since forks may still be forking."""
    for _ in range(50):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) in (KERNEL_PID, 1):
                continue
            pid = int(entry)
            if everything or _cmdline(pid) == kernel_cmdline:
                try:
                    os.kill(pid, signal.SIGKILL)
                    found = True
                except OSError:
                    pass
        if not found:
            return
        _reap()


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


if __name__ == "__main__":
    Kernel().serve()
