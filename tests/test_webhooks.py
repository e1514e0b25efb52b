"""Webhooks: the endpoints API through the openai SDK, field for field; background responses that report
their end to a real receiver, which checks every signature with the SDK's `unwrap`; retries with one
webhook-id; rotation; tenants; the URL guard; and delivery that survives the gateway being killed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
import threading
import time
import typing
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import openai
import pytest
from openai.types.webhooks import WebhookEndpoint, WebhookEndpointWithSecret

from .conftest import MODEL, ROOT, Gateway, Process, free_port, gateway_config, metric
from .test_background import poll
from .test_postgres import postgres  # noqa: F401  (the session's PostgreSQL server)
from .webhook_receiver import Receiver

RESPONSE_EVENTS = ["response.completed", "response.failed", "response.cancelled", "response.incomplete"]
AGENT_SESSION_EVENTS = [
    "agent.session.created",
    "agent.session.action_required",
    "agent.session.in_progress",
    "agent.session.idle",
    "agent.session.failed",
]
KEYS = [{"key": "sk-one", "tenant": "one"}, {"key": "sk-two", "tenant": "two"}]
DEAD_PORT = free_port()  # allowed, and nothing listens there
FAST_RETRIES = {"first_retry_s": 0.2, "max_retry_interval_s": 1.0, "poll_interval_s": 0.1, "timeout_s": 2}


def webhooks_section(receiver: Receiver, **overrides: Any) -> dict[str, Any]:
    return {"allowed_urls": [receiver.origin, f"http://127.0.0.1:{DEAD_PORT}/"], **FAST_RETRIES, **overrides}


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hooked(emulator: Process, tmp_path_factory: pytest.TempPathFactory, receiver: Receiver) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("webhooks")
    config = gateway_config(emulator.url, workdir, auth={"api_keys": KEYS}, webhooks=webhooks_section(receiver))
    server = {"label": "local", "transport": "stdio", "command": [sys.executable, "-m", "tests.mcp_server"], "cwd": str(ROOT)}
    config["tool_servers"] = [server]
    gateway = Gateway(config, workdir).start(timeout=60)
    yield gateway
    gateway.stop()


def client_of(gateway: Gateway, key: str = "sk-one") -> openai.OpenAI:
    return gateway.client(api_key=key)


@pytest.fixture
def endpoint(hooked: Gateway, receiver: Receiver) -> Iterator[WebhookEndpointWithSecret]:
    """An endpoint of tenant `one` wanting every response event, at a path of its own on the receiver."""
    client = client_of(hooked)
    created = client.webhooks.create(name="test", url=receiver.url(f"hook-{uuid.uuid4().hex[:8]}"), event_types=RESPONSE_EVENTS)  # type: ignore[arg-type]
    yield created
    client.webhooks.delete(created.id)


def path_of(endpoint: WebhookEndpoint) -> str:
    return endpoint.url.rsplit("/", 1)[-1]


def test_the_endpoints_api_as_the_sdk_defines_it(hooked: Gateway, receiver: Receiver) -> None:
    client = client_of(hooked)
    created = client.webhooks.create(name="orders", url=receiver.url("orders"), event_types=["response.completed", "response.completed"])
    assert created.object == "webhook_endpoint" and created.id.startswith("we_")
    assert created.signing_secret.startswith("whsec_") and created.signing_secret_hint == "whsec_****" + created.signing_secret[-4:]
    assert created.event_types == ["response.completed"] and created.name == "orders" and created.url == receiver.url("orders")
    assert created.created_at == created.updated_at and abs(created.created_at - time.time()) < 5
    # The secret is shown once: never again, in no listing.
    raw = httpx.get(f"{hooked.url}/v1/webhook_endpoints/{created.id}", headers={"authorization": "Bearer sk-one"}).json()
    assert "signing_secret" not in raw and raw["signing_secret_hint"] == created.signing_secret_hint
    assert created.signing_secret not in httpx.get(f"{hooked.url}/v1/webhook_endpoints", headers={"authorization": "Bearer sk-one"}).text
    fetched = client.webhooks.retrieve(created.id)
    assert fetched.model_dump() == WebhookEndpoint.model_validate(created.model_dump(exclude={"signing_secret"})).model_dump()
    # An update that changes nothing leaves updated_at; one that does moves it.
    time.sleep(1.1)
    assert client.webhooks.update(created.id, name="orders").updated_at == created.updated_at
    changed = client.webhooks.update(created.id, name="orders-v2", event_types=["response.failed", "batch.completed"])
    assert changed.name == "orders-v2" and changed.event_types == ["response.failed", "batch.completed"] and changed.updated_at > created.updated_at
    second = client.webhooks.create(name="second", url=receiver.url("second"), event_types=["response.completed"])
    page = client.webhooks.list(limit=1)
    assert [endpoint.id for endpoint in page.data] == [second.id] and page.has_more  # newest first
    assert [endpoint.id for endpoint in client.webhooks.list(limit=1, after=second.id).data] == [created.id]
    assert client.webhooks.event_types.list().data == RESPONSE_EVENTS + AGENT_SESSION_EVENTS
    # Every type the SDK names is accepted (this gateway emits the four above).
    every = client.webhooks.create(name="all", url=receiver.url("all"), event_types=sdk_event_types())  # type: ignore[arg-type]
    assert sorted(every.event_types) == sorted(sdk_event_types()) and len(every.event_types) > 20
    client.webhooks.delete(every.id)
    deleted = client.webhooks.delete(created.id)
    assert deleted.deleted and deleted.id == created.id and deleted.object == "webhook_endpoint.deleted"
    with pytest.raises(openai.NotFoundError) as missing:
        client.webhooks.retrieve(created.id)
    assert missing.value.body["param"] == "webhook_endpoint_id"  # type: ignore[index]
    client.webhooks.delete(second.id)


def sdk_event_types() -> list[str]:
    """The `event_types` literals of the SDK's create parameters."""
    from openai.types.webhooks.webhook_create_params import WebhookCreateParams

    (listed,) = typing.get_args(typing.get_type_hints(WebhookCreateParams, include_extras=True)["event_types"])
    (literal,) = typing.get_args(listed)
    return list(typing.get_args(literal))


