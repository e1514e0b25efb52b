"""Search by words, dialect by dialect: how common each query word is, the most it can add to a chunk's score,
and the ranking of the chunks that hold the essential words (word_ranking.py decides which are).

SQLite ranks by FTS5's BM25: a word adds at most `idf * (k1 + 1)` to a chunk; its chunks are counted by FTS5
(which stems it as it stemmed the chunks) up to the number that makes it common, never further.
PostgreSQL ranks by `ts_rank`, where a word adds less than 0.1 divided by the query's distinct lexemes; how
common a word is comes from ANALYZE's statistics (an estimate: it orders the words, it bounds nothing).
"""

from __future__ import annotations

import math
from typing import Any

from .database import Tx
from .word_ranking import COMMON_SHARE, SAMPLED, Ranked, Term, best

# FTS5's bm25(): k1 = 1.2, so a word adds at most idf * 2.2 however often a chunk holds it; an idf below zero
# (a word in more than half of the chunks) is taken as 1e-6.
BM25_MOST = 2.2
IDF_FLOOR = 1e-6
# ts_rank with the default weights: a lexeme adds less than 0.1 (its weight, D) before the division.
TS_RANK_MOST = 0.1


_FTS = "vector_store_chunks_fts"
LATEST = 20_000  # the chunks a common word's share is measured among (the latest written)


def _phrases(words: list[str]) -> str:
    return " OR ".join(f'"{word}"' for word in words)


class SQLiteWords:
    def __init__(self, tx: Tx, join: str, where: str, params: list[Any], limit: int) -> None:
        self.tx, self.join, self.where, self.params, self.limit = tx, join, where, params, limit

    async def search(self, words: list[str]) -> Ranked:
        return await best(await self._terms(words), self.limit, self, counted=True)

    async def _terms(self, words: list[str]) -> list[Term]:
        """Each word's chunks, counted up to the number that makes it common (FTS5 stems the word as it indexed
        the chunks), and the share of the latest chunks that hold it: one statement (a search is on a turn's
        path, and each statement a trip to the database's thread)."""
        counts = ", ".join(
            f"(SELECT COUNT(*) FROM (SELECT 1 FROM {_FTS} WHERE {_FTS} MATCH ? LIMIT (SELECT common_from FROM bounds))), "
            f"(SELECT COUNT(*) FROM {_FTS} WHERE {_FTS} MATCH ? AND rowid > (SELECT latest FROM bounds))"
            for _ in words
        )
        statement = (
            "WITH top(chunks) AS (SELECT COALESCE(MAX(seq), 0) FROM vector_store_chunks), "
            "bounds(common_from, latest) AS (SELECT MAX(CAST(? * chunks AS INTEGER), ?), MAX(chunks - ?, 0) FROM top) "
            f"SELECT top.chunks, bounds.common_from, (SELECT COUNT(*) FROM vector_store_chunks WHERE seq > bounds.latest), {counts} "
            "FROM top, bounds"
        )
        params = [value for word in words for value in (f'"{word}"', f'"{word}"')]
        row = (await self.tx.fetch(statement, COMMON_SHARE, self.limit * SAMPLED, LATEST, *params))[0]
        # chunks_at_most: no fewer than FTS5 counts (seqs are never reused), so an idf from it is no less.
        chunks_at_most, common_from, latest, *held = (int(value) for value in row)
        in_latest = max(latest, 1)

        def idf(chunks: int) -> float:
            return max(math.log((chunks_at_most - chunks + 0.5) / (chunks + 0.5)), IDF_FLOOR)

        terms = []
        for n, word in enumerate(words):
            chunks, recent = held[2 * n], held[2 * n + 1]
            if chunks < common_from:  # counted: its idf as FTS5 takes it, or more (a phrase's is FTS5's own count too)
                terms.append(Term(word, chunks, BM25_MOST * idf(chunks), common=False))
            else:  # held by at least `common_from`: its idf is no more than that count's
                weightless = recent / in_latest > 0.5  # in more than half the chunks: BM25 weighs it (nearly) nothing
                terms.append(
                    Term(word, max(chunks, int(recent / in_latest * chunks_at_most)), BM25_MOST * idf(chunks), common=True, weightless=weightless)
                )
        return terms

    async def rank(self, essential: list[Term], others: list[Term], rows: int | None) -> Ranked:
        # bm25() scores the phrases of the branch of the MATCH expression a chunk matched: `(E AND O) OR (E NOT
        # O)` holds exactly the chunks of an essential word, each scored by every word it holds.
        own, other = _phrases([term.word for term in essential]), _phrases([term.word for term in others])
        holds = f"(({own}) AND ({other})) OR (({own}) NOT ({other}))" if others else own
        # The full-text index is read first (CROSS JOIN keeps it outside): a chunk is looked up only once matched.
        matched = (
            "SELECT c.seq AS seq, bm25(vector_store_chunks_fts) AS rank FROM vector_store_chunks_fts "
            f"CROSS JOIN vector_store_chunks c ON c.seq = vector_store_chunks_fts.rowid{self.join} "
            f"WHERE vector_store_chunks_fts MATCH ? AND {self.where}"
        )
        if rows is None:
            found = await self.tx.fetch(f"{matched} ORDER BY rank LIMIT ?", holds, *self.params, self.limit)
        else:
            found = await self.tx.fetch(f"SELECT seq, rank FROM ({matched} LIMIT ?) ORDER BY rank LIMIT ?", holds, *self.params, rows, self.limit)
        return [(int(seq), -float(rank)) for seq, rank in found]  # BM25 as FTS5 gives it: lower is better


