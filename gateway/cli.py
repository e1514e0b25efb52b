"""The `gateway` command.

gateway serve --config FILE [--host H] [--port P]
gateway check-config FILE
gateway sandbox build [--base IMAGE] [--tag TAG]
gateway sandbox build-egress [--base IMAGE] [--tag TAG]   (from a checkout of the repository)
"""

from __future__ import annotations

import argparse
import sys
import threading
import urllib.parse
from types import FrameType

from .config import ConfigError, GatewayConfig, load_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description="OpenAI-compatible gateway for gpt-oss on vLLM")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", required=True, help="YAML config file (see configs/gateway.yaml)")
    serve.add_argument("--host", help="address to listen on (overrides server.host)")
    serve.add_argument("--port", type=int, help="port to listen on (overrides server.port)")
    serve.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="overrides logging.level")
    check = commands.add_parser("check-config", help="validate a config and print what it would connect to")
    check.add_argument("file")
    sandbox = commands.add_parser("sandbox", help="the Python sandbox image").add_subparsers(dest="action", required=True)
    build = sandbox.add_parser("build", help="build the sandbox image (works offline from a local base image)")
    build.add_argument("--base", default=None, help="base image with python3 (default python:3.12-slim)")
    build.add_argument("--tag", default=None, help="image name (default harmony-gateway/sandbox:latest)")
    egress = sandbox.add_parser("build-egress", help="build the egress proxy's image (sandboxes with a network policy)")
    egress.add_argument("--base", default=None, help="base image with python3 (default python:3.12-slim)")
    egress.add_argument("--tag", default=None, help="image name (default harmony-gateway/egress:latest)")
    args = parser.parse_args(argv)
    if args.command == "sandbox":
        return _build_sandbox(args.base, args.tag, egress=args.action == "build-egress")

    try:
        config = load_config(args.config if args.command == "serve" else args.file)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    if args.command == "check-config":
        print(describe(config))
        return 0
    if args.log_level:
        config.logging.level = args.log_level
    return _serve(config, args.host, args.port)


def _serve(config: GatewayConfig, host: str | None, port: int | None) -> int:
    import uvicorn

    from runtime.cpu import use_short_switch_interval

    from .app import create_app
    from .logs import configure_logging
    from .shutdown import Drain
    from .web.http_protocol import MAX_HEAD_BYTES, with_header_timeout

    configure_logging(config.logging)
    use_short_switch_interval()
    drain = Drain(config.server.shutdown_grace_s)

    class Server(uvicorn.Server):
        stopping = False

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            drain.request()  # running responses get the grace period, then end with response.failed
            delay = config.server.drain_delay_s
            if self.stopping or delay == 0:  # a second signal stops listening at once
                super().handle_exit(sig, frame)
                return
            # Keep listening a while, answering /ready and new requests with 503, so that load balancers
            # see the replica leave before its port closes. A timer thread only sets uvicorn's flag.
            self.stopping = True
            timer = threading.Timer(delay, super().handle_exit, (sig, frame))
            timer.daemon = True
            timer.start()

    uvicorn_config = uvicorn.Config(
        create_app(config, drain),
        host=host or config.server.host,
        port=port if port is not None else config.server.port,
        log_config=None,  # ours, set above
        access_log=False,  # the gateway's middleware logs requests, with their ids
        timeout_graceful_shutdown=int(config.server.shutdown_grace_s) + 5,
        http=with_header_timeout(config.server.header_timeout_s),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,  # where h11 serves: a larger request head is a 400
        # A Responses WebSocket message larger than the body limit is an error event (socket.py); one past
        # twice that is not even buffered: the socket is closed (1009).
        ws_max_size=2 * config.server.max_body_bytes,
        ws_per_message_deflate=config.server.websocket.per_message_deflate,
    )
    Server(uvicorn_config).run()
    return 0


def _redacted(url: str) -> str:
    """A database URL without its password."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def describe(config: GatewayConfig) -> str:
    """What a config would connect to, without its secrets."""
    lines = [
        "config is valid",
        f"listen:       {config.server.host}:{config.server.port}",
        *(f"engine:       {engine.url}" + (f" (model {engine.model})" if engine.model else "") for engine in config.engine_configs()),
        f"storage:      {_redacted(config.storage.database_url())}",
        f"auth:         {len(config.auth.api_keys)} API key(s)" if config.auth.api_keys else "auth:         open (no API keys)",
        f"logging:      {config.logging.format}, {config.logging.level}",
    ]
    sandbox = config.sandbox
    if sandbox is None:
        lines.append("sandbox:      none (code_interpreter is refused)")
    else:
        where = f"image {sandbox.image}" if sandbox.backend == "docker" else "Linux namespaces on this host"
        lines.append(
            f"sandbox:      {sandbox.backend}, {where}; {sandbox.memory} memory, {sandbox.cpus:g} CPU, "
            f"{sandbox.timeout_s:g} s per execution, pool {sandbox.pool_size}, at most {sandbox.max_sessions} sessions"
        )
        if sandbox.runtime:
            lines.append(f"runtime:      {sandbox.runtime}")
        network = sandbox.network
        lines.append(
            f"network:      allowlists through {network.proxy_url} on {network.docker_network} (control {network.control_url})"
            if network.enabled
            else "network:      none (network_policy allowlist is refused)"
        )
    for server in config.tool_servers:
        where = " ".join([*(server.command or []), *server.args]) if server.transport == "stdio" else (server.url or "")
        extra = f", headers: {', '.join(sorted(server.headers))}" if server.headers else ""
        lines.append(f"tool server:  {server.label} ({server.transport}) {where}{extra}")
    allowed = ", ".join(config.mcp.allowed_urls) or "none"
    lines.append(f"request MCP:  server_url allowed under: {allowed}")
    return "\n".join(lines)


def _build_sandbox(base: str | None, tag: str | None, egress: bool) -> int:
    from sandbox.build import DEFAULT_BASE, DEFAULT_TAG, EGRESS_TAG, BuildError, build, build_egress

    tag = tag or (EGRESS_TAG if egress else DEFAULT_TAG)
    try:
        image_id = (build_egress if egress else build)(base or DEFAULT_BASE, tag)
    except BuildError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1
    print(f"built {tag} ({image_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