def test_bad_endpoint_requests_are_400s_naming_the_field(hooked: Gateway, receiver: Receiver) -> None:
    client = client_of(hooked)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"name": "x", "url": receiver.url(), "event_types": ["response.exploded"]}, "event_types[0]"),
        ({"name": "x", "url": receiver.url(), "event_types": []}, "event_types"),
        ({"name": "x", "url": receiver.url()}, "event_types"),
        ({"name": "x", "url": receiver.url(), "event_types": ["response.completed"], "enabled": True}, "enabled"),
        ({"name": "", "url": receiver.url(), "event_types": ["response.completed"]}, "name"),
        ({"name": "x", "url": "x" * 3000, "event_types": ["response.completed"]}, "url"),
    ]
    for body, param in cases:
        with pytest.raises(openai.BadRequestError) as refused:
            client.post("/webhook_endpoints", body=body, cast_to=httpx.Response)
        assert refused.value.body["param"] == param, body  # type: ignore[index]


def test_a_background_agent_reports_its_completion_once_signed(hooked: Gateway, receiver: Receiver, endpoint: WebhookEndpointWithSecret) -> None:
    client = client_of(hooked)
    tools: Any = [{"type": "mcp", "server_label": "local", "require_approval": "never"}]
    agent = '[[call local.add {"a": 2, "b": 3}]] [[call local.echo {"text": "done"}]]'
    response = client.responses.create(model=MODEL, input=agent, tools=tools, background=True)
    client.responses.create(model=MODEL, input="a foreground response reports nothing")
    (delivery,) = receiver.wait_for(1, path_of(endpoint))
    event = delivery.unwrap(endpoint.signing_secret)
    assert event.type == "response.completed" and event.data.id == response.id and event.object == "event"
    assert event.id.startswith("evt_") and delivery.webhook_id.startswith("wh_")
    done = client.responses.retrieve(response.id)
    assert done.status == "completed" and [item.type for item in done.output if item.type == "mcp_call"] == ["mcp_call", "mcp_call"]
    assert abs(event.created_at - done.completed_at) <= 1  # type: ignore[operator]
    assert delivery.headers["user-agent"].startswith("harmony-gateway-webhooks")
    time.sleep(1.0)
    assert len(receiver.to(path_of(endpoint))) == 1  # exactly once


def test_each_way_a_response_ends_is_its_own_event(hooked: Gateway, receiver: Receiver, endpoint: WebhookEndpointWithSecret) -> None:
    client = client_of(hooked)
    cancelled = client.responses.create(model=MODEL, input="[long 400] [slow 40]", background=True)
    time.sleep(0.5)
    assert client.responses.cancel(cancelled.id).status == "cancelled"
    incomplete = client.responses.create(model=MODEL, input="[long 80]", background=True, max_output_tokens=16)
    assert poll(client, incomplete.id).status == "incomplete"
    failed = client.responses.create(model=MODEL, input="[malformed]", background=True)
    assert poll(client, failed.id).status == "failed"
    events = {event.data.id: event.type for event in (d.unwrap(endpoint.signing_secret) for d in receiver.wait_for(3, path_of(endpoint)))}
    assert events == {cancelled.id: "response.cancelled", incomplete.id: "response.incomplete", failed.id: "response.failed"}


