"""A Docker API proxy that lets the gateway do what the sandbox needs and nothing else.

Whoever can use the Docker socket is root on the host. In the compose stack the gateway does not get
the socket: it talks to this proxy, which holds it and allows only
  * `/_ping`, `/version`, and inspecting images;
  * listing containers, with a filter on the sandbox label;
  * creating a container only from the sandbox image, only hardened (no network, read-only root,
    every capability dropped, no-new-privileges, not privileged, no host namespaces, no bind mounts
    or devices, a non-root user, memory and pids limits) and labelled as a sandbox;
  * starting, attaching to, inspecting, waiting for, killing and removing containers that carry the
    sandbox label.
Everything else is answered 403. One request per connection: after the request is checked it is sent
on and the two connections are spliced, which also carries attach's hijacked stream.

Run: python -m sandbox.socket_proxy --listen 0.0.0.0:2375 --image harmony-gateway/sandbox:latest
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

log = logging.getLogger("sandbox.socket_proxy")

LABEL = "harmony-gateway.sandbox"
MAX_HEAD = 64 * 1024
MAX_BODY = 1024 * 1024
_VERSION = re.compile(r"^/v\d+\.\d+")
_CONTAINER_ACTION = re.compile(r"^/containers/([A-Za-z0-9_.-]+)(?:/(start|attach|json|wait|kill))?$")


class Denied(Exception):
    pass


class Proxy:
    def __init__(self, socket_path: str, image: str) -> None:
        self.socket_path = socket_path
        self.image = image

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if len(head) > MAX_HEAD:
                raise Denied("request head too large")
            method, target, headers = _parse_head(head)
            length = int(headers.get("content-length", "0") or 0)
            if length > MAX_BODY or headers.get("transfer-encoding"):
                raise Denied("request body too large or chunked")
            body = await reader.readexactly(length) if length else b""
            await self.check(method, target, body)
            up_reader, upstream = await asyncio.open_unix_connection(self.socket_path)
            upstream.write(_rewrite_head(head, headers) + body)
            await upstream.drain()
            await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
        except Denied as exc:
            log.warning("denied: %s", exc)
            payload = json.dumps({"message": f"denied by the harmony-gateway socket proxy: {exc}"}).encode()
            writer.write(
                b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\nConnection: close\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            for stream in (writer, upstream):
                if stream is not None:
                    stream.close()

    async def check(self, method: str, target: str, body: bytes) -> None:
        parts = urlsplit(target)
        path = _VERSION.sub("", unquote(parts.path))
        if (method, path) in (("GET", "/_ping"), ("HEAD", "/_ping"), ("GET", "/version")):
            return
        if method == "GET" and path.startswith("/images/") and path.endswith("/json") and path != "/images/json":
            return
        if method == "GET" and path == "/containers/json":
            filters = json.loads(parse_qs(parts.query).get("filters", ["{}"])[0])
            if not any(str(label).startswith(f"{LABEL}=") for label in filters.get("label", [])):
                raise Denied("listing containers needs a filter on the sandbox label")
            return
        if method == "POST" and path == "/containers/create":
            self.check_create(json.loads(body or b"{}"))
            return
        match = _CONTAINER_ACTION.match(path)
        allowed = {None: "DELETE", "start": "POST", "attach": "POST", "json": "GET", "wait": "POST", "kill": "POST"}
        if match and match.group(2) in allowed and method == allowed[match.group(2)]:
            if await self._is_sandbox(match.group(1)):
                return
            raise Denied(f"{method} {path}: not a sandbox container")
        raise Denied(f"{method} {path}")

    def check_create(self, spec: dict[str, Any]) -> None:
        host = spec.get("HostConfig") or {}
        problems = []
        if spec.get("Image") != self.image:
            problems.append(f"image must be {self.image}")
        if (spec.get("Labels") or {}).get(LABEL) != "1":
            problems.append("the sandbox label is missing")
        if str(spec.get("User", "")).split(":")[0] in ("", "0", "root"):
            problems.append("the user must not be root")
        if host.get("NetworkMode") != "none":
            problems.append("network must be none")
        if not host.get("ReadonlyRootfs"):
            problems.append("the root file system must be read-only")
        if host.get("Privileged"):
            problems.append("privileged is not allowed")
        if "ALL" not in (host.get("CapDrop") or []) or host.get("CapAdd"):
            problems.append("every capability must be dropped")
        if "no-new-privileges" not in (host.get("SecurityOpt") or []):
            problems.append("no-new-privileges is required")
        if host.get("Binds") or host.get("Mounts") or host.get("Devices") or host.get("VolumesFrom"):
            problems.append("mounts and devices are not allowed")
        if any(host.get(key) == "host" for key in ("PidMode", "IpcMode", "UTSMode", "UsernsMode", "CgroupnsMode")):
            problems.append("host namespaces are not allowed")
        if not host.get("Memory") or not host.get("PidsLimit"):
            problems.append("memory and pids limits are required")
        if problems:
            raise Denied("container create: " + "; ".join(problems))

    async def _is_sandbox(self, container: str) -> bool:
        reader, writer = await asyncio.open_unix_connection(self.socket_path)
        try:
            writer.write(f"GET /containers/{container}/json HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            response = await reader.read()
        finally:
            writer.close()
        head, _, payload = response.partition(b"\r\n\r\n")
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            return False
        if b"transfer-encoding: chunked" in head.lower():
            payload = _unchunk(payload)
        labels = (json.loads(payload).get("Config") or {}).get("Labels") or {}
        return labels.get(LABEL) == "1"


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return method, target, headers


def _rewrite_head(head: bytes, headers: dict[str, str]) -> bytes:
    """One request per connection: ask Docker to close after its answer, unless this is attach's upgrade."""
    if "upgrade" in headers:
        return head
    lines = [line for line in head.split(b"\r\n")[:-2] if not line.lower().startswith(b"connection:")]
    return b"\r\n".join(lines + [b"Connection: close", b"", b""])


def _unchunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        if writer.can_write_eof():
            try:
                writer.write_eof()
            except OSError:
                pass


async def serve(listen: str, socket_path: str, image: str) -> None:
    host, port = listen.rsplit(":", 1)
    proxy = Proxy(socket_path, image)
    server = await asyncio.start_server(proxy.handle, host, int(port), limit=MAX_HEAD)
    log.info("docker socket proxy on %s for image %s", listen, image)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default="0.0.0.0:2375")
    parser.add_argument("--socket", default="/var/run/docker.sock")
    parser.add_argument("--image", required=True, help="the only image containers may be created from")
    args = parser.parse_args()
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(serve(args.listen, args.socket, args.image))


if __name__ == "__main__":
    main()
