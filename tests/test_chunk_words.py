"""Search by words on SQLite at a scale where words are common (gateway/storage/chunk_words.py): the chunks
written as ingestion writes them, searched by the gateway's ranking and by FTS5 ranking every match."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from pathlib import Path
from typing import Any

from gateway.storage import Tx, open_database
from gateway.storage.chunk_index import ChunkIndex, Scope, Written
from gateway.storage.vector_store_store import StoreFile, VectorStore, VectorStoreStore

VOCABULARY = [f"w{n}" for n in range(4000)]
WEIGHTS = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(VOCABULARY))))


async def written(path: Path, chunks: int) -> tuple[Any, str]:
    db = open_database(f"sqlite:///{path}", retry_s=5, pool_size=1)
    await db.start()
    stores = VectorStoreStore(db)
    now = int(time.time())
    store = VectorStore("vs_words", "default", "words", None, now, now, {}, None)
    await stores.create(store, 1000)
    rng = random.Random(5)
    files = [
        StoreFile(None, store.id, f"file_{n}", "default", f"doc{n}.txt", None, now, "in_progress", None, 0, {}, {}) for n in range(chunks // 100)
    ]
    await stores.attach(files, [[] for _ in files], 10**6)
    index = ChunkIndex(db)
    for file in files:
        await db.execute("UPDATE vector_store_files SET owner = 'test' WHERE seq = ?", file.seq)
        texts = [" ".join(rng.choices(VOCABULARY, cum_weights=WEIGHTS, k=rng.randint(20, 60))) for _ in range(100)]
        assert await index.complete(file, "test", Written(texts, None, 0), 10**12) == "indexed"
    return db, store.id


async def every_match(db: Any, store_id: str, words: list[str], limit: int) -> list[tuple[int, float]]:
    async def work(tx: Tx) -> list[tuple[int, float]]:
        rows = await tx.fetch(
            "SELECT c.seq, bm25(vector_store_chunks_fts) AS rank FROM vector_store_chunks_fts JOIN vector_store_chunks c "
            "ON c.seq = vector_store_chunks_fts.rowid WHERE vector_store_chunks_fts MATCH ? AND c.vector_store_id = ? ORDER BY rank, c.seq LIMIT ?",
            " OR ".join(f'"{word}"' for word in words),
            store_id,
            limit,
        )
        return [(int(seq), -float(rank)) for seq, rank in rows]

    return await db.transaction(work)


def test_rare_words_are_ranked_as_every_match_would_be_and_common_ones_fill_from_a_sample(tmp_path: Path) -> None:
    async def check() -> None:
        db, store_id = await written(tmp_path / "words.sqlite3", 6000)
        index, scope = ChunkIndex(db), Scope([store_id])
        rng = random.Random(9)
        exact = 0
        for _ in range(60):
            words = [rng.choice(VOCABULARY[:40]), rng.choice(VOCABULARY[200:])]
            found = await index.by_words(scope, words, 10)
            expected = await every_match(db, store_id, words, 10)
            assert len(found) == len(expected) == 10
            # The rare word's chunks that the full ranking puts in the answer are in it, each with its score, to
            # 1e-5: a word in more than half the chunks is left out of the score (2.2e-6 at most), so a chunk
            # that near a tie with the last may give way to it.
            held = {seq for seq, _ in await every_match(db, store_id, words[1:], 10**6)}
            got = dict(found)
            for seq, score in expected:
                if seq in held and seq in got:
                    assert abs(got[seq] - score) < 1e-5, (words, seq)
                elif seq in held:
                    assert abs(found[-1][1] - score) < 1e-5, (words, seq)
            exact += [round(score, 4) for _, score in found] == [round(score, 4) for _, score in expected]
        assert exact >= 50  # most answers are decided by the rare word: the full ranking's, score for score
        # Two common words only: ranked from a sample, the answer still full and every chunk holding one.
        found = await index.by_words(scope, ["w0", "w1"], 10)
        assert len(found) == 10 and all(score > 0 for _, score in found)
        await db.close()

    asyncio.run(check())