def test_an_endpoint_gets_only_the_events_it_wants(hooked: Gateway, receiver: Receiver) -> None:
    client = client_of(hooked)
    only_failed = client.webhooks.create(name="failures", url=receiver.url("failures"), event_types=["response.failed"])
    paused = client.webhooks.create(name="paused", url=receiver.url("paused"), event_types=["response.completed"])
    client.webhooks.update(paused.id, event_types=[])  # paused: kept, with its secret, sent nothing
    try:
        completed = client.responses.create(model=MODEL, input="hi", background=True)
        failed = client.responses.create(model=MODEL, input="[malformed]", background=True)
        assert poll(client, completed.id).status == "completed" and poll(client, failed.id).status == "failed"
        (delivery,) = receiver.wait_for(1, "failures")
        assert delivery.unwrap(only_failed.signing_secret).data.id == failed.id
        time.sleep(0.8)
        assert len(receiver.to("failures")) == 1 and receiver.to("paused") == []
    finally:
        client.webhooks.delete(only_failed.id)
        client.webhooks.delete(paused.id)


def test_a_failing_receiver_gets_the_same_webhook_id_until_it_accepts(
    hooked: Gateway, receiver: Receiver, endpoint: WebhookEndpointWithSecret
) -> None:
    receiver.answers[:] = [500, 500, 302]  # errors, then a redirect (not followed: a failure too), then 200
    client = client_of(hooked)
    response = client.responses.create(model=MODEL, input="hi", background=True)
    deliveries = receiver.wait_for(4, path_of(endpoint))
    assert len({delivery.webhook_id for delivery in deliveries}) == 1
    assert len({delivery.body for delivery in deliveries}) == 1  # the same event every time
    for delivery in deliveries:  # each attempt signed afresh, with its own timestamp
        assert delivery.unwrap(endpoint.signing_secret).data.id == response.id
    assert deliveries[1].at - deliveries[0].at >= 0.1 and deliveries[2].at - deliveries[1].at >= 0.2  # backing off
    time.sleep(1.0)
    assert len(receiver.to(path_of(endpoint))) == 4
    attempts = _attempts(hooked, deliveries[0].webhook_id)
    assert [status for status, _ in attempts] == [500, 500, 302, 200]
    assert receiver.to("redirected") == []  # the redirect was not followed


def _attempts(gateway: Gateway, webhook_id: str) -> list[tuple[int | None, str | None]]:
    database = Path(gateway_storage(gateway))
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT status_code, error FROM webhook_attempts WHERE delivery_id = ? ORDER BY number", (webhook_id,)).fetchall()
        status = db.execute("SELECT status, attempts FROM webhook_deliveries WHERE id = ?", (webhook_id,)).fetchone()
    assert status == ("delivered", len(rows))
    return rows


def gateway_storage(gateway: Gateway) -> str:
    import yaml

    return str(yaml.safe_load(gateway.config_path.read_text())["storage"]["path"])


def test_rotation_signs_with_the_new_secret_and_keeps_the_old_only_if_asked(hooked: Gateway, receiver: Receiver) -> None:
    client = client_of(hooked)
    created = client.webhooks.create(name="rotating", url=receiver.url("rotating"), event_types=["response.completed"])
    try:
        rotated = client.webhooks.rotate_secret(created.id)
        assert rotated.signing_secret != created.signing_secret and rotated.signing_secret_hint == "whsec_****" + rotated.signing_secret[-4:]
        assert rotated.updated_at >= created.updated_at
        result = client.webhooks.test(created.id, event_type="response.completed")
        assert result.object == "webhook_endpoint.test" and result.status_code == 200 and result.success is True
        assert result.webhook_endpoint_id == created.id and result.event_type == "response.completed"
        (test,) = receiver.wait_for(1, "rotating")
        assert test.unwrap(rotated.signing_secret).type == "response.completed"
        with pytest.raises(openai.InvalidWebhookSignatureError):
            test.unwrap(created.signing_secret)
        kept = client.webhooks.rotate_secret(created.id, keep_old_secret_active_for_24_hours=True)
        client.webhooks.test(created.id, event_type="response.failed")
        second = receiver.wait_for(2, "rotating")[1]
        assert second.unwrap(kept.signing_secret).type == "response.failed"
        assert second.unwrap(rotated.signing_secret).type == "response.failed"  # the old one, kept for 24 hours
        with pytest.raises(openai.InvalidWebhookSignatureError):
            second.unwrap(created.signing_secret)
        # No secret is ever written to the gateway's log.
        log = hooked.log.read_text()
        assert all(secret not in log for secret in (created.signing_secret, rotated.signing_secret, kept.signing_secret))
    finally:
        client.webhooks.delete(created.id)


