"""A Docker API proxy that lets the gateway do what the sandbox needs and nothing else.

Whoever can use the Docker socket is root on the host. In the compose stack the gateway does not get
the socket: it talks to this proxy, which holds it. What is allowed is decided in `proxy_policy.py`
(create hardened sandbox containers of one image; start, attach to, inspect, wait for, kill and remove
containers carrying the sandbox label; list them; ping, version, inspect the sandbox image); everything
else is a 403.

Every request on a client connection is parsed with h11 and checked, in a loop, however many a client
pipelines. Docker never sees the client's bytes: the proxy sends a request it built itself, on a new
connection to the socket, and relays the answer. The one raw pass-through is attach: after Docker
answered `101` to an allowed attach, the connection is the container's stdin/stdout and is spliced.

Run: python -m sandbox.socket_proxy --listen 0.0.0.0:2375 --image harmony-gateway/sandbox:latest
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

import anyio
import h11
from anyio.abc import ByteStream

from .proxy_policy import LABEL, Limits, Refused, Upstream, plan

log = logging.getLogger("sandbox.socket_proxy")

MAX_HEAD = 64 * 1024
MAX_BODY = 64 * 1024
MAX_INSPECT = 4 * 1024 * 1024
IDLE_TIMEOUT_S = 60.0  # a client connection silent this long (mid-request or between requests) is closed
_HOP_BY_HOP = {b"connection", b"keep-alive", b"transfer-encoding", b"upgrade", b"proxy-connection", b"te", b"trailer"}


class Proxy:
    def __init__(self, socket_path: str, limits: Limits) -> None:
        self.socket_path = socket_path
        self.limits = limits

    async def handle(self, client: ByteStream) -> None:
        async with client:
            try:
                await self._serve(client)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError, TimeoutError):
                pass
            except h11.ProtocolError as exc:  # our own state machine refused to go on: just close
                log.debug("connection closed: %s", exc)
            except Exception:  # one connection's fault never stops the proxy
                log.exception("connection failed")

    async def _serve(self, client: ByteStream) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        while True:
            try:
                request, body = await _read_request(conn, client)
            except h11.RemoteProtocolError as exc:
                await _send_error(conn, client, 400, f"bad request: {exc}", close=True)
                return
            except _BadRequest as exc:
                await _send_error(conn, client, 400, str(exc), close=True)
                return
            if request is None:
                return
            upgrade = _header(request, b"upgrade") is not None
            try:
                upstream = plan(request.method.decode(), request.target.decode("ascii"), body, self.limits, upgrade)
                if upstream.container is not None:
                    upstream = upstream.for_container(await self._sandbox_id(upstream.container))
            except _NoSuchContainer as exc:
                # As Docker answers it: the gateway's client then sees NotFound (a session's container
                # removed meanwhile, say, by the reaper while shutdown was listing them).
                await _send_error(conn, client, 404, f"No such container: {exc}")
            except Refused as exc:
                log.warning("denied: %s %s: %s", request.method.decode(), request.target.decode("ascii", "replace"), exc)
                await _send_error(conn, client, 403, f"denied by the harmony-gateway socket proxy: {exc}")
            else:
                if await self._forward(conn, client, upstream):
                    return  # spliced until either side closed
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()

    async def _sandbox_id(self, reference: str) -> str:
        """The full id of the container `reference` names, if it carries the sandbox label."""
        status, payload = await self._fetch(Upstream("GET", f"/containers/{reference}/json"))
        if status == 404:
            raise _NoSuchContainer(reference)
        if status == 200:
            try:
                info = json.loads(payload)
                labels = (info.get("Config") or {}).get("Labels") or {}
                image_id = info.get("Id")
                if labels.get(LABEL) == "1" and isinstance(image_id, str):
                    return image_id
            except (ValueError, AttributeError):
                pass
        raise Refused(f"{reference}: not a sandbox container")

    async def _fetch(self, upstream: Upstream) -> tuple[int, bytes]:
        """One request of the proxy's own to Docker, its answer read whole (bounded)."""
        docker, conn = await self._send(upstream)
        async with docker:
            response = await _next_event(conn, docker)
            if not isinstance(response, h11.Response):
                raise Refused("Docker gave an unexpected answer")
            payload = await _read_body(conn, docker, MAX_INSPECT, Refused("Docker's answer is too large"))
            return response.status_code, payload

    async def _send(self, upstream: Upstream) -> tuple[ByteStream, h11.Connection]:
        docker = await anyio.connect_unix(self.socket_path)
        conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        headers = [("Host", "docker"), ("Content-Length", str(len(upstream.body)))]
        if upstream.body:
            headers.append(("Content-Type", "application/json"))
        headers += [("Connection", "Upgrade"), ("Upgrade", "tcp")] if upstream.upgrade else [("Connection", "close")]
        request = h11.Request(method=upstream.method, target=upstream.target, headers=headers)
        await docker.send(conn.send(request) + conn.send(h11.Data(data=upstream.body)) + conn.send(h11.EndOfMessage()))
        return docker, conn

    async def _forward(self, conn: h11.Connection, client: ByteStream, upstream: Upstream) -> bool:
        """Send the built request and relay Docker's answer; True if the connection was spliced."""
        docker, upconn = await self._send(upstream)
        async with docker:
            response = await _next_event(upconn, docker)
            headers = [(name, value) for name, value in response.headers if name.lower() not in _HOP_BY_HOP]
            if isinstance(response, h11.InformationalResponse):
                if response.status_code != 101 or not upstream.upgrade:
                    raise h11.LocalProtocolError("unexpected informational answer from Docker")
                upgraded = headers + [(b"Connection", b"Upgrade"), (b"Upgrade", b"tcp")]
                await client.send(conn.send(h11.InformationalResponse(status_code=101, headers=upgraded, reason=response.reason)))
                await _splice(client, conn.trailing_data[0], docker, upconn.trailing_data[0])
                return True
            await client.send(conn.send(h11.Response(status_code=response.status_code, headers=headers, reason=response.reason)))
            while type(event := await _next_event(upconn, docker)) is h11.Data:
                await client.send(conn.send(event))
            await client.send(conn.send(h11.EndOfMessage()))
            return False


