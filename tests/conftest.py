"""Fixtures: the engine emulator and the gateway as real processes on loopback, and clients for them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest
import yaml

from .stream_checker import check_response_stream, parse_sse

MODEL = "openai/gpt-oss-20b"
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, timeout: float = 20) -> None:
    """Until something accepts TCP connections on loopback `port` (servers without a health route)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {timeout:g} s")


class Process:
    """A server started as a child process, waited for until `health_path` answers."""

    def __init__(self, args: list[str], port: int, health_path: str, log: Path) -> None:
        self.args, self.port, self.health_path, self.log = args, port, health_path, log
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> "Process":
        # Generous: a process started while other work holds the cores can take tens of seconds to import
        # and open its stores, and how fast a server starts is not what the tests that start one measure.
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(self.args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.args} exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + self.health_path, timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.args} did not become healthy:\n{self.log.read_text()[-3000:]}")

    def peak_rss_bytes(self) -> int:
        """The most memory the process has held at once (the kernel's high-water mark, VmHWM)."""
        assert self.proc is not None
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) * 1024

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_emulator(tmp: Path, *extra: str) -> Process:
    port = free_port()
    args = [sys.executable, "-m", "tests.emulator", "--port", str(port), *extra]
    return Process(args, port, "/health", tmp / f"emulator-{port}.log").start()


class Gateway(Process):
    def __init__(self, config: dict[str, Any], tmp: Path) -> None:
        port = free_port()
        path = tmp / f"gateway-{port}.yaml"
        path.write_text(yaml.safe_dump(config))
        args = [sys.executable, "-m", "gateway", "serve", "--config", str(path), "--port", str(port)]
        super().__init__(args, port, "/health", tmp / f"gateway-{port}.log")
        self.config_path = path

    def client(self, **kwargs: Any) -> openai.OpenAI:
        return openai.OpenAI(**({"base_url": self.url + "/v1", "api_key": "unused", "max_retries": 0} | kwargs))

    def async_client(self, **kwargs: Any) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(**({"base_url": self.url + "/v1", "api_key": "unused", "max_retries": 0} | kwargs))


def gateway_config(engine_url: str, tmp: Path, **sections: Any) -> dict[str, Any]:
    # The scripted model breaks grammars on purpose (`[misbehave]`), to test each safeguard behind the grammar
    # alone: an engine that did so would be distrusted from then on. That distrust is tested apart
    # (test_structured_outputs.py), with it on as it is by default.
    engine = {"url": engine_url, "distrust_on_violation": False}
    config: dict[str, Any] = {"engine": engine, "storage": {"path": str(tmp / "responses.sqlite3")}}
    for name, values in sections.items():
        if isinstance(values, list):
            config[name] = values
        else:
            config.setdefault(name, {}).update(values)
    return config


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("servers")


@pytest.fixture(scope="session")
def emulator(workdir: Path) -> Iterator[Process]:
    process = start_emulator(workdir)
    yield process
    process.stop()


@pytest.fixture(scope="session")
def gateway(emulator: Process, workdir: Path) -> Iterator[Gateway]:
    process = Gateway(gateway_config(emulator.url, workdir), workdir).start()
    yield process
    process.stop()


@pytest.fixture
def make_gateway(tmp_path: Path) -> Iterator[Any]:
    """Start extra gateways with their own config; all are stopped after the test."""
    started: list[Gateway] = []

    def make(engine_url: str, **sections: Any) -> Gateway:
        process = Gateway(gateway_config(engine_url, tmp_path, **sections), tmp_path).start()
        started.append(process)
        return process

    yield make
    for process in started:
        process.stop()


