"""The proxy's decisions, as a mitmproxy addon: who a client is (the token in its proxy credentials), where
it may go (its grant's domains, on the allowed ports, to public addresses the proxy resolved itself), what is
put into its requests (domain secrets, in HTTPS headers to their domain only), and how much it may use.

Every server connection passes `server_connect`, whatever is tunnelled: the host is checked against the grant
there, resolved once, every address checked, and the connection made to that checked address (the name kept
for SNI and certificate checks), so a name that resolves elsewhere the second time gains nothing.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable

from mitmproxy import http

from runtime.addresses import Address, PublicAddresses
from runtime.domains import normalized

from .grants import Grant, Grants, Scrubber, Secret

log = logging.getLogger("egress")

RESOLVE_TIMEOUT_S = 5.0
_SPENT = "this sandbox has moved {} bytes through the proxy, its limit"


@dataclass
class Client:
    """A connection from a sandbox: whose grant it uses, and since when."""

    token: str
    tenant: str
    started: float


class Egress:
    def __init__(
        self,
        grants: Grants,
        addresses: PublicAddresses,
        ports: frozenset[int] = frozenset({80, 443}),
        resolve: dict[str, str] | None = None,
        max_tenant_connections: int = 256,
    ) -> None:
        self.grants = grants
        self.addresses = addresses
        self.ports = ports
        self.resolve = resolve or {}  # the operator's fixed names (tests, an internal index), checked like any
        self._clients: dict[str, Client] = {}
        # Connections open per tenant, across its sandboxes: one tenant cannot take all the proxy has.
        self.max_tenant_connections = max_tenant_connections
        self._tenants: dict[str, int] = {}

    # -- who the client is ------------------------------------------------------------------------------

    def http_connect(self, flow: http.HTTPFlow) -> None:
        """A CONNECT: its host and port are checked now; what is tunnelled is checked request by request."""
        self._admit(flow, tunnel=True)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.request.method == "CONNECT" or flow.response is not None:
            return
        client = self._clients.get(flow.client_conn.id)
        if client is None and flow.client_conn.tls_established:
            return _refuse(flow, 407, "the request came through no authorized tunnel")
        if client is None:  # a plain-HTTP request to the proxy itself: it names its credentials
            if self._admit(flow, tunnel=False) is None:
                return None
            client = self._clients[flow.client_conn.id]
        grant = self._grant(flow, client)
        if grant is None:
            return None
        host = normalized(flow.request.host)
        if not grant.allows(host) or flow.request.port not in self.ports:
            return _refuse(flow, 403, f"{host}:{flow.request.port} is not allowed for this sandbox")
        flow.request.headers.pop("Proxy-Authorization", None)
        if flow.request.scheme == "https" and grant.secrets:
            _substitute(flow.request.headers, grant.secrets_of(host))
        flow.request.stream = self._counter(flow, client)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        client = self._clients.get(flow.client_conn.id)
        if client is None or flow.response is None:
            return
        grant = self.grants.get(client.token)
        secrets = grant.secrets_of(normalized(flow.request.host)) if grant is not None and flow.request.scheme == "https" else ()
        if not secrets:
            flow.response.stream = self._counter(flow, client)
            return
        # A server that echoes the credential (a debugging endpoint, an error page) must not hand it to the
        # sandbox: in headers it goes back to its placeholder; in the (uncompressed) body it is masked with
        # as many `*`, which keeps the body's length what its Content-Length says.
        _replace_headers(flow.response.headers, [(secret.value, secret.placeholder) for secret in secrets])
        scrubber, count = Scrubber([(secret.value, "*" * len(secret.value)) for secret in secrets]), self._counter(flow, client)
        flow.response.stream = lambda chunk: scrubber.feed(count(chunk))

    def tcp_start(self, flow: Any) -> None:
        """A tunnel that carries neither TLS nor HTTP: refused (the server is never connected), since
        nothing in it could be checked or counted."""
        flow.server_conn.error = "only HTTP and HTTPS pass the sandbox egress proxy"

    def udp_start(self, flow: Any) -> None:
        flow.server_conn.error = "only HTTP and HTTPS pass the sandbox egress proxy"

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """A WebSocket's messages count against the sandbox's bytes, as bodies do; past them, none passes."""
        client = self._clients.get(flow.client_conn.id)
        grant = self.grants.get(client.token) if client is not None else None
        assert flow.websocket is not None
        message = flow.websocket.messages[-1]
        if grant is not None:
            grant.bytes_used += len(message.content)
        if grant is None or grant.bytes_used > grant.max_bytes:
            message.drop()

    async def server_connect(self, data: Any) -> None:
        """Before any connection to a server: the host allowed, resolved here, every address public (or in
        the operator's allowed networks), and the connection pinned to the checked address."""
        server = data.server
        client = self._clients.get(data.client.id)
        grant = self.grants.get(client.token) if client is not None else None
        host, port = server.address
        name = normalized(str(host))
        if grant is None:
            server.error = "this sandbox has no network grant"
            return
        if not grant.allows(name) or port not in self.ports:
            server.error = f"{name}:{port} is not allowed for this sandbox"
            return
        try:
            address = await self._resolved(name, port)
        except OSError as exc:
            server.error = f"{name} could not be resolved ({exc.strerror or exc})"
            return
        except Refused as exc:
            server.error = str(exc)
            return
        server.sni = server.sni or name
        server.address = (str(address), port)

    def client_disconnected(self, client_conn: Any) -> None:
        client = self._clients.pop(client_conn.id, None)
        if client is not None:
            grant = self.grants.get(client.token)
            if grant is not None:
                grant.connections -= 1
            left = self._tenants.pop(client.tenant) - 1
            if left:
                self._tenants[client.tenant] = left

    # -- checks ---------------------------------------------------------------------------------------------

    def _admit(self, flow: http.HTTPFlow, tunnel: bool) -> Client | None:
        """Authenticate a client's first request (its CONNECT, or its first plain request), count its
        connection against its grant, and check where the request goes."""
        token = _token(flow.request.headers.get("Proxy-Authorization", ""))
        grant = self.grants.get(token) if token else None
        if token is None or grant is None:
            _refuse(flow, 407, "the sandbox's proxy credentials are missing or no longer valid")
            flow.response.headers["Proxy-Authenticate"] = 'Basic realm="sandbox egress"'
            return None
        host, port = normalized(flow.request.host), flow.request.port
        if _is_address(host):
            _refuse(flow, 403, f"{host} is an IP address: sandboxes reach domain names in their allowlist only")
            return None
        if not grant.allows(host):
            _refuse(flow, 403, f"{host} is not in this sandbox's allowed domains")
            return None
        if port not in self.ports or (tunnel and port == 80):
            _refuse(flow, 403, f"port {port} is not allowed (only {', '.join(map(str, sorted(self.ports)))})")
            return None
        if grant.bytes_used >= grant.max_bytes:
            _refuse(flow, 429, _SPENT.format(grant.max_bytes))
            return None
        if grant.connections >= grant.max_connections:
            _refuse(flow, 429, f"this sandbox has {grant.max_connections} connections open already, its limit")
            return None
        if self._tenants.get(grant.tenant, 0) >= self.max_tenant_connections:
            _refuse(flow, 429, f"this tenant's sandboxes have {self.max_tenant_connections} connections open already, its limit")
            return None
        grant.connections += 1
        self._tenants[grant.tenant] = self._tenants.get(grant.tenant, 0) + 1
        self._clients[flow.client_conn.id] = Client(token, grant.tenant, time.monotonic())
        return self._clients[flow.client_conn.id]

    def _grant(self, flow: http.HTTPFlow, client: Client) -> Grant | None:
        grant = self.grants.get(client.token)
        if grant is None:
            _refuse(flow, 407, "the sandbox's network grant has ended")
            return None
        if time.monotonic() - client.started > grant.max_connection_s:
            _refuse(flow, 408, f"the connection is older than {grant.max_connection_s:g} s, its limit")
            return None
        if grant.bytes_used >= grant.max_bytes:
            _refuse(flow, 429, _SPENT.format(grant.max_bytes))
            return None
        return grant

    def _counter(self, flow: http.HTTPFlow, client: Client) -> Callable[[bytes], bytes]:
        """A body's chunks as they pass, counted against the grant; past its bytes or time, the flow ends."""
        token, started = client.token, client.started

        def count(chunk: bytes) -> bytes:
            grant = self.grants.get(token)
            if grant is None:
                flow.kill()
                return b""
            grant.bytes_used += len(chunk)
            if grant.bytes_used > grant.max_bytes or time.monotonic() - started > grant.max_connection_s:
                flow.kill()
                return b""
            return chunk

        return count

    async def _resolved(self, name: str, port: int) -> Address:
        fixed = self.resolve.get(name)
        if fixed is not None:
            addresses = [ipaddress.ip_address(fixed)]
        else:
            loop = asyncio.get_running_loop()
            found = await asyncio.wait_for(loop.getaddrinfo(name, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT_S)
            addresses = [ipaddress.ip_address(entry[4][0]) for entry in found]
        if not addresses:
            raise Refused(f"{name} has no address")
        refused = [address for address in addresses if not self.addresses.permits(address)]
        if refused:
            raise Refused(f"{name} resolves to a private, loopback or otherwise non-public address ({refused[0]}), which sandboxes may not reach")
        return addresses[0]


class Refused(Exception):
    """A server the client may not reach: the reason becomes the proxy's 502."""


def _token(header: str) -> str | None:
    """The password of Basic proxy credentials (the user name is not looked at)."""
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic" or len(encoded) > 512:
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return decoded.partition(":")[2] or None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def _substitute(headers: http.Headers, secrets: tuple[Secret, ...]) -> None:
    """Each secret's placeholder, wherever it is in a header value, becomes the secret (headers only)."""
    _replace_headers(headers, [(secret.placeholder, secret.value) for secret in secrets])


def _replace_headers(headers: http.Headers, pairs: list[tuple[str, str]]) -> None:
    for name in set(headers.keys()):
        values = headers.get_all(name)
        replaced = [_replace_all(value, pairs) for value in values]
        if replaced != values:
            headers.set_all(name, replaced)


def _replace_all(text: str, pairs: list[tuple[str, str]]) -> str:
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def _refuse(flow: http.HTTPFlow, status: int, reason: str) -> None:
    log.info("refused %s %s:%s: %s", flow.request.method, flow.request.host, flow.request.port, reason)
    flow.response = http.Response.make(status, f"sandbox egress proxy: {reason}\n".encode(), {"Content-Type": "text/plain"})