def test_a_test_event_reports_the_receivers_answer_or_why_there_was_none(hooked: Gateway, receiver: Receiver) -> None:
    client = client_of(hooked)
    created = client.webhooks.create(name="bad", url=receiver.url("bad"), event_types=["response.completed"])
    nowhere = client.webhooks.create(name="gone", url=f"http://127.0.0.1:{DEAD_PORT}/hook", event_types=["response.completed"])
    try:
        receiver.answers[:] = [503]
        assert client.webhooks.test(created.id, event_type="response.incomplete").status_code == 503
        with pytest.raises(openai.BadRequestError) as unreachable:
            client.webhooks.test(nowhere.id, event_type="response.completed")
        assert unreachable.value.body["code"] == "webhook_delivery_failed"  # type: ignore[index]
    finally:
        client.webhooks.delete(created.id)
        client.webhooks.delete(nowhere.id)


def test_another_tenants_endpoint_is_a_404(hooked: Gateway, receiver: Receiver, endpoint: WebhookEndpointWithSecret) -> None:
    other = client_of(hooked, "sk-two")
    for attempt in (
        lambda: other.webhooks.retrieve(endpoint.id),
        lambda: other.webhooks.update(endpoint.id, name="mine"),
        lambda: other.webhooks.rotate_secret(endpoint.id),
        lambda: other.webhooks.test(endpoint.id, event_type="response.completed"),
        lambda: other.webhooks.delete(endpoint.id),
    ):
        with pytest.raises(openai.NotFoundError):
            attempt()
    assert other.webhooks.list().data == []
    # Its background responses do not reach tenant one's endpoint.
    response = other.responses.create(model=MODEL, input="hi", background=True)
    assert poll(other, response.id).status == "completed"
    time.sleep(0.8)
    assert receiver.to(path_of(endpoint)) == []
    assert client_of(hooked).webhooks.retrieve(endpoint.id).name == "test"


def test_private_urls_need_the_operators_allow_list(hooked: Gateway, receiver: Receiver) -> None:
    client = client_of(hooked)
    refused = [
        f"http://127.0.0.1:{receiver.port + 1}/hook",  # loopback, another port than the allowed one
        "https://127.0.0.1/hook",
        "https://10.1.2.3/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "http://example.com/hook",  # public, but not https
        "https://user:pass@example.com/hook",
        "ftp://example.com/hook",
        f"{receiver.origin}%2e%2e/x",
    ]
    for url in refused:
        with pytest.raises(openai.BadRequestError) as error:
            client.webhooks.create(name="x", url=url, event_types=["response.completed"])
        assert error.value.body["param"] == "url", url  # type: ignore[index]
    created = client.webhooks.create(name="x", url=receiver.url("allowed"), event_types=["response.completed"])
    with pytest.raises(openai.BadRequestError):
        client.webhooks.update(created.id, url="https://192.168.1.1/hook")
    client.webhooks.delete(created.id)


def test_a_gateway_without_the_allow_list_refuses_loopback(emulator: Process, make_gateway: Any, receiver: Receiver) -> None:
    gateway = make_gateway(emulator.url)
    with pytest.raises(openai.BadRequestError) as error:
        gateway.client().webhooks.create(name="x", url=receiver.url(), event_types=["response.completed"])
    assert error.value.body["param"] == "url" and "webhooks.allowed_urls" in error.value.body["message"]  # type: ignore[index]


# -- delivery that outlives the process sending it -----------------------------------------------------


def _held_delivery(gateway: Gateway, receiver: Receiver) -> tuple[WebhookEndpointWithSecret, str]:
    """An endpoint, and a background response whose delivery the receiver holds (unanswered) when this returns."""
    client = gateway.client()
    endpoint = client.webhooks.create(name="held", url=receiver.url(), event_types=["response.completed"])
    response = client.responses.create(model=MODEL, input="hi", background=True)
    receiver.wait_for(1)
    return endpoint, response.id


def test_a_delivery_cut_off_by_sigkill_is_made_after_a_restart(emulator: Process, tmp_path: Path) -> None:
    receiver = Receiver(hold=1)
    config = gateway_config(emulator.url, tmp_path, webhooks=webhooks_section(receiver))
    first = Gateway(config, tmp_path).start()
    again = None
    try:
        endpoint, response_id = _held_delivery(first, receiver)
        assert first.proc is not None
        first.proc.kill()  # between the response's end (stored, its delivery with it) and the receiver's answer
        first.proc.wait()
        again = Gateway(config, tmp_path).start()
        # Sooner than the dead process's claim runs out (timeout_s + 10 s): the restart lets its claims go.
        cut_off, delivered = receiver.wait_for(2, timeout=5)
        assert cut_off.webhook_id == delivered.webhook_id and cut_off.body == delivered.body
        assert delivered.unwrap(endpoint.signing_secret).data.id == response_id
        time.sleep(0.8)
        assert len(receiver.deliveries) == 2
    finally:
        receiver.stop()
        first.stop()
        if again is not None:
            again.stop()


