"""Search by words without ranking every chunk that holds a common word (MaxScore, query by query).

A common word ("install" in a store of manuals) is in a large share of the chunks, and ranking each of them is
what made a search slow at scale; yet such a word adds little to any chunk's score. So the query's words are
taken rarest first: the chunks holding one of the first few ("essential") are ranked by every word of the
query, and if the last of the `limit` best scores more than a chunk holding only the other words could
possibly score (each word's most, summed), no other chunk can enter the best: the result is the exact one,
found by ranking only the essential words' chunks. Otherwise the next rarest word is made essential, up to
the common words, whose chunks are ranked from a sample (`best`).

The dialects say how common a word is and the most it can add (chunk_words.py): how common orders the words,
the most a word can add is an upper bound, so what the rare words decide is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

Ranked = list[tuple[int, float]]  # chunk seq and score, best first


@dataclass(frozen=True)
class Term:
    word: str  # as the query has it: each full-text search stems it itself
    chunks: int  # how many chunks hold it, or an estimate (only the order is taken from an estimate)
    most: float  # the most it can add to any chunk's score (an upper bound)
    common: bool  # held by more than COMMON_SHARE of the chunks
    weightless: bool = False  # a common word the score all but ignores (BM25: one in more than half the chunks)


# A word held by more than this share of the chunks is common: its chunks are many and alike (BM25 weighs it
# little, a word in more than half of them not at all), and they are not all ranked (`best`).
COMMON_SHARE = 0.005
SAMPLED = 100  # the chunks of common words ranked: the first `limit * SAMPLED` in the scope (recall: README)


class Ranker(Protocol):
    async def rank(self, essential: list[Term], others: list[Term], rows: int | None) -> Ranked:
        """The best `limit` of the chunks that hold an essential term (of the first `rows` of them, when
        given), scored by every term."""


async def best(terms: list[Term], limit: int, ranker: Ranker, counted: bool) -> Ranked:
    """The `limit` best chunks for `terms`. `counted`: each term's `chunks` is exact, so essential words too
    few to fill the answer are not tried alone.

    Exact while the rare words decide it: their chunks are all ranked, and the answer stands once its last
    scores more than the other words could add. What they leave undecided is a common word's: its chunks
    (the rarest common word's first) are ranked from the first `limit * SAMPLED` in the scope, a top-k that
    stops early. A scope that small (every test's) is ranked whole, so exactly."""
    # A weightless word is left out of the ranking while another is there (it would move a score by no more
    # than its `most`, 2.2e-6 for BM25), so its chunks are neither read nor counted.
    scored = [term for term in terms if not term.weightless] or terms
    rare = sorted((term for term in scored if not term.common), key=lambda term: term.chunks)
    common = sorted((term for term in scored if term.common), key=lambda term: term.chunks)
    found: Ranked = []
    for cut in range(1, len(rare) + 1):
        essential, others = rare[:cut], rare[cut:] + common
        if counted and cut < len(rare) and sum(term.chunks for term in essential) < limit:
            continue  # too few chunks to fill the answer: the next word must be ranked too
        found = await ranker.rank(essential, others, None)
        if len(found) >= limit and (not others or found[limit - 1][1] > sum(term.most for term in others)):
            return found
        if not others and len(scored) == len(terms):
            return found  # every chunk of every word was ranked
    kept = dict(found)
    # The common words' chunks, the rarest word's first, each scored by the words that weigh (a weightless
    # word is left out of the score here too: counting its chunks would cost what sampling saves); another
    # word's only while the answer has room.
    weighing = [term for term in terms if not term.weightless]
    weightless = sorted((term for term in terms if term.weightless and term not in common), key=lambda term: term.chunks)
    for word in common + weightless:
        sampled = await ranker.rank([word], [term for term in weighing if term is not word], limit * SAMPLED)
        for seq, score in sampled:
            kept.setdefault(seq, score)
        if len(kept) >= limit:
            break
    return sorted(kept.items(), key=lambda pair: -pair[1])[:limit]
