"""Domain names in sandbox network allowlists: `example.com` (that host only) and `*.example.com` (every
name under it, not the name itself). Shared by the gateway, which validates what a request allows, and the
egress proxy, which matches hosts against it; standard library only (the proxy runs in its own venv)."""

from __future__ import annotations

import re

MAX_DOMAIN = 253
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_NAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})+")  # at least two labels: no bare `com`, no `localhost`
_NUMERIC = re.compile(r"[0-9.]+")


def normalized(host: str) -> str:
    """A host as allowlists compare it: lower case, without the root's trailing dot."""
    return host.lower().removesuffix(".")


def domain_problem(domain: str) -> str | None:
    """Why `domain` cannot be in an allowlist, or None: a name of two labels or more, ASCII (an
    international name in its `xn--` form), optionally `*.` before it; never an IP address."""
    if len(domain) > MAX_DOMAIN:
        return f"is longer than {MAX_DOMAIN} characters"
    name = domain[2:] if domain.startswith("*.") else domain
    if not _NAME.fullmatch(name):
        return "is not a domain name (lower-case letters, digits and hyphens in dot-separated labels, or *. before one)"
    if _NUMERIC.fullmatch(name):
        return "is an IP address; only domain names can be allowed"
    return None


def matches(host: str, domain: str) -> bool:
    """Whether `host` (normalized) is what the allowlist entry `domain` allows."""
    if domain.startswith("*."):
        return host.endswith(domain[1:]) and len(host) > len(domain) - 1
    return host == domain


def allowed(host: str, domains: tuple[str, ...] | list[str]) -> bool:
    return any(matches(host, domain) for domain in domains)
