"""The PostgreSQL backend (`storage.url: postgresql://...`), against a real server started from Debian's
package: the stored-state scenarios of the other test modules played again on it, what the storage
layer itself promises (parents shared along a chain, deletion, migrations), and a server restart
during runs."""

from __future__ import annotations

import inspect
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from . import test_background, test_conversations, test_responses
from .conftest import MODEL, Gateway, gateway_config
from .servers import PostgresServer
from .stream_checker import check_response_stream, parse_sse


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer().start()
    yield server
    server.close()


@pytest.fixture(scope="module")
def pg_gateway(emulator, postgres, tmp_path_factory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("pg-gateway")
    process = Gateway(gateway_config(emulator.url, tmp, storage={"url": postgres.new_database()}), tmp).start()
    yield process
    process.stop()


# Scenarios written for the default store, played on PostgreSQL: what a stored response, a conversation
# and a background run promise must not depend on the backend.
SCENARIOS: list[Callable[..., None]] = [
    test_responses.test_previous_response_id_continues,
    test_responses.test_retrieve_delete_and_input_items,
    test_responses.test_stored_streamed_response_matches_the_stream,
    test_conversations.test_conversation_lifecycle,
    test_conversations.test_responses_continue_and_fill_the_conversation,
    test_conversations.test_items_api_changes_what_the_model_reads,
    test_conversations.test_item_pages,
    test_conversations.test_function_calls_through_a_conversation,
    test_conversations.test_conversation_refusals,
    test_background.test_background_is_answered_at_once_and_polled,
    test_background.test_a_stream_resumed_after_a_lost_connection_loses_nothing,
    test_background.test_cancel_stops_the_run,
    test_background.test_two_cancels_at_once_and_many_runs,
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: f"{scenario.__module__.rsplit('.', 1)[-1]}.{scenario.__name__}")
def test_scenario_on_postgresql(scenario, pg_gateway, emulator):
    fixtures = {"gateway": pg_gateway, "emulator": emulator}
    scenario(**{name: fixtures[name] for name in inspect.signature(scenario).parameters})


def _stored_rows(gateway: Gateway, postgres: PostgresServer | None, sql: str) -> list[tuple[Any, ...]]:
    """Rows of the gateway's own database, read directly (SQLite file or PostgreSQL)."""
    import yaml

    storage = yaml.safe_load(gateway.config_path.read_text())["storage"]
    if "url" not in storage:
        with sqlite3.connect(storage["path"]) as db:
            return db.execute(sql).fetchall()
    import asyncio

    import asyncpg

    async def fetch() -> list[tuple[Any, ...]]:
        connection = await asyncpg.connect(storage["url"])
        try:
            return [tuple(row) for row in await connection.fetch(sql)]
        finally:
            await connection.close()

    return asyncio.run(fetch())


@pytest.fixture(params=["sqlite", "postgresql"])
def any_gateway(request, emulator, make_gateway) -> Gateway:
    if request.param == "sqlite":
        return make_gateway(emulator.url)
    return make_gateway(emulator.url, storage={"url": request.getfixturevalue("postgres").new_database()})


def test_a_chain_stores_each_response_once(any_gateway):
    """Each response of a chain stores only the messages it added: the stored size grows with the
    conversation, not with its square; the model still reads everything."""
    client = any_gateway.client()
    previous = None
    for turn in range(6):
        response = client.responses.create(model=MODEL, input=f"turn {turn} " + "x" * 2000, previous_response_id=previous)
        previous = response.id
    last = client.responses.create(model=MODEL, input="what was said? [recall]", previous_response_id=previous)
    assert all(f"turn {turn} " in last.output_text for turn in range(6))
    rows = _stored_rows(any_gateway, None, "SELECT id, dialog FROM responses")
    sizes = {row[0]: len(json.loads(row[1])) for row in rows}
    # user message, analysis, final answer: three messages each, never the earlier ones again.
    assert set(sizes.values()) == {3}, sizes
    lengths = sorted(len(row[1]) for row in rows)
    assert lengths[-2] < 1.2 * lengths[0]  # the sixth turn stores no more than the first did


def test_deleting_a_parent_keeps_its_children_whole(any_gateway):
    client = any_gateway.client()
    first = client.responses.create(model=MODEL, input="my name is Ada")
    second = client.responses.create(model=MODEL, input="and I like tea", previous_response_id=first.id)
    client.responses.delete(first.id)
    with pytest.raises(Exception) as err:
        client.responses.retrieve(first.id)
    assert getattr(err.value, "status_code", None) == 404
    # The child still reads its parent's messages: hidden, kept while a child builds on them.
    third = client.responses.create(model=MODEL, input="who am I? [recall]", previous_response_id=second.id)
    assert "my name is Ada" in third.output_text and "and I like tea" in third.output_text
    ids = {row[0] for row in _stored_rows(any_gateway, None, "SELECT id FROM responses")}
    assert first.id in ids
    # Once the last child that needs them is gone, they go too.
    client.responses.delete(third.id)
    client.responses.delete(second.id)
    ids = {row[0] for row in _stored_rows(any_gateway, None, "SELECT id FROM responses")}
    assert not ids & {first.id, second.id, third.id}


def test_an_unversioned_sqlite_database_is_migrated(emulator, make_gateway, tmp_path):
    """A database written before migrations existed (no schema_version, no tenant or state columns)
    is brought up to date at start, and its responses can still be continued."""
    path = tmp_path / "legacy.sqlite3"
    dialog = [{"role": "user", "content": [{"type": "text", "text": "my name is Grace"}]}]
    response = {"id": "resp_legacy", "object": "response", "created_at": int(time.time()), "status": "completed", "output": []}
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE responses (id TEXT PRIMARY KEY, created_at REAL NOT NULL, response TEXT NOT NULL, "
            "input_items TEXT NOT NULL, dialog TEXT NOT NULL, open_calls TEXT NOT NULL)"
        )
        db.execute(
            "INSERT INTO responses VALUES (?,?,?,?,?,?)",
            ("resp_legacy", time.time(), json.dumps(response), "[]", json.dumps(dialog), "{}"),
        )
    gateway = make_gateway(emulator.url, storage={"path": str(path)})
    client = gateway.client()
    assert client.responses.retrieve("resp_legacy").id == "resp_legacy"
    answer = client.responses.create(model=MODEL, input="who am I? [recall]", previous_response_id="resp_legacy")
    assert "my name is Grace" in answer.output_text
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT version FROM schema_version").fetchone()[0] >= 2


def test_postgresql_restarted_during_runs(emulator, make_gateway, tmp_path):
    """The database goes away and comes back while responses run: they finish, and are stored whole
    (statements are retried within storage.retry_s), including a background run's events."""
    server = PostgresServer().start()
    try:
        gateway = make_gateway(emulator.url, storage={"url": server.url(), "retry_s": 20})
        client = gateway.client()
        background = client.responses.create(model=MODEL, input="[long 60] [slow 40]", background=True)
        results: dict[str, Any] = {}

        def foreground() -> None:
            results["response"] = client.responses.create(model=MODEL, input="[long 60] [slow 40]")

        thread = threading.Thread(target=foreground)
        thread.start()
        time.sleep(0.6)
        server.restart(down_s=1.5)
        thread.join(30)
        stored = client.responses.retrieve(results["response"].id)
        assert stored.status == "completed" and stored.output_text == results["response"].output_text
        done = test_background.poll(client, background.id)
        assert done.status == "completed" and done.output_text == " ".join(f"word{i}" for i in range(60))
        events = parse_sse(httpx.get(f"{gateway.url}/v1/responses/{background.id}", params={"stream": "true"}, timeout=30).content)
        assert check_response_stream(events).status == "completed"  # every event kept, in order, none twice
    finally:
        server.close()


def test_the_gateway_waits_for_postgresql_then_refuses_clearly(emulator, make_gateway, tmp_path):
    """A database that stays down: requests that need it get a 503 in OpenAI's shape, not a hang or a 500;
    once it is back they work again."""
    server = PostgresServer().start()
    try:
        gateway = make_gateway(emulator.url, storage={"url": server.url(), "retry_s": 1})
        client = gateway.client()
        stored = client.responses.create(model=MODEL, input="hello")
        server.stop()
        started = time.monotonic()
        answer = httpx.get(f"{gateway.url}/v1/responses/{stored.id}", timeout=30)
        assert answer.status_code == 503 and answer.json()["error"]["code"] == "storage_unavailable"
        assert time.monotonic() - started < 10
        server.start()
        assert client.responses.retrieve(stored.id).id == stored.id
    finally:
        server.close()


def test_files_and_containers_on_postgresql(emulator, postgres, make_gateway, sandbox_image, tmp_path):
    """The Files and Containers APIs' records on PostgreSQL: uploads, quota and tenants, and a container's
    files in and out of a python session."""
    from . import test_files
    from .conftest import sandbox_section

    keys = [{"key": "alice-key", "tenant": "alice"}, {"key": "bob-key", "tenant": "bob"}]
    files = {"max_file_bytes": 100_000, "tenant_quota_bytes": 150_000, "directory": str(tmp_path / "uploads")}
    uploads = make_gateway(emulator.url, storage={"url": postgres.new_database()}, auth={"api_keys": keys}, files=files)
    test_files.test_files_api_upload_list_download_delete(uploads)
    sandbox = sandbox_section("docker", f"pg-files-{tmp_path.name}")
    coded = make_gateway(emulator.url, storage={"url": postgres.new_database()}, sandbox=sandbox, files={"directory": str(tmp_path / "code")})
    test_files.test_a_csv_in_and_the_result_out_with_its_citation(coded, emulator)
    test_files.test_a_container_made_through_the_api(coded)


@pytest.fixture(params=["sqlite", "postgresql"])
def quota_gateway(request, emulator, make_gateway, tmp_path) -> Gateway:
    from .conftest import sandbox_section

    files = {"tenant_quota_bytes": 1_000_000, "max_container_files": 5, "directory": str(tmp_path / "files")}
    sandbox = sandbox_section("local", f"quota-{tmp_path.name}", pool_size=0)
    storage = {"url": request.getfixturevalue("postgres").new_database()} if request.param == "postgresql" else {}
    return make_gateway(emulator.url, files=files, sandbox=sandbox, **({"storage": storage} if storage else {}))


def _parallel(count: int, send: Callable[[int], httpx.Response]) -> list[int]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(count) as pool:
        return [answer.status_code for answer in pool.map(send, range(count))]


def test_the_quota_and_file_counts_hold_under_parallel_uploads(quota_gateway):
    """12 uploads of 300 KB at once against a 1 MB quota, 20 rounds: never more than 3 stored; 12 files at
    once into a container of 5 at most: 5 kept; 12 uploads of one path at once: one file, no 500."""
    url = quota_gateway.url
    client = quota_gateway.client()
    data = b"x" * 300_000

    def upload(_: int) -> httpx.Response:
        return httpx.post(f"{url}/v1/files", data={"purpose": "user_data"}, files={"file": ("a.bin", data)}, timeout=30)

    for _ in range(20):
        statuses = _parallel(12, upload)
        # Uploads still arriving count too, so fewer than 3 may get through; never more.
        assert set(statuses) <= {200, 413} and 1 <= statuses.count(200) <= 3, statuses
        stored = list(client.files.list())
        assert sum(file.bytes for file in stored) <= 1_000_000
        for file in stored:
            client.files.delete(file.id)
    container = client.containers.create(name="parallel")

    def into_container(number: int) -> httpx.Response:
        return httpx.post(f"{url}/v1/containers/{container.id}/files", files={"file": (f"{number}.txt", b"data")}, timeout=30)

    statuses = _parallel(12, into_container)
    assert statuses.count(200) == 5 and set(statuses) == {200, 400}, statuses
    assert len(list(client.containers.files.list(container.id))) == 5
    other = client.containers.create(name="one path")

    def same_path(_: int) -> httpx.Response:
        return httpx.post(f"{url}/v1/containers/{other.id}/files", files={"file": ("same.txt", b"data")}, timeout=30)

    assert set(_parallel(12, same_path)) <= {200, 409}
    assert [file.path for file in client.containers.files.list(other.id)] == ["/mnt/data/same.txt"]


def test_a_nul_character_is_bad_input_not_a_database_down(postgres, emulator, make_gateway, tmp_path):
    from .conftest import sandbox_section

    sandbox = sandbox_section("local", f"nul-{tmp_path.name}", pool_size=0)
    gateway = make_gateway(emulator.url, storage={"url": postgres.new_database()}, sandbox=sandbox)
    url = gateway.url
    answers = [
        httpx.get(f"{url}/v1/files/file_a%00b"),
        httpx.get(f"{url}/v1/files", params={"after": "file_\x00"}),
        httpx.get(f"{url}/v1/files", params={"purpose": "user\x00data"}),
        httpx.get(f"{url}/v1/responses/resp_%00"),
        httpx.post(f"{url}/v1/containers", json={"name": "a\x00b"}),
        httpx.get(f"{url}/v1/containers", params={"after": "cntr_\x00"}),
    ]
    for answer in answers:
        assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error", answer.text


def test_skills_on_postgresql(emulator, postgres, make_gateway, tmp_path):
    """Skills and their versions on PostgreSQL: created, versioned, listed, tenants apart, deleted."""
    from . import test_skills

    keys = [{"key": "alice-key", "tenant": "alice"}, {"key": "bob-key", "tenant": "bob"}]
    gateway = make_gateway(
        emulator.url, storage={"url": postgres.new_database()}, auth={"api_keys": keys}, files={"directory": str(tmp_path / "files")}
    )
    test_skills.test_a_skill_its_versions_and_its_content(gateway)


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_progress_writes_are_fenced_by_the_owner(dialect: str, postgres: PostgresServer, tmp_path: Path) -> None:
    """The store's own fence, alone: once another replica adopted a run, the replica it was taken from
    writes nothing more of its progress (neither its events nor its state), whatever else would stop it."""
    import asyncio

    from gateway.storage import open_database
    from gateway.storage.response_store import ResponseStore, Stalled

    url = f"sqlite:///{tmp_path}/fence.sqlite3" if dialect == "sqlite" else postgres.new_database()

    async def check() -> None:
        db = open_database(url, retry_s=1, pool_size=2)
        await db.start()
        try:
            store = ResponseStore(db)
            response = {"id": "resp_fence", "created_at": 1, "status": "in_progress", "output": []}
            await store.begin(response, [], "t", "a", max_running=4, request="sealed")
            assert await store.progress("resp_fence", "a", response, [(0, b"event 0")], "checkpoint-a")
            assert await store.adopt(Stalled("resp_fence", "a"), "b") is not None
            late = response | {"output": ["written by a, late"]}
            assert not await store.progress("resp_fence", "a", late, [(1, b"a's event 1")], "checkpoint-a2")
            assert [frame for _, frame in await store.events_after("resp_fence", -1)] == [b"event 0"]
            assert await store.progress("resp_fence", "b", response, [(1, b"b's event 1")], "checkpoint-b")
            assert [frame for _, frame in await store.events_after("resp_fence", -1)] == [b"event 0", b"b's event 1"]
            stored = await store.get("resp_fence", "t", dialog=False)
            assert stored is not None and "written by a" not in json.dumps(stored.response)
        finally:
            await db.close()

    asyncio.run(check())


def test_a_tenants_transaction_lock_holds_the_next_one_back(postgres: PostgresServer) -> None:
    """The lock the quota checks stand on (`Tx.lock`), its interleaving forced rather than hoped for: while
    one transaction holds a key, another asking for it waits until the first commits; another key is not
    held back."""
    import asyncio

    from gateway.storage import open_database

    async def check() -> None:
        db = open_database(postgres.new_database(), retry_s=1, pool_size=3)
        await db.start()
        holding, release = asyncio.Event(), asyncio.Event()
        order: list[str] = []

        async def first(tx: Any) -> None:
            await tx.lock("quota:alice")
            holding.set()
            await release.wait()
            order.append("first commits")

        async def second(tx: Any) -> None:
            await tx.lock("quota:alice")
            order.append("second has the lock")

        async def other(tx: Any) -> None:
            await tx.lock("quota:bob")
            order.append("other key")

        try:
            held = asyncio.create_task(db.transaction(first))
            await asyncio.wait_for(holding.wait(), 10)
            waiting = asyncio.create_task(db.transaction(second))
            await asyncio.wait_for(db.transaction(other), 10)
            await asyncio.sleep(0.5)
            assert order == ["other key"]  # the second waits while the first holds the key
            release.set()
            await asyncio.wait_for(asyncio.gather(held, waiting), 10)
            assert order == ["other key", "first commits", "second has the lock"]
        finally:
            await db.close()

    asyncio.run(check())
