"""What the network-policy tests run against: the egress proxy's real image in a container, on an internal
Docker network of the test's own (no route anywhere) and on Docker's bridge, where the tests' HTTPS and
HTTP servers listen on the host. The servers' names are fixed for the proxy (`--resolve`), and their
address is the operator's allowed exception (`--allow-network`), as an operator does for an internal index."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import secrets
import ssl
import subprocess
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import trustme

from .conftest import ensure_image

EGRESS_IMAGE = os.environ.get("EGRESS_TEST_IMAGE", "harmony-gateway/egress:test")
NAMES = ("allowed.test", "other.test", "secret.test", "private.test")
PRIVATE = "10.255.255.1"  # where private.test points: a private address behind an allowed name


def ensure_egress_image() -> str:
    """Build the egress proxy's image for the tests unless one of these sources exists."""
    from sandbox.build import egress_sha

    return ensure_image(EGRESS_IMAGE, "build-egress", "harmony-gateway.egress-sha", egress_sha())


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Seen:
    """A request a test server received."""

    server: str
    method: str
    path: str
    headers: dict[str, str]  # names in lower case (HTTP/2 and HTTP/1.1 spell them differently)


@dataclass
class Servers:
    """The tests' servers on the host: one HTTPS (every name), one plain HTTP."""

    address: str
    ca: trustme.CA
    root: Path
    seen: list[Seen] = field(default_factory=list)
    https_port: int = 0
    http_port: int = 0
    _servers: list[http.server.ThreadingHTTPServer] = field(default_factory=list)

    def start(self) -> "Servers":
        self._make_site()
        https = self._serve("https")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ca.issue_cert(*NAMES, self.address).configure_cert(context)  # the address too: bench/egress.py goes direct
        https.socket = context.wrap_socket(https.socket, server_side=True)
        self._serve("http")
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def requests(self, path: str) -> list[Seen]:
        return [seen for seen in self.seen if seen.path == path]

    def _serve(self, kind: str) -> http.server.ThreadingHTTPServer:
        servers, root = self, self.root

        class Handler(http.server.SimpleHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # connections kept alive, as real servers keep them
            disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall between them

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self) -> None:
                servers.seen.append(Seen(kind, "GET", self.path, {name.lower(): value for name, value in self.headers.items()}))
                if self.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", f"https://other.test:{servers.https_port}/hello")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/echo":  # what a careless debugging endpoint does: the credential comes back
                    body = json.dumps({"authorization": self.headers.get("Authorization")}).encode()
                    self._send(body, "application/json")
                elif self.path == "/hello":
                    self._send(f"hello from {self.headers.get('Host', '').split(':')[0]}\n".encode(), "text/plain")
                elif self.path.startswith("/bytes/"):  # a download of that many bytes, streamed
                    self._stream(int(self.path.removeprefix("/bytes/")))
                else:
                    super().do_GET()

            def _stream(self, size: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(size))
                self.end_headers()
                chunk = b"x" * 65536
                while size > 0:
                    self.wfile.write(chunk[: min(size, len(chunk))])
                    size -= len(chunk)

            def _send(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer((self.address, 0), Handler)
        server.daemon_threads = True
        if kind == "https":
            self.https_port = server.server_address[1]
        else:
            self.http_port = server.server_address[1]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._servers.append(server)
        return server

    def _make_site(self) -> None:
        """A package index with one wheel, and a git repository served over git's plain HTTP protocol."""
        files, simple = self.root / "files", self.root / "simple" / "tinypkg"
        files.mkdir(parents=True)
        simple.mkdir(parents=True)
        wheel = "tinypkg-1.0-py3-none-any.whl"
        (files / wheel).write_bytes(_wheel())
        digest = hashlib.sha256((files / wheel).read_bytes()).hexdigest()
        (simple / "index.html").write_text(f'<html><body><a href="/files/{wheel}#sha256={digest}">{wheel}</a></body></html>')
        work, bare = self.root.parent / "repo-work", self.root / "repo.git"
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
        subprocess.run([*git, "init", "-q", str(work)], check=True)
        (work / "README").write_text("cloned through the egress proxy\n")
        subprocess.run([*git, "-C", str(work), "add", "README"], check=True)
        subprocess.run([*git, "-C", str(work), "commit", "-qm", "first"], check=True)
        subprocess.run([*git, "clone", "-q", "--bare", str(work), str(bare)], check=True)
        subprocess.run(["git", "-C", str(bare), "update-server-info"], check=True)


def _wheel() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as wheel:
        wheel.writestr("tinypkg/__init__.py", "VERSION = '1.0'\n")
        wheel.writestr("tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n")
        wheel.writestr("tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr("tinypkg-1.0.dist-info/RECORD", "")
    return buffer.getvalue()


@dataclass
class EgressStack:
    """The proxy's container, its networks, and the servers behind it."""

    network: str  # the internal network sandboxes join
    outside: str  # the proxy's way out, to the servers
    proxy: str  # the proxy's container
    proxy_url: str  # as sandboxes reach it
    control_url: str  # as the gateway reaches it
    key: str
    servers: Servers

    def network_section(self, **overrides: Any) -> dict[str, Any]:
        section = {
            "enabled": True,
            "docker_network": self.network,
            "proxy_url": self.proxy_url,
            "control_url": self.control_url,
            "control_key": self.key,
        }
        return section | overrides

    def register(self, tenant: str, domains: list[str], max_connections: int = 1000, max_bytes: int = 1 << 40) -> str:
        """A grant registered as the gateway would; its token."""
        token = secrets.token_urlsafe(32)
        grant = {"tenant": tenant, "allowed_domains": domains, "secrets": [], "max_connections": max_connections,
                 "max_bytes": max_bytes, "max_connection_s": 3600, "expires_in_s": 3600}  # fmt: skip
        httpx.put(f"{self.control_url}/grants/{token}", json=grant, headers={"Authorization": f"Bearer {self.key}"}).raise_for_status()
        return token

    def proxy_from_host(self, token: str) -> str:
        """The proxy as the host reaches it (on its way-out network), with a grant's token."""
        networks = json.loads(docker("inspect", self.proxy))[0]["NetworkSettings"]["Networks"]
        return f"http://sandbox:{token}@{networks[self.outside]['IPAddress']}:3128"

    def proxy_ca(self, path: Path) -> Path:
        path.write_text(httpx.get(self.control_url + "/ca.pem", headers={"Authorization": f"Bearer {self.key}"}).text)
        return path

    def stop_proxy(self) -> None:
        docker("stop", "-t", "1", self.proxy)

    def start_proxy(self) -> None:
        docker("start", self.proxy)
        _wait_healthy(self.control_url)

    def close(self) -> None:
        subprocess.run(["docker", "rm", "-f", self.proxy], capture_output=True)
        subprocess.run(["docker", "network", "rm", self.network, self.outside], capture_output=True)
        self.servers.stop()


def start_stack(tmp: Path, max_tenant_connections: int = 8) -> EgressStack:
    image = ensure_egress_image()
    suffix = f"{os.getpid()}-{secrets.token_hex(3)}"
    # The proxy's way out: a bridge network of the test's own, whose host address the servers listen on.
    outside = f"hg-egress-out-{suffix}"
    docker("network", "create", outside)
    host = json.loads(docker("network", "inspect", outside))[0]["IPAM"]["Config"][0]["Gateway"]
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp / "test-ca.pem"))
    (tmp / "test-ca.pem").chmod(0o644)
    site = tmp / "site"
    site.mkdir()
    servers = Servers(host, ca, site).start()
    # An internal network with no address of the host's on it: from there, nothing but its members is reachable.
    network = f"hg-egress-{suffix}"
    docker("network", "create", "--internal", "-o", "com.docker.network.bridge.inhibit_ipv4=true", network)
    key = secrets.token_urlsafe(24)
    args = ["--listen", "0.0.0.0:3128", "--control", "0.0.0.0:8081", "--upstream-ca", "/ca/test-ca.pem"]
    args += ["--max-tenant-connections", str(max_tenant_connections)]
    args += ["--ports", f"80,443,{servers.https_port},{servers.http_port}", "--allow-network", f"{host}/32"]
    args += [arg for name in NAMES for arg in ("--resolve", f"{name}={PRIVATE if name == 'private.test' else host}")]
    proxy = f"hg-egress-proxy-{suffix}"
    mount = f"{tmp / 'test-ca.pem'}:/ca/test-ca.pem:ro"
    docker("create", "--name", proxy, "--network", outside, "-e", f"EGRESS_CONTROL_KEY={key}", "-v", mount, image, *args)
    docker("network", "connect", network, proxy)
    docker("start", proxy)
    networks = json.loads(docker("inspect", proxy))[0]["NetworkSettings"]["Networks"]
    proxy_url, control_url = f"http://{networks[network]['IPAddress']}:3128", f"http://{networks[outside]['IPAddress']}:8081"
    stack = EgressStack(network, outside, proxy, proxy_url, control_url, key, servers)
    _wait_healthy(stack.control_url)
    return stack


def _wait_healthy(control_url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(control_url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the egress proxy did not come up")
        time.sleep(0.2)
