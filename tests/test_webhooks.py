"""Webhooks: the endpoints API through the openai SDK, field for field; background responses that report
their end to a real receiver, which checks every signature with the SDK's `unwrap`; retries with one
webhook-id; rotation; tenants; the URL guard; and delivery that survives the gateway being killed."""

from __future__ import annotations

import sqlite3
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest
from openai.types.webhooks import WebhookEndpoint, WebhookEndpointWithSecret

from .conftest import MODEL, ROOT, Gateway, Process, free_port, gateway_config
from .test_background import poll
from .webhook_receiver import Receiver

RESPONSE_EVENTS = ["response.completed", "response.failed", "response.cancelled", "response.incomplete"]
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
    assert client.webhooks.event_types.list().data == RESPONSE_EVENTS
    deleted = client.webhooks.delete(created.id)
    assert deleted.deleted and deleted.id == created.id and deleted.object == "webhook_endpoint.deleted"
    with pytest.raises(openai.NotFoundError) as missing:
        client.webhooks.retrieve(created.id)
    assert missing.value.body["param"] == "webhook_endpoint_id"  # type: ignore[index]
    client.webhooks.delete(second.id)


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
    receiver.answers[:] = [500, 302]  # an error, then a redirect (not followed: a failure too), then 200
    client = client_of(hooked)
    response = client.responses.create(model=MODEL, input="hi", background=True)
    deliveries = receiver.wait_for(3, path_of(endpoint))
    assert len({delivery.webhook_id for delivery in deliveries}) == 1
    assert len({delivery.body for delivery in deliveries}) == 1  # the same event every time
    for delivery in deliveries:  # each attempt signed afresh, with its own timestamp
        assert delivery.unwrap(endpoint.signing_secret).data.id == response.id
    assert deliveries[1].at - deliveries[0].at >= 0.1 and deliveries[2].at - deliveries[1].at >= 0.2  # backing off
    time.sleep(1.0)
    assert len(receiver.to(path_of(endpoint))) == 3
    attempts = _attempts(hooked, deliveries[0].webhook_id)
    assert [status for status, _ in attempts] == [500, 302, 200]


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
