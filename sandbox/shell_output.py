"""`max_output_length` in characters, as OpenAI counts it: the kernel caps each stream in bytes (at most
four per character in UTF-8), and the text is cut to the characters asked for here, live and at the end."""

from __future__ import annotations

import re
from dataclasses import replace

from .channel import ShellEnd, ShellOutput

MAX_TAIL_CHARS = 2048
# How the kernel marks the bytes it left out between the head and the tail it kept (kernel.py, Capture.text).
KERNEL_CUT = re.compile(r"\n\[\.\.\. output truncated: \d+ bytes omitted of (\d+) \.\.\.\]\n")


class CharacterLimit:
    """One command's output within `limit` characters per stream (None: only the configured byte cap)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.head = limit - min(limit // 4, MAX_TAIL_CHARS) if limit is not None else 0
        self.sent = {"stdout": 0, "stderr": 0}  # characters streamed live: at most the kept head

    def kernel_bytes(self, configured: int) -> int:
        """The byte cap to ask the kernel for."""
        return min(4 * self.limit, configured) if self.limit is not None else configured

    def live(self, written: ShellOutput) -> ShellOutput | None:
        """What of a live line to send: the head that will be kept, nothing past it."""
        if self.limit is None:
            return written
        room = self.head - self.sent[written.stream]
        if room <= 0:
            return None
        self.sent[written.stream] += min(room, len(written.text))
        return written if len(written.text) <= room else replace(written, text=written.text[:room])

    def end(self, ended: ShellEnd) -> ShellEnd:
        return replace(ended, stdout=self.cut(ended.stdout), stderr=self.cut(ended.stderr)) if self.limit is not None else ended

    def cut(self, text: str) -> str:
        if self.limit is None or len(text) <= self.limit:
            return text
        tail = self.limit - self.head
        found = KERNEL_CUT.search(text)
        if found is None:  # all of it arrived: characters are counted exactly
            note = f"{len(text) - self.limit} characters omitted"
        else:  # the kernel kept a head and a tail of the bytes already
            note = f"{found.group(1)} bytes in all, {self.limit} characters kept"
            text = text[: found.start()] + text[found.end() :]
        return f"{text[: self.head]}\n[... output truncated: {note} ...]\n{text[len(text) - tail :] if tail else ''}"
