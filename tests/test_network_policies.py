"""Sandboxes with a network policy: code in the container reaches the domains its policy allows, through the
egress proxy (its real image, egress/), and nothing else; a domain secret arrives at its domain substituted
while the container, its output and every stored thing hold only the placeholder. Real Docker, real HTTPS
servers of the tests' own (a test CA), through the openai SDK."""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import openai
import pytest

from .conftest import MODEL, Gateway, Process, docker_runtimes, emulator_stats, gateway_config, sandbox_section
from .egress_stack import PRIVATE, EgressStack, start_stack
from .helpers import items_of

SECRET = "sk-live-0123456789abcdefVALUE"
ENCODED = base64.b64encode(SECRET.encode()).decode()
KEYS = [{"key": "alice-key", "tenant": "alice"}, {"key": "bob-key", "tenant": "bob"}]


def run(commands: list[str]) -> str:
    return f"[[call shell.exec {json.dumps({'commands': commands})}]]"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, sandbox_image: str) -> Iterator[EgressStack]:
    stack = start_stack(tmp_path_factory.mktemp("egress"))
    yield stack
    stack.close()


@pytest.fixture(scope="module")
def networked(stack: EgressStack, emulator: Process, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    workdir = tmp_path_factory.mktemp("networked")
    network = stack.network_section(deny=["denied.test", "bad.example.test"])
    # 1g: what an Agents API hosted environment (container_size small) is given.
    sandbox = sandbox_section("docker", f"net-{os.getpid()}", timeout_s=30, pool_size=1, network=network, memory="1g")
    process = Gateway(gateway_config(emulator.url, workdir, sandbox=sandbox, auth={"api_keys": KEYS}), workdir).start()
    process.workdir = workdir  # type: ignore[attr-defined]
    yield process
    process.stop()


def shell_outputs(client: openai.OpenAI, commands: list[str], environment: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    response = client.responses.create(model=MODEL, input=run(commands), tools=[{"type": "shell", "environment": environment}])
    dumped = response.model_dump()
    assert dumped["status"] == "completed", dumped
    (result,) = items_of(dumped, "shell_call_output")
    return dumped, result["output"]


def readiness(gateway: Gateway, egress: bool) -> int:
    """/ready's status once it reports the egress proxy as `egress` (it checks every few seconds)."""
    deadline = time.monotonic() + 30
    while True:
        answer = httpx.get(gateway.url + "/ready", timeout=5)
        if answer.json().get("sandbox_egress") is egress or time.monotonic() > deadline:
            return answer.status_code
        time.sleep(0.2)


def allowlist(*domains: str, secrets: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"type": "allowlist", "allowed_domains": list(domains), **({"domain_secrets": secrets} if secrets else {})}


def test_code_reaches_allowed_domains_with_every_client_and_nothing_else(networked: Gateway, stack: EgressStack) -> None:
    servers, port = stack.servers, stack.servers.https_port
    base = f"https://allowed.test:{port}"
    commands = [
        f"python3 -c \"import urllib.request; print(urllib.request.urlopen('{base}/hello', timeout=10).read().decode(), end='')\"",
        f"curl -fsS {base}/hello",
        f"git clone -q {base}/repo.git /tmp/repo && cat /tmp/repo/README",
        f"python3 -m pip download -q --no-deps -d /tmp/dl --index-url {base}/simple/ tinypkg && ls /tmp/dl",
        f"curl -fsS https://other.test:{port}/hello",  # a domain not allowed
        f"curl -fsS https://{servers.address}:{port}/hello",  # an IP literal
        f"curl -fsS https://private.test:{port}/hello",  # an allowed name on a private address
        f"curl -fsSL {base}/redirect",  # a redirect to a domain not allowed
        "curl -fsS https://allowed.test:22/",  # another port
        # Around the proxy: no route to the servers' host, no name resolution.
        f"python3 -c \"import socket; socket.create_connection(('{servers.address}', {port}), timeout=3)\"",
        f"curl -fsS --noproxy '*' --max-time 5 {base}/hello",
    ]
    environment = {"type": "container_auto", "network_policy": allowlist("allowed.test", "private.test")}
    _, outputs = shell_outputs(networked.client(api_key="alice-key"), commands, environment)
    ok = [output["stdout"] for output in outputs[:4]]
    assert ok == ["hello from allowed.test\n"] * 2 + ["cloned through the egress proxy\n", "tinypkg-1.0-py3-none-any.whl\n"], outputs
    for output in outputs[:4]:
        assert output["outcome"] == {"type": "exit", "exit_code": 0}, output
    refused = outputs[4:]
    for output in refused:
        assert output["outcome"]["exit_code"] != 0, output
    assert "403" in refused[0]["stderr"] and "403" in refused[1]["stderr"] and "403" in refused[4]["stderr"]
    assert "502" in refused[2]["stderr"]  # the proxy resolved private.test itself, and would not connect there
    assert "other.test" not in {seen.headers.get("host", "").split(":")[0] for seen in servers.seen}
    assert [seen.path for seen in servers.requests("/redirect")] == ["/redirect"]
    assert not servers.requests("/") and PRIVATE not in json.dumps([seen.headers for seen in servers.seen])
    assert "unreachable" in refused[5]["stderr"] or "timed out" in refused[5]["stderr"], refused[5]


def test_a_domain_secret_reaches_its_domain_only_and_the_sandbox_sees_a_placeholder(networked: Gateway, stack: EgressStack) -> None:
    alice = networked.client(api_key="alice-key")
    servers, port = stack.servers, stack.servers.https_port
    policy = allowlist("secret.test", "allowed.test", secrets=[{"domain": "secret.test", "name": "API_KEY", "value": SECRET}])
    container = alice.containers.create(name="with a key", network_policy=policy)  # type: ignore[arg-type]
    shown = alice.containers.retrieve(container.id).model_dump()
    assert shown["network_policy"] == {"type": "allowlist", "allowed_domains": ["secret.test", "allowed.test"]}
    commands = [
        "echo $API_KEY",
        f'env | grep -c "$(echo {ENCODED} | base64 -d)" || true',  # the value itself must not be in the command
        f'curl -fsS -H "Authorization: Bearer $API_KEY" https://secret.test:{port}/echo',
        f'curl -fsS -H "Authorization: Bearer $API_KEY" https://allowed.test:{port}/echo',
        f'curl -fsS -H "Authorization: Bearer $API_KEY" http://secret.test:{servers.http_port}/echo',
        f'grep -rl "$(echo {ENCODED} | base64 -d)" /tmp /mnt/data 2>/dev/null | wc -l',
    ]
    environment = {"type": "container_reference", "container_id": container.id}
    response, outputs = shell_outputs(alice, commands, environment)
    placeholder = outputs[0]["stdout"].strip()
    assert placeholder.startswith("hgsecret_") and len(placeholder) > 24
    assert outputs[1]["stdout"] == "0\n" and outputs[5]["stdout"] == "0\n"
    assert len(servers.requests("/echo")) == 3, servers.requests("/echo")
    received = {(seen.server, seen.headers["host"].split(":")[0]): seen.headers["authorization"] for seen in servers.requests("/echo")}
    assert received == {
        ("https", "secret.test"): f"Bearer {SECRET}",  # substituted, over HTTPS, for its domain
        ("https", "allowed.test"): f"Bearer {placeholder}",  # another allowed domain gets the placeholder
        ("http", "secret.test"): f"Bearer {placeholder}",  # and plain HTTP never carries the secret
    }
    # The server echoed the secret back: the proxy masked it on the way in.
    assert json.loads(outputs[2]["stdout"]) == {"authorization": "Bearer " + "*" * len(SECRET)}
    assert SECRET not in json.dumps(response) and SECRET not in json.dumps(alice.containers.list().model_dump())
    stored = b"".join(path.read_bytes() for path in Path(networked.workdir).rglob("*.sqlite3*"))  # type: ignore[attr-defined]
    assert SECRET.encode() not in stored  # sealed at rest
    # Another tenant: the container is not theirs, and their own sandbox has no network.
    bob = networked.client(api_key="bob-key")
    with pytest.raises(openai.NotFoundError):
        bob.responses.create(model=MODEL, input=run(["echo $API_KEY"]), tools=[{"type": "shell", "environment": environment}])
    _, theirs = shell_outputs(bob, ["echo ${API_KEY:-none}", f"curl -fsS --max-time 5 https://secret.test:{port}/echo"], {"type": "container_auto"})
    assert theirs[0]["stdout"] == "none\n" and theirs[1]["outcome"]["exit_code"] != 0
    assert len(servers.requests("/echo")) == 3


RAW_TUNNEL = """
import base64, os, socket, sys
from urllib.parse import urlsplit
proxy = urlsplit(os.environ["HTTPS_PROXY"])
auth = base64.b64encode(f"sandbox:{proxy.password}".encode()).decode()
with socket.create_connection((proxy.hostname, proxy.port), timeout=10) as sock:
    sock.sendall(f"CONNECT allowed.test:{sys.argv[1]} HTTP/1.1\\r\\nHost: allowed.test\\r\\nProxy-Authorization: Basic {auth}\\r\\n\\r\\n".encode())
    print(sock.recv(1000).split(b"\\r\\n")[0].decode())
    sock.sendall(b"\\x00\\x01raw bytes, neither TLS nor HTTP\\r\\n\\r\\n")
    print(repr(sock.recv(1000)))
"""


def test_a_tunnel_carries_http_and_https_only(networked: Gateway, stack: EgressStack) -> None:
    """A CONNECT to an allowed host and port, then bytes that are neither TLS nor HTTP: the server never
    sees them (what cannot be read cannot be checked, nor counted)."""
    commands = [f"cat > /tmp/raw.py <<'EOF'{RAW_TUNNEL}EOF", f"python3 /tmp/raw.py {stack.servers.http_port}"]
    _, outputs = shell_outputs(
        networked.client(api_key="alice-key"), commands, {"type": "container_auto", "network_policy": allowlist("allowed.test")}
    )
    established, answer = outputs[1]["stdout"].splitlines()
    assert established.endswith("200 Connection established") and answer == "b''", outputs  # closed, not relayed


def test_a_secret_in_a_requests_tools_is_echoed_masked_and_stored_sealed(networked: Gateway, stack: EgressStack) -> None:
    client, port = networked.client(api_key="alice-key"), stack.servers.https_port
    policy = allowlist("secret.test", secrets=[{"domain": "secret.test", "name": "TOKEN", "value": SECRET}])
    commands = [f'curl -fsS -o /dev/null -H "X-Token: $TOKEN" https://secret.test:{port}/hello']
    response, outputs = shell_outputs(client, commands, {"type": "container_auto", "network_policy": policy})
    assert outputs[0]["outcome"]["exit_code"] == 0 and stack.servers.requests("/hello")[-1].headers["x-token"] == SECRET
    echoed = response["tools"][0]["environment"]["network_policy"]["domain_secrets"]
    assert echoed == [{"domain": "secret.test", "name": "TOKEN", "value": "********"}]
    assert SECRET not in client.responses.retrieve(response["id"]).model_dump_json()
    stored = b"".join(path.read_bytes() for path in Path(networked.workdir).rglob("*.sqlite3*"))  # type: ignore[attr-defined]
    assert SECRET.encode() not in stored


def test_code_interpreter_auto_container_with_a_policy(networked: Gateway, stack: EgressStack) -> None:
    client = networked.client(api_key="alice-key")
    url = f"https://allowed.test:{stack.servers.https_port}/hello"
    code = f"import urllib.request\nprint(urllib.request.urlopen('{url}', timeout=10).read().decode())"
    tool = {"type": "code_interpreter", "container": {"type": "auto", "network_policy": allowlist("allowed.test")}}
    response = client.responses.create(model=MODEL, input=f"[[python {code}]]", tools=[tool], include=["code_interpreter_call.outputs"])
    (call,) = items_of(response.model_dump(), "code_interpreter_call")
    assert call["outputs"][0]["logs"] == "hello from allowed.test", call


def test_without_a_policy_a_sandbox_has_no_network(networked: Gateway, stack: EgressStack) -> None:
    servers = stack.servers
    commands = [
        "env | grep -ci proxy || true",
        f"python3 -c \"import socket; socket.create_connection(('{servers.address}', {servers.https_port}), timeout=3)\"",
        f"curl -fsS --max-time 5 --proxy {stack.proxy_url} https://allowed.test:{servers.https_port}/hello",
    ]
    for environment in ({"type": "container_auto"}, {"type": "container_auto", "network_policy": {"type": "disabled"}}):
        _, outputs = shell_outputs(networked.client(api_key="alice-key"), commands, environment)
        assert outputs[0]["stdout"] == "0\n"
        assert outputs[1]["outcome"]["exit_code"] != 0 and outputs[2]["outcome"]["exit_code"] != 0, outputs


@pytest.mark.parametrize(
    ("policy", "param", "words"),
    [
        (allowlist("127.0.0.1"), "network_policy.allowed_domains[0]", "IP address"),
        (allowlist("exa mple.com"), "network_policy.allowed_domains[0]", "not a domain name"),
        (allowlist("localhost"), "network_policy.allowed_domains[0]", "not a domain name"),
        (allowlist("*.example.test"), "network_policy.allowed_domains[0]", "sandbox.network"),  # reaches bad.example.test
        (allowlist("*.test"), "network_policy.allowed_domains[0]", "not a domain name"),
        (allowlist("denied.test"), "network_policy.allowed_domains[0]", "sandbox.network"),
        (
            allowlist("a.test", secrets=[{"domain": "b.test", "name": "K", "value": "v"}]),
            "network_policy.domain_secrets[0].domain",
            "allowed_domains",
        ),
        (
            allowlist("a.test", secrets=[{"domain": "a.test", "name": "HTTPS_PROXY", "value": "v"}]),
            "network_policy.domain_secrets[0].name",
            "reserved",
        ),
        (
            allowlist("a.test", secrets=[{"domain": "a.test", "name": "LD_PRELOAD", "value": "v"}]),
            "network_policy.domain_secrets[0].name",
            "reserved",
        ),
        (
            allowlist("a.test", secrets=[{"domain": "a.test", "name": "K", "value": "line\nbreak"}]),
            "network_policy.domain_secrets[0].value",
            "printable",
        ),
        (allowlist("a.test", secrets=[{"domain": "a.test", "name": "K", "value": "clé"}]), "network_policy.domain_secrets[0].value", "ASCII"),
        (allowlist(*[f"d{i}.test" for i in range(65)]), "network_policy.allowed_domains", "64"),
    ],
)
def test_a_policy_outside_the_bounds_is_refused_by_name(networked: Gateway, policy: dict[str, Any], param: str, words: str) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        networked.client(api_key="alice-key").containers.create(name="x", network_policy=policy)  # type: ignore[arg-type]
    assert raised.value.param == param and words in raised.value.message, raised.value.message
    shell = {"type": "shell", "environment": {"type": "container_auto", "network_policy": policy}}
    with pytest.raises(openai.BadRequestError) as raised:
        networked.client(api_key="alice-key").responses.create(model=MODEL, input="hi", tools=[shell])
    assert raised.value.param == f"tools[0].environment.{param}"


def test_another_policy_gets_another_container(networked: Gateway, stack: EgressStack) -> None:
    client, port = networked.client(api_key="alice-key"), stack.servers.https_port
    first = {"type": "container_auto", "network_policy": allowlist("allowed.test")}
    response, outputs = shell_outputs(client, ["echo kept > /tmp/mark", f"curl -fsS https://allowed.test:{port}/hello"], first)
    assert outputs[1]["stdout"] == "hello from allowed.test\n"
    again = client.responses.create(
        model=MODEL, input=run(["cat /tmp/mark", f"curl -fsS https://allowed.test:{port}/hello"]), previous_response_id=response["id"],
        tools=[{"type": "shell", "environment": {"type": "container_auto"}}],
    )  # fmt: skip
    (result,) = items_of(again.model_dump(), "shell_call_output")
    assert result["output"][0]["outcome"]["exit_code"] != 0  # a new container: no network, and not the first one's files
    assert result["output"][1]["outcome"]["exit_code"] != 0


def test_the_proxy_down_is_a_clear_error_and_its_restart_is_recovered(networked: Gateway, stack: EgressStack, emulator: Process) -> None:
    client, port = networked.client(api_key="alice-key"), stack.servers.https_port
    container = client.containers.create(name="through restarts", network_policy=allowlist("allowed.test"))  # type: ignore[arg-type]
    environment = {"type": "container_reference", "container_id": container.id}
    _, outputs = shell_outputs(client, [f"curl -fsS https://allowed.test:{port}/hello"], environment)
    assert outputs[0]["stdout"] == "hello from allowed.test\n"
    stack.stop_proxy()
    try:
        response = client.responses.create(model=MODEL, input=run(["echo ran"]), tools=[{"type": "shell", "environment": environment}])
        (result,) = items_of(response.model_dump(), "shell_call_output")
        assert response.status == "completed" and result["status"] == "incomplete" and result["output"] == []
        # What the model read: why the commands did not run.
        assert "the sandbox egress proxy is unreachable" in emulator_stats(emulator)["last_prompt"]
        assert readiness(networked, False) == 503  # and /ready says so
    finally:
        stack.start_proxy()
    assert readiness(networked, True) == 200
    # The proxy came back knowing no grant: the next call registers the sandbox's again.
    _, outputs = shell_outputs(client, [f"curl -fsS https://allowed.test:{port}/hello"], environment)
    assert outputs[0]["stdout"] == "hello from allowed.test\n", outputs


def test_under_gvisor_a_sandbox_reaches_its_allowed_domain_and_no_other(
    stack: EgressStack, emulator: Process, make_gateway: Any, tmp_path: Path
) -> None:
    if "runsc" not in docker_runtimes():
        pytest.skip("the Docker daemon has no runsc runtime (README: gVisor)")
    sandbox = sandbox_section("docker", f"net-gvisor-{os.getpid()}", timeout_s=30, pool_size=0, runtime="runsc", network=stack.network_section())
    gateway = make_gateway(emulator.url, sandbox=sandbox)
    port = stack.servers.https_port
    commands = [f"curl -fsS https://allowed.test:{port}/hello", f"curl -fsS https://other.test:{port}/hello"]
    _, outputs = shell_outputs(gateway.client(), commands, {"type": "container_auto", "network_policy": allowlist("allowed.test")})
    assert outputs[0]["stdout"] == "hello from allowed.test\n" and outputs[1]["outcome"]["exit_code"] != 0, outputs


def test_one_sandbox_and_one_tenant_cannot_hold_every_connection(stack: EgressStack, tmp_path: Path) -> None:
    """From the host, on the proxy's other side: the bounds are the proxy's own, whoever connects."""
    ca, url = ssl.create_default_context(cafile=str(stack.proxy_ca(tmp_path / "ca.pem"))), f"https://allowed.test:{stack.servers.https_port}/hello"
    held: list[httpx.Client] = []

    def connect(token: str) -> bool:
        client = httpx.Client(verify=ca, proxy=stack.proxy_from_host(token), trust_env=False)
        try:
            client.get(url).raise_for_status()  # kept alive: the connection stays open
        except httpx.HTTPError:
            client.close()
            return False
        held.append(client)
        return True

    try:
        narrow = stack.register("narrow", ["allowed.test"], max_connections=2)
        assert [connect(narrow) for _ in range(3)] == [True, True, False]  # the sandbox's own limit
        first, second = stack.register("acme", ["allowed.test"]), stack.register("acme", ["allowed.test"])
        assert [connect(first) for _ in range(5)] + [connect(second) for _ in range(5)] == [True] * 8 + [False] * 2  # the tenant's: 8
        assert connect(stack.register("another", ["allowed.test"]))  # another tenant is served still
        for client in held[2:]:
            client.close()
        deadline = time.monotonic() + 10
        while not connect(second) and time.monotonic() < deadline:  # closed connections free the tenant's room
            time.sleep(0.1)
        assert time.monotonic() < deadline
    finally:
        for client in held:
            client.close()


def test_a_sandbox_moves_no_more_bytes_than_its_grant_allows(stack: EgressStack, tmp_path: Path) -> None:
    ca = ssl.create_default_context(cafile=str(stack.proxy_ca(tmp_path / "ca.pem")))
    token, url = stack.register("bytes", ["allowed.test"], max_bytes=1_000_000), f"https://allowed.test:{stack.servers.https_port}"
    with httpx.Client(verify=ca, proxy=stack.proxy_from_host(token), trust_env=False) as client:
        assert len(client.get(f"{url}/bytes/500000").content) == 500_000
        with pytest.raises(httpx.HTTPError):  # past the budget, the download is cut
            client.get(f"{url}/bytes/4000000").raise_for_status()
    with httpx.Client(verify=ca, proxy=stack.proxy_from_host(token), trust_env=False) as client:
        with pytest.raises(httpx.ProxyError, match="429"):  # and the sandbox gets no more
            client.get(f"{url}/hello")


def test_a_vaults_environment_variable_credential_reaches_its_host_only(networked: Gateway, stack: EgressStack) -> None:
    """The Agents API: a session's vault holds an `environment_variable` credential limited to one host; its
    hosted environment (allowed two) gets the placeholder, the egress proxy puts the secret in HTTPS requests
    to that host alone."""
    alice = networked.client(api_key="alice-key")
    servers, port = stack.servers, stack.servers.https_port
    vault = alice.beta.agents.vaults.create(name="keys")
    networking = {"type": "limited", "allowed_hosts": ["secret.test"]}
    auth = {"type": "environment_variable", "secret_name": "SERVICE_KEY", "secret_value": SECRET, "networking": networking}
    alice.beta.agents.vaults.credentials.create(vault.id, name="service", auth=auth)  # type: ignore[arg-type]
    network = {"access": "restricted", "allowed_domains": ["secret.test", "allowed.test"]}
    session = alice.beta.agents.sessions.create(
        agent={"model": MODEL}, environment={"type": "openai_hosted", "network": network}, vault_ids=[vault.id]
    )  # type: ignore[arg-type]
    before = len(servers.requests("/echo"))
    commands = [
        "echo $SERVICE_KEY",
        f'curl -fsS -H "Authorization: Bearer $SERVICE_KEY" https://secret.test:{port}/echo',
        f'curl -fsS -H "Authorization: Bearer $SERVICE_KEY" https://allowed.test:{port}/echo',
    ]
    with alice.beta.agents.sessions.stream(session.id, input=run(commands)) as stream:
        events = list(stream)
    done = [event.item for event in events if event.type == "agent.session.turn.item.done" and event.item.type == "command_execution"]
    placeholder = done[0].output.splitlines()[0]  # type: ignore[union-attr]  (the three commands' output, in order)
    assert placeholder.startswith("hgsecret_"), done
    received = {seen.headers["host"].split(":")[0]: seen.headers["authorization"] for seen in servers.requests("/echo")[before:]}
    assert received == {"secret.test": f"Bearer {SECRET}", "allowed.test": f"Bearer {placeholder}"}
    assert SECRET not in json.dumps([event.model_dump() for event in events])
