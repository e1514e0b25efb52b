"""Which addresses the browser may fetch from: a guard against server-side request forgery.

The model chooses the URLs, and a page it read may have chosen them for it, so a URL is hostile input.
Only public addresses are allowed, unless the operator allows a network by name (`browser.allow_networks`).
The host is resolved once, every address it resolves to is checked, and the request then goes to a
checked address (with the name kept for the Host header and TLS), so a name that resolves differently the
second time (DNS rebinding) gains nothing. Redirects are checked the same way, hop by hop.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import anyio
import idna

from runtime.addresses import Address, PublicAddresses


class BlockedURL(Exception):
    """The URL may not be fetched; the message says why, for the model."""


@dataclass(frozen=True)
class Target:
    """A URL checked for fetching: connect to `address`, name the host as `host`."""

    url: str
    parts: SplitResult
    host: str
    port: int
    address: Address

    @property
    def connect_url(self) -> str:
        """The URL with the checked address in place of the host name."""
        host = f"[{self.address}]" if self.address.version == 6 else str(self.address)
        return self.parts._replace(netloc=f"{host}:{self.port}").geturl()

    @property
    def host_header(self) -> str:
        default = {"http": 80, "https": 443}[self.parts.scheme]
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == default else f"{name}:{self.port}"


class AddressPolicy(PublicAddresses):
    """Public addresses (and the networks an operator allows), checked for a URL's host."""

    async def check(self, url: str) -> Target:
        """Resolve the URL's host and check every address; raises BlockedURL."""
        try:
            parts = urlsplit(url)
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme, 0)
        except ValueError:
            raise BlockedURL(f"`{url[:200]}` is not a valid URL") from None
        if parts.scheme not in ("http", "https"):
            raise BlockedURL("only http and https URLs can be opened")
        host = parts.hostname
        if not host:
            raise BlockedURL(f"`{url[:200]}` has no host")
        if parts.username or parts.password:
            raise BlockedURL("URLs with credentials are not opened")
        if not host.isascii():
            try:  # as browsers read an international name (UTS 46, IDNA 2008); what it refuses is no host
                host = idna.encode(host, uts46=True).decode("ascii")
            except (idna.IDNAError, UnicodeError):
                raise BlockedURL(f"`{host[:100]}` is not a valid host name") from None
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise BlockedURL(f"the host `{host}` could not be resolved ({exc.strerror or exc})") from None
            addresses = [ipaddress.ip_address(entry[4][0]) for entry in found]
        if not addresses:
            raise BlockedURL(f"the host `{host}` has no address")
        refused = [address for address in addresses if not self.permits(address)]
        if refused:
            raise BlockedURL(f"`{host}` is a private, loopback or otherwise non-public address ({refused[0]}), which the browser may not open")
        return Target(url, parts, host, port, addresses[0])
