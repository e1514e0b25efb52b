"""The in-sandbox kernel: a stateful Python namespace with Jupyter semantics, driven over stdin/stdout.

(One file on purpose: it is copied into the sandbox image and runs there alone, standard library only.)

Runs inside the sandbox (container or bubblewrap), standard library only. The host writes one JSON
request per line and reads one JSON reply per line:

    {"id": 1, "op": "ping"}                                   -> {"id": 1, "status": "ready", "pid": ...}
    {"id": 2, "code": "...", "timeout": 10, "max_output": N,  -> {"id": 2, "status": "ok" | "error" | "timeout"
     "token": "..." (optional)}                                   | "restarted", "output": "...",
                                                                   "images": [base64 PNG, ...],
                                                                   "reason": ... (restarted only)}
    {"id": 8, "op": "result", "token": "..."}                 -> the reply of the last execution if it had this
                                                                 token, else {"id": 8, "status": "unknown", ...}
    {"id": 3, "op": "files"}                                  -> {"id": 3, "status": "ok", "files": [[path, size,
                                                                   mtime_ns], ...], "truncated": bool}
    {"id": 4, "op": "write", "path": p, "data": base64,       -> {"id": 4, "status": "ok"} or {"status": "error",
     "first": bool, "last": bool}                                 "error": "...", "errno": "ENOSPC"}
    {"id": 5, "op": "read", "path": p, "offset": n, "length": m} -> {"id": 5, "status": "ok", "data": base64, "size": n}
    {"id": 6, "op": "delete", "path": p}                      -> {"id": 6, "status": "ok"}
    {"op": "seal" | "clear", "path": p}                       -> {"status": "ok"}: a folder made read-only, or
                                                                 removed with all it holds
    (with "root": "skills", the file operations act on /mnt/skills instead of /mnt/data)
    {"id": 7, "op": "shell", "command": "...", "timeout": 10,  -> any number of {"id": 7, "status": "output",
     "max_output": N}                                             "stream": "stdout" | "stderr", "data": "..."},
                                                                 then {"id": 7, "status": "exit" | "timeout",
                                                                 "exit_code": n, "stdout": "...", "stderr": "..."}
    (a ping that comes while code or a command runs is answered at once, out of turn: a replica attaching
     to a busy kernel learns it is alive without waiting for the code to end)
    {"op": "interrupt"}                                       -> no reply of its own: the execution in progress
                                                                 gets KeyboardInterrupt (its reply, "error", comes
                                                                 as usual; one that does not stop within
                                                                 INTERRUPT_GRACE_S is "restarted", "interrupted"),
                                                                 the shell command in progress is killed with all
                                                                 it started (exit code 137); idle, it is ignored

The last execution's reply is kept until the next one: a host that stopped while the code ran (its gateway
replica died) leaves it to another, which asks for it by the token it was given ("result") instead of
running the code again.

The file operations copy the session's files in and out of /mnt/data between executions (DataFiles).
A shell command runs in bash under /mnt/data, beside the Python worker (Shell): what it writes is sent as
it arrives, up to the output cap, and the final reply holds the capped head and tail of each stream.

Two processes, so that the user's code can neither forge a reply nor lose the session by writing:
  * the supervisor owns the protocol channel. It is not dumpable, so code of the same user can neither
    open its descriptors through /proc nor ptrace it. It reads what the code prints from a pipe and
    keeps only the head and tail (the cap applies where the output is written, not after it filled a
    disk), validates the worker's result, and replaces a worker that died, hung past the time limit or
    answered nonsense ("restarted": the session's state is gone).
  * the worker, forked from the supervisor, runs the code. It never holds the channel: fds 1 and 2 are
    the capture pipe, fd 0 is /dev/null, and it answers the supervisor on a socket of its own.
"""

from __future__ import annotations

import ast
import base64
import codecs
import ctypes
import errno
import io
import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time
import traceback