class PostgresWords:
    def __init__(self, tx: Tx, join: str, where: str, params: list[Any], limit: int) -> None:
        self.tx, self.join, self.where, self.params, self.limit = tx, join, where, params, limit
        self.query = ""

    async def search(self, words: list[str]) -> Ranked:
        self.query = " | ".join(words)
        return await best(await self._terms(words), self.limit, self, counted=False)

    async def _terms(self, words: list[str]) -> list[Term]:
        # Each word's lexemes, what share of the chunks hold its first (ANALYZE's most common elements; a word
        # not among them is rarer than they are), and the query's distinct lexemes (ts_rank divides by them).
        rows = await self.tx.fetch(
            "SELECT w.word, COALESCE(array_length(tsvector_to_array(to_tsvector('english', w.word)), 1), 0), "
            "COALESCE(s.freqs[array_position(s.elems, (tsvector_to_array(to_tsvector('english', w.word)))[1])], 0), "
            "COALESCE(array_length(tsvector_to_array(to_tsvector('english', ?)), 1), 0) "
            "FROM unnest(?::text[]) WITH ORDINALITY AS w(word, n) LEFT JOIN ("
            "SELECT most_common_elems::text::text[] AS elems, most_common_elem_freqs AS freqs FROM pg_stats "
            "WHERE schemaname = current_schema() AND tablename = 'vector_store_chunks' AND attname = 'words') s ON true ORDER BY w.n",
            " ".join(words),
            words,
        )
        return [
            # float4 scores, compared with a margin; a word PostgreSQL drops as a stop word adds nothing
            Term(word, int(float(share) * 1_000_000), TS_RANK_MOST * int(lexemes) / max(int(distinct), 1) + 1e-6, float(share) > COMMON_SHARE)
            for word, lexemes, share, distinct in rows
        ]

    async def rank(self, essential: list[Term], others: list[Term], rows: int | None) -> Ranked:
        matched = (
            f"SELECT c.seq AS seq, ts_rank(c.words, to_tsquery('english', ?)) AS rank FROM vector_store_chunks c{self.join} "
            f"WHERE c.words @@ to_tsquery('english', ?) AND {self.where}"
        )
        holds = " | ".join(term.word for term in essential)
        if rows is None:
            found = await self.tx.fetch(f"{matched} ORDER BY rank DESC LIMIT ?", self.query, holds, *self.params, self.limit)
        else:
            sql = f"SELECT seq, rank FROM ({matched} LIMIT ?) sampled ORDER BY rank DESC LIMIT ?"
            found = await self.tx.fetch(sql, self.query, holds, *self.params, rows, self.limit)
        return [(int(seq), float(rank)) for seq, rank in found]
