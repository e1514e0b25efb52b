"""Sealed blobs: text the gateway hands out or stores that only it may read back, and only for what it was
sealed for.

With `store: false` the gateway keeps nothing, yet gpt-oss needs its analysis from earlier in the turn
(between tool calls) to go on. The client asks for `include: ["reasoning.encrypted_content"]`, gets each
reasoning item sealed with AES-256-GCM, and sends the items back in the next request's input. Compaction
items come back the same way, and a background run's request is stored sealed (it may hold MCP credentials).

Each blob names its purpose and its tenant in the AEAD's associated data, under a key derived for that
purpose alone (HKDF from `server.reasoning_key`), and carries the id of the key that sealed it: a blob of
another tenant, of another purpose, changed, or sealed under an unknown key is the same `Unsealable`. Keys
rotate: a new `server.reasoning_key` seals from then on, the old ones listed in `server.retired_reasoning_keys`
still open what they sealed. Without a key, each process makes its own, so blobs do not survive a restart
or cross replicas.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
from enum import Enum

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

log = logging.getLogger("gateway.sealed")

MAX_SEALED_CHARS = 4 * 1024 * 1024
_VERSION = b"\x02"
_KEY_ID_BYTES = 8
_NONCE_BYTES = 12
_HEADER_BYTES = len(_VERSION) + _KEY_ID_BYTES
_LEGACY_CONTEXT = b"harmony-gateway reasoning v1"  # the one context every blob had before purposes


class Purpose(Enum):
    """What a blob was sealed for: it opens for that alone."""

    REASONING = "reasoning"  # a reasoning item's encrypted_content
    COMPACTION = "compaction"  # a compaction item's encrypted_content
    RUN_REQUEST = "run-request"  # a background run's request, kept in the store for the replica adopting it


class Unsealable(ValueError):
    """The blob was not sealed by this gateway for this tenant and purpose, or was changed since."""


class _Key:
    """One master key: its id, and an AEAD per purpose under a key derived for that purpose only."""

    def __init__(self, master: bytes) -> None:
        self.master = master
        self.id = hashlib.sha256(b"harmony-gateway key id\0" + master).digest()[:_KEY_ID_BYTES]
        self.aeads = {purpose: AESGCM(_derive(master, purpose)) for purpose in Purpose}


def _derive(master: bytes, purpose: Purpose) -> bytes:
    info = b"harmony-gateway sealed v2\0" + purpose.value.encode()
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(master)


def _associated_data(header: bytes, purpose: Purpose, tenant: str) -> bytes:
    return b"\0".join((header, purpose.value.encode(), tenant.encode()))


class Sealer:
    def __init__(self, key_b64: str | None, retired_b64: list[str] | None = None) -> None:
        if key_b64:
            master = base64.b64decode(key_b64, validate=True)
            if len(master) != 32:
                raise ValueError("server.reasoning_key must be 32 bytes, base64-encoded")
        else:
            master = AESGCM.generate_key(bit_length=256)
            log.info("sealed blobs (reasoning.encrypted_content, compaction) use a key of this process's own (server.reasoning_key is not set)")
        self._current = _Key(master)
        self._keys = {self._current.id: self._current}
        for retired in retired_b64 or []:
            key = _Key(base64.b64decode(retired, validate=True))
            self._keys.setdefault(key.id, key)

    def seal(self, text: str, purpose: Purpose, tenant: str) -> str:
        key = self._current
        header = _VERSION + key.id
        nonce = os.urandom(_NONCE_BYTES)
        sealed = key.aeads[purpose].encrypt(nonce, text.encode(), _associated_data(header, purpose, tenant))
        return base64.urlsafe_b64encode(header + nonce + sealed).decode()

    def open(self, blob: str, purpose: Purpose, tenant: str) -> str:
        if len(blob) > MAX_SEALED_CHARS:
            raise Unsealable("too long")
        try:
            raw = base64.urlsafe_b64decode(blob.encode())
        except (binascii.Error, ValueError):
            raise Unsealable("not base64") from None
        header, nonce, sealed = raw[:_HEADER_BYTES], raw[_HEADER_BYTES : _HEADER_BYTES + _NONCE_BYTES], raw[_HEADER_BYTES + _NONCE_BYTES :]
        key = self._keys.get(header[len(_VERSION) :]) if header[:1] == _VERSION else None
        if key is not None:
            try:
                return key.aeads[purpose].decrypt(nonce, sealed, _associated_data(header, purpose, tenant)).decode()
            except (ValueError, InvalidTag, UnicodeDecodeError):
                pass
        if purpose is Purpose.RUN_REQUEST:
            # A run stored by a gateway of before purposes (a rolling upgrade hands its runs over): its
            # request was sealed in the one old context. Only the store holds these, never a client's input.
            return self._open_legacy(raw)
        raise Unsealable("not sealed by this gateway for this use")

    def _open_legacy(self, raw: bytes) -> str:
        for key in self._keys.values():
            try:
                return AESGCM(key.master).decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _LEGACY_CONTEXT).decode()
            except (ValueError, InvalidTag, UnicodeDecodeError):
                continue
        raise Unsealable("not sealed by this gateway for this use")
