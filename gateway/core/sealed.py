"""Sealed blobs: text the gateway hands out or stores that only it may read back, and only for what it was
sealed for.

With `store: false` the gateway keeps nothing, yet gpt-oss needs its analysis from earlier in the turn
(between tool calls) to go on. The client asks for `include: ["reasoning.encrypted_content"]`, gets each
reasoning item sealed with AES-256-GCM, and sends the items back in the next request's input. Compaction
items come back the same way; a background run's request (it may hold MCP credentials) and webhook endpoints'
signing secrets are stored sealed.

Each blob names its purpose and its tenant in the AEAD's associated data, under a key derived for that
purpose alone (HKDF from `server.reasoning_key`), and carries the id of the key that sealed it: a blob of
another tenant, of another purpose, changed, or sealed under an unknown key is the same `Unsealable`. Keys
rotate: a new `server.reasoning_key` seals from then on, the old ones listed in `server.retired_reasoning_keys`
still open what they sealed. Without a key, the first gateway on the store makes one and keeps it there
(storage/key_store.py, `shared_sealer`): restarts and replicas share it, and it still opens what it sealed
once a key is configured. A process whose keys cannot open what the store's sealing key sealed does not start.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
from enum import Enum
from typing import TYPE_CHECKING

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

if TYPE_CHECKING:
    from ..config import ServerConfig
    from ..storage.key_store import KeyStore

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
    WEBHOOK_SECRET = "webhook-secret"  # a webhook endpoint's signing secret, kept in the store
    DOMAIN_SECRET = "domain-secret"  # a container network policy's domain secret (files/network.py)
    AGENT_SECRET = "agent-secret"  # an agent's MCP server headers and authorization (agents/objects.py)
    VAULT_SECRET = "vault-secret"  # a vault credential's tokens and secret values (vaults/)


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


class KeysDoNotOpen(Exception):
    """The store's blobs were sealed by a key this process does not have: it would fail them one by one."""


def new_key() -> str:
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()


async def shared_sealer(keys: KeyStore, server: ServerConfig) -> Sealer:
    """The sealer of every process on the store: the configured key seals where one is, else the store's own
    (made by the first process to start); the store's own key, and the retired ones, still open what they sealed."""
    made = await keys.made_key(new_key)
    if server.reasoning_key:
        sealer = Sealer(server.reasoning_key, [*server.retired_reasoning_keys, made])
    else:
        sealer = Sealer(made, server.retired_reasoning_keys)
        log.info("sealed blobs use the store's own key (server.reasoning_key is not set): every gateway on this store shares it")
    sealing = await keys.sealing_key_id()
    if sealing is not None and not sealer.opens(sealing):
        raise KeysDoNotOpen(
            f"the store's blobs are sealed by key {sealing}, which server.reasoning_key and server.retired_reasoning_keys do not hold: "
            "list the key that sealed them in server.retired_reasoning_keys"
        )
    if sealing != sealer.key_id:
        await keys.set_sealing_key_id(sealer.key_id)
    return sealer


class Sealer:
    def __init__(self, key_b64: str | None, retired_b64: list[str] | None = None) -> None:
        if key_b64:
            master = base64.b64decode(key_b64, validate=True)
            if len(master) != 32:
                raise ValueError("server.reasoning_key must be 32 bytes, base64-encoded")
        else:  # a process on its own (tests, tools): blobs do not outlive it
            master = AESGCM.generate_key(bit_length=256)
        self._current = _Key(master)
        self._keys = {self._current.id: self._current}
        for retired in retired_b64 or []:
            key = _Key(base64.b64decode(retired, validate=True))
            self._keys.setdefault(key.id, key)

    @property
    def key_id(self) -> str:
        """The id of the key that seals, in hex."""
        return self._current.id.hex()

    def opens(self, key_id: str) -> bool:
        """Whether one of the keys opens what the key of this id (hex) sealed."""
        return any(key.hex() == key_id for key in self._keys)

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
