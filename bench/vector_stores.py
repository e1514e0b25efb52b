"""Vector stores and file_search: ingestion, search latency, and what a file_search turn costs (not a timed
test; prints figures).

1. Ingestion: `--files` text files of `--file-kb` KB uploaded, put in a store in batches, timed until every
   one is completed, words only and with the emulator's embeddings; meanwhile /metrics is read every 0.2 s
   for the event loop's longest stall (`gateway_event_loop_lag_max_seconds`).
2. Search: stores of 10k and 100k chunks (and 1M: --sizes) written straight into the database (SQLite, and
   PostgreSQL with pgvector, its HNSW index built after, timed), then `POST /v1/vector_stores/{id}/search`
   timed, p50 and p95, by words and hybrid (with --before DIR, a gateway run from an older checkout searches
   the same store first); then recall@10 against the exact search, by meaning and by words.
3. The file_search turn: the gateway's CPU time per response, with a file_search call and without one.

Run: .venv/bin/python bench/vector_stores.py [--files 1000] [--file-kb 10] [--searches 200] [--sizes 10000,100000]
     [--skip-postgres] [--skip-sqlite] [--search-only] [--before DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.storage import Tx, open_database  # noqa: E402
from gateway.storage.chunk_index import ChunkIndex, Scope, Written  # noqa: E402
from gateway.storage.chunk_words import PostgresWords, SQLiteWords  # noqa: E402
from gateway.storage.database import Dialect  # noqa: E402
from gateway.storage.vector_store_store import StoreFile, VectorStore, VectorStoreStore  # noqa: E402
from gateway.storage.word_ranking import Term  # noqa: E402
from gateway.vector_stores.search import STOP_WORDS  # noqa: E402
from gateway.vector_stores.search import words as search_words  # noqa: E402
from tests import conftest  # noqa: E402
from tests.conftest import ROOT, Gateway, gateway_config, start_emulator  # noqa: E402
from tests.emulator import EMBEDDING_DIMENSIONS, EMBEDDING_MODEL, embedding  # noqa: E402

# Text like English: four words in ten are stop words, the others drawn from 30,000 by Zipf's law (a few
# everywhere, most rare). A query asks as people do: "how do I" and two words drawn the same way.
STOP = sorted(STOP_WORDS)
VOCABULARY = [f"w{n}" for n in range(30_000)]
WEIGHTS = list(itertools.accumulate(1 / (rank + 1) for rank in range(len(VOCABULARY))))


def words(rng: random.Random, count: int) -> str:
    content = rng.choices(VOCABULARY, cum_weights=WEIGHTS, k=count)
    return " ".join(rng.choice(STOP) if rng.random() < 0.4 else word for word in content)


def query(rng: random.Random) -> str:
    return "how do I " + " ".join(rng.choices(VOCABULARY, cum_weights=WEIGHTS, k=2))


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms, p95 {p95 * 1000:7.1f} ms"


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def embeddings_section(emulator_url: str) -> dict[str, Any]:
    return {"embeddings": {"url": emulator_url, "model": EMBEDDING_MODEL, "dimensions": EMBEDDING_DIMENSIONS, "batch_size": 128}}


# -- 1. ingestion ---------------------------------------------------------------------------------------------


def ingest(gateway: Gateway, files: int, file_kb: int) -> None:
    api = gateway.client(timeout=120)
    rng = random.Random(1)
    ids = [
        api.files.create(file=(f"doc{n}.txt", io.BytesIO(words(rng, file_kb * 1024 // 6).encode())), purpose="assistants").id for n in range(files)
    ]
    store = api.vector_stores.create(name="bench")
    started = time.perf_counter()
    for start in range(0, len(ids), 500):
        api.vector_stores.file_batches.create(store.id, file_ids=ids[start : start + 500])
    stall = 0.0
    while True:
        metrics = httpx.get(gateway.url + "/metrics").text
        stall = max(stall, *(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("gateway_event_loop_lag_max_seconds")))
        counts = api.vector_stores.retrieve(store.id).file_counts
        if counts.in_progress == 0:
            break
        time.sleep(0.2)
    elapsed = time.perf_counter() - started
    print(f"  {counts.completed} files completed ({counts.failed} failed) in {elapsed:6.1f} s; longest event-loop stall {stall * 1000:5.1f} ms")


# -- 2. search ------------------------------------------------------------------------------------------------

HNSW_INDEX = "CREATE INDEX IF NOT EXISTS vector_store_chunks_embedding ON vector_store_chunks USING hnsw (embedding vector_cosine_ops)"


async def fill(url: str, chunks: int) -> str:
    """A store of `chunks` chunks of 60 words (100 per file) with their vectors, written as ingestion writes
    them; on PostgreSQL without the HNSW index (built after, timed: `build_index`)."""
    db = open_database(url, retry_s=5, pool_size=4)
    await db.start()
    store, index = VectorStoreStore(db), ChunkIndex(db)
    await index.prepare_vectors(EMBEDDING_MODEL, EMBEDDING_DIMENSIONS)
    if db.dialect is Dialect.POSTGRESQL:
        await db.execute("DROP INDEX IF EXISTS vector_store_chunks_embedding")
    now = int(time.time())
    record = VectorStore(f"vs_bench{chunks}", "default", "bench", None, now, now, {}, None)
    await store.create(record, 1000)
    rng = random.Random(chunks)
    per_file = 100
    for first in range(0, chunks, per_file * 50):
        files = [
            StoreFile(None, record.id, f"file_{n}", "default", f"doc{n}.txt", None, now, "in_progress", None, 0, {}, {})
            for n in range(first // per_file, min(chunks, first + per_file * 50) // per_file)
        ]
        await store.attach(files, [[] for _ in files], 10**6)
        for file in files:
            await db.execute("UPDATE vector_store_files SET owner = 'bench' WHERE seq = ?", file.seq)
            texts = [words(rng, 60) for _ in range(per_file)]
            await index.complete(file, "bench", Written(texts, [embedding(text) for text in texts], 0), 10**12)
    if db.dialect is Dialect.POSTGRESQL:
        await db.execute("ANALYZE vector_store_chunks")  # as autovacuum would have by now: word statistics
    await db.close()
    return record.id


async def build_index(url: str) -> float:
    db = open_database(url, retry_s=5, pool_size=1)
    await db.start()
    started = time.perf_counter()
    await db.maintain(f"SET maintenance_work_mem = '1GB'; {HNSW_INDEX}")  # as the gateway builds it, but not concurrently
    elapsed = time.perf_counter() - started
    await db.close()
    return elapsed


DEPTH = 40  # what the gateway asks of each ranking for 10 results (search.py: 4 results' worth)


async def recall(url: str, store_id: str, queries: int) -> str:
    """recall@10 of what the gateway searches against the exact search: by meaning (approximate index vs
    every vector measured), and by words (rarest words first and sampled common words vs every match ranked)."""
    db = open_database(url, retry_s=5, pool_size=2)
    await db.start()
    index = ChunkIndex(db, search_timeout_s=300, exact_search_below=0)
    await index.prepare_vectors(EMBEDDING_MODEL, EMBEDDING_DIMENSIONS)
    if index.indexable:
        await index.keep_index()  # built by now (build_index): searched through it from here
    rng = random.Random(11)
    scope = Scope([store_id])
    meaning, meaning_ties, by_words = [], [], []
    ranker = PostgresWords if db.dialect is Dialect.POSTGRESQL else SQLiteWords
    for _ in range(queries):
        text = query(rng)
        vector = embedding(text)
        nearest = (await index.by_vector(scope, vector, DEPTH, exact=True))[:10]
        found = (await index.by_vector(scope, vector, DEPTH))[:10]
        meaning.append(len({seq for seq, _ in nearest} & {seq for seq, _ in found}) / max(len(nearest), 1))
        # Near-ties too: a chunk found counts when it is as near as the exact answer's last.
        meaning_ties.append(sum(1 for _, similarity in found if similarity >= nearest[-1][1] - 1e-6) / max(len(nearest), 1))
        terms = search_words(text)

        async def every_match(tx: Tx, terms: list[str] = terms) -> Any:
            join, where, params = scope.where()
            everything = [Term(word, 0, 0.0, False) for word in terms]
            return (await ranker(tx, join, where, params, DEPTH).rank(everything, [], None))[:10]

        ranked = await db.transaction(every_match)
        found_words = (await index.by_words(scope, terms, DEPTH))[:10]
        # Many chunks tie (the same words, as often, in as long a chunk): a chunk found counts when it scores as
        # high as the exact answer's last (less 1e-5: a weightless word left out moves a score by 2.2e-6 at most).
        last = ranked[-1][1] if ranked else 0.0
        hits = sum(1 for _, score in found_words if score >= last - 1e-5)
        by_words.append(hits / len(ranked) if ranked else 1.0)
    await db.close()
    mode = "HNSW" if index.approximate else "exact"
    return (
        f"recall@10 by meaning ({mode}) {statistics.mean(meaning):.3f} (min {min(meaning):.1f}; near-ties counted "
        f"{statistics.mean(meaning_ties):.3f}), by words {statistics.mean(by_words):.3f} (min {min(by_words):.1f})"
    )


def time_searches(gateway: Gateway, store_id: str, searches: int) -> list[float]:
    rng = random.Random(7)
    timings = []
    with httpx.Client(base_url=gateway.url, timeout=60) as client:
        client.post(f"/v1/vector_stores/{store_id}/search", json={"query": "warm up"})
        for _ in range(searches):
            body = {"query": query(rng), "max_num_results": 10}
            started = time.perf_counter()
            assert client.post(f"/v1/vector_stores/{store_id}/search", json=body).status_code == 200
            timings.append(time.perf_counter() - started)
    return timings


def searched(emulator_url: str, workdir: Path, url: str, store_id: str, searches: int, source: Path, label: str) -> None:
    """Words, then hybrid, through a gateway run from `source` (this checkout, or an older one: --before)."""
    for hybrid in (False, True):
        sections: dict[str, Any] = {"storage": {"url": url}}
        if hybrid:
            sections["vector_stores"] = embeddings_section(emulator_url)
        conftest.ROOT = source  # the gateway process runs from there
        gateway = Gateway(gateway_config(emulator_url, workdir, **sections), workdir).start()
        try:
            timings = time_searches(gateway, store_id, searches)
        finally:
            gateway.stop()
            conftest.ROOT = ROOT
        print(f"    {label:6} {'hybrid' if hybrid else 'words '}: {percentiles(timings)}", flush=True)


def search_latency(emulator_url: str, tmp: Path, backend: str, sizes: list[int], searches: int, before: Path | None) -> None:
    postgres = None
    if backend == "postgresql":
        from tests.servers import PostgresServer, pgvector_binaries

        postgres = PostgresServer(pgvector_binaries()).start()
    try:
        for size in sizes:
            workdir = Path(tempfile.mkdtemp(dir=tmp))
            url = postgres.new_database() if postgres is not None else f"sqlite:///{workdir / 'db.sqlite3'}"
            started = time.perf_counter()
            store_id = asyncio.run(fill(url, size))
            print(f"  {backend}, {size} chunks (written in {time.perf_counter() - started:.0f} s):", flush=True)
            if before is not None:
                searched(emulator_url, workdir, url, store_id, searches, before, "before")
            if postgres is not None:
                print(f"    HNSW index built in {asyncio.run(build_index(url)):.1f} s", flush=True)
            searched(emulator_url, workdir, url, store_id, searches, ROOT, "after")
            print(f"    {asyncio.run(recall(url, store_id, min(searches, 100)))}", flush=True)
    finally:
        if postgres is not None:
            postgres.close()


# -- 3. the file_search turn ----------------------------------------------------------------------------------


def turn_cpu(gateway: Gateway, requests: int) -> None:
    api = gateway.client(timeout=60)
    file_id = api.files.create(file=("notes.md", io.BytesIO(b"The archive is in the basement, behind the boiler.")), purpose="assistants").id
    store = api.vector_stores.create(name="turn", file_ids=[file_id])
    while api.vector_stores.retrieve(store.id).file_counts.in_progress:
        time.sleep(0.1)
    tools: Any = [{"type": "file_search", "vector_store_ids": [store.id]}]
    asked = 'Where is the archive? [[call file_search.msearch {"queries": ["archive"]}]][[answer In the basement.【0†notes.md】]]'
    assert gateway.proc is not None
    for label, body in (("a plain answer", {"input": "Where is the archive?"}), ("a file_search turn", {"input": asked, "tools": tools})):
        api.responses.create(model="openai/gpt-oss-20b", store=False, **body)  # warm-up
        before = cpu_s(gateway.proc.pid)
        for _ in range(requests):
            api.responses.create(model="openai/gpt-oss-20b", store=False, **body)
        print(f"  {label:20}: {(cpu_s(gateway.proc.pid) - before) / requests * 1000:6.2f} ms of gateway CPU per response")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--file-kb", type=int, default=10)
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    parser.add_argument("--search-only", action="store_true")
    parser.add_argument("--before", type=Path, help="an older checkout: its gateway searched the same stores first")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-vector-stores-"))
    emulator = start_emulator(tmp)
    try:
        for label, sections in (
            () if args.search_only else (("words only", {}), ("with embeddings", {"vector_stores": embeddings_section(emulator.url)}))
        ):
            workdir = Path(tempfile.mkdtemp(dir=tmp))
            gateway = Gateway(gateway_config(emulator.url, workdir, **sections), workdir).start()
            try:
                print(f"ingestion of {args.files} files of {args.file_kb} KB, {label}:")
                ingest(gateway, args.files, args.file_kb)
                if not sections:
                    print(f"the file_search turn ({args.turns} responses each):")
                    turn_cpu(gateway, args.turns)
            finally:
                gateway.stop()
        sizes = [int(size) for size in args.sizes.split(",")]
        print(f'search, {args.searches} queries ("how do I" and two words), 10 results:')
        backends = [name for name, skip in (("sqlite", args.skip_sqlite), ("postgresql", args.skip_postgres)) if not skip]
        for backend in backends:
            search_latency(emulator.url, tmp, backend, sizes, args.searches, args.before)
    finally:
        emulator.stop()


if __name__ == "__main__":
    main()
