"""What each sandbox may do through the proxy: grants the gateway registers, named by the token in the
sandbox's proxy URL, with what each one is using now (connections, bytes)."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

from runtime.domains import allowed, domain_problem, matches

MAX_GRANT_BYTES = 64 * 1024
TOKEN = re.compile(r"[A-Za-z0-9_-]{32,64}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


class BadGrant(ValueError):
    """A registration the proxy refuses: the message says what is wrong with it."""


@dataclass(frozen=True)
class Secret:
    """A domain secret: `placeholder`, in a header of an HTTPS request to `domain`, becomes `value`."""

    domain: str
    placeholder: str
    value: str


@dataclass
class Grant:
    tenant: str
    domains: tuple[str, ...]
    secrets: tuple[Secret, ...]
    max_connections: int
    max_bytes: int
    max_connection_s: float
    expires_at: float
    connections: int = 0
    bytes_used: int = 0
    secrets_for: dict[str, tuple[Secret, ...]] = field(default_factory=dict)  # by host, computed once per host

    def allows(self, host: str) -> bool:
        return allowed(host, self.domains)

    def secrets_of(self, host: str) -> tuple[Secret, ...]:
        found = self.secrets_for.get(host)
        if found is None:
            found = self.secrets_for[host] = tuple(secret for secret in self.secrets if matches(host, secret.domain))
        return found


def parse_grant(body: bytes, now: float | None = None) -> Grant:
    """A registration's body, checked field by field; raises BadGrant."""
    if len(body) > MAX_GRANT_BYTES:
        raise BadGrant("the grant is too large")
    try:
        spec = json.loads(body)
    except ValueError:
        raise BadGrant("the grant is not JSON") from None
    if not isinstance(spec, dict):
        raise BadGrant("the grant must be an object")
    expected = {"tenant", "allowed_domains", "secrets", "max_connections", "max_bytes", "max_connection_s", "expires_in_s"}
    if set(spec) != expected:
        raise BadGrant(f"the grant must have exactly the fields {sorted(expected)}")
    domains = spec["allowed_domains"]
    if not isinstance(domains, list) or not 1 <= len(domains) <= 256 or not all(isinstance(d, str) and domain_problem(d) is None for d in domains):
        raise BadGrant("allowed_domains must be 1 to 256 valid domain names")
    secrets = spec["secrets"]
    if not isinstance(secrets, list) or len(secrets) > 64:
        raise BadGrant("secrets must be a list of at most 64")
    parsed = tuple(_secret(secret, domains) for secret in secrets)
    numbers = [spec[name] for name in ("max_connections", "max_bytes", "max_connection_s", "expires_in_s")]
    if not all(type(n) in (int, float) and n > 0 for n in numbers) or not isinstance(spec["tenant"], str):
        raise BadGrant("the limits must be positive numbers, the tenant a string")
    return Grant(
        spec["tenant"],
        tuple(domains),
        parsed,
        int(spec["max_connections"]),
        int(spec["max_bytes"]),
        float(spec["max_connection_s"]),
        (now if now is not None else time.monotonic()) + float(spec["expires_in_s"]),
    )


def _secret(spec: Any, domains: list[str]) -> Secret:
    if not isinstance(spec, dict) or set(spec) != {"domain", "placeholder", "value"}:
        raise BadGrant("a secret has exactly domain, placeholder and value")
    domain, placeholder, value = spec["domain"], spec["placeholder"], spec["value"]
    if not (isinstance(domain, str) and (domain in domains or (domain_problem(domain) is None and allowed(domain, domains)))):
        raise BadGrant("a secret's domain must be one of allowed_domains")
    if not (isinstance(placeholder, str) and _ENV_NAME.fullmatch(placeholder) and len(placeholder) >= 24):
        raise BadGrant("a secret's placeholder must be a random word of 24 characters or more")
    if not (isinstance(value, str) and 0 < len(value) <= 8192 and value.isascii() and value.isprintable()):
        raise BadGrant("a secret's value must be 1 to 8192 printable ASCII characters")
    return Secret(domain, placeholder, value)


class Grants:
    """The registered grants, by token. A grant lapses at its expiry unless registered again (the gateway
    does before each use of its sandbox), so one whose sandbox went without a word goes too."""

    def __init__(self, max_grants: int = 10_000) -> None:
        self._grants: dict[str, Grant] = {}
        self._max = max_grants

    def __len__(self) -> int:
        return len(self._grants)

    def put(self, token: str, grant: Grant) -> None:
        if not TOKEN.fullmatch(token):
            raise BadGrant("the token must be 32 to 64 URL-safe characters")
        current = self._grants.get(token)
        if current is not None:  # registered again: what it is using carries over
            grant.connections, grant.bytes_used = current.connections, current.bytes_used
        elif len(self._grants) >= self._max:
            self.sweep()
            if len(self._grants) >= self._max:
                raise BadGrant("the proxy holds as many grants as it may")
        self._grants[token] = grant

    def drop(self, token: str) -> None:
        self._grants.pop(token, None)

    def get(self, token: str, now: float | None = None) -> Grant | None:
        grant = self._grants.get(token)
        if grant is None:
            return None
        if grant.expires_at <= (now if now is not None else time.monotonic()):
            del self._grants[token]
            return None
        return grant

    def sweep(self) -> None:
        now = time.monotonic()
        for token in [token for token, grant in self._grants.items() if grant.expires_at <= now]:
            del self._grants[token]


class Scrubber:
    """Replaces strings in a stream of chunks, matches split across chunks included: the end of each chunk
    that could start a match waits for the next one (an empty chunk ends the stream and lets it go)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self._pairs = [(old.encode(), new.encode()) for old, new in pairs if old]
        self._keep = max((len(old) for old, _ in self._pairs), default=1) - 1
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        data = self._held + chunk
        for old, new in self._pairs:
            data = data.replace(old, new)
        if not chunk or self._keep == 0:
            self._held = b""
            return data
        self._held = data[-self._keep :]
        return data[: -self._keep] if len(data) > self._keep else b""
