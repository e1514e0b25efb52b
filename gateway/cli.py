"""`gateway serve --config FILE [--host H] [--port P]` and `gateway sandbox build [--base IMAGE] [--tag TAG]`."""

from __future__ import annotations

import argparse
import logging
import sys

from .config import ConfigError, load_config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description="OpenAI-compatible gateway for gpt-oss on vLLM")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the gateway")
    serve.add_argument("--config", required=True, help="YAML config file (see configs/gateway.yaml)")
    serve.add_argument("--host", help="address to listen on (overrides server.host)")
    serve.add_argument("--port", type=int, help="port to listen on (overrides server.port)")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sandbox = commands.add_parser("sandbox", help="the Python sandbox image").add_subparsers(dest="action", required=True)
    build = sandbox.add_parser("build", help="build the sandbox image (works offline from a local base image)")
    build.add_argument("--base", default=None, help="base image with python3 (default python:3.12-slim)")
    build.add_argument("--tag", default=None, help="image name (default harmony-gateway/sandbox:latest)")
    args = parser.parse_args(argv)
    if args.command == "sandbox":
        return _build_sandbox(args.base, args.tag)

    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2

    import uvicorn

    from .app import create_app

    host = args.host or config.server.host
    port = args.port if args.port is not None else config.server.port
    uvicorn.run(create_app(config), host=host, port=port, log_level=args.log_level, access_log=False)
    return 0


def _build_sandbox(base: str | None, tag: str | None) -> int:
    from sandbox.build import DEFAULT_BASE, DEFAULT_TAG, BuildError, build

    try:
        image_id = build(base or DEFAULT_BASE, tag or DEFAULT_TAG)
    except BuildError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 1
    print(f"built {tag or DEFAULT_TAG} ({image_id})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