@contextlib.contextmanager
def two_replicas(emulator: Process, database: str, receiver: Receiver, tmp_path: Path) -> Iterator[list[Gateway]]:
    """Replicas `r0` and `r1` on one PostgreSQL database (a lease of 2 s), sending webhooks to `receiver`;
    all three stopped after."""
    replicas: list[Gateway] = []
    try:
        for name in ("r0", "r1"):
            storage = {"url": database, "lease_s": 2.0, "replica_id": name}
            replicas.append(Gateway(gateway_config(emulator.url, tmp_path, storage=storage, webhooks=webhooks_section(receiver)), tmp_path).start())
        yield replicas
    finally:
        receiver.stop()
        for replica in replicas:
            replica.stop()


def test_another_replica_takes_over_the_delivery_of_one_killed(emulator: Process, postgres: Any, tmp_path: Path) -> None:  # noqa: F811
    receiver = Receiver(hold=1)
    database = postgres.new_database()
    with two_replicas(emulator, database, receiver, tmp_path) as replicas:
        endpoint, response_id = _held_delivery(replicas[0], receiver)
        ((claimer,),) = pg_rows(database, "SELECT claimed_by FROM webhook_deliveries")  # the one killed
        killed = replicas[0] if claimer == "r0" else replicas[1]
        assert killed.proc is not None
        killed.proc.kill()
        killed.proc.wait()
        # Sooner than its claim runs out (timeout_s + 10 s): once its lease has (2 s), the claim is void.
        cut_off, delivered = receiver.wait_for(2, timeout=8)
        assert cut_off.webhook_id == delivered.webhook_id
        assert delivered.unwrap(endpoint.signing_secret).data.id == response_id
        # Recorded once the receiver's answer is in: looked at until then.
        assert _pg_until(database, "SELECT status, attempts FROM webhook_deliveries", [("delivered", 1)]) == [("delivered", 1)]
        survivor = "r1" if claimer == "r0" else "r0"
        assert pg_rows(database, "SELECT replica, status_code FROM webhook_attempts") == [(survivor, 200)]  # the killed one's never ended


def test_a_run_adopted_from_a_killed_replica_reports_its_end_once(emulator: Process, postgres: Any, tmp_path: Path) -> None:  # noqa: F811
    receiver = Receiver()
    database = postgres.new_database()
    with two_replicas(emulator, database, receiver, tmp_path) as replicas:
        endpoint = replicas[0].client().webhooks.create(name="adopted", url=receiver.url(), event_types=["response.completed"])
        response = replicas[0].client().responses.create(model=MODEL, input="[long 200] [slow 10]", background=True)
        time.sleep(0.8)
        assert replicas[0].proc is not None
        replicas[0].proc.kill()  # mid-answer: r1 adopts the run and ends it
        (delivery,) = receiver.wait_for(1, timeout=30)
        assert delivery.unwrap(endpoint.signing_secret).data.id == response.id
        assert replicas[1].client().responses.retrieve(response.id).status == "completed"
        time.sleep(1.0)
        assert len(receiver.deliveries) == 1
        assert pg_rows(database, "SELECT replica, status_code FROM webhook_attempts") == [("r1", 200)]


def pg_rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    import asyncpg

    async def fetch() -> list[tuple[Any, ...]]:
        connection = await asyncpg.connect(url)
        try:
            return [tuple(row) for row in await connection.fetch(sql)]
        finally:
            await connection.close()

    return asyncio.run(fetch())


def _pg_until(url: str, sql: str, expected: list[tuple[Any, ...]], timeout: float = 5) -> list[tuple[Any, ...]]:
    deadline = time.monotonic() + timeout
    while (rows := pg_rows(url, sql)) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return rows


def test_a_slow_receiver_never_slows_a_run(emulator: Process, tmp_path: Path) -> None:
    receiver = Receiver(delay_s=1.5)
    gateway = Gateway(gateway_config(emulator.url, tmp_path, webhooks=webhooks_section(receiver, timeout_s=5)), tmp_path).start()
    try:
        client = gateway.client()
        client.webhooks.create(name="slow", url=receiver.url(), event_types=["response.completed"])
        started = time.monotonic()
        ids = [client.responses.create(model=MODEL, input=f"hi {n}", background=True).id for n in range(6)]
        assert all(poll(client, response_id).status == "completed" for response_id in ids)
        assert time.monotonic() - started < 1.5  # all ended before the receiver answered the first
        assert sorted(json.loads(d.body)["data"]["id"] for d in receiver.wait_for(6)) == sorted(ids)
    finally:
        receiver.stop()
        gateway.stop()