CELL = "<cell>"
KILL_GRACE_S = 2.0  # past the time limit, how long the worker has to stop before it is killed
STRAY_STOP_S = 5.0  # how long the forks a call left are stopped, scan after scan, before all are killed
INTERRUPT_GRACE_S = 1.0  # after an interrupt, how long the code has to stop before its worker is killed
INTERRUPT_REPEAT_S = 0.05  # how often the worker is signalled meanwhile
MAX_RESULT_BYTES = 32 * 1024 * 1024  # the worker's result line: its images
MAX_IMAGES = 16
MAX_IMAGE_CHARS = 8 * 1024 * 1024
STATUSES = {"ok", "error", "timeout"}
DATA_DIR = "/mnt/data"
SKILLS_DIR = "/mnt/skills"  # skills the gateway installs, each in a folder of its own, read-only
PR_SET_DUMPABLE = 4


class ExecutionTimeout(BaseException):
    """Raised in the user's code when its time is up. A BaseException, so `except Exception` does not catch it."""


# -- the supervisor ---------------------------------------------------------------------------------------


class Capture:
    """What the code wrote: the first bytes and the last ones, and how many there were in all."""

    def __init__(self, limit: int) -> None:
        self.tail_size = min(limit // 4, 2048)
        self.head_size = limit - self.tail_size
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_size - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_size:
                del self.tail[: len(self.tail) - self.tail_size]

    def text(self) -> str:
        if not self.tail:
            return self.head.decode("utf-8", "replace")
        tail = bytes(self.tail[-self.tail_size :])
        if self.total <= self.head_size + len(tail):
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        omitted = self.total - len(self.head) - len(tail)
        head = self.head.decode("utf-8", "ignore")
        return f"{head}\n[... output truncated: {omitted} bytes omitted of {self.total} ...]\n{tail.decode('utf-8', 'ignore')}"


class Requests:
    """The host's request lines, read straight from the channel's descriptor (no buffer that `select` could
    not see), so an interrupt is noticed while code or a command runs."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.ended = False
        self._buffer = bytearray()
        self._lines: list[bytes] = []

    def next(self) -> bytes | None:
        """The next request line, waiting for it; None once the host closed the channel."""
        while not self._lines:
            if self.ended:
                return None
            self.read()
        return self._lines.pop(0)

    def read(self) -> None:
        """What the descriptor has now (call when it is readable, or to wait for a line)."""
        data = os.read(self.fd, 1 << 20)
        if not data:
            self.ended = True
            return
        self._buffer += data
        while (end := self._buffer.find(b"\n")) >= 0:
            self._lines.append(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]

    def interrupted(self) -> bool:
        """Whether an interrupt came among the lines read (taken out: a request of another op waits)."""
        kept = [line for line in self._lines if not _is_interrupt(line)]
        found = len(kept) != len(self._lines)
        self._lines = kept
        return found

    def pings(self) -> list[object]:
        """The ids of the pings among the lines read, taken out to be answered now."""
        found: list[object] = []
        kept: list[bytes] = []
        for line in self._lines:
            request = json.loads(line) if len(line) < 256 and b'"ping"' in line else None
            if isinstance(request, dict) and request.get("op") == "ping":
                found.append(request.get("id"))
            else:
                kept.append(line)
        self._lines = kept
        return found

    def watched(self) -> list[int]:
        return [] if self.ended else [self.fd]

    def close(self) -> None:
        os.close(self.fd)


def _is_interrupt(line: bytes) -> bool:
    return line.startswith(b'{"op": "interrupt"') or line.startswith(b'{"op":"interrupt"')


class Supervisor:
    def __init__(self) -> None:
        # Private copies of the protocol channel (os.dup makes them non-inheritable), then fds 0-2 elsewhere.
        self.requests = Requests(os.dup(0))
        self.replies = os.fdopen(os.dup(1), "wb")
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        _set_dumpable(False)
        self.pid = os.getpid()
        self.cmdline = _cmdline(self.pid)
        self.worker_pid = 0
        self.worker_sock: socket.socket | None = None
        self.capture_fd = -1
        self.kept: tuple[str, dict[str, object]] | None = None  # the last execution's token and reply
        self._start_worker()

    def read_requests(self) -> None:
        """What the host sent while code or a command runs: kept for later, but pings, answered now."""
        self.requests.read()
        for request_id in self.requests.pings():
            self.reply({"id": request_id, "status": "ready", "pid": self.pid})

    def reply(self, reply: dict[str, object]) -> None:
        self.replies.write(json.dumps(reply).encode() + b"\n")
        self.replies.flush()

    def serve(self) -> None:
        data, skills = DataFiles(DATA_DIR), DataFiles(SKILLS_DIR)
        while (line := self.requests.next()) is not None:
            if _is_interrupt(line):  # nothing runs: it came too late
                continue
            request = json.loads(line)
            if request.get("op") == "ping":
                reply = {"id": request["id"], "status": "ready", "pid": self.pid}
            elif request.get("op") in DataFiles.OPS:
                files = skills if request.get("root") == "skills" else data
                reply = {"id": request["id"], **files.handle(request)}
            elif request.get("op") == "shell":
                shell = Shell(request["id"], self, {self.pid, self.worker_pid}, int(request["max_output"]))
                reply = {"id": request["id"], **shell.run(request["command"], float(request["timeout"]))}
            elif request.get("op") == "result":
                kept = self.kept if self.kept is not None and self.kept[0] == request.get("token") else None
                reply = {"id": request["id"], **(kept[1] if kept is not None else {"status": "unknown", "output": "", "images": []})}
            else:
                result = self.execute(request["code"], float(request["timeout"]), int(request["max_output"]))
                token = request.get("token")
                self.kept = (token, result) if isinstance(token, str) else None
                reply = {"id": request["id"], **result}
            self.reply(reply)

    def execute(self, code: str, timeout: float, max_output: int) -> dict[str, object]:
        capture = Capture(max_output)
        assert self.worker_sock is not None
        try:
            self.worker_sock.sendall(json.dumps({"code": code, "timeout": timeout}).encode() + b"\n")
        except OSError:
            return self._restart(capture, "exited")
        deadline = time.monotonic() + timeout + KILL_GRACE_S
        result = bytearray()
        interrupted_at: float | None = None
        while True:
            if interrupted_at is None and self.requests.interrupted():
                interrupted_at = time.monotonic()
            if interrupted_at is not None:
                if time.monotonic() - interrupted_at > INTERRUPT_GRACE_S:
                    return self._restart(capture, "interrupted")
                # Again until the result comes: a signal that lands before the code starts (or after it
                # ended) is ignored by the worker, the first one while it runs raises KeyboardInterrupt.
                os.kill(self.worker_pid, signal.SIGINT)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._restart(capture, "timeout")
            if interrupted_at is not None:
                remaining = min(remaining, INTERRUPT_REPEAT_S)
            ready, _, _ = select.select([self.capture_fd, self.worker_sock, *self.requests.watched()], [], [], max(remaining, 0))
            if self.requests.fd in ready:
                self.read_requests()
            if self.capture_fd in ready:
                self._read_capture(capture)
            if self.worker_sock in ready:
                chunk = self.worker_sock.recv(1 << 20)
                if not chunk:
                    return self._restart(capture, self._death())
                result += chunk
                if len(result) > MAX_RESULT_BYTES:
                    return self._restart(capture, "invalid_reply")
                if result.endswith(b"\n"):
                    break
        parsed = _valid_result(bytes(result))
        if parsed is None:
            return self._restart(capture, "invalid_reply")
        _kill_strays(self.cmdline, keep={self.pid, self.worker_pid}, everything=parsed["status"] == "timeout")
        self._drain_capture(capture)
        return {"status": parsed["status"], "output": capture.text(), "images": parsed["images"]}

    def _read_capture(self, capture: Capture) -> bool:
        try:
            data = os.read(self.capture_fd, 1 << 16)
        except BlockingIOError:
            return False
        capture.add(data)
        return bool(data)

    def _drain_capture(self, capture: Capture) -> None:
        """What is already in the pipe; a background process that keeps writing does not hold the reply."""
        for _ in range(4096):
            if not self._read_capture(capture):
                return

    def _restart(self, capture: Capture, reason: str) -> dict[str, object]:
        """The worker died, hung or misbehaved: replace it. Its state is gone."""
        oom = reason == "killed" and _oom_kills() > self.oom_kills
        _kill_strays(self.cmdline, keep={self.pid}, everything=True)
        self._drain_capture(capture)
        self._start_worker()
        return {"status": "restarted", "output": capture.text(), "images": [], "reason": "out_of_memory" if oom else reason}

    def _death(self) -> str:
        try:
            _, status = os.waitpid(self.worker_pid, 0)
        except ChildProcessError:
            return "exited"
        return "killed" if os.WIFSIGNALED(status) else "exited"

    def _start_worker(self) -> None:
        if self.worker_sock is not None:
            self.worker_sock.close()
            os.close(self.capture_fd)
        ours, theirs = socket.socketpair()
        capture_read, capture_write = os.pipe()
        os.set_blocking(capture_read, False)
        self.oom_kills = _oom_kills()
        pid = os.fork()
        if pid == 0:
            try:
                ours.close()
                os.close(capture_read)
                self.requests.close()
                self.replies.close()
                os.dup2(capture_write, 1)
                os.dup2(capture_write, 2)
                # Nothing else of the supervisor's: whatever descriptors it inherited or holds (the
                # protocol channel among them), the worker closes all but stdio and its own socket.
                keep = theirs.fileno()
                os.closerange(3, keep)
                os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
                _set_dumpable(True)  # inherited from the supervisor; the worker has nothing to hide
                Worker(theirs).serve()
            finally:
                os._exit(0)
        theirs.close()
        os.close(capture_write)
        self.worker_pid, self.worker_sock, self.capture_fd = pid, ours, capture_read


class Shell:
    """One shell command: bash -c in /mnt/data, in a session of its own, stdin empty. What it writes is
    sent to the host as it arrives (progress lines), up to each stream's cap; the reply holds the capped
    head and tail of each. When the command ends, whatever it left running in the background is killed,
    so a command's time limit bounds everything it started."""

    PROGRAM = "/bin/bash"
    POLL_S = 0.05  # how often the command's exit is looked for while something else holds its pipes

    def __init__(self, request_id: object, supervisor: Supervisor, keep: set[int], max_output: int) -> None:
        self.request_id = request_id
        self.supervisor = supervisor  # its channel: progress lines go out, an interrupt comes in
        self.requests = supervisor.requests
        self.keep = keep  # the kernel's own processes
        self.captures = {"stdout": Capture(max_output), "stderr": Capture(max_output)}
        self.sent = {"stdout": 0, "stderr": 0}  # bytes sent live: at most each capture's head
        self.decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in self.captures}
        self.pipes: dict[int, str] = {}  # the command's pipes still open, and which stream each is

    def run(self, command: str, timeout: float) -> dict[str, object]:
        try:
            process = subprocess.Popen(
                [self.PROGRAM, "-c", command],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=DATA_DIR,
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            return {"status": "exit", "exit_code": 127, "stdout": "", "stderr": f"{self.PROGRAM}: {exc}\n"}
        assert process.stdout is not None and process.stderr is not None
        self.pipes = {process.stdout.fileno(): "stdout", process.stderr.fileno(): "stderr"}
        for fd in self.pipes:
            os.set_blocking(fd, False)
        deadline = time.monotonic() + timeout
        interrupted = False
        while self.pipes and process.poll() is None and (remaining := deadline - time.monotonic()) > 0:
            # An open pipe's end is the usual sign of the exit; the poll is for a command whose background
            # children hold its pipes after it exited.
            if self.requests.interrupted():
                interrupted = True
                break
            ready, _, _ = select.select([*self.pipes, *self.requests.watched()], [], [], min(remaining, self.POLL_S))
            if self.requests.fd in ready:
                self.supervisor.read_requests()
            for fd in ready:
                if fd in self.pipes:
                    self._read(fd)
        timed_out = False
        if not interrupted:  # an interrupted command is killed below, with what it started
            try:
                process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        for fd in list(self.pipes):  # what the pipes hold now, not what strays go on writing
            for _ in range(64):
                if not self._read(fd):
                    break
        self._stop(process)
        process.stdout.close()
        process.stderr.close()
        texts: dict[str, object] = {name: capture.text() for name, capture in self.captures.items()}
        if timed_out:
            return {"status": "timeout", "exit_code": -1, **texts}
        code = process.returncode
        return {"status": "exit", "exit_code": code if code >= 0 else 128 - code, **texts}  # a signal, as bash says it

    def _read(self, fd: int) -> bool:
        """Read what the pipe has and send its part within the cap; False once it has ended."""
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return True
        name = self.pipes[fd]
        if not data:
            del self.pipes[fd]
            return False
        capture = self.captures[name]
        capture.add(data)
        live = data[: max(0, capture.head_size - self.sent[name])]
        self.sent[name] += len(live)
        text = self.decoders[name].decode(live) if live else ""
        if text:
            self.supervisor.reply({"id": self.request_id, "status": "output", "stream": name, "data": text})
        return True

    def _stop(self, process: subprocess.Popen[bytes]) -> None:
        """Kill the command's session whole, and any other process but the kernel's (one that left the
        session), then reap them."""
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        process.wait()
        _kill_strays(b"", keep=self.keep, everything=True)


class DataFiles:
    """The session's files under /mnt/data, copied in and out by the gateway between executions.

    The user's code owns this directory and may have left links, FIFOs or devices where a file was, and
    the supervisor holds the protocol channel: every path is opened one component at a time, never
    following a link (a link to /proc/self/fd/1 would otherwise reach the channel), and only regular
    files are read. A file is written to a hidden name and renamed into place when complete, so a copy
    that fails (no space left) leaves nothing behind.
    """

    OPS = {"files", "write", "read", "delete", "seal", "clear"}
    PARTIAL = ".hg-partial-"
    MAX_LISTED = 1000
    MAX_SKIPPED = 20
    MAX_DEPTH = 8

    def __init__(self, root: str) -> None:
        self.root = root
        self.upload: tuple[int, str, int, str] | None = None  # (dir fd, partial name, file fd, final name)

    def handle(self, request: dict[str, object]) -> dict[str, object]:
        op = request["op"]
        try:
            if op == "files":
                return self.listing()
            path = request.get("path")
            if not isinstance(path, str) or not _safe_path(path):
                return {"status": "error", "error": "invalid path", "errno": "EINVAL"}
            if op == "write":
                return self.write(path, str(request.get("data", "")), bool(request.get("first")), bool(request.get("last")))
            if op == "read":
                offset, length = request.get("offset", 0), request.get("length", 0)
                if not isinstance(offset, int) or not isinstance(length, int):
                    return {"status": "error", "error": "offset and length must be integers", "errno": "EINVAL"}
                return self.read(path, offset, length)
            if op in ("seal", "clear"):
                return self.tree(path, remove=op == "clear")
            return self.delete(path)
        except OSError as exc:
            if op == "write":
                self.abort()
            code = errno.errorcode.get(exc.errno or 0, "EIO")
            return {"status": "error", "error": os.strerror(exc.errno) if exc.errno else str(exc), "errno": code}
        except (ValueError, TypeError) as exc:
            self.abort()
            return {"status": "error", "error": str(exc), "errno": "EINVAL"}

    def listing(self) -> dict[str, object]:
        """Every regular file, with its size and time; and the files the gateway cannot keep, with why (a
        name that is not UTF-8 or a path too long: the code chooses names, and one bad name must not cost
        the others)."""
        files: list[list[object]] = []
        skipped: list[list[str]] = []
        truncated = False
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        stack: list[tuple[int, str, int]] = [(root, "", 0)]
        while stack:
            fd, prefix, depth = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.name.startswith(self.PARTIAL):
                            continue
                        path = prefix + entry.name
                        problem = _unkept_name(path)
                        if problem is not None:
                            if len(skipped) < self.MAX_SKIPPED:
                                skipped.append([path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")[:200], problem])
                            continue
                        info = entry.stat(follow_symlinks=False)
                        if entry.is_dir(follow_symlinks=False) and depth + 1 < self.MAX_DEPTH:
                            try:
                                child = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                            except OSError:
                                continue
                            stack.append((child, path + "/", depth + 1))
                        elif entry.is_file(follow_symlinks=False):
                            if len(files) >= self.MAX_LISTED:
                                truncated = True
                                break
                            files.append([path, info.st_size, info.st_mtime_ns])
            finally:
                os.close(fd)
        return {"status": "ok", "files": files, "skipped": skipped, "truncated": truncated}

    def write(self, path: str, data: str, first: bool, last: bool) -> dict[str, object]:
        if first:
            self.abort()
            parent, name = self._parent(path, create=True)
            partial = f"{self.PARTIAL}{os.getpid()}-{time.monotonic_ns()}"
            try:
                fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
            except OSError:
                os.close(parent)
                raise
            self.upload = (parent, partial, fd, name)
        if self.upload is None:
            return {"status": "error", "error": "no file is being written", "errno": "EINVAL"}
        parent, partial, fd, name = self.upload
        chunk = memoryview(base64.b64decode(data, validate=True))
        while chunk:
            chunk = chunk[os.write(fd, chunk) :]
        if last:
            os.close(fd)
            self.upload = (parent, partial, -1, name)
            os.rename(partial, name, src_dir_fd=parent, dst_dir_fd=parent)
            os.close(parent)
            self.upload = None
        return {"status": "ok"}

    def abort(self) -> None:
        """Remove the file being written, if any."""
        if self.upload is None:
            return
        parent, partial, fd, _ = self.upload
        self.upload = None
        if fd >= 0:
            os.close(fd)
        try:
            os.unlink(partial, dir_fd=parent)
        except OSError:
            pass
        os.close(parent)

    def read(self, path: str, offset: int, length: int) -> dict[str, object]:
        parent, name = self._parent(path, create=False)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
        finally:
            os.close(parent)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return {"status": "error", "error": "not a regular file", "errno": "EINVAL"}
            data = os.pread(fd, max(0, min(length, 4 << 20)), max(0, offset))
        finally:
            os.close(fd)
        return {"status": "ok", "data": base64.b64encode(data).decode(), "size": info.st_size}

    def delete(self, path: str) -> dict[str, object]:
        parent, name = self._parent(path, create=False)
        try:
            os.unlink(name, dir_fd=parent)
        finally:
            os.close(parent)
        return {"status": "ok"}

    def tree(self, path: str, remove: bool) -> dict[str, object]:
        """Make the folder `path` and all under it read-only (files 0444, folders 0555), or remove it
        whole. Links are never followed: one found is left alone, or removed itself."""
        parent, name = self._parent(path, create=False)
        try:
            try:
                top = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
            except FileNotFoundError:
                return {"status": "ok"}
            self._walk(top, remove, 0)
            if remove:
                os.rmdir(name, dir_fd=parent)
        finally:
            os.close(parent)
        return {"status": "ok"}

    def _walk(self, fd: int, remove: bool, depth: int) -> None:
        """`tree` below the folder open as `fd` (which it closes)."""
        try:
            os.fchmod(fd, 0o755)
            for name in os.listdir(fd) if depth <= self.MAX_DEPTH else []:
                mode = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    self._walk(os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd), remove, depth + 1)
                    if remove:
                        os.rmdir(name, dir_fd=fd)
                elif remove:
                    os.unlink(name, dir_fd=fd)
                elif stat.S_ISREG(mode):
                    file = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
                    try:
                        os.fchmod(file, 0o444)
                    finally:
                        os.close(file)
            if not remove:
                os.fchmod(fd, 0o555)
        finally:
            os.close(fd)

    def _parent(self, path: str, create: bool) -> tuple[int, str]:
        """An fd of the directory holding `path` (reached without following links), and the last name."""
        *directories, name = path.split("/")
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for directory in directories:
                if create:
                    try:
                        os.mkdir(directory, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass
                child = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = child
        except BaseException:
            os.close(fd)
            raise
        return fd, name


def _unkept_name(path: str) -> str | None:
    """Why a listed path cannot be a container file (None when it can)."""
    try:
        encoded = path.encode("utf-8")  # a name that is not UTF-8 comes as lone surrogates
    except UnicodeEncodeError:
        return "its name is not UTF-8"
    if len(encoded) > 1024:
        return "its path is longer than 1024 bytes"
    return None


def _safe_path(path: str) -> bool:
    """A relative path of plain names: no empty, `.` or `..` part, no NUL, bounded."""
    parts = path.split("/")
    return 0 < len(path) <= 1024 and "\0" not in path and all(part not in ("", ".", "..") and len(part.encode()) <= 255 for part in parts)


def _valid_result(line: bytes) -> dict[str, object] | None:
    """The worker's result, if it is one (the worker runs the user's code and may say anything)."""
    try:
        result = json.loads(line)
    except ValueError:
        return None
    if not isinstance(result, dict) or result.get("status") not in STATUSES:
        return None
    images = result.get("images")
    if not isinstance(images, list) or len(images) > MAX_IMAGES:
        return None
    if not all(isinstance(image, str) and len(image) <= MAX_IMAGE_CHARS for image in images):
        return None
    return {"status": result["status"], "images": images}


def _set_dumpable(dumpable: bool) -> None:
    """Not dumpable: processes of the same user may neither read this one's /proc/PID/fd nor ptrace it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, int(dumpable), 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _oom_kills() -> int:
    """The cgroup's count of processes killed for memory, where the sandbox can read it (v2, then v1)."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path) as file:
                for line in file:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill":
                        return int(value)
        except (OSError, ValueError):
            continue
    return 0


# -- the worker -------------------------------------------------------------------------------------------


class _FdWriter(io.TextIOBase):
    """sys.stdout / sys.stderr: unbuffered writes to a file descriptor, so their order is kept."""

    def __init__(self, fd: int, name: str) -> None:
        self._fd = fd
        self.name = name

    @property
    def encoding(self) -> str:  # type: ignore[override]  # a constant: TextIOBase declares an attribute
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


_interruptible: set[bool] = set()  # not empty while the code runs: an interrupt raises once, then is ignored


def _on_interrupt(signum: int, frame: object) -> None:
    if _interruptible:
        _interruptible.clear()
        raise KeyboardInterrupt


class Worker:
    def __init__(self, channel: socket.socket) -> None:
        self.channel = channel
        self.pid = os.getpid()
        sys.stdin = open(os.devnull, encoding="utf-8")
        sys.stdout = _FdWriter(1, "<stdout>")
        sys.stderr = _FdWriter(2, "<stderr>")
        self.namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}

    def serve(self) -> None:
        signal.signal(signal.SIGINT, _on_interrupt)
        stopped = False  # the last cell was stopped or failed: the supervisor killed the forks it left
        for line in self.channel.makefile("rb"):
            request = json.loads(line)
            if stopped:
                # Those forks were this process's children: their zombies are reaped here, or they would hold
                # the sandbox's process limit and the next cell could start no process.
                _reap()
            status = self.execute(request["code"], request["timeout"])
            stopped = status != "ok"
            reply = json.dumps({"status": status, "images": _figures()}).encode() + b"\n"
            self.channel.sendall(reply)

    def execute(self, code: str, timeout: float) -> str:
        status = "ok"
        try:
            self._run(code, timeout)
        except ExecutionTimeout:
            status = "timeout"
            sys.stderr.write(f"\nTimeoutError: the execution was stopped after {timeout:g} seconds.\n")
        except BaseException as exc:  # the user's exception (KeyboardInterrupt too), shown as Jupyter shows it
            status = "error"
            _print_traceback(exc)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            _interruptible.clear()
        return status

    def _run(self, code: str, timeout: float) -> None:
        # Earlier code may have replaced the handlers or blocked the signals.
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.signal(signal.SIGINT, _on_interrupt)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGALRM, signal.SIGINT])
        signal.setitimer(signal.ITIMER_REAL, timeout)
        tree = ast.parse(code, CELL)
        last = None
        final = tree.body[-1] if tree.body else None
        if isinstance(final, ast.Expr):
            tree.body.pop()
            last = ast.Expression(final.value)
        try:
            _interruptible.add(True)
            exec(compile(tree, CELL, "exec"), self.namespace)
            if last is not None:
                value = eval(compile(last, CELL, "eval"), self.namespace)
                if value is not None:
                    self.namespace["_"] = value
                    sys.stdout.write(repr(value) + "\n")
        finally:
            if os.getpid() != self.pid:  # a fork of the user's code: it must not print or reply
                os._exit(0)


