"""Whether a request's own MCP server URL is one the operator allowed (`mcp.allowed_urls`).

A string prefix is no check: `http://127.0.0.1:8000` is a prefix of `http://127.0.0.1:8000@evil/` and
of `http://127.0.0.1:80001/`. URLs are parsed and compared by parts: the same scheme, host and port
exactly, and the path on a segment boundary. Anything a parser could read two ways is refused:
user info, backslashes, fragments, whitespace, dot segments, encoded slashes and dots.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

_SAFE = re.compile(r"^[A-Za-z0-9\-._~:/?\[\]!$&'()*+,;=%]+$")  # RFC 3986 characters, minus '#' and '@'
_AMBIGUOUS_ESCAPES = re.compile(r"%(2e|2f|5c|40|23|00)", re.IGNORECASE)
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int
    path: str  # without a trailing slash; "" for the root

    def allows(self, other: "Origin") -> bool:
        if (self.scheme, self.host, self.port) != (other.scheme, other.host, other.port):
            return False
        return not self.path or other.path == self.path or other.path.startswith(self.path + "/")


def parse(url: str) -> Origin | None:
    """The URL's parts, or None if it is not a plain http(s) URL."""
    if len(url) > 2048 or not _SAFE.match(url) or _AMBIGUOUS_ESCAPES.search(url):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return None
    segments = parts.path.split("/")
    if any(segment in (".", "..") for segment in segments):
        return None
    return Origin(scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme], parts.path.rstrip("/"))


def plain_urls(allowed: list[str]) -> list[str]:
    """An allow-list as a config validator checks it: every entry a plain http(s) URL, else ValueError."""
    for url in allowed:
        if parse(url) is None:
            raise ValueError(f"{url!r} is not a plain http(s) URL (no user info, fragment or dot segments)")
    return allowed


def is_allowed(url: str, allowed: list[str]) -> bool:
    target = parse(url)
    if target is None:
        return False
    return any(entry is not None and entry.allows(target) for entry in map(parse, allowed))


def shown(url: str) -> str:
    """The URL as it may be stored, listed or logged: user info, query and fragment left out, since each may
    carry a credential (`user:pass@`, `?token=`), as headers may."""
    try:
        parts = urlsplit(url[:2048])
        host, port = parts.hostname or "", parts.port
    except ValueError:
        return "(an invalid URL)"
    where = f"[{host}]" if ":" in host else host
    return urlunsplit((parts.scheme, where if port is None else f"{where}:{port}", parts.path, "", ""))
