"""The Vector Stores API through the openai SDK: stores made from uploaded files, ingested in the
background, searched by words (and by meaning with an embeddings endpoint: test_file_search.py), with
`filters` over the files' attributes; batches; hostile files failing alone; tenants apart."""

from __future__ import annotations

import io
import os
import secrets
import time
import zipfile
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest

from .conftest import Gateway, Process, gateway_config

CORPUS = {
    "cars.md": "# Car care\nChange the engine oil of your car every 5000 miles, and check the brakes and the tires.",
    "dogs.txt": "Training a puppy takes patience: reward the dog at once, and keep the lessons short.",
    "tea.md": "Green tea is brewed at 80 degrees for two minutes; black tea wants boiling water.",
    "page.html": "<html><head><title>Bread</title><script>var oil = 1;</script></head><body><h1>Sourdough bread</h1>"
    "<p>Feed the starter with flour and water the night before you bake the bread.</p></body></html>",
}


def pdf(text: str) -> bytes:
    """A one-page PDF showing `text`, written by hand."""
    content = b"BT /F1 12 Tf 72 712 Td (" + text.encode() + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO(b"%PDF-1.4\n")
    out.seek(0, 2)
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1) + b"".join(b"%010d 00000 n \n" % offset for offset in offsets))
    out.write(b"trailer << /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


@pytest.fixture(scope="module")
def stores_gateway(emulator: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("vector-stores")
    keys = [{"key": "sk-one", "tenant": "one"}, {"key": "sk-two", "tenant": "two"}]
    process = Gateway(gateway_config(emulator.url, workdir, auth={"api_keys": keys}), workdir).start()
    yield process
    process.stop()


def client(gateway: Gateway, key: str = "sk-one") -> openai.OpenAI:
    return gateway.client(api_key=key)


def upload(api: openai.OpenAI, name: str, content: str | bytes) -> str:
    data = content.encode() if isinstance(content, str) else content
    return api.files.create(file=(name, io.BytesIO(data)), purpose="assistants").id


def ready(api: openai.OpenAI, store_id: str, timeout: float = 60) -> Any:
    """The store once none of its files is in progress."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        store = api.vector_stores.retrieve(store_id)
        if store.file_counts.in_progress == 0:
            return store
        time.sleep(0.1)
    raise AssertionError(f"{store_id} is still ingesting: {store}")


def test_a_store_made_from_uploads_is_ingested_and_searched(stores_gateway: Gateway) -> None:
    api = client(stores_gateway)
    ids = {name: upload(api, name, text) for name, text in CORPUS.items()}
    store = api.vector_stores.create(
        name="handbook", file_ids=list(ids.values()), metadata={"team": "docs"}, expires_after={"anchor": "last_active_at", "days": 7}
    )
    assert store.object == "vector_store" and store.name == "handbook" and store.metadata == {"team": "docs"}
    assert store.file_counts.total == 4 and store.expires_after is not None and store.expires_after.days == 7

    store = ready(api, store.id)
    assert store.status == "completed" and store.file_counts.completed == 4 and store.file_counts.failed == 0
    assert store.usage_bytes > 0 and store.expires_at == store.last_active_at + 7 * 86400

    page = api.vector_stores.search(store.id, query="how often to change the oil")
    results = list(page)
    assert results[0].filename == "cars.md" and results[0].file_id == ids["cars.md"]
    assert 0 < results[0].score <= 1 and "engine oil" in results[0].content[0].text
    # HTML is indexed as its text: the script's words are not.
    bread = list(api.vector_stores.search(store.id, query="sourdough starter"))
    assert bread[0].filename == "page.html" and "var oil" not in bread[0].content[0].text
    assert [result.filename for result in api.vector_stores.search(store.id, query="oil")] == ["cars.md"]
    # Several queries: each searched, a file found by either is found.
    both = {result.filename for result in api.vector_stores.search(store.id, query=["green tea", "puppy"])}
    assert {"tea.md", "dogs.txt"} <= both
    # A threshold above every score leaves nothing; max_num_results bounds the rest.
    assert list(api.vector_stores.search(store.id, query="tea", ranking_options={"score_threshold": 1.0})) == []
    assert len(list(api.vector_stores.search(store.id, query="the", max_num_results=1))) <= 1

    content = api.vector_stores.files.content(ids["tea.md"], vector_store_id=store.id)
    assert [part.text for part in content] == [CORPUS["tea.md"]]
    listed = api.vector_stores.files.list(store.id, filter="completed", limit=2)
    assert len(listed.data) == 2 and listed.has_more
    assert len(api.vector_stores.files.list(store.id, filter="failed").data) == 0

    renamed = api.vector_stores.update(store.id, name="manual", expires_after=None)
    assert renamed.name == "manual" and renamed.expires_after is None and renamed.expires_at is None
    assert store.id in [each.id for each in api.vector_stores.list()]

    # A file taken out leaves the search; deleting the store removes it.
    assert api.vector_stores.files.delete(ids["cars.md"], vector_store_id=store.id).deleted
    assert all(result.filename != "cars.md" for result in api.vector_stores.search(store.id, query="engine oil"))
    assert api.vector_stores.retrieve(store.id).file_counts.total == 3
    assert api.vector_stores.delete(store.id).deleted
    with pytest.raises(openai.NotFoundError):
        api.vector_stores.retrieve(store.id)


def test_upload_and_poll_and_batches(stores_gateway: Gateway, tmp_path: Path) -> None:
    api = client(stores_gateway)
    store = api.vector_stores.create(name="batches")
    path = tmp_path / "notes.md"
    path.write_text("Meeting notes: the launch moves to March.")
    added = api.vector_stores.files.upload_and_poll(vector_store_id=store.id, file=path)
    assert added.status == "completed" and added.object == "vector_store.file" and added.usage_bytes > 0

    first, second = upload(api, "a.txt", "alpha report"), upload(api, "b.txt", "beta report")
    batch = api.vector_stores.file_batches.create(
        store.id,
        files=[{"file_id": first, "attributes": {"kind": "a"}}, {"file_id": second}],
        attributes={"kind": "shared"},
        chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 200, "chunk_overlap_tokens": 50}},
    )
    assert batch.object == "vector_store.files_batch" and batch.file_counts.total == 2
    batch = api.vector_stores.file_batches.poll(batch.id, vector_store_id=store.id, poll_interval_ms=100)
    polled = api.vector_stores.file_batches.create_and_poll(store.id, file_ids=[upload(api, "c.txt", "gamma report")], poll_interval_ms=100)
    assert polled.status == "completed" and polled.file_counts.completed == 1
    assert batch.status == "completed" and batch.file_counts.completed == 2
    files = {file.id: file for file in api.vector_stores.file_batches.list_files(batch.id, vector_store_id=store.id)}
    assert files[first].attributes == {"kind": "a"} and files[second].attributes == {"kind": "shared"}
    assert files[first].chunking_strategy is not None and files[first].chunking_strategy.static.max_chunk_size_tokens == 200  # type: ignore[union-attr]
    cancelled = api.vector_stores.file_batches.cancel(batch.id, vector_store_id=store.id)
    assert cancelled.status == "cancelled" and cancelled.file_counts.completed == 2  # nothing was left to cancel

    with pytest.raises(openai.BadRequestError) as refused:
        api.vector_stores.file_batches.create(store.id, file_ids=[first], files=[{"file_id": second}])
    assert refused.value.status_code == 400
    with pytest.raises(openai.NotFoundError) as missing:
        api.vector_stores.file_batches.create(store.id, file_ids=[first, "file_nothing"])
    assert missing.value.body["param"] == "file_ids[1]"  # type: ignore[index]


def test_ne_and_nin_hold_for_a_file_without_the_key(stores_gateway: Gateway) -> None:
    """As filters.py says and OpenAI filters: a file that lacks the key is not equal to the value, nor in the list."""
    api = client(stores_gateway)
    store = api.vector_stores.create(name="keyless")
    for name, attributes in [("red.txt", {"team": "red"}), ("blue.txt", {"team": "blue"}), ("none.txt", {"year": 2024})]:
        api.vector_stores.files.create(store.id, file_id=upload(api, name, "Quarterly report of a team."), attributes=attributes)
    ready(api, store.id)

    def found(filters: dict[str, Any]) -> set[str]:
        return {result.filename for result in api.vector_stores.search(store.id, query="quarterly report", filters=filters)}  # type: ignore[arg-type]

    assert found({"type": "ne", "key": "team", "value": "red"}) == {"blue.txt", "none.txt"}
    assert found({"type": "nin", "key": "team", "value": ["red", "blue"]}) == {"none.txt"}
    assert found({"type": "eq", "key": "team", "value": "red"}) == {"red.txt"}
    assert found({"type": "in", "key": "team", "value": ["red", "blue"]}) == {"red.txt", "blue.txt"}


def test_filters_narrow_the_search_in_the_query(stores_gateway: Gateway) -> None:
    api = client(stores_gateway)
    store = api.vector_stores.create(name="filtered")
    rows = [
        ("r2021.txt", 2021, "red", True),
        ("r2023.txt", 2023, "red", False),
        ("b2023.txt", 2023, "blue", True),
        ("b2024.txt", 2024, "blue", False),
    ]
    for name, year, team, public in rows:
        file_id = upload(api, name, f"Quarterly report of the {team} team for {year}.")
        api.vector_stores.files.create(store.id, file_id=file_id, attributes={"year": year, "team": team, "public": public})
    ready(api, store.id)

    def found(filters: dict[str, Any], max_results: int = 10) -> set[str]:
        return {
            result.filename for result in api.vector_stores.search(store.id, query="quarterly report", filters=filters, max_num_results=max_results)
        }  # type: ignore[arg-type]

    assert found({"type": "eq", "key": "team", "value": "red"}) == {"r2021.txt", "r2023.txt"}
    assert found({"type": "ne", "key": "team", "value": "red"}) == {"b2023.txt", "b2024.txt"}
    assert found({"type": "gte", "key": "year", "value": 2023}) == {"r2023.txt", "b2023.txt", "b2024.txt"}
    assert found({"type": "lt", "key": "year", "value": 2023}) == {"r2021.txt"}
    assert found({"type": "eq", "key": "public", "value": True}) == {"r2021.txt", "b2023.txt"}
    assert found({"type": "in", "key": "year", "value": [2021, 2024]}) == {"r2021.txt", "b2024.txt"}
    assert found({"type": "nin", "key": "team", "value": ["blue"]}) == {"r2021.txt", "r2023.txt"}
    assert found({"type": "eq", "key": "missing", "value": "x"}) == set()
    both = {"type": "and", "filters": [{"type": "eq", "key": "team", "value": "blue"}, {"type": "gt", "key": "year", "value": 2023}]}
    assert found(both) == {"b2024.txt"}
    either = {"type": "or", "filters": [both, {"type": "eq", "key": "year", "value": 2021}]}
    assert found(either) == {"b2024.txt", "r2021.txt"}
    # Applied in the query: with one result asked for, the one that passes the filter is it.
    assert found({"type": "eq", "key": "year", "value": 2024}, max_results=1) == {"b2024.txt"}

    # Updated attributes are what the next search filters on.
    target = next(file for file in api.vector_stores.files.list(store.id) if file.attributes and file.attributes["year"] == 2021)
    api.vector_stores.files.update(target.id, vector_store_id=store.id, attributes={"year": 2025, "team": "red"})
    assert found({"type": "gt", "key": "year", "value": 2024}) == {"r2021.txt"}

    with pytest.raises(openai.BadRequestError) as refused:
        found({"type": "gt", "key": "public", "value": True})
    assert refused.value.body["param"] == "filters"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError):
        found({"type": "like", "key": "team", "value": "r%"})


def test_a_hostile_file_fails_alone(stores_gateway: Gateway) -> None:
    api = client(stores_gateway)
    junk = io.BytesIO()
    with zipfile.ZipFile(junk, "w") as archive:
        archive.writestr("x.bin", os.urandom(2000))
    ids = [
        upload(api, "broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\nendobj\n" + os.urandom(3000)),
        upload(api, "junk.zip", junk.getvalue()),
        upload(api, "fine.txt", "A file that reads well."),
        upload(api, "log.pdf", pdf("The lighthouse keeper logs every ship.")),
    ]
    store = ready(api, api.vector_stores.create(name="hostile", file_ids=ids).id)
    assert store.file_counts.completed == 2 and store.file_counts.failed == 2 and store.status == "completed"
    failed = {file.id: file for file in api.vector_stores.files.list(store.id, filter="failed")}
    assert set(failed) == set(ids[:2])
    assert all(file.last_error is not None and file.last_error.code in ("invalid_file", "unsupported_file") for file in failed.values())
    assert failed[ids[1]].last_error.code == "unsupported_file"  # type: ignore[union-attr]
    assert [result.filename for result in api.vector_stores.search(store.id, query="reads well")] == ["fine.txt"]
    assert [result.filename for result in api.vector_stores.search(store.id, query="lighthouse keeper")] == ["log.pdf"]


def test_another_tenants_store_is_not_there(stores_gateway: Gateway) -> None:
    mine, theirs = client(stores_gateway, "sk-one"), client(stores_gateway, "sk-two")
    file_id = upload(mine, "secret.txt", "the vault code is 4711")
    store = ready(mine, mine.vector_stores.create(name="mine", file_ids=[file_id]).id)
    for attempt in (
        lambda: theirs.vector_stores.retrieve(store.id),
        lambda: theirs.vector_stores.search(store.id, query="vault code"),
        lambda: theirs.vector_stores.files.list(store.id),
        lambda: theirs.vector_stores.files.create(store.id, file_id=file_id),
        lambda: theirs.vector_stores.delete(store.id),
    ):
        with pytest.raises(openai.NotFoundError):
            attempt()
    # Nor may another tenant's file be put into one's own store.
    own = theirs.vector_stores.create(name="theirs")
    with pytest.raises(openai.NotFoundError):
        theirs.vector_stores.files.create(own.id, file_id=file_id)
    assert store.id not in [each.id for each in theirs.vector_stores.list()]
    assert mine.vector_stores.retrieve(store.id).file_counts.completed == 1


def test_bad_requests_are_4xx(stores_gateway: Gateway) -> None:
    api = client(stores_gateway)
    store = api.vector_stores.create(name="bad")
    for call in (
        lambda: api.vector_stores.create(
            name="x", chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 50, "chunk_overlap_tokens": 0}}
        ),
        lambda: api.vector_stores.create(
            name="x", chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 400, "chunk_overlap_tokens": 300}}
        ),
        lambda: api.vector_stores.search(store.id, query="x", max_num_results=51),
        lambda: api.vector_stores.search(store.id, query=["q"] * 11),
        lambda: api.vector_stores.files.list(store.id, filter="done"),  # type: ignore[arg-type]
        lambda: api.vector_stores.create(name="x", extra_body={"colour": "red"}),
    ):
        with pytest.raises(openai.BadRequestError):
            call()
    file_id = upload(api, "attrs.txt", "text")
    with pytest.raises(openai.BadRequestError) as refused:
        api.vector_stores.files.create(store.id, file_id=file_id, attributes={f"k{n}": n for n in range(17)})
    assert refused.value.body["param"] == "file_id.attributes"  # type: ignore[index]


# -- on PostgreSQL with pgvector, shared by replicas --------------------------------------------------------------


@pytest.fixture(scope="module")
def pgvector() -> Iterator[Any]:
    from .servers import PostgresServer, pgvector_binaries

    server = PostgresServer(pgvector_binaries()).start()
    yield server
    server.close()


def pg_sections(emulator: Process, database: str, **storage: Any) -> dict[str, Any]:
    from .emulator import EMBEDDING_DIMENSIONS, EMBEDDING_MODEL

    embeddings = {"url": emulator.url, "model": EMBEDDING_MODEL, "dimensions": EMBEDDING_DIMENSIONS}
    return {"storage": {"url": database, **storage}, "vector_stores": {"embeddings": embeddings}}


def test_vector_stores_on_postgresql_with_pgvector(emulator: Process, pgvector: Any, make_gateway: Any) -> None:
    gateway = make_gateway(emulator.url, **pg_sections(emulator, pgvector.new_database()))
    api = gateway.client()
    ids = {name: upload(api, name, text) for name, text in {**CORPUS, "auto.md": "The automobile goes to the garage."}.items()}
    store = ready(api, api.vector_stores.create(name="pg", file_ids=list(ids.values())).id)
    assert store.file_counts.completed == 5 and store.usage_bytes > 0
    # Words (PostgreSQL's full-text search, English stemming), and meaning (pgvector) fused.
    assert [r.filename for r in api.vector_stores.search(store.id, query="changing oil")][0] == "cars.md"
    words_only = {"hybrid_search": {"embedding_weight": 0, "text_weight": 1}}
    assert [r.filename for r in api.vector_stores.search(store.id, query="vehicle", ranking_options=words_only)] == []  # type: ignore[arg-type]
    by_meaning = [r.filename for r in api.vector_stores.search(store.id, query="vehicle")]
    assert by_meaning[:2] == ["auto.md", "cars.md"] or by_meaning[:2] == ["cars.md", "auto.md"]
    api.vector_stores.files.update(ids["tea.md"], vector_store_id=store.id, attributes={"drink": True})
    assert [r.filename for r in api.vector_stores.search(store.id, query="water", filters={"type": "eq", "key": "drink", "value": True})] == [
        "tea.md"
    ]
    assert [part.text for part in api.vector_stores.files.content(ids["tea.md"], vector_store_id=store.id)] == [CORPUS["tea.md"]]
    assert api.vector_stores.delete(store.id).deleted


def test_a_filtered_search_of_a_large_store_is_found_whole_by_meaning(emulator: Process, pgvector: Any, make_gateway: Any) -> None:
    """Searched through the HNSW index (its scans counted), a store whose nearest chunks the filter leaves out:
    what passes comes from the iterative scan reading on past them (this round passes with no fallback);
    and, with that scan allowed to read a single tuple (`hnsw.max_scan_tuples`), from the exact search its
    short answer falls back to (this round fails without it). A store below `exact_search_below` is
    searched exactly, the index not read."""
    database = pgvector.new_database()
    kept = {"tea.md", "dogs.txt"}
    lines = "\n".join(f"tea kettle {n} tea pot tea leaf tea cup" for n in range(20000))  # each chunk nearer to "tea"
    scans = "SELECT COALESCE(SUM(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = 'vector_store_chunks_embedding'"
    pieces = {"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 0}}
    by_meaning: Any = {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}
    kind: Any = {"type": "eq", "key": "kind", "value": "kept"}

    def index_read(before: int, wait_s: float = 30) -> bool:
        deadline = time.monotonic() + wait_s  # a server process flushes its statistics within 10 s of going idle
        while int(pgvector.sql(database, scans)) == before and time.monotonic() < deadline:
            time.sleep(0.2)
        return int(pgvector.sql(database, scans)) > before

    for round, max_scan_tuples in enumerate((None, 1)):
        if max_scan_tuples is not None:  # read by the next gateway's connections
            pgvector.sql(database, f"ALTER DATABASE {database.rsplit('/', 1)[1]} SET hnsw.max_scan_tuples = {max_scan_tuples}")
        sections = pg_sections(emulator, database)
        sections["vector_stores"]["exact_search_below"] = 1000
        gateway = make_gateway(emulator.url, **sections)
        api = gateway.client()
        if round == 0:
            large = api.vector_stores.create(name="large", file_ids=[upload(api, "kettles.txt", lines)], chunking_strategy=pieces)  # type: ignore[arg-type]
            for name in kept:
                api.vector_stores.files.create(large.id, file_id=upload(api, name, CORPUS[name]), attributes={"kind": "kept"})
            assert ready(api, large.id).file_counts.completed == 3
            small = ready(api, api.vector_stores.create(name="small", file_ids=[upload(api, name, CORPUS[name]) for name in kept]).id)
        assert int(pgvector.sql(database, f"SELECT COUNT(*) FROM vector_store_chunks WHERE vector_store_id = '{large.id}'")) > 1000
        before = int(pgvector.sql(database, scans))
        found = api.vector_stores.search(large.id, query="tea", ranking_options=by_meaning, filters=kind, max_num_results=10)
        assert {result.filename for result in found} == kept, round
        assert index_read(before)
        gateway.stop()
    before = int(pgvector.sql(database, scans))
    api = make_gateway(emulator.url, **sections).client()
    assert {result.filename for result in api.vector_stores.search(small.id, query="tea", ranking_options=by_meaning)} == kept
    assert not index_read(before, wait_s=12)


def test_a_new_embedding_model_on_postgresql_re_embeds_in_the_background(emulator: Process, pgvector: Any, make_gateway: Any) -> None:
    """Another model of other dimensions: the column of vectors made anew (its HNSW index with it), the chunks
    embedded again in the background, and found by meaning alone again."""
    database = pgvector.new_database()
    first = make_gateway(emulator.url, **pg_sections(emulator, database))
    store = ready(
        first.client(), first.client().vector_stores.create(name="pg", file_ids=[upload(first.client(), n, t) for n, t in CORPUS.items()]).id
    )
    first.stop()
    sections = pg_sections(emulator, database)
    sections["vector_stores"]["embeddings"] |= {"model": "emulator-embedding-32", "dimensions": 32}
    api = make_gateway(emulator.url, **sections).client()
    by_meaning = {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}}
    deadline = time.monotonic() + 60
    while [r.filename for r in api.vector_stores.search(store.id, query="green tea", ranking_options=by_meaning)][:1] != ["tea.md"]:  # type: ignore[arg-type]
        assert time.monotonic() < deadline, "the chunks were not embedded again"
        time.sleep(0.1)
    assert (
        pgvector.sql(
            database,
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'vector_store_chunks'::regclass AND attname = 'embedding'",
        )
        == "vector(32)"
    )
    assert pgvector.sql(database, "SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'vector_store_chunks_embedding'") == "1"
    assert pgvector.sql(database, "SELECT COUNT(*) FROM vector_store_chunks WHERE embedding IS NULL") == "0"


def test_an_hnsw_index_whose_build_failed_is_built_again(emulator: Process, pgvector: Any, make_gateway: Any) -> None:
    """A build cancelled midway leaves an invalid index: the next gateway drops it and builds it anew, in the
    background, and searches through it once it is valid."""
    database = pgvector.new_database()
    first = make_gateway(emulator.url, **pg_sections(emulator, database))
    ready(first.client(), first.client().vector_stores.create(name="pg", file_ids=[upload(first.client(), n, t) for n, t in CORPUS.items()]).id)
    first.stop()
    pgvector.sql(database, "DROP INDEX vector_store_chunks_embedding")
    pgvector.sql(
        database,
        "CREATE INDEX vector_store_chunks_embedding ON vector_store_chunks USING hnsw (embedding vector_cosine_ops); "
        "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'vector_store_chunks_embedding'::regclass",
    )  # as a cancelled concurrent build leaves it
    # (to_regclass: the index is missing a moment, between its drop and its new build)
    valid = "SELECT COALESCE((SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('vector_store_chunks_embedding')), false)"
    oid = "SELECT to_regclass('vector_store_chunks_embedding')::oid"
    invalid_oid = pgvector.sql(database, oid)
    assert pgvector.sql(database, valid) == "f"
    make_gateway(emulator.url, **pg_sections(emulator, database))
    deadline = time.monotonic() + 30
    while pgvector.sql(database, valid) != "t":
        assert time.monotonic() < deadline, "the index was not built again"
        time.sleep(0.1)
    assert pgvector.sql(database, oid) != invalid_oid  # a new index, not the invalid one


def test_ingestion_is_taken_over_when_its_replica_is_killed(emulator: Process, pgvector: Any, make_gateway: Any) -> None:
    """SIGKILL of the replica ingesting a file (its embeddings call under way): another replica takes the file
    over once the lease ran out, and its chunks are written once."""
    from .conftest import emulator_stats

    database = pgvector.new_database()
    first = make_gateway(emulator.url, **pg_sections(emulator, database, lease_s=1.0))
    api = first.client()
    # Its embeddings call is held by the emulator until the test lets it go: the replica is killed inside it.
    key = f"takeover{secrets.token_hex(4)}"
    file_id = upload(api, "slow.txt", f"The archive is in the basement. [embedding-held {key}]")
    store = api.vector_stores.create(name="taken over", file_ids=[file_id])
    deadline = time.monotonic() + 30
    while not emulator_stats(emulator)["embeddings_held"].get(key):  # the first replica is embedding it
        assert time.monotonic() < deadline
        time.sleep(0.05)
    second = make_gateway(emulator.url, **pg_sections(emulator, database, lease_s=1.0))
    assert first.proc is not None
    first.proc.kill()
    first.proc.wait()
    httpx.post(f"{emulator.url}/_emulator/release/{key}")
    other = second.client()
    assert other.vector_stores.retrieve(store.id).file_counts.in_progress == 1
    done = ready(other, store.id, timeout=30)
    assert done.file_counts.completed == 1
    assert [r.filename for r in other.vector_stores.search(store.id, query="archive basement")] == ["slow.txt"]  # once, not twice
    assert f"file {file_id} indexed" in second.log.read_text()


def test_files_are_cut_as_their_chunking_strategy_says(stores_gateway: Gateway) -> None:
    """Windows of gpt-oss's tokens: `static` at its size and overlap (each chunk begins inside the one before),
    `auto` at 800 with 400 of overlap."""
    from gateway.engine import harmony

    api = client(stores_gateway)
    text = " ".join(f"item{n}" for n in range(400))
    tokens = len(harmony.encoding().encode(text, allowed_special=set(), disallowed_special=()))
    file_id = upload(api, "items.txt", text)
    static = api.vector_stores.create(
        name="static", file_ids=[file_id], chunking_strategy={"type": "static", "static": {"max_chunk_size_tokens": 100, "chunk_overlap_tokens": 50}}
    )
    auto = api.vector_stores.create(name="auto", file_ids=[file_id])
    ready(api, static.id), ready(api, auto.id)

    chunks = [part.text for part in api.vector_stores.files.content(file_id, vector_store_id=static.id)]
    assert len(chunks) == -(-(tokens - 100) // 50) + 1  # a window every 50 tokens, the last reaching the end
    assert all(len(harmony.encoding().encode(chunk, allowed_special=set())) <= 101 for chunk in chunks)
    assert all(later.split()[0] in earlier for earlier, later in zip(chunks, chunks[1:]))
    assert chunks[0].startswith("item0") and chunks[-1].endswith("item399")
    auto_chunks = [part.text for part in api.vector_stores.files.content(file_id, vector_store_id=auto.id)]
    assert len(auto_chunks) == (1 if tokens <= 800 else -(-(tokens - 800) // 400) + 1)


def test_a_tenants_stores_and_a_stores_files_are_capped(emulator: Process, make_gateway: Any) -> None:
    api = make_gateway(emulator.url, vector_stores={"max_stores_per_tenant": 1, "max_files_per_store": 1}).client()
    store = api.vector_stores.create(name="only")
    with pytest.raises(openai.BadRequestError) as stores:
        api.vector_stores.create(name="one too many")
    assert stores.value.code == "too_many_vector_stores"
    api.vector_stores.files.create(store.id, file_id=upload(api, "a.txt", "first"))
    with pytest.raises(openai.BadRequestError) as files:
        api.vector_stores.files.create(store.id, file_id=upload(api, "b.txt", "second"))
    assert files.value.code == "too_many_files_in_this_vector_store" and files.value.body["param"] == "file_id"  # type: ignore[index]
    assert api.vector_stores.retrieve(store.id).file_counts.total == 1  # the refused file was not added
