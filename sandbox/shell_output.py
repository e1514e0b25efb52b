"""`max_output_length` as OpenAI defines it: the most characters one command returns, its stdout and stderr
together and the note that says what was cut included. The kernel caps each stream in bytes (at most four
per character in UTF-8); the text is cut to the characters asked for here, live and at the end, and what
was streamed live is always the start of what the command returns."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from .channel import ShellEnd, ShellOutput

MAX_TAIL_CHARS = 2048
NOTE_ROOM = 60  # the longest note (`_note`): a stream cut keeps this much of its share for it
NOTED_FROM = 4 * NOTE_ROOM  # a smaller limit is cut without a note: there is no room to say it
# How the kernel marks the bytes it left out between the head and the tail it kept (kernel.py, Capture.text).
KERNEL_CUT = re.compile(r"\n\[\.\.\. output truncated: \d+ bytes omitted of (\d+) \.\.\.\]\n")
STREAMS = ("stdout", "stderr")


@dataclass
class _Stream:
    text: str  # what the command wrote, the kernel's note taken out
    sent: int  # characters streamed live: the head it keeps
    written_bytes: int | None  # all the bytes it wrote, where the kernel cut them (its text is not whole)


class CharacterLimit:
    """One command's output within `limit` characters (None: only the configured byte cap)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        reserve = 2 * NOTE_ROOM + min(limit // 4, MAX_TAIL_CHARS) if limit is not None and limit >= NOTED_FROM else 0
        self.head = limit - reserve if limit is not None else 0  # the characters streamed live, both streams together
        self.sent = {"stdout": 0, "stderr": 0}

    def kernel_bytes(self, configured: int) -> int:
        """The byte cap to ask the kernel for, per stream."""
        return min(4 * self.limit, configured) if self.limit is not None else configured

    def live(self, written: ShellOutput) -> ShellOutput | None:
        """What of a live line to send: the head that will be kept, nothing past it."""
        if self.limit is None:
            return written
        room = self.head - sum(self.sent.values())
        if room <= 0:
            return None
        self.sent[written.stream] += min(room, len(written.text))
        return written if len(written.text) <= room else replace(written, text=written.text[:room])

    def end(self, ended: ShellEnd) -> ShellEnd:
        if self.limit is None:
            return ended
        streams = [_read(text, self.sent[name]) for name, text in zip(STREAMS, (ended.stdout, ended.stderr))]
        whole = all(stream.written_bytes is None for stream in streams) and sum(len(stream.text) for stream in streams) <= self.limit
        if whole:
            return replace(ended, stdout=streams[0].text, stderr=streams[1].text)
        # A stream streamed whole is kept whole; the others share what the heads left, each for its note and tail.
        cut = [stream.written_bytes is not None or len(stream.text) > stream.sent for stream in streams]
        budget = self.limit - sum(stream.sent if is_cut else len(stream.text) for stream, is_cut in zip(streams, cut))
        kept = [self._kept(stream, budget // sum(cut)) if is_cut else stream.text for stream, is_cut in zip(streams, cut)]
        return replace(ended, stdout=kept[0], stderr=kept[1])

    def _kept(self, stream: _Stream, share: int) -> str:
        """A stream that did not fit: its head as streamed, then in `share` characters the note and its tail."""
        rest = len(stream.text) - stream.sent
        if stream.written_bytes is None and rest <= share:
            return stream.text
        if self.head == self.limit:  # no room for a note: it keeps its start, cut
            return stream.text[: stream.sent + share]
        tail = 0
        for _ in range(3):  # the note's length depends on the number it says, which depends on the tail's
            note = _note(rest - tail, stream.written_bytes)
            tail = max(min(share - len(note), rest), 0)
        return f"{stream.text[: stream.sent]}{note}{stream.text[len(stream.text) - tail :] if tail else ''}"


def _read(text: str, sent: int) -> _Stream:
    found = KERNEL_CUT.search(text)
    if found is None:
        return _Stream(text, sent, None)
    return _Stream(text[: found.start()] + text[found.end() :], sent, int(found.group(1)))


def _note(omitted: int, written_bytes: int | None) -> str:
    if written_bytes is not None:  # the kernel left bytes out too: characters cannot be counted
        return f"\n[... output truncated: {written_bytes} bytes written in all ...]\n"
    return f"\n[... output truncated: {omitted} characters omitted ...]\n"
