"""`max_output_length` over both streams of one command (sandbox/shell_output.py): the limit is for stdout
and stderr together, so text that fits exactly is returned whole, however it is split between them."""

from __future__ import annotations

import pytest

from sandbox.channel import ShellEnd, ShellOutput
from sandbox.shell_output import CharacterLimit


@pytest.mark.parametrize("length", [2, 50, 239, 240, 300, 9000])
@pytest.mark.parametrize("streamed", [False, True])
def test_stdout_and_stderr_together_exactly_at_the_limit_are_whole(length: int, streamed: bool) -> None:
    for split in sorted({1, length // 2, length - 1}):
        stdout, stderr = "é" * split, "b" * (length - split)  # characters, not bytes
        limit = CharacterLimit(length)
        if streamed:  # their lines were sent live first, as a command's output arrives
            limit.live(ShellOutput("stdout", stdout))
            limit.live(ShellOutput("stderr", stderr))
        ended = limit.end(ShellEnd(0, stdout, stderr))
        assert (ended.stdout, ended.stderr) == (stdout, stderr), (length, split)
        over = CharacterLimit(length).end(ShellEnd(0, stdout, stderr + "x"))
        assert len(over.stdout) + len(over.stderr) <= length and (over.stdout, over.stderr) != (stdout, stderr + "x")
