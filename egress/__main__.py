"""`python -m egress`: the sandboxes' egress proxy and its control API, in one process.

    EGRESS_CONTROL_KEY=... python -m egress --listen 0.0.0.0:3128 --control 0.0.0.0:8081 --confdir /data

`--allow-network` and `--resolve` are the operator's ways to an internal service (a package index on a
private address): a name resolved as told, an address range treated as public. `--upstream-ca` is a CA the
proxy trusts for servers besides the system's."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
from pathlib import Path

from mitmproxy import options
from mitmproxy.addons import core, disable_h2c, errorcheck, next_layer, proxyserver, tlsconfig
from mitmproxy.master import Master

from runtime.addresses import PublicAddresses

from .addon import Egress
from .control import application
from .grants import Grants

log = logging.getLogger("egress")


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


async def serve(args: argparse.Namespace, key: str) -> None:
    confdir = Path(args.confdir)
    confdir.mkdir(parents=True, exist_ok=True)
    host, port = _host_port(args.listen)
    opts = options.Options(listen_host=host, listen_port=port, confdir=str(confdir))
    proxy = Master(opts)
    grants = Grants()
    resolve = dict(entry.split("=", 1) for entry in args.resolve)
    ports = frozenset(int(port) for port in args.ports.split(","))
    egress = Egress(grants, PublicAddresses(args.allow_network), ports, resolve, args.max_tenant_connections)
    # Only what this proxy needs: each of mitmproxy's default addons (replay, rewriting, flow saving, its
    # onboarding site, ...) would be asked about every event of every connection, a third of its time.
    proxy.addons.add(
        core.Core(),
        proxyserver.Proxyserver(),
        next_layer.NextLayer(),
        tlsconfig.TlsConfig(),
        disable_h2c.DisableH2C(),
        errorcheck.ErrorCheck(),
        egress,
    )
    opts.update(
        connection_strategy="lazy",  # no connection before the addon has checked where it goes
        http3=False,
        ssl_verify_upstream_trusted_ca=args.upstream_ca,
    )
    control_host, control_port = _host_port(args.control)
    application(grants, key, confdir / "mitmproxy-ca-cert.pem").listen(control_port, address=control_host)
    log.info("egress proxy on %s, control API on %s", args.listen, args.control)
    await proxy.run()


def _key_from(path: Path) -> str:
    """The control key in `path`, made there first if there is none: a volume shared with the gateway
    alone (compose.yaml) hands it over, readable there and nowhere else."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        made = path.with_suffix(".tmp")
        made.write_text(secrets.token_urlsafe(32))
        made.chmod(0o644)
        made.replace(path)  # whole or not at all, for a gateway reading it meanwhile
    return path.read_text().strip()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m egress")
    parser.add_argument("--listen", default="0.0.0.0:3128", help="where sandboxes reach the proxy")
    parser.add_argument("--control", default="127.0.0.1:8081", help="where the gateway registers grants")
    parser.add_argument("--confdir", default=os.path.expanduser("~/.egress"), help="the proxy's CA lives here (made on first start)")
    parser.add_argument("--ports", default="80,443", help="the server ports sandboxes may reach")
    parser.add_argument("--upstream-ca", default=None)
    parser.add_argument("--max-tenant-connections", type=int, default=256, help="open at once, across a tenant's sandboxes")
    parser.add_argument("--allow-network", action="append", default=[], metavar="CIDR")
    parser.add_argument("--resolve", action="append", default=[], metavar="NAME=ADDRESS")
    parser.add_argument("--control-key-file", default=None, help="without EGRESS_CONTROL_KEY: the key's file, made on first start")
    args = parser.parse_args()
    key = os.environ.get("EGRESS_CONTROL_KEY", "") or (_key_from(Path(args.control_key_file)) if args.control_key_file else "")
    if len(key) < 16:
        parser.error("the control key (EGRESS_CONTROL_KEY, or --control-key-file) must be 16 characters or more")
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("mitmproxy").setLevel(logging.WARNING)  # a line per connection otherwise
    asyncio.run(serve(args, key))


if __name__ == "__main__":
    main()