# -- the outbox's own guarantees, alone --------------------------------------------------------------------


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_the_outbox_is_written_with_the_end_and_each_delivery_claimed_once(dialect: str, postgres: Any, tmp_path: Path) -> None:  # noqa: F811
    """Deliveries are written in the transaction that ends a background response (its final record, or a
    take-over of a dead replica's run), only when that write lands, only for the tenant's endpoints that want
    the event; and replicas claiming at once never claim one delivery twice (each claim locks what it takes)."""
    from gateway.storage import open_database
    from gateway.storage.response_store import ResponseStore, Stalled, StoredResponse
    from gateway.storage.webhook_outbox import WebhookOutbox
    from gateway.storage.webhook_store import Endpoint, SigningSecrets, WebhookStore
    from gateway.webhooks.outbox import ResponseEvents

    url = f"sqlite:///{tmp_path}/outbox.sqlite3" if dialect == "sqlite" else postgres.new_database()

    async def check() -> None:
        db = open_database(url, retry_s=1, pool_size=8)
        await db.start()
        try:
            outbox = WebhookOutbox(db)
            woken: list[int] = []
            outbox.on_written(lambda: woken.append(1))
            store, endpoints = ResponseStore(db, ResponseEvents(outbox)), WebhookStore(db)
            secrets = SigningSecrets("sealed", "whsec_****abcd")
            await endpoints.create(Endpoint("we_t", "t", "n", "https://x/", ["response.failed", "response.cancelled"], secrets, 1, 1), 10)
            await endpoints.create(Endpoint("we_other", "other", "n", "https://x/", ["response.failed"], secrets, 1, 1), 10)
            for name in ("r1", "r2", "r3", "r4"):  # live replicas: their claims hold
                await db.execute("INSERT INTO replicas (id, heartbeat_at) VALUES (?, ?)", name, time.time() + 60)
            running = {"created_at": 1, "status": "in_progress", "background": True, "output": []}
            for response_id in ("resp_taken", "resp_ended"):
                await store.begin(running | {"id": response_id}, [], "t", "a", max_running=4, request="sealed")
            failed = running | {"id": "resp_taken", "status": "failed"}
            assert not await store.take_over(Stalled("resp_taken", "not-its-owner"), failed, lambda n: b"x")
            assert woken == [] and await outbox.claim("r1", 10, 30, 0) == []
            assert await store.take_over(Stalled("resp_taken", "a"), failed, lambda n: b"x")
            assert woken == [1]
            (due,) = await outbox.claim("r1", 10, 30, 0)
            assert (due.endpoint_id, due.event_type, json.loads(due.payload)["data"]["id"]) == ("we_t", "response.failed", "resp_taken")
            ended = StoredResponse(running | {"id": "resp_ended", "status": "cancelled"}, [], [], {}, {}, "t")
            assert not await store.put(ended, owner="not-its-owner")
            completed = StoredResponse(running | {"id": "resp_ended", "status": "completed"}, [], [], {}, {}, "t")
            assert await store.put(completed, owner="a")  # stored; no endpoint wants response.completed
            assert woken == [1] and await outbox.claim("r1", 10, 30, 0) == []
            # Many deliveries, four replicas claiming small batches at once: each taken exactly once.
            await db.transaction(lambda tx: _enqueue_many(outbox, tx, 200))
            taken: list[list[str]] = [[], [], [], []]

            async def claimer(index: int) -> None:
                while batch := await outbox.claim(f"r{index + 1}", 7, 30, time.time() - 10):
                    taken[index] += [delivery.id for delivery in batch]

            await asyncio.gather(*(claimer(index) for index in range(4)))
            everything = [delivery_id for batch in taken for delivery_id in batch]
            assert len(everything) == len(set(everything)) == 200
            # A claim of a live replica holds until it runs out (an attempt whose outcome was never written).
            await db.transaction(lambda tx: _enqueue_many(outbox, tx, 1, "late"))
            assert len(await outbox.claim("r1", 10, 0.3, time.time() - 10)) == 1
            assert await outbox.claim("r2", 10, 30, time.time() - 10) == []
            await asyncio.sleep(0.4)
            assert [due.id for due in await outbox.claim("r2", 10, 30, time.time() - 10)] == ["wh_late0"]
        finally:
            await db.close()

    asyncio.run(check())


async def _enqueue_many(outbox: Any, tx: Any, count: int, prefix: str = "") -> None:
    for n in range(count):
        await outbox.enqueue(tx, "t", "response.failed", b"{}", time.time(), lambda n=n: f"wh_{prefix}{n}")


