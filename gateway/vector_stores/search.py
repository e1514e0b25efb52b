"""Search over vector stores: by words always; by meaning too where an embeddings endpoint is configured,
the two rankings fused by reciprocal rank fusion (RRF), weighted as `ranking_options.hybrid_search` asks.

Scores are in [0, 1], as OpenAI's are: a fused score is divided by the most a chunk can get (first in both
rankings), a score by words alone is BM25's squashed (`s / (s + 1)`). `score_threshold` drops what is
below it. Several queries are searched each, a chunk keeping its best score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..storage.chunk_index import Chunk, ChunkIndex, Scope
from .embeddings import Embeddings

RRF_K = 60  # the usual constant: a chunk's part of a ranking is weight / (RRF_K + its rank)
MIN_CANDIDATES = 20  # each ranking is read this deep at least (4 results' worth otherwise)
MAX_TERMS, MAX_TERM_CHARS = 64, 64
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Ranking:
    score_threshold: float = 0.0
    embedding_weight: float = 1.0
    text_weight: float = 1.0


@dataclass(frozen=True)
class Found:
    chunk: Chunk
    score: float


# English words that are in nearly every chunk of English text: a query's "how do I" would make every chunk a
# candidate to rank, for no part of its score (PostgreSQL's `english` configuration leaves them out too).
STOP_WORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before being below between both but by can "
    "could did do does doing down during each few for from further had has have having he her here hers herself him himself his "
    "how i if in into is it its itself just me more most my myself no nor not now of off on once only or other our ours ourselves "
    "out over own same she should so some such than that the their theirs them themselves then there these they this those "
    "through to too under until up very was we were what when where which while who whom why will with would you your yours "
    "yourself yourselves".split()
)


def words(query: str) -> list[str]:
    """The query's words, as both full-text searches are given them (no operator of theirs survives), stop
    words left out unless there is nothing else."""
    found = list(dict.fromkeys(word for word in _WORD.findall(query.lower()) if len(word) <= MAX_TERM_CHARS))
    meaningful = [word for word in found if word not in STOP_WORDS]
    return (meaningful or found)[:MAX_TERMS]


class Searcher:
    def __init__(self, index: ChunkIndex, embeddings: Embeddings | None) -> None:
        self.index = index
        self.embeddings = embeddings

    @property
    def hybrid(self) -> bool:
        """Chunks are ranked by meaning too."""
        return self.embeddings is not None and self.index.vectors

    async def search(self, scope: Scope, queries: list[str], max_results: int, ranking: Ranking) -> list[Found]:
        vectors: list[list[float] | None] = [None] * len(queries)
        if self.embeddings is not None and self.index.vectors and ranking.embedding_weight > 0 and queries:
            vectors = list(await self.embeddings.embed(queries))  # every query in one request
        best: dict[int, float] = {}
        for query, vector in zip(queries, vectors):
            for seq, score in await self._ranked(scope, query, vector, max_results, ranking):
                best[seq] = max(best.get(seq, 0.0), score)
        kept = sorted(((score, seq) for seq, score in best.items() if score >= ranking.score_threshold), key=lambda pair: (-pair[0], pair[1]))
        kept = kept[:max_results]
        chunks = await self.index.chunks([seq for _, seq in kept])
        return [
            Found(chunk, round(score, 6))
            for score, seq in kept
            if (chunk := chunks.get(seq)) is not None  # removed since it was ranked
        ]

    async def _ranked(self, scope: Scope, query: str, vector: list[float] | None, max_results: int, ranking: Ranking) -> list[tuple[int, float]]:
        """One query's chunks and scores; `vector`: the query's embedding (None: it is not ranked by meaning)."""
        depth = max(max_results * 4, MIN_CANDIDATES)
        terms = words(query)
        by_words = await self.index.by_words(scope, terms, depth) if terms else []
        if not self.hybrid:
            return [(seq, score / (score + 1.0)) for seq, score in by_words if score > 0]
        by_meaning = await self.index.by_vector(scope, vector, depth) if vector is not None else []
        weights = (ranking.text_weight, ranking.embedding_weight)
        fused: dict[int, float] = {}
        for weight, ranked in zip(weights, (by_words, by_meaning)):
            if weight <= 0:  # a ranking weighed 0 is left out
                continue
            for rank, (seq, _) in enumerate(ranked, start=1):
                fused[seq] = fused.get(seq, 0.0) + weight / (RRF_K + rank)
        most = sum(weights) / (RRF_K + 1)
        return [(seq, score / most) for seq, score in fused.items()] if most > 0 else []
