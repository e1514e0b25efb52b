"""A sampling profile of the gateway process while a benchmark round runs (py-spy, installed apart:
`.venv/bin/pip install py-spy`), written as collapsed stacks and summarised as the functions that hold
the most samples, by their own time and with what they call."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def profiled(pid: int, path: Path | None, rate: int = 1000) -> Iterator[None]:
    """Samples of `pid` while the block runs, into `path` (nothing when `path` is None)."""
    if path is None:
        yield
        return
    spy = shutil.which("py-spy") or str(Path(__file__).resolve().parent.parent / ".venv/bin/py-spy")
    native = ["--native"] if os.environ.get("PROFILE_NATIVE") else []
    command = [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", str(rate), "--nonblocking", *native, "-o", str(path)]
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached before the round starts
    try:
        yield
    finally:
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=30)


def top(path: Path, count: int = 25) -> str:
    """The functions with the most samples: own (the innermost frame) and total (anywhere on the stack)."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if not stack:
            continue
        weight = int(number)
        frames = [frame.split(" (")[0] + " (" + frame.rsplit("/", 1)[-1] if " (" in frame else frame for frame in stack.split(";")]
        if frames[0].startswith("process ") or frames[0].startswith("thread "):
            frames = frames[1:]
        if not frames:
            continue
        samples += weight
        own[frames[-1]] += weight
        for frame in set(frames):
            total[frame] += weight
    lines = [f"{samples} samples; own time:"]
    lines += [f"  {100 * n / samples:5.1f}%  {frame}" for frame, n in own.most_common(count)]
    lines.append("total time (with callees):")
    lines += [f"  {100 * n / samples:5.1f}%  {frame}" for frame, n in total.most_common(count)]
    return "\n".join(lines)
