"""`reasoning.encrypted_content`: the model's reasoning, sealed for a stateless client to send back.

With `store: false` the gateway keeps nothing, yet gpt-oss needs its analysis from earlier in the turn
(between tool calls) to go on. The client asks for `include: ["reasoning.encrypted_content"]`, gets each
reasoning item sealed with AES-256-GCM under the gateway's key, and sends the items back in the next
request's input; a blob that was changed, or sealed under another key, is a 400. The key comes from
`server.reasoning_key` (32 bytes, base64); without one, each process makes its own, so blobs do not
survive a restart or cross replicas.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

log = logging.getLogger("gateway.sealed")

_CONTEXT = b"harmony-gateway reasoning v1"  # bound into the tag: a blob sealed for another use fails
_NONCE_BYTES = 12
MAX_SEALED_CHARS = 4 * 1024 * 1024


class Unsealable(ValueError):
    """The blob was not sealed by this gateway's key, or was changed since."""


class Sealer:
    def __init__(self, key_b64: str | None) -> None:
        if key_b64:
            key = base64.b64decode(key_b64, validate=True)
            if len(key) != 32:
                raise ValueError("server.reasoning_key must be 32 bytes, base64-encoded")
        else:
            key = AESGCM.generate_key(bit_length=256)
            log.info("reasoning.encrypted_content is sealed with a key of this process's own (server.reasoning_key is not set)")
        self._aead = AESGCM(key)

    def seal(self, text: str) -> str:
        nonce = os.urandom(_NONCE_BYTES)
        return base64.urlsafe_b64encode(nonce + self._aead.encrypt(nonce, text.encode(), _CONTEXT)).decode()

    def open(self, blob: str) -> str:
        if len(blob) > MAX_SEALED_CHARS:
            raise Unsealable("too long")
        try:
            raw = base64.urlsafe_b64decode(blob.encode())
            return self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _CONTEXT).decode()
        except (binascii.Error, ValueError, InvalidTag, UnicodeDecodeError):
            raise Unsealable("not sealed by this gateway") from None
