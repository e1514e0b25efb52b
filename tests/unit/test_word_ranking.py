"""Rarest words first (gateway/storage/word_ranking.py), against ranking every chunk: a corpus in memory scored
by FTS5's own BM25 formula, searched both ways."""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections import Counter

from gateway.storage.word_ranking import SAMPLED, Ranked, Term, best

K1, B = 1.2, 0.75


class Corpus:
    """Chunks of words drawn by Zipf's law, ranked as FTS5's bm25() ranks them."""

    def __init__(self, chunks: int, seed: int) -> None:
        rng = random.Random(seed)
        vocabulary = [f"w{n}" for n in range(3000)]
        weights = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(vocabulary))))
        self.chunks = [Counter(rng.choices(vocabulary, cum_weights=weights, k=rng.randint(20, 60))) for _ in range(chunks)]
        self.average = sum(sum(chunk.values()) for chunk in self.chunks) / chunks
        self.held = Counter(word for chunk in self.chunks for word in chunk)
        self.read = 0  # chunks ranked, all calls together

    def idf(self, word: str) -> float:
        n = len(self.chunks)
        return max(math.log((n - self.held[word] + 0.5) / (self.held[word] + 0.5)), 1e-6)

    def score(self, seq: int, words: list[str]) -> float:
        chunk, length = self.chunks[seq], sum(self.chunks[seq].values())
        return sum(
            self.idf(word) * chunk[word] * (K1 + 1) / (chunk[word] + K1 * (1 - B + B * length / self.average)) for word in words if chunk[word]
        )

    def terms(self, words: list[str], common_from: int) -> list[Term]:
        return [Term(word, self.held[word], 2.2 * self.idf(word), self.held[word] >= common_from) for word in words]

    def every(self, words: list[str], limit: int) -> Ranked:
        ranked = [(seq, self.score(seq, words)) for seq, chunk in enumerate(self.chunks) if any(chunk[word] for word in words)]
        return sorted(ranked, key=lambda pair: (-pair[1], pair[0]))[:limit]


class Ranker:
    def __init__(self, corpus: Corpus, words: list[str], limit: int) -> None:
        self.corpus, self.words, self.limit = corpus, words, limit
        self.calls: list[int | None] = []

    async def rank(self, essential: list[Term], others: list[Term], rows: int | None) -> Ranked:
        self.calls.append(rows)
        held = [seq for seq, chunk in enumerate(self.corpus.chunks) if any(chunk[term.word] for term in essential)][:rows]
        self.corpus.read += len(held)
        every = [term.word for term in essential + others]
        ranked = [(seq, self.corpus.score(seq, every)) for seq in held]
        return sorted(ranked, key=lambda pair: (-pair[1], pair[0]))[: self.limit]


def queries(corpus: Corpus, count: int, seed: int) -> list[list[str]]:
    rng = random.Random(seed)
    words = sorted(corpus.held, key=lambda word: -corpus.held[word])
    # One word of the commonest hundred, one of the rest: the shape of most real queries.
    return [[rng.choice(words[:100]), rng.choice(words[100:])] for _ in range(count)]


def test_the_answer_is_the_full_ranking_while_nothing_is_common_and_fewer_chunks_are_read() -> None:
    corpus, limit = Corpus(3000, seed=1), 10
    full_reads, decided = 0, 0
    for words in queries(corpus, 200, seed=2):
        ranker = Ranker(corpus, words, limit)
        found = asyncio.run(best(corpus.terms(words, common_from=10**9), limit, ranker, counted=True))
        expected = corpus.every(words, limit)
        assert [(seq, round(score, 9)) for seq, score in found] == [(seq, round(score, 9)) for seq, score in expected], words
        full_reads += sum(1 for chunk in corpus.chunks if any(chunk[word] for word in words))
        decided += len(ranker.calls) == 1 and len(words) > 1
    assert decided > 100 and corpus.read < full_reads * 0.75  # the rare word decided most answers alone


def test_a_common_word_that_could_pass_the_last_makes_the_next_word_essential() -> None:
    """Two chunks hold the rare word once each, among long text; many short chunks hold a fairly common word
    many times: ranked whole, one of those beats the rare ones, so the rare word alone cannot decide."""
    corpus = Corpus(1, seed=3)
    corpus.chunks = [Counter({"rare": 1, "filler": 200}), Counter({"rare": 1, "filler": 150})]
    corpus.chunks += [Counter({"often": 9, "x": 1})] + [Counter({"filler": 30})] * 60 + [Counter({"often": 1, "filler": 20})] * 20
    corpus.average = sum(sum(chunk.values()) for chunk in corpus.chunks) / len(corpus.chunks)
    corpus.held = Counter(word for chunk in corpus.chunks for word in chunk)
    words, limit = ["rare", "often"], 2
    ranker = Ranker(corpus, words, limit)
    found = asyncio.run(best(corpus.terms(words, common_from=10**9), limit, ranker, counted=True))
    assert found == corpus.every(words, limit) and found[0][0] == 2  # the chunk of `often` nine times leads
    assert len(ranker.calls) == 2  # the rare word's chunks alone were ranked first, and could not decide


def test_common_words_are_ranked_from_a_sample_and_rare_words_still_exactly() -> None:
    corpus, limit = Corpus(4000, seed=4), 10
    common_from = 400
    for words in queries(corpus, 60, seed=5):
        ranker = Ranker(corpus, words, limit)
        found = asyncio.run(best(corpus.terms(words, common_from), limit, ranker, counted=True))
        rare = [word for word in words if corpus.held[word] < common_from]
        assert all(rows in (None, limit * SAMPLED) for rows in ranker.calls)
        # Every chunk of a rare word that the full ranking puts in the answer is in it, with its score.
        expected = dict(corpus.every(words, limit))
        of_rare = {seq: score for seq, score in expected.items() if any(corpus.chunks[seq][word] for word in rare)}
        got = dict(found)
        assert all(seq in got and math.isclose(got[seq], score) for seq, score in of_rare.items()), words
        assert len(found) == min(limit, len(corpus.every(words, 10**9)))
