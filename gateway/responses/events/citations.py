"""The model's citations made into annotations as the text streams: `【CURSOR†L{a}-L{b}】` of a browser's
page, `【N†FILENAME】` of a file_search result.

A page's citation is replaced, as OpenAI's web search writes its answers, by a Markdown link to the cited
page, `([domain](url))`, which its `url_citation` spans; a file's citation is taken out of the text and
becomes a `file_citation` at the place it stood, as OpenAI's file search annotates its answers. A
citation nothing resolves is left as the model wrote it. Text from a `【` is held back until it is clear
whether it is a citation: at most MAX_CITATION characters, so a stray bracket delays the stream by little.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable
from urllib.parse import unquote

from connectors.browser.pages import domain_of

MAX_CITATION = 160
_CITATION = re.compile(r"【(\d{1,6})†([^【】\n]{1,150})】")
_PREFIX = re.compile(r"【\d{0,6}(?:†[^【】\n]{0,150})?")
LINES = re.compile(r"L(\d{1,7})(?:-L(\d{1,7}))?")


@dataclass(frozen=True)
class UrlCitation:
    url: str
    title: str


@dataclass(frozen=True)
class FileCitation:
    file_id: str
    filename: str


Cited = UrlCitation | FileCitation
Resolve = Callable[[int, str], "Cited | None"]  # (the number, what follows †) → what it cites


@dataclass
class Piece:
    text: str
    annotation: dict[str, Any] | None = None  # set when `text` is a citation's link (or empty, a file's place)


class CitationRewriter:
    def __init__(self, resolve: Resolve) -> None:
        self.resolve = resolve
        self._pending = ""
        self._length = 0  # characters given out so far: where the next piece starts
        self._last = ""  # the last character given out

    def feed(self, text: str) -> list[Piece]:
        buffer, self._pending = self._pending + text, ""
        pieces: list[Piece] = []
        while buffer:
            start = buffer.find("【")
            if start < 0:
                pieces.append(self._plain(buffer))
                break
            if start > 0:
                pieces.append(self._plain(buffer[:start]))
                buffer = buffer[start:]
            end = buffer.find("】", 0, MAX_CITATION + 1)
            if end < 0:
                if len(buffer) <= MAX_CITATION and _PREFIX.fullmatch(buffer):
                    self._pending = buffer  # may still become a citation
                    break
                pieces.append(self._plain(buffer[0]))  # a bracket that starts no citation
                buffer = buffer[1:]
                continue
            match = _CITATION.fullmatch(buffer, 0, end + 1)
            if match is None:
                pieces.append(self._plain(buffer[0]))
                buffer = buffer[1:]
                continue
            pieces += self._citation(match)
            buffer = buffer[end + 1 :]
        return [piece for piece in pieces if piece.text or piece.annotation is not None]

    def flush(self) -> list[Piece]:
        """The end of the message: what was held back is plain text."""
        held, self._pending = self._pending, ""
        return [self._plain(held)] if held else []

    def _plain(self, text: str) -> Piece:
        if text:
            self._length += len(text)
            self._last = text[-1]
        return Piece(text)

    def _citation(self, match: re.Match[str]) -> list[Piece]:
        cited = self.resolve(int(match.group(1)), match.group(2))
        if cited is None:
            return [self._plain(match.group(0))]
        if isinstance(cited, FileCitation):
            annotation = {"type": "file_citation", "file_id": cited.file_id, "filename": cited.filename, "index": self._length}
            return [Piece("", annotation)]
        url, title = cited.url, cited.title
        pieces = [self._plain(" ")] if self._last and not self._last.isspace() and self._last not in "([" else []
        link = f"([{domain_of(url)}]({url}))"
        start = self._length
        self._plain(link)
        annotation = {"type": "url_citation", "start_index": start, "end_index": start + len(link), "title": title, "url": url}
        return pieces + [Piece(link, annotation)]


# gpt-oss links the files its code wrote as `sandbox:/mnt/data/NAME`, as OpenAI's models do.
_SANDBOX_LINK = re.compile(r"sandbox:/mnt/data/((?:[^\s()\[\]<>\"'`]|\([^\s()]*\))+)")

FileLookup = Callable[[str], "dict[str, Any] | None"]  # a path under /mnt/data → the annotation's fields


def container_file_citations(text: str, lookup: FileLookup) -> list[dict[str, Any]]:
    """`container_file_citation` annotations of a finished message: each spans a `sandbox:/mnt/data/PATH`
    link to a file the container has, as OpenAI announces them, after the message's last delta."""
    found = []
    for match in _SANDBOX_LINK.finditer(text):
        path = unquote(match.group(1).rstrip(".,;:!?"))
        citation = lookup(path)
        if citation is not None:
            end = match.start() + len("sandbox:/mnt/data/") + len(match.group(1).rstrip(".,;:!?"))
            found.append(citation | {"start_index": match.start(), "end_index": end})
    return found
