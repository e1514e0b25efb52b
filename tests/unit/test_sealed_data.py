"""Blobs sealed once, under a fixed key, and kept as test data (tests/data/sealed_blobs.json): what the
stores and clients hold today must open after any change to the sealing, for its own purpose and tenant
only. A change of the derivation, the associated data or the framing breaks every stored background
request and webhook secret, and every `encrypted_content` a client holds: it fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.core.sealed import Purpose, Sealer, Unsealable, new_key

KEPT = json.loads((Path(__file__).parent.parent / "data" / "sealed_blobs.json").read_text())
BLOBS: list[dict[str, Any]] = KEPT["blobs"]


def test_every_purpose_and_two_tenants_are_kept() -> None:
    assert {(blob["purpose"], blob["tenant"]) for blob in BLOBS} == {(purpose.value, tenant) for purpose in Purpose for tenant in ("alice", "bob")}


@pytest.mark.parametrize("blob", BLOBS, ids=lambda blob: f"{blob['purpose']}-{blob['tenant']}")
def test_a_kept_blob_opens_for_its_purpose_and_tenant(blob: dict[str, Any]) -> None:
    sealer = Sealer(KEPT["key"])
    assert sealer.key_id == KEPT["key_id"]
    assert sealer.open(blob["blob"], Purpose(blob["purpose"]), blob["tenant"]) == blob["text"]
    # Under a new key, with the kept one retired (a key rotation): still open.
    assert Sealer(new_key(), [KEPT["key"]]).open(blob["blob"], Purpose(blob["purpose"]), blob["tenant"]) == blob["text"]


@pytest.mark.parametrize("blob", BLOBS, ids=lambda blob: f"{blob['purpose']}-{blob['tenant']}")
def test_a_kept_blob_opens_for_nothing_else(blob: dict[str, Any]) -> None:
    sealer = Sealer(KEPT["key"])
    other_tenant = "bob" if blob["tenant"] == "alice" else "alice"
    with pytest.raises(Unsealable):
        sealer.open(blob["blob"], Purpose(blob["purpose"]), other_tenant)
    for purpose in Purpose:
        if purpose.value != blob["purpose"]:
            with pytest.raises(Unsealable):
                sealer.open(blob["blob"], purpose, blob["tenant"])
    with pytest.raises(Unsealable):
        Sealer(new_key()).open(blob["blob"], Purpose(blob["purpose"]), blob["tenant"])