def test_a_receiver_that_never_accepts_is_given_up_after_the_retry_window(emulator: Process, tmp_path: Path) -> None:
    receiver = Receiver(answers=[500] * 1000)
    gateway = Gateway(gateway_config(emulator.url, tmp_path, webhooks=webhooks_section(receiver, retry_for_s=1.5)), tmp_path).start()
    try:
        client = gateway.client()
        client.webhooks.create(name="down", url=receiver.url(), event_types=["response.completed"])
        response = client.responses.create(model=MODEL, input="hi", background=True)
        assert poll(client, response.id).status == "completed"
        time.sleep(3.5)
        tried = len(receiver.deliveries)
        assert 2 <= tried <= 12 and len({delivery.webhook_id for delivery in receiver.deliveries}) == 1
        time.sleep(1.0)
        assert len(receiver.deliveries) == tried  # given up: no more attempts
        with sqlite3.connect(gateway_storage(gateway)) as db:
            assert db.execute("SELECT status, attempts FROM webhook_deliveries").fetchall() == [("given_up", tried)]
        metrics = httpx.get(f"{gateway.url}/metrics").text
        assert metric(metrics, "gateway_webhook_deliveries_total", outcome="given_up") == 1
        assert metric(metrics, "gateway_webhook_deliveries_total", outcome="retried") == tried - 1
    finally:
        receiver.stop()
        gateway.stop()


def test_ended_deliveries_are_pruned_after_keep_s(emulator: Process, tmp_path: Path) -> None:
    receiver = Receiver()
    gateway = Gateway(gateway_config(emulator.url, tmp_path, webhooks=webhooks_section(receiver, keep_s=1)), tmp_path).start()
    try:
        client = gateway.client()
        client.webhooks.create(name="kept", url=receiver.url(), event_types=["response.completed"])
        client.responses.create(model=MODEL, input="hi", background=True)
        receiver.wait_for(1)
        recorded = _count_until(gateway, "SELECT COUNT(*) FROM webhook_attempts", lambda count: count == 1)  # after the answer
        assert recorded == 1
        time.sleep(3.0)
        with sqlite3.connect(gateway_storage(gateway)) as db:
            assert db.execute("SELECT COUNT(*) FROM webhook_deliveries").fetchone()[0] == 0
            assert db.execute("SELECT COUNT(*) FROM webhook_attempts").fetchone()[0] == 0
    finally:
        receiver.stop()
        gateway.stop()


def _count_until(gateway: Gateway, sql: str, done: Callable[[int], bool], timeout: float = 5) -> int:
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(gateway_storage(gateway)) as db:
            count = int(db.execute(sql).fetchone()[0])
        if done(count) or time.monotonic() > deadline:
            return count
        time.sleep(0.05)


# -- fair shares between tenants (Security 5) ----------------------------------------------------------------


def test_one_tenants_dead_receivers_never_hold_anothers_webhook(emulator: Process, tmp_path: Path) -> None:
    """Tenant one's twenty endpoints point at a receiver that holds every request past the attempt's
    timeout; tenant two's webhook still arrives at once (its share of the slots is its own, per-tenant and
    per-endpoint caps hold tenant one back, and its endpoints' breakers open). Its `/test` calls wait their
    own turn too."""
    stuck = Receiver(hold=10_000)
    fast = Receiver()
    section = {
        "allowed_urls": [stuck.origin, fast.origin],
        **FAST_RETRIES,
        "timeout_s": 8,
        "max_concurrent": 8,
        "max_in_flight_per_tenant": 4,
        "breaker_failures": 2,
        "breaker_open_s": 30,
    }
    gateway = Gateway(gateway_config(emulator.url, tmp_path, auth={"api_keys": KEYS}, webhooks=section), tmp_path).start()
    try:
        one, two = client_of(gateway, "sk-one"), client_of(gateway, "sk-two")
        for n in range(20):
            one.webhooks.create(name=f"dead {n}", url=stuck.url(f"dead-{n}"), event_types=["response.completed"])
        two.webhooks.create(name="alive", url=fast.url("alive"), event_types=["response.completed"])
        idle_started = time.monotonic()
        poll(two, two.responses.create(model=MODEL, input="idle", background=True).id)
        fast.wait_for(1, "alive")
        idle = time.monotonic() - idle_started
        for n in range(3):  # sixty deliveries to receivers that never answer
            poll(one, one.responses.create(model=MODEL, input=f"flood {n}", background=True).id)
        with stuck._arrived:
            assert stuck._arrived.wait_for(lambda: len(stuck.deliveries) >= 4, 10)
        started = time.monotonic()
        ended = poll(two, two.responses.create(model=MODEL, input="mine", background=True).id)
        (delivery,) = [d for d in fast.wait_for(2, "alive", timeout=10)[1:]]
        loaded = time.monotonic() - started
        assert json.loads(delivery.body)["data"]["id"] == ended.id
        assert loaded < max(2 * idle, 1.5), (idle, loaded)
        # /test: tenant one's two slots are busy with its dead receivers; tenant two's test is answered.
        dead = one.webhooks.list().data[0]
        blocked = [
            threading.Thread(
                target=lambda: httpx.post(
                    f"{gateway.url}/v1/webhook_endpoints/{dead.id}/test",
                    headers={"authorization": "Bearer sk-one"},
                    json={"event_type": "response.completed"},
                    timeout=30,
                )
            )
            for _ in range(4)
        ]
        for thread in blocked:
            thread.start()
        alive = two.webhooks.list().data[0]
        started = time.monotonic()
        answer = httpx.post(
            f"{gateway.url}/v1/webhook_endpoints/{alive.id}/test",
            headers={"authorization": "Bearer sk-two"},
            json={"event_type": "response.completed"},
            timeout=30,
        )
        assert answer.status_code == 200 and time.monotonic() - started < 2
        for thread in blocked:
            thread.join()
    finally:
        stuck.stop()
        fast.stop()
        gateway.stop()


