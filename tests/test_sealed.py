"""Sealed blobs open only for what and whom they were sealed: another tenant's compaction item, a compaction
item sent as reasoning, and a background run's stored request sent as reasoning are each the 400 a
tampered blob is, with nothing of their text shown; keys rotate, and runs stored before purposes still
adopt."""

from __future__ import annotations

import base64
import os
import sqlite3
import time
from typing import Any, Iterator

import openai
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.core.sealed import Purpose, Sealer, Unsealable

from .conftest import MODEL, Gateway, Process, gateway_config

KEYS = [{"key": "alice-key", "tenant": "alice"}, {"key": "mallory-key", "tenant": "mallory"}]


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_a_blob_opens_for_its_purpose_and_tenant_alone() -> None:
    sealer = Sealer(new_key())
    blob = sealer.seal("the plan", Purpose.REASONING, "alice")
    assert sealer.open(blob, Purpose.REASONING, "alice") == "the plan"
    for purpose, tenant in [(Purpose.REASONING, "mallory"), (Purpose.COMPACTION, "alice"), (Purpose.RUN_REQUEST, "alice")]:
        with pytest.raises(Unsealable):
            sealer.open(blob, purpose, tenant)
    # A tenant whose name extends another's is another tenant (the parts are separated, not run together).
    with pytest.raises(Unsealable):
        sealer.open(sealer.seal("x", Purpose.REASONING, "ali"), Purpose.REASONING, "alice")
    with pytest.raises(Unsealable):
        Sealer(new_key()).open(blob, Purpose.REASONING, "alice")  # another gateway's key


def test_keys_rotate_and_old_blobs_are_refused_but_stored_runs() -> None:
    old, new = new_key(), new_key()
    before = Sealer(old).seal("kept", Purpose.COMPACTION, "alice")
    rotated = Sealer(new, [old])
    assert rotated.open(before, Purpose.COMPACTION, "alice") == "kept"  # a retired key still opens its blobs
    after = rotated.seal("fresh", Purpose.COMPACTION, "alice")
    with pytest.raises(Unsealable):
        Sealer(old).open(after, Purpose.COMPACTION, "alice")  # and seals nothing new
    with pytest.raises(Unsealable):
        Sealer(new).open(before, Purpose.COMPACTION, "alice")  # once dropped from the list, it opens nothing
    # A blob of the one context used before purposes: a stored run's request still opens (a rolling upgrade
    # hands such runs over), as reasoning or compaction it is refused.
    nonce = os.urandom(12)
    legacy = base64.urlsafe_b64encode(nonce + AESGCM(base64.b64decode(old)).encrypt(nonce, b"{}", b"harmony-gateway reasoning v1")).decode()
    assert Sealer(old).open(legacy, Purpose.RUN_REQUEST, "alice") == "{}"
    for purpose in (Purpose.REASONING, Purpose.COMPACTION):
        with pytest.raises(Unsealable):
            Sealer(old).open(legacy, purpose, "alice")


@pytest.fixture(scope="module")
def tenants(emulator: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("sealed")
    process = Gateway(gateway_config(emulator.url, tmp, auth={"api_keys": KEYS}, server={"reasoning_key": new_key()}), tmp).start()
    process.database = tmp / "responses.sqlite3"  # type: ignore[attr-defined]
    yield process
    process.stop()


def refused(client: openai.OpenAI, items: list[dict[str, Any]], secret: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input=[*items, {"role": "user", "content": "go on"}])
    assert err.value.body["code"] == "invalid_encrypted_content"
    assert secret not in str(err.value.body)


def test_another_tenants_compaction_item_is_refused(tenants: Gateway) -> None:
    alice, mallory = tenants.client(api_key="alice-key"), tenants.client(api_key="mallory-key")
    first = alice.responses.create(model=MODEL, input="alice's private plan")
    item = alice.responses.compact(model=MODEL, previous_response_id=first.id).output[-1].to_dict()
    assert alice.responses.create(model=MODEL, input=[item, {"role": "user", "content": "go on"}]).status == "completed"
    refused(mallory, [item], "private plan")
    # Alice's own compaction item, sent as a reasoning item: refused, its summary never shown as reasoning.
    refused(alice, [{"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": item["encrypted_content"]}], "private plan")


def test_a_stored_run_request_sent_as_reasoning_is_refused(tenants: Gateway) -> None:
    alice = tenants.client(api_key="alice-key")
    secret = "the-run-request-secret"
    running = alice.responses.create(model=MODEL, input=f"{secret} [stall]", background=True, instructions=secret)
    try:
        blob = None
        for _ in range(100):
            with sqlite3.connect(f"file:{tenants.database}?mode=ro", uri=True) as db:  # type: ignore[attr-defined]
                rows = db.execute("SELECT request FROM responses WHERE id = ?", (running.id,)).fetchall()
            if rows and rows[0][0]:
                blob = rows[0][0]
                break
            time.sleep(0.05)
        assert blob is not None and secret not in blob
        reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": blob}
        refused(alice, [reasoning], secret)
        refused(alice, [{"type": "compaction", "id": "cmp_1", "encrypted_content": blob}], secret)
    finally:
        alice.responses.cancel(running.id)


def _encrypted_reasoning(gateway: Gateway) -> list[dict[str, Any]]:
    """A stateless first turn's output, reasoning sealed, as a client sends it back."""
    first = gateway.client().responses.create(model=MODEL, input="hi", store=False, include=["reasoning.encrypted_content"])
    return [item.model_dump(exclude_none=True) for item in first.output]


def _opens(gateway: Gateway, items: list[dict[str, Any]]) -> bool:
    try:
        gateway.client().responses.create(model=MODEL, input=[*items, {"role": "user", "content": "go on"}], store=False)
    except openai.BadRequestError as exc:
        assert exc.body["code"] == "invalid_encrypted_content"  # type: ignore[index]
        return False
    return True


def test_with_no_key_configured_the_store_keeps_one_that_outlives_the_process(emulator: Process, tmp_path) -> None:
    """No `server.reasoning_key`: the gateway's key is the store's, so what it sealed opens after a restart;
    a key configured later seals from then on and the store's own still opens what it sealed; a key that
    cannot open what the store's sealing key sealed stops the gateway at start, saying which to list."""
    started: list[Gateway] = []

    def start(**server: Any) -> Gateway:
        gateway = Gateway(gateway_config(emulator.url, tmp_path, server=server), tmp_path)
        started.append(gateway)
        return gateway.start()

    try:
        first = start()
        sealed = _encrypted_reasoning(first)
        first.stop()
        again = start()
        assert _opens(again, sealed)
        again.stop()
        configured = new_key()
        keyed = start(reasoning_key=configured)
        assert _opens(keyed, sealed)
        sealed_by_configured = _encrypted_reasoning(keyed)
        keyed.stop()
        with pytest.raises(RuntimeError, match="list the key that sealed them in server.retired_reasoning_keys"):
            start(reasoning_key=new_key())
        rotated = start(reasoning_key=new_key(), retired_reasoning_keys=[configured])
        assert _opens(rotated, sealed_by_configured) and _opens(rotated, sealed)
    finally:
        for gateway in started:
            gateway.stop()