@pytest.fixture(autouse=True)
def _grammar_lets_the_model_through(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every completion the shared emulator wrote under a structural tag was one the tag allows, unless
    the script broke it on purpose: the grammar never forbids what a well-formed model writes."""
    if "emulator" not in request.fixturenames:
        yield
        return
    emulator = request.getfixturevalue("emulator")
    before = emulator_stats(emulator)["violation_count"]
    yield
    stats = emulator_stats(emulator)
    assert stats["violation_count"] == before, f"the engine's grammar forbade what the scripted model wrote: {stats['grammar_violations'][-1]!r}"


def emulator_stats(emulator: Process) -> dict[str, Any]:
    return httpx.get(emulator.url + "/_emulator/stats").json()


def open_stream(gateway: Process, body: dict[str, Any], receive_buffer: int = 4096) -> socket.socket:
    """POST `body` on a raw socket with a small receive buffer and return the socket unread: a client that
    reads as slowly as the test wants, or not at all."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.connect(("127.0.0.1", gateway.port))
    payload = json.dumps(body).encode()
    head = f"POST /v1/responses HTTP/1.1\r\nHost: gateway\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
    sock.sendall(head.encode() + payload)
    return sock


def metric(text: str, name: str, default: float | None = None, **labels: str) -> float:
    """One sample of a Prometheus exposition; `default` when it has none (a label set not yet counted)."""
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, value = line.rsplit(" ", 1)
        if series.split("{")[0] != name:
            continue
        if all(f'{key}="{val}"' in series for key, val in labels.items()):
            return float(value)
    if default is not None:
        return default
    raise AssertionError(f"no {name} {labels} in metrics")


def stream_raw(gateway: Process, body: dict[str, Any], timeout: float = 30) -> list[dict[str, Any]]:
    """POST a streaming request over plain HTTP, decode the SSE frames, and run the conformance checker."""
    with httpx.Client(timeout=timeout) as client:
        response = client.post(gateway.url + "/v1/responses", json=body | {"stream": True})
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(response.content)
    check_response_stream(events)
    return events


def stream_sdk(client: openai.OpenAI, **kwargs: Any) -> list[dict[str, Any]]:
    """Stream through the SDK's create(stream=True) and run the conformance checker on what arrived."""
    events = [event.to_dict() for event in client.responses.create(**({"model": MODEL} | kwargs), stream=True)]
    check_response_stream(events)
    return events


# -- the Python sandbox --------------------------------------------------------------------------------

SANDBOX_IMAGE = "harmony-gateway/sandbox:test"
LOCAL_BASE_IMAGE = "harmony-gateway/base:bookworm"


def base_image() -> str:
    """The base for the images the tests build: SANDBOX_BASE_IMAGE, or python:3.12-slim if Docker has it,
    or one made locally with debootstrap (scripts/make-base-image) when no registry is reachable."""
    import docker
    import docker.errors

    client = docker.from_env()
    for candidate in filter(None, (os.environ.get("SANDBOX_BASE_IMAGE"), "python:3.12-slim", LOCAL_BASE_IMAGE)):
        try:
            client.images.get(candidate)
            return candidate
        except docker.errors.ImageNotFound:
            continue
    subprocess.run([str(ROOT / "scripts" / "make-base-image"), LOCAL_BASE_IMAGE], check=True)
    return LOCAL_BASE_IMAGE


def ensure_sandbox_image() -> str:
    """Build the sandbox image for the tests unless one with this kernel exists."""
    from sandbox.build import sandbox_sha

    return ensure_image(SANDBOX_IMAGE, "build", "harmony-gateway.sandbox-sha", sandbox_sha())


def ensure_image(tag: str, action: str, label: str, sha: str) -> str:
    """`gateway sandbox ACTION` builds `tag` unless an image of it carries `label` = `sha` (its sources)."""
    import docker
    import docker.errors

    try:
        if docker.from_env().images.get(tag).labels.get(label) == sha:
            return tag
    except docker.errors.ImageNotFound:
        pass
    command = [sys.executable, "-m", "gateway", "sandbox", action, "--base", base_image(), "--tag", tag]
    subprocess.run(command, check=True, cwd=ROOT)
    return tag


def pytest_collection_finish(session: pytest.Session) -> None:
    # Built here rather than in a fixture, so the build does not count against a test's timeout.
    if any("sandbox_image" in getattr(item, "fixturenames", ()) for item in session.items):
        ensure_sandbox_image()


@pytest.fixture(scope="session")
def sandbox_image() -> str:
    return ensure_sandbox_image()


def sandbox_section(backend: str, instance: str, **overrides: Any) -> dict[str, Any]:
    section = {
        "backend": backend,
        "image": SANDBOX_IMAGE,
        "timeout_s": 3,
        "memory": "256m",
        "pids": 64,
        "pool_size": 2,
        "idle_ttl_s": 300,
        "max_sessions": 64,
        "instance": instance,
    }
    return section | overrides


def docker_runtimes() -> set[str]:
    """The runtimes the Docker daemon has registered (runc, and runsc where gVisor is set up)."""
    import docker

    return set(docker.from_env().info().get("Runtimes", {}))


def sandbox_containers(instance: str) -> list[str]:
    import docker

    filters = {"label": ["harmony-gateway.sandbox=1", f"harmony-gateway.instance={instance}"]}
    return [c["Id"] for c in docker.from_env().api.containers(all=True, filters=filters, quiet=True)]