def _print_traceback(exc: BaseException) -> None:
    """The traceback without the kernel's own frames (those that ran the cell, and the interrupt's)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != CELL:
        tb = tb.tb_next
    kept = []
    while tb is not None:
        if tb.tb_frame.f_code.co_filename != __file__:
            kept.append(tb)
        tb = tb.tb_next
    for frame, following in zip(kept, [*kept[1:], None]):
        frame.tb_next = following
    tb = kept[0] if kept else None
    if isinstance(exc, SyntaxError):
        tb = None
    sys.stderr.write("".join(traceback.format_exception(type(exc), exc, tb)))


def _figures() -> list[str]:
    """Open matplotlib figures as base64 PNGs (then closed, as a notebook shows each once)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    images = []
    try:
        for number in pyplot.get_fignums()[:MAX_IMAGES]:
            buffer = io.BytesIO()
            pyplot.figure(number).savefig(buffer, format="png")
            image = base64.b64encode(buffer.getvalue()).decode()
            if len(image) <= MAX_IMAGE_CHARS:
                images.append(image)
    finally:
        pyplot.close("all")
    return images


# -- processes ----------------------------------------------------------------------------------------------


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read()
    except OSError:
        return b""


def _kill_strays(kernel_cmdline: bytes, keep: set[int], everything: bool) -> None:
    """Kill forks of the worker left running by the user's code (a fork bomb); with `everything`, every
    other process of the sandbox. Each stray is stopped first, scan after scan until none runs: a stopped
    process forks no more, so the scans gain on a fork bomb however busy the machine is (killing alone,
    a busy machine let it refill what each scan killed). Then all of them are killed and reaped."""
    stopped: set[int] = set()
    deadline = time.monotonic() + STRAY_STOP_S
    while time.monotonic() < deadline:
        running = [pid for pid in _strays(kernel_cmdline, keep, everything) if pid not in stopped]
        if not running:
            break
        for pid in running:
            try:
                os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
            except OSError:
                pass
    for _ in range(50):  # the stopped ones, and any a reused pid hid from the scans
        found = False
        for pid in stopped | set(_strays(kernel_cmdline, keep, everything)):
            try:
                os.kill(pid, signal.SIGKILL)
                found = True
            except OSError:
                pass
        stopped.clear()
        _reap()
        if not found:
            return


def _strays(kernel_cmdline: bytes, keep: set[int], everything: bool) -> list[int]:
    pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and int(entry) != 1 and int(entry) not in keep]
    return pids if everything else [pid for pid in pids if _cmdline(pid) == kernel_cmdline]


def _reap() -> None:
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _install_egress_ca() -> None:
    """A sandbox with a network policy trusts its egress proxy's CA, which the gateway passes in the
    environment (sandbox/network.py): the file its clients' trust variables name is written once, here."""
    pem = os.environ.pop("EGRESS_CA_PEM", None)
    if pem:
        with open("/tmp/.egress-ca.pem", "w") as out:
            out.write(pem)


if __name__ == "__main__":
    _install_egress_ca()
    Supervisor().serve()