def test_claims_deal_slots_to_tenants_in_turn_within_their_caps() -> None:
    from gateway.config import WebhooksConfig
    from gateway.storage.webhook_outbox import Due
    from gateway.webhooks.shares import DeliveryShares

    shares = DeliveryShares(WebhooksConfig(max_in_flight_per_tenant=3, max_in_flight_per_endpoint=2, breaker_failures=2, breaker_open_s=60))
    assert shares.shares(["a", "b", "c"], 5) == {"a": 2, "b": 2, "c": 1}
    assert shares.shares(["a", "b"], 10) == {"a": 3, "b": 3}
    assert shares.take([("d1", "e1"), ("d2", "e1"), ("d3", "e1"), ("d4", "e2")], 3) == ["d1", "d2", "d4"]
    due = Due("d1", "e1", "a", "response.completed", b"{}", 0.0, 0, "https://x", None)  # type: ignore[arg-type]
    for _ in range(2):
        shares.started(due)
        shares.ended(due, answered=False)
    assert shares.endpoint("e1") == 0 and shares.blocked() == ["e1"]  # the breaker is open
    shares.started(due)
    assert shares.tenant("a") == 2
    shares.ended(due, answered=True)
    assert shares.endpoint("e1") == 2 and shares.tenant("a") == 3


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_claim_deals_deliveries_to_tenants_in_turn(dialect: str, postgres: Any, tmp_path: Path) -> None:  # noqa: F811
    """Tenant t's backlog of 100 older deliveries does not fill a claim: tenant other's come in the first
    batch, and a blocked endpoint's are left where they are."""
    from gateway.storage import open_database
    from gateway.storage.webhook_outbox import Room, WebhookOutbox
    from gateway.storage.webhook_store import Endpoint, SigningSecrets, WebhookStore

    url = f"sqlite:///{tmp_path}/fair.sqlite3" if dialect == "sqlite" else postgres.new_database()

    class Blocked(Room):
        def blocked(self) -> list[str]:
            return ["we_t2"]

    async def check() -> None:
        db = open_database(url, retry_s=1, pool_size=4)
        await db.start()
        try:
            outbox, endpoints = WebhookOutbox(db), WebhookStore(db)
            secrets = SigningSecrets("sealed", "whsec_****abcd")
            for endpoint_id, tenant in [("we_t", "t"), ("we_other", "other")]:
                await endpoints.create(Endpoint(endpoint_id, tenant, "n", "https://x/", ["response.failed"], secrets, 1, 1), 10)
            await db.execute("INSERT INTO replicas (id, heartbeat_at) VALUES (?, ?)", "r1", time.time() + 60)  # its claims hold
            for n in range(100):
                await db.transaction(lambda tx, n=n: outbox.enqueue(tx, "t", "response.failed", b"{}", time.time(), lambda: f"wh_t{n}"))
            for n in range(3):
                await db.transaction(lambda tx, n=n: outbox.enqueue(tx, "other", "response.failed", b"{}", time.time(), lambda: f"wh_o{n}"))
            batch = await outbox.claim("r1", 4, 30, time.time() - 10)
            assert sorted(due.tenant for due in batch) == ["other", "other", "t", "t"]
            await endpoints.create(Endpoint("we_t2", "t", "n", "https://y/", ["response.failed"], secrets, 1, 1), 10)
            ids = iter(["wh_t100", "wh_t101"])  # one for each of tenant t's endpoints
            await db.transaction(lambda tx: outbox.enqueue(tx, "t", "response.failed", b"{}", time.time(), lambda: next(ids)))
            rest = await outbox.claim("r1", 1000, 30, time.time() - 10, Blocked())
            assert len(rest) == 100 and "we_t2" not in {due.endpoint_id for due in rest}
        finally:
            await db.close()

    asyncio.run(check())
