"""Signing secrets and signatures, as Standard Webhooks define them and the openai SDK's `webhooks.unwrap`
checks them: a secret `whsec_` + base64 of 32 random bytes; each attempt signs `{webhook-id}.{timestamp}.{body}`
with HMAC-SHA256 under every secret still valid, the signatures space-separated as `v1,<base64>`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from ..core.sealed import Purpose, Sealer
from ..storage.webhook_store import SigningSecrets

_PREFIX = "whsec_"


def new_secret() -> str:
    return _PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def made(sealer: Sealer, tenant: str) -> tuple[str, str]:
    """A new secret: in the clear (shown once) and sealed (kept)."""
    secret = new_secret()
    return secret, sealer.seal(secret, Purpose.WEBHOOK_SECRET, tenant)


def opened(sealer: Sealer, sealed: SigningSecrets, tenant: str, at: float) -> list[str]:
    """The secrets that sign an attempt made at `at`, in the clear; raises Unsealable."""
    return [sealer.open(secret, Purpose.WEBHOOK_SECRET, tenant) for secret in sealed.valid(at)]


def hint(secret: str) -> str:
    """What listings show of a secret: enough to tell two apart, nothing to sign with."""
    return f"{_PREFIX}****{secret[-4:]}"


def signature_header(webhook_id: str, timestamp: int, body: bytes, secrets_valid: list[str]) -> str:
    """The `webhook-signature` header: one signature per secret (two while a rotation keeps the old one)."""
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    signatures = []
    for secret in secrets_valid:
        key = base64.b64decode(secret[len(_PREFIX) :])
        signatures.append("v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode())
    return " ".join(signatures)
