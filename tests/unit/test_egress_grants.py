"""The egress proxy's pure parts (egress/grants.py, runtime/domains.py): grants as the control API takes
them, allowlist matching, and the scrubbing of echoed secrets across chunk boundaries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from egress.grants import BadGrant, Grants, Scrubber, parse_grant
from runtime.domains import allowed, domain_problem

PLACEHOLDER = "hgsecret_" + "0" * 32


def grant(**changes: Any) -> bytes:
    body = {
        "tenant": "t",
        "allowed_domains": ["api.example.com", "*.files.example.com"],
        "secrets": [{"domain": "api.example.com", "placeholder": PLACEHOLDER, "value": "sk-1"}],
        "max_connections": 4,
        "max_bytes": 1000,
        "max_connection_s": 60,
        "expires_in_s": 30,
    }
    return json.dumps(body | changes).encode()


def test_hosts_match_exact_names_and_wildcards_below_them() -> None:
    domains = ("api.example.com", "*.files.example.com")
    assert allowed("api.example.com", domains) and allowed("a.b.files.example.com", domains)
    assert not allowed("files.example.com", domains)  # a wildcard is the names under it, not the name
    assert not allowed("evil-api.example.com", domains) and not allowed("api.example.com.evil.org", domains)
    assert not allowed("xfiles.example.com", domains)


@pytest.mark.parametrize("domain", ["10.0.0.1", "localhost", "*.com", "exa_mple.com", "-a.com", "a..com", "*.*.a.com", "A.com", "a" * 64 + ".com"])
def test_what_is_not_a_domain_is_refused(domain: str) -> None:
    assert domain_problem(domain) is not None


@pytest.mark.parametrize(
    "changes",
    [
        {"allowed_domains": ["127.0.0.1"]},
        {"allowed_domains": []},
        {"secrets": [{"domain": "other.example.com", "placeholder": PLACEHOLDER, "value": "v"}]},
        {"secrets": [{"domain": "api.example.com", "placeholder": "short", "value": "v"}]},
        {"secrets": [{"domain": "api.example.com", "placeholder": PLACEHOLDER, "value": "a\r\nX-Injected: 1"}]},
        {"max_bytes": -1},
        {"extra": 1},
    ],
)
def test_a_bad_grant_is_refused(changes: dict[str, Any]) -> None:
    with pytest.raises(BadGrant):
        parse_grant(grant(**changes))


def test_secrets_apply_to_their_domain_and_a_grant_lapses() -> None:
    parsed = parse_grant(grant(), now=0.0)
    assert [secret.value for secret in parsed.secrets_of("api.example.com")] == ["sk-1"]
    assert parsed.secrets_of("x.files.example.com") == ()
    grants = Grants()
    grants.put("t" * 40, parsed)
    assert grants.get("t" * 40, now=10.0) is parsed and grants.get("t" * 40, now=31.0) is None
    with pytest.raises(BadGrant):
        grants.put("short", parsed)


def test_registering_again_keeps_what_the_sandbox_used() -> None:
    grants, first = Grants(), parse_grant(grant())
    grants.put("t" * 40, first)
    first.connections, first.bytes_used = 2, 500
    grants.put("t" * 40, parse_grant(grant()))
    again = grants.get("t" * 40)
    assert again is not None and (again.connections, again.bytes_used) == (2, 500)


@pytest.mark.parametrize("cut", range(1, 12))
def test_the_scrubber_masks_a_secret_split_across_chunks(cut: int) -> None:
    body = b'{"authorization": "Bearer sk-secret"}'
    at = body.index(b"sk-secret") + cut - 3
    scrubber = Scrubber([("sk-secret", "*********")])
    out = scrubber.feed(body[:at]) + scrubber.feed(body[at:]) + scrubber.feed(b"")
    assert out == body.replace(b"sk-secret", b"*********")
