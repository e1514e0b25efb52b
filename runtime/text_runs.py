"""Long runs of one character class in text, found in linear time, and text cut at them.

Byte-pair encoding (openai-harmony's tokenizer) is quadratic in the length of a piece its pre-tokenizer
keeps whole: a run of letters, of punctuation or of whitespace (16,000 spaces cost 137 ms, 200,000 half a
minute), and its pre-tokenizer's regex overflows its stack on runs of a million. Such runs are found here,
before anything reaches the tokenizer, so that the text is cut inside them (`pieces`) or refused.

Each pattern is anchored at the start of a run (the lookbehind), so a run is tried once from its start:
an unanchored `{n,}` would be tried again from every position inside a long run, quadratic too.
"""

from __future__ import annotations

import functools
import re
from typing import Iterator

# The pre-tokenizer's classes that it keeps in one piece (digits it splits by three).
LETTERS, SYMBOLS, SPACE = r"[^\W\d_]", r"(?:_|[^\w\s])", r"\s"
KINDS = (LETTERS, SYMBOLS, SPACE)


@functools.cache
def _long_run(kind: str, limit: int) -> re.Pattern[str]:
    """A run of `kind` longer than `limit`, matched from its first character only: the leading class lets
    the engine skip to candidates fast, and the lookbehind rejects any but a run's first character."""
    return re.compile(f"{kind}(?<!{kind}{kind}){kind}{{{limit}}}")


_REST = {kind: re.compile(f"{kind}*") for kind in KINDS}
_SPACES = re.compile(r"\S+")


def long_runs(text: str, limit: int) -> Iterator[tuple[int, int]]:
    """The spans of the runs longer than `limit` characters, in order of their kind, then of position.
    Only the kinds a quick look (C-speed splits) cannot rule out are searched for."""
    if len(text) <= limit:
        return
    words = any(len(word) > limit for word in text.split())
    spaces = any(len(gap) > limit for gap in _SPACES.split(text))
    for kind, wanted in ((LETTERS, words), (SYMBOLS, words), (SPACE, spaces)):
        if not wanted:
            continue
        pattern, at = _long_run(kind, limit), 0
        while (found := pattern.search(text, at)) is not None:
            stop = _REST[kind].match(text, found.end()).end()  # type: ignore[union-attr]  # `*` always matches
            yield found.start(), stop
            at = stop


def has_long_run(text: str, limit: int) -> bool:
    return next(long_runs(text, limit), None) is not None


def pieces(text: str, limit: int, cut_every: int) -> list[str]:
    """`text` cut inside each run longer than `limit`, every `cut_every` characters from the run's start,
    the last piece of a run at least `cut_every` long: no piece holds a run longer than
    `max(limit, 2 * cut_every)`. Text without such a run is one piece.

    Tokenised piece by piece, a run of one repeated character (spaces, tabs, newlines, a letter) that
    stands on its own gives the tokens of the whole when `cut_every` is a multiple of 128: BPE merges
    such a run into equal blocks from its start and only its last 128 to 256 characters differently
    (tests/test_harmony.py checks it against openai-harmony). Other long runs may tokenise differently
    next to a cut; they come only from model or tool output (requests refuse them)."""
    cuts: list[int] = []
    for start, end in long_runs(text, limit):
        cuts.extend(range(start + cut_every, end - cut_every + 1, cut_every))
    if not cuts:
        return [text]
    bounds = [0, *sorted(cuts), len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]
