"""The egress proxy's cost (not a timed test; prints figures). Needs Docker; builds the images it lacks.

Starts the proxy's real image with the tests' servers (tests/egress_stack.py) and measures, from the host:
  * an HTTPS GET on a new connection, direct to the server vs through the proxy (CONNECT, the proxy's TLS
    to the client, its own to the server), p50 and p95, rounds interleaved;
  * a 100 MB download through the proxy vs direct, MB/s;
  * the proxy container's memory idle, and with 50 grants each holding 10 open connections;
and, where Docker has gVisor: a sandbox's start (container and kernel answering) and a python turn's
round trip under runsc vs runc.
Run: .venv/bin/python bench/egress.py [--requests 200] [--megabytes 100]
"""

from __future__ import annotations

import argparse
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from runtime.supervision import Supervisor  # noqa: E402
from sandbox.config import SandboxConfig  # noqa: E402
from sandbox.manager import SandboxManager  # noqa: E402
from tests.conftest import docker_runtimes, ensure_sandbox_image  # noqa: E402
from tests.egress_stack import EgressStack, start_stack  # noqa: E402


def percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"p50 {statistics.median(ordered) * 1000:6.2f} ms  p95 {ordered[int(len(ordered) * 0.95) - 1] * 1000:6.2f} ms"


def memory_mib(container: str) -> float:
    usage = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", container], capture_output=True, text=True).stdout
    value, unit = usage.split("/")[0].strip()[:-3], usage.split("/")[0].strip()[-3:]
    return float(value) * {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0}[unit]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--megabytes", type=int, default=100)
    args = parser.parse_args()
    ensure_sandbox_image()
    with tempfile.TemporaryDirectory() as tmp:
        stack = start_stack(Path(tmp), max_tenant_connections=10_000)
        try:
            measure_proxy(stack, args.requests, args.megabytes, Path(tmp))
        finally:
            stack.close()
    measure_runtimes()


def measure_proxy(stack: EgressStack, requests: int, megabytes: int, tmp: Path) -> None:
    servers = stack.servers
    proxy = stack.proxy_from_host(stack.register("bench", ["allowed.test"]))
    ca_file = tmp / "ca.pem"
    servers.ca.cert_pem.write_to_path(str(ca_file))
    proxy_ca = stack.proxy_ca(tmp / "proxy-ca.pem")
    direct_url = f"https://{servers.address}:{servers.https_port}"
    proxied_url = f"https://allowed.test:{servers.https_port}"

    trust_server, trust_proxy = ssl.create_default_context(cafile=str(ca_file)), ssl.create_default_context(cafile=str(proxy_ca))

    def get(url: str, verify: ssl.SSLContext, via: str | None) -> float:
        with httpx.Client(verify=verify, proxy=via, trust_env=False) as client:  # a new connection each time
            started = time.perf_counter()
            client.get(url + "/hello").raise_for_status()
            return time.perf_counter() - started

    direct, proxied = [], []
    for _ in range(requests):
        direct.append(get(direct_url, trust_server, None))
        proxied.append(get(proxied_url, trust_proxy, proxy))
    print(f"HTTPS GET, new connection, {requests} each (loopback):")
    print(f"  direct        {percentiles(direct)}")
    print(f"  through proxy {percentiles(proxied)}")
    added = [b - a for a, b in zip(sorted(direct), sorted(proxied))]
    print(f"  added         p50 {statistics.median(added) * 1000:6.2f} ms")

    size = megabytes * 1024 * 1024

    def download(url: str, verify: ssl.SSLContext, via: str | None) -> float:
        started = time.perf_counter()
        received = 0
        with httpx.Client(verify=verify, proxy=via, trust_env=False, timeout=120) as client:
            with client.stream("GET", f"{url}/bytes/{size}") as response:
                for chunk in response.iter_bytes():
                    received += len(chunk)
        assert received == size, received
        return size / (time.perf_counter() - started) / 1e6

    print(f"{megabytes} MB download:")
    print(f"  direct        {download(direct_url, trust_server, None):7.1f} MB/s")
    print(f"  through proxy {download(proxied_url, trust_proxy, proxy):7.1f} MB/s")

    idle = memory_mib(stack.proxy)
    clients = []
    for _ in range(50):
        via = stack.proxy_from_host(stack.register("bench", ["allowed.test"]))
        for _ in range(10):
            client = httpx.Client(verify=trust_proxy, proxy=via, trust_env=False)
            client.get(proxied_url + "/hello").raise_for_status()  # the tunnel stays open, kept alive
            clients.append(client)
    held = memory_mib(stack.proxy)
    for client in clients:
        client.close()
    print(f"proxy memory: idle {idle:.1f} MiB; 50 grants x 10 open connections {held:.1f} MiB ({(held - idle) * 1024 / 500:.0f} KiB per connection)")


def measure_runtimes() -> None:
    runtimes = ["runc"] + (["runsc"] if "runsc" in docker_runtimes() else [])
    if len(runtimes) == 1:
        print("gVisor: the Docker daemon has no runsc runtime (scripts/register-runsc); skipped")
    for runtime in runtimes:
        starts, turns = anyio.run(sandbox_timings, runtime)
        print(f"sandbox under {runtime:5}: start {percentiles(starts)};  python turn {percentiles(turns)}")


async def sandbox_timings(runtime: str) -> tuple[list[float], list[float]]:
    config = SandboxConfig(
        image="harmony-gateway/sandbox:test", pool_size=0, instance=f"bench-{runtime}", runtime=None if runtime == "runc" else runtime
    )
    manager = SandboxManager(config)
    starts, turns = [], []
    async with anyio.create_task_group() as tasks:
        await manager.start(Supervisor(tasks))
        for _ in range(5):
            started = time.perf_counter()
            kernel = await manager.backend.create()
            starts.append(time.perf_counter() - started)
            await kernel.destroy()
        await manager.execute("bench", "1", resumed=False, tenant="bench")
        for _ in range(30):
            started = time.perf_counter()
            await manager.execute("bench", "sum(range(1000))", resumed=False, tenant="bench")
            turns.append(time.perf_counter() - started)
        await manager.close()
        tasks.cancel_scope.cancel()
    return starts, turns


if __name__ == "__main__":
    main()