class _NoSuchContainer(Refused):
    """Docker knows no container by that reference: answered 404, as Docker would."""


class _BadRequest(Exception):
    pass


async def _read_request(conn: h11.Connection, client: ByteStream) -> tuple[h11.Request | None, bytes]:
    """The next request and its body, or (None, b"") when the client closed between requests."""
    event = await _next_event(conn, client)
    if type(event) is h11.ConnectionClosed:
        return None, b""
    assert isinstance(event, h11.Request)
    # h11 lets Transfer-Encoding win over Content-Length; a request with both is how requests are
    # smuggled past a proxy, so it is refused rather than interpreted.
    if _header(event, b"transfer-encoding") is not None and _header(event, b"content-length") is not None:
        raise _BadRequest("a request must not have both Content-Length and Transfer-Encoding")
    return event, await _read_body(conn, client, MAX_BODY, _BadRequest("request body too large"))


async def _read_body(conn: h11.Connection, stream: ByteStream, limit: int, too_large: Exception) -> bytes:
    """A message's body, up to its end, refused past `limit` bytes."""
    body = bytearray()
    while type(part := await _next_event(conn, stream)) is h11.Data:
        body += part.data
        if len(body) > limit:
            raise too_large
    return bytes(body)


async def _next_event(conn: h11.Connection, stream: ByteStream) -> Any:
    # Clients must keep talking; Docker may take its time (a wait, a slow start).
    timeout = IDLE_TIMEOUT_S if conn.our_role is h11.SERVER else None
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            with anyio.fail_after(timeout):
                try:
                    data = await stream.receive(65536)
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    data = b""
            conn.receive_data(data)
            continue
        if event is h11.PAUSED:
            raise h11.LocalProtocolError("the connection is paused")
        return event


def _header(request: h11.Request, name: bytes) -> bytes | None:
    return next((value for key, value in request.headers if key == name), None)


async def _send_error(conn: h11.Connection, client: ByteStream, status: int, message: str, close: bool = False) -> None:
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    payload = json.dumps({"message": message}).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))]
    if close:
        headers.append(("Connection", "close"))
    await client.send(
        conn.send(h11.Response(status_code=status, headers=headers)) + conn.send(h11.Data(data=payload)) + conn.send(h11.EndOfMessage())
    )


async def _splice(client: ByteStream, client_early: bytes, docker: ByteStream, docker_early: bytes) -> None:
    """Bytes both ways until either side closes: attach's hijacked stream."""

    async def pump(source: ByteStream, sink: ByteStream, early: bytes) -> None:
        try:
            if early:
                await sink.send(early)
            async for chunk in source:
                await sink.send(chunk)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(pump, client, docker, client_early)
        group.start_soon(pump, docker, client, docker_early)


async def serve(listen: str, socket_path: str, limits: Limits) -> None:
    host, port = listen.rsplit(":", 1)
    proxy = Proxy(socket_path, limits)
    listener = await anyio.create_tcp_listener(local_host=host, local_port=int(port))
    log.info("docker socket proxy on %s for image %s", listen, limits.image)
    await listener.serve(proxy.handle)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listen", default="0.0.0.0:2375")
    parser.add_argument("--socket", default="/var/run/docker.sock")
    parser.add_argument("--image", required=True, help="the only image containers may be created from")
    parser.add_argument("--max-memory", type=int, default=Limits.max_memory, help="bytes a container may ask for")
    parser.add_argument("--max-pids", type=int, default=Limits.max_pids)
    parser.add_argument("--network", default=None, help="the egress network sandboxes with a network policy may join")
    parser.add_argument("--runtime", default=None, help="the Docker runtime every sandbox runs under (e.g. runsc)")
    args = parser.parse_args()
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    limits = Limits(args.image, max_memory=args.max_memory, max_pids=args.max_pids, network=args.network or None, runtime=args.runtime or None)
    anyio.run(serve, args.listen, args.socket, limits)


if __name__ == "__main__":
    main()
