"""Signing secrets and signatures, as Standard Webhooks define them and the openai SDK's `webhooks.unwrap`
checks them: a secret `whsec_` + base64 of 32 random bytes; each attempt signs `{webhook-id}.{timestamp}.{body}`
with HMAC-SHA256 under every secret still valid, the signatures space-separated as `v1,<base64>`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

_PREFIX = "whsec_"


def new_secret() -> str:
    return _PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


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
