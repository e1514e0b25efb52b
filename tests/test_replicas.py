"""Several gateway replicas sharing one PostgreSQL, with HAProxy in front: any replica serves any
response, a cancel reaches the replica running it, a killed replica's runs are ended by the others, and
a client that reconnects to another replica mid-stream loses nothing."""

from __future__ import annotations

import base64
import contextlib
import json
import signal
import threading
import time
from typing import Any, Iterator

import httpx
import openai
import pytest

from .conftest import MODEL, Gateway, emulator_stats, gateway_config
from .servers import HAProxy
from .stream_checker import check_response_stream, parse_sse
from .test_background import killed_and_started_again, poll
from .test_mcp import MCPProcess
from .test_postgres import postgres  # noqa: F401  (the session's PostgreSQL server)

LEASE_S = 2.0
SHARED_KEY = base64.b64encode(bytes(range(32))).decode()
SLOW = "[long 80] [slow 30]"  # about 2.5 s of streaming
EXPECTED = " ".join(f"word{i}" for i in range(80))
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False},
    "strict": True,
}


class Cluster:
    def __init__(self, replicas: list[Gateway], balancer: HAProxy) -> None:
        self.replicas = replicas
        self.balancer = balancer

    def client(self, index: int | None = None) -> openai.OpenAI:
        url = self.balancer.url if index is None else self.replicas[index].url
        return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


@contextlib.contextmanager
def started_cluster(emulator, postgres, tmp_path, **sections: Any) -> Iterator[Cluster]:  # noqa: F811
    """Two replicas on one new database (with these config sections besides), and their balancer."""
    database = postgres.new_database()
    replicas = []
    try:
        for _ in range(2):
            # No `server.reasoning_key`: the replicas share the store's own key, which seals what they hand each
            # other (a run's request, reasoning): a killed replica's run is adopted all the same.
            config = gateway_config(emulator.url, tmp_path, storage={"url": database, "lease_s": LEASE_S}, **sections)
            replicas.append(Gateway(config, tmp_path).start())
        balancer = HAProxy([replica.port for replica in replicas], tmp_path).start()
        yield Cluster(replicas, balancer)
        balancer.stop()
    finally:
        for replica in replicas:
            replica.stop()


@pytest.fixture
def cluster(emulator, postgres, tmp_path) -> Iterator[Cluster]:  # noqa: F811
    with started_cluster(emulator, postgres, tmp_path) as started:
        yield started


def _read_events(url: str, response_id: str, after: int | None = None) -> list[dict[str, Any]]:
    params = {"stream": "true"} | ({"starting_after": str(after)} if after is not None else {})
    return parse_sse(httpx.get(f"{url}/v1/responses/{response_id}", params=params, timeout=60).content)


def test_any_replica_serves_a_response_running_on_another(cluster):
    first, second = cluster.client(0), cluster.client(1)
    response = first.responses.create(model=MODEL, input=SLOW, background=True)
    # While it runs on the first replica, the second shows its progress, from the store.
    deadline = time.monotonic() + 10
    seen = second.responses.retrieve(response.id)
    while len(seen.output) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
        seen = second.responses.retrieve(response.id)
    assert seen.status == "in_progress" and [item.type for item in seen.output] == ["reasoning", "message"]
    assert seen.output[0].content[0].text.startswith("The user said")
    assert [item.content[0].text for item in second.responses.input_items.list(response.id)] == [SLOW]
    with pytest.raises(openai.BadRequestError) as err:  # not continued before it ended
        second.responses.create(model=MODEL, input="and then?", previous_response_id=response.id)
    assert err.value.body["param"] == "previous_response_id"
    # The second replica follows its stream live, from any point, to the end.
    events = _read_events(cluster.replicas[1].url, response.id, after=3)
    assert events[0]["sequence_number"] == 4
    final = check_response_stream(_read_events(cluster.replicas[1].url, response.id))
    assert final.status == "completed" and final.output_text == EXPECTED
    assert events == _read_events(cluster.replicas[0].url, response.id, after=3)
    # Continued on the other replica, with the first one's dialog.
    later = second.responses.create(model=MODEL, input="what did I ask? [recall]", previous_response_id=response.id)
    assert "[long 80]" in later.output_text


def test_a_cancel_reaches_the_replica_running_the_response(cluster, emulator):
    aborted = emulator_stats(emulator)["aborted"]
    response = cluster.client(0).responses.create(model=MODEL, input="[long 400] [slow 40]", background=True)
    followed: dict[str, Any] = {}

    def follow() -> None:  # a reader on the second replica, which does not run the response
        followed["events"] = _read_events(cluster.replicas[1].url, response.id)

    reader = threading.Thread(target=follow)
    reader.start()
    time.sleep(0.8)
    cancelled = cluster.client(1).responses.cancel(response.id)
    assert cancelled.status == "cancelled"
    reader.join(30)
    assert followed["events"][-1]["type"] == "error" and followed["events"][-1]["code"] == "response_cancelled"
    assert emulator_stats(emulator)["aborted"] == aborted + 1  # the first replica aborted its engine request
    assert cluster.client(0).responses.retrieve(response.id).status == "cancelled"
    assert cluster.client(1).responses.cancel(response.id).status == "cancelled"  # idempotent, anywhere


def test_reasoning_sealed_by_one_replica_opens_on_another_with_no_key_configured(cluster):
    first = cluster.client(0).responses.create(model=MODEL, input="hi", store=False, include=["reasoning.encrypted_content"])
    (reasoning,) = [item for item in first.output if item.type == "reasoning"]
    assert reasoning.encrypted_content
    items = [item.model_dump(exclude_none=True) for item in first.output]
    second = cluster.client(1).responses.create(model=MODEL, input=[*items, {"role": "user", "content": "go on"}], store=False)
    assert second.status == "completed"


def test_a_killed_replicas_run_is_adopted_by_another_and_completes(cluster, emulator):
    """SIGKILL of the replica running a background response in the middle of its answer: the other replica
    adopts the run once the lease runs out and asks the engine to continue the prompt that ends with the
    tokens already generated. The client, resuming there after the last event it saw, gets one stream:
    no gap, no repeated delta, one terminal event, the answer whole."""
    words = 300
    expected = " ".join(f"word{i}" for i in range(words))
    seen: list[dict[str, Any]] = []
    body = {"model": MODEL, "input": f"[long {words}] [slow 10]", "background": True, "stream": True}
    with httpx.stream("POST", f"{cluster.replicas[0].url}/v1/responses", json=body, timeout=30) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if len(seen) == 60:  # well into the answer's text
                    cluster.replicas[0].proc.kill()  # SIGKILL: no shutdown, no last write
                    break
    killed_at = time.monotonic()
    response_id = seen[0]["response"]["id"]
    rest: list[dict[str, Any]] = []
    first_after = None
    with httpx.stream("GET", f"{cluster.replicas[1].url}/v1/responses/{response_id}",
                      params={"stream": "true", "starting_after": str(seen[-1]["sequence_number"])}, timeout=60) as answer:  # fmt: skip
        for line in answer.iter_lines():
            if line.startswith("data: "):
                first_after = first_after or time.monotonic()
                rest.append(json.loads(line[6:]))
    assert first_after is not None and first_after - killed_at < LEASE_S + 2  # adopted within the lease and a little
    final = check_response_stream(seen + rest)
    assert final.status == "completed" and final.output_text == expected
    # The continuation's prompt ends with the answer's text so far, which the client had (at least) seen.
    shown = "".join(event["delta"] for event in seen if event["type"] == "response.output_text.delta")
    written = emulator_stats(emulator)["last_prompt"].rsplit("<|channel|>final<|message|>", 1)[1]
    assert shown and written.startswith(shown) and expected.startswith(written) and len(written) < len(expected)
    stored = cluster.client(1).responses.retrieve(response_id)
    assert stored.status == "completed" and stored.output_text == expected
    assert [item.id for item in stored.output] == [item.id for item in final.output]
    # Through the balancer, which stops sending to the dead replica, the cluster goes on.
    assert cluster.client().responses.create(model=MODEL, input="still there?").status == "completed"


def _follow_until_killed(cluster: Cluster, text: str, events: int) -> list[dict[str, Any]]:
    """The first `events` events of a background response streamed from the first replica, which is then
    killed (SIGKILL: no shutdown, no last write)."""
    seen: list[dict[str, Any]] = []
    body = {"model": MODEL, "input": text, "background": True, "stream": True}
    with httpx.stream("POST", f"{cluster.replicas[0].url}/v1/responses", json=body, timeout=30) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if len(seen) == events:
                    cluster.replicas[0].proc.kill()
                    break
    return seen


def test_a_killed_replica_never_has_its_sequence_numbers_given_again(cluster):
    """A client follows a background response on the replica running it, which is killed: resuming on
    another replica after the last event it saw, it gets the rest and exactly one terminal event, and
    no number it saw ever stands for another event (its replica showed only what it had journaled)."""
    seen = _follow_until_killed(cluster, "[long 400] [slow 10]", events=40)
    response_id, last = seen[0]["response"]["id"], seen[-1]["sequence_number"]
    rest = _read_events(cluster.replicas[1].url, response_id, after=last)
    assert [event["sequence_number"] for event in rest] == list(range(last + 1, last + 1 + len(rest)))
    assert [event["type"] for event in rest].count("response.completed") == 1 and rest[-1]["type"] == "response.completed"
    # Read from the start, the stream is the one the client was shown, then the rest.
    whole = _read_events(cluster.replicas[1].url, response_id)
    assert whole[: len(seen)] == seen and whole[len(seen) :] == rest


def test_an_adopted_run_read_on_its_adopter_from_the_start_is_whole(cluster):
    """Read from its adopter without `starting_after` (the adopter's own log starts where the stored events
    of the replica that died end), right after the adoption, mid-run and after the end: each read is the
    whole stream from `response.created`, every event equal to the stored one of its number."""
    response_id = _follow_until_killed(cluster, "[long 300] [slow 15]", events=50)[0]["response"]["id"]
    adopter = cluster.replicas[1]
    assert _wait_for(lambda: f"response {response_id} adopted" in adopter.log.read_text(), 10 * LEASE_S)
    reads: list[list[dict[str, Any]]] = []
    readers = [threading.Thread(target=lambda: reads.append(_read_events(adopter.url, response_id)))]
    readers[0].start()  # right after the adoption
    time.sleep(1.5)
    readers.append(threading.Thread(target=lambda: reads.append(_read_events(adopter.url, response_id))))
    readers[1].start()  # mid-run
    for reader in readers:
        reader.join(60)
    reads.append(_read_events(adopter.url, response_id))  # after the end: from the store
    stored = reads[-1]
    assert stored[0]["type"] == "response.created" and stored[-1]["type"] == "response.completed"
    assert [event["sequence_number"] for event in stored] == list(range(len(stored)))
    for read in reads:
        assert read == stored
    check_response_stream(stored)


def test_a_replica_that_stalled_past_its_lease_hands_its_readers_to_the_store(cluster):
    """Replica A stops (SIGSTOP) while a client follows its background response; B adopts the run once A's
    lease runs out. When A comes back it finds the run taken (its writes are fenced off): it stops the run
    and writes nothing more, and the client's stream on A goes on from the store with B's events, to one
    terminal event, no number given twice."""
    followed: dict[str, Any] = {}

    def follow() -> None:
        body = {"model": MODEL, "input": "[long 400] [slow 20]", "background": True, "stream": True}
        with httpx.Client(timeout=60) as client:
            followed["events"] = parse_sse(client.post(f"{cluster.replicas[0].url}/v1/responses", json=body).content)

    reader = threading.Thread(target=follow)
    reader.start()
    time.sleep(1.0)
    paused = cluster.replicas[0].proc
    paused.send_signal(signal.SIGSTOP)
    try:
        time.sleep(4 * LEASE_S)  # B's reaper ends the run once A's lease has run out
    finally:
        paused.send_signal(signal.SIGCONT)
    reader.join(30)
    events = followed["events"]
    final = check_response_stream(events)
    assert final.status == "completed" and final.output_text == " ".join(f"word{i}" for i in range(400))
    stored = cluster.client(1).responses.retrieve(events[0]["response"]["id"])
    assert stored.status == "completed" and stored.output_text == final.output_text  # A, back, did not write over B


def test_a_client_reconnects_to_another_replica_mid_stream(cluster):
    first: list[dict[str, Any]] = []
    body = {"model": MODEL, "input": SLOW, "background": True, "stream": True}
    with httpx.stream("POST", f"{cluster.replicas[0].url}/v1/responses", json=body, timeout=30) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                first.append(json.loads(line[6:]))
                if len(first) == 10:
                    break  # the connection drops
    response_id = first[0]["response"]["id"]
    # The SDK resumes on the other replica, after the last event it saw.
    rest = [event.to_dict() for event in cluster.client(1).responses.retrieve(response_id, stream=True, starting_after=first[-1]["sequence_number"])]
    final = check_response_stream(first + rest)
    assert final.status == "completed" and final.output_text == EXPECTED


def test_the_balanced_cluster_serves_every_operation(cluster):
    """Through HAProxy each request may land on either replica: create, poll, resume, cancel, continue."""
    client = cluster.client()
    runs = [client.responses.create(model=MODEL, input=SLOW, background=True) for _ in range(6)]
    cancelled = client.responses.cancel(runs[0].id)
    assert cancelled.status == "cancelled"
    for run in runs[1:]:
        done = poll(client, run.id)
        assert done.status == "completed" and done.output_text == EXPECTED
        events = [event.to_dict() for event in client.responses.retrieve(run.id, stream=True, starting_after=2)]
        assert events[0]["sequence_number"] == 3 and events[-1]["type"] == "response.completed"
    later = client.responses.create(model=MODEL, input="what did I ask? [recall]", previous_response_id=runs[1].id)
    assert "[long 80]" in later.output_text


def _containers_by_owner(instance: str) -> dict[str, list[str]]:
    import docker

    filters = {"label": ["harmony-gateway.sandbox=1", f"harmony-gateway.instance={instance}"]}
    owners: dict[str, list[str]] = {}
    for container in docker.from_env().api.containers(all=True, filters=filters):
        owners.setdefault(container["Labels"].get("harmony-gateway.owner", ""), []).append(container["Id"])
    return owners


def _remove_containers(instance: str) -> None:
    import docker

    client = docker.from_env()
    for containers in _containers_by_owner(instance).values():
        for container in containers:
            client.api.remove_container(container, force=True)


def _held_sessions(gateway: Gateway) -> int:
    return httpx.get(gateway.url + "/ready", timeout=5).json()["sandbox_sessions"]


def _wait_for(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
    return bool(condition())


def test_python_state_follows_its_conversation_across_replicas(emulator, postgres, tmp_path, sandbox_image):  # noqa: F811
    """Replicas with the same sandbox.instance on one Docker daemon: a conversation's python session is
    taken over by whichever replica serves its next turn, state and all, held by one replica at a time.
    A replica starting up removes only containers of replicas that are gone; a session outlives the
    replica that started it, and the one that last held it, for another to take over."""
    from .conftest import sandbox_section
    from .test_sandbox import CODE_TOOL, STATE_LOST

    database = postgres.new_database()
    instance = f"test-{time.monotonic_ns()}-shared"
    sections = {"storage": {"url": database, "lease_s": LEASE_S}, "sandbox": sandbox_section("docker", instance, pool_size=1)}
    first = Gateway(gateway_config(emulator.url, tmp_path, **sections), tmp_path).start()
    second = third = None
    tools: Any = [CODE_TOOL]

    def turn(gateway: Gateway, code: str, previous: Any) -> Any:
        response = gateway.client().responses.create(model=MODEL, input=f"[[python {code}]]", tools=tools, previous_response_id=previous.id)
        assert STATE_LOST not in response.output_text
        return response

    try:
        start = first.client().responses.create(model=MODEL, input="[[python x = 6 * 7]]", tools=tools)
        (first_id,) = _containers_by_owner(instance)  # its pool's container, and the session's
        second = Gateway(gateway_config(emulator.url, tmp_path, **sections), tmp_path).start()
        assert _wait_for(lambda: len(_containers_by_owner(instance)) == 2, 30)  # its pool fills after start-up
        (second_id,) = set(_containers_by_owner(instance)) - {first_id}
        assert len(_containers_by_owner(instance)[first_id]) == 2  # the second one's start-up left them
        # The session moves to the second replica with its state; the first lets go of it.
        moved = turn(second, "print(x)", start)
        assert "42" in moved.output_text
        assert _wait_for(lambda: _held_sessions(first) == 0, 5) and _held_sessions(second) == 1
        # And back, and again: one holder at a time, one container all along.
        back = turn(first, "x += 1; print(x)", moved)
        assert "43" in back.output_text
        assert _wait_for(lambda: _held_sessions(second) == 0, 5)
        again = turn(second, "x += 1; print(x)", back)
        assert "44" in again.output_text
        # The replica that started the session dies: its pool's container goes, the session's stays
        # with the replica holding it.
        first.proc.kill()
        third = Gateway(gateway_config(emulator.url, tmp_path, **sections), tmp_path).start()
        assert _wait_for(lambda: len(_containers_by_owner(instance).get(first_id, [])) == 1, 6 * LEASE_S + 10)
        after = turn(second, "x += 1; print(x)", again)
        assert "45" in after.output_text
        # The holder dies too: the session is kept for its idle time, and a live replica takes it over.
        second.proc.kill()
        adopted = turn(third, "x += 1; print(x)", after)
        assert "46" in adopted.output_text
        assert _wait_for(lambda: second_id not in _containers_by_owner(instance), 6 * LEASE_S + 10)
        assert len(_containers_by_owner(instance)[first_id]) == 1
        assert "47" in turn(third, "x += 1; print(x)", adopted).output_text
    finally:
        for gateway in (first, second, third):
            if gateway is not None:
                gateway.stop()
    assert _containers_by_owner(instance) == {}  # a clean shutdown removes what the replica holds


def test_an_mcp_call_in_flight_when_its_replica_dies_is_not_made_again(emulator, postgres, tmp_path):  # noqa: F811
    """SIGKILL of the replica while its MCP call runs: the adopter does not send the call again (it may
    have had its effect); the model is told it was interrupted, and the response completes."""
    server = MCPProcess("streamable-http", name="shared")
    database = postgres.new_database()
    replicas: list[Gateway] = []
    try:
        for _ in range(2):
            config = gateway_config(
                emulator.url, tmp_path, storage={"url": database, "lease_s": LEASE_S}, server={"reasoning_key": SHARED_KEY},
                mcp={"allowed_urls": [f"http://127.0.0.1:{server.port}/"]},
            )  # fmt: skip
            config["tool_servers"] = [{"label": "shared", "transport": "streamable-http", "url": server.url}]
            replicas.append(Gateway(config, tmp_path).start(timeout=60))
        first, second = (openai.OpenAI(base_url=replica.url + "/v1", api_key="unused", max_retries=0) for replica in replicas)
        tools: Any = [{"type": "mcp", "server_label": "shared", "require_approval": "never"}]
        response = first.responses.create(model=MODEL, input='[[call shared.slow_tally {"seconds": 4}]]', tools=tools, background=True)
        assert _wait_for(lambda: any(item.type == "mcp_call" for item in second.responses.retrieve(response.id).output), 10)
        time.sleep(0.5)  # the call is running on the first replica
        replicas[0].proc.kill()
        ended = poll(second, response.id, timeout=30)
        assert ended.status == "completed"
        call = next(item for item in ended.output if item.type == "mcp_call")
        assert call.status == "incomplete" and call.output is None
        assert "interrupted" in ended.output_text
        # The engine had finished the call's turn: the adopter asked it for nothing more of that turn (a
        # prompt ending with the call's own tokens), only for the turn after the tool's output.
        assert not [prompt for prompt in emulator_stats(emulator)["recent_prompts"] if prompt.endswith("<|call|>")]
        counted = second.responses.create(model=MODEL, input="[[call shared.tally_count {}]]", tools=tools)
        assert counted.output_text == "The tool said: 1"  # the call ran once, on the replica that died
    finally:
        for replica in replicas:
            replica.stop()
        server.stop()


def test_a_rolling_restart_hands_every_run_over(emulator, postgres, tmp_path):  # noqa: F811
    """32 background agents of 5 MCP tool turns each, on two replicas; each replica in turn is stopped
    (SIGTERM) and started again, as `compose.replicas.yaml` describes. Each run a stopping replica holds is
    handed over at a clean point and adopted by the other: all 32 complete, none failed, no tool call made
    twice or cut off, no event lost or repeated, and a replica holding its runs drains in under 5 s."""
    server = MCPProcess("streamable-http", name="shared")
    database = postgres.new_database()
    configs: list[dict[str, Any]] = []
    replicas: list[Gateway] = []
    try:
        for _ in range(2):
            config = gateway_config(
                emulator.url, tmp_path, storage={"url": database, "lease_s": 5.0}, server={"reasoning_key": SHARED_KEY},
                mcp={"allowed_urls": [f"http://127.0.0.1:{server.port}/"]}, loop={"max_background_per_tenant": 64},
            )  # fmt: skip
            config["tool_servers"] = [{"label": "shared", "transport": "streamable-http", "url": server.url}]
            configs.append(config)
            replicas.append(Gateway(config, tmp_path).start(timeout=60))
        tools: Any = [{"type": "mcp", "server_label": "shared", "require_approval": "never"}]
        agent = "[slow 20] " + " ".join('[[call shared.slow {"seconds": 1.0}]]' for _ in range(5))
        ids = [replicas[index % 2].client().responses.create(model=MODEL, input=agent, tools=tools, background=True).id for index in range(32)]
        drains = []
        for index in range(2):  # one replica after the other
            time.sleep(1.0)
            stopping = replicas[index]
            assert stopping.proc is not None
            began = time.monotonic()
            stopping.proc.send_signal(signal.SIGTERM)
            stopping.proc.wait(30)
            drains.append(time.monotonic() - began)
            replicas[index] = Gateway(configs[index], tmp_path).start(timeout=60)
        client = replicas[0].client()
        for response_id in ids:
            ended = poll(client, response_id, timeout=120)
            assert ended.status == "completed", (response_id, ended.status, ended.error)
            calls = [item for item in ended.output if item.type == "mcp_call"]
            assert [call.status for call in calls] == ["completed"] * 5 and ended.output_text == "The tool said: slept 1.0"
            final = check_response_stream(_read_events(replicas[1].url, response_id))
            assert final.status == "completed" and [item.id for item in final.output] == [item.id for item in ended.output]
        assert max(drains) < 5, drains
        print(f"drain times with 32 agents running: {', '.join(f'{drain:.2f} s' for drain in drains)}")
    finally:
        for replica in replicas:
            replica.stop()
        server.stop()


def _python_replicas(emulator: Any, postgres: Any, tmp_path: Any, instance: str, timeout_s: float) -> list[Gateway]:
    """Two replicas sharing a new database and one Docker daemon's sandbox sessions (`instance`)."""
    from .conftest import sandbox_section

    sections = {
        "storage": {"url": postgres.new_database(), "lease_s": LEASE_S}, "server": {"reasoning_key": SHARED_KEY},
        "sandbox": sandbox_section("docker", instance, pool_size=1, timeout_s=timeout_s),
    }  # fmt: skip
    return [Gateway(gateway_config(emulator.url, tmp_path, **sections), tmp_path).start(timeout=60) for _ in range(2)]


def test_a_python_call_in_flight_when_its_replica_dies_runs_once(emulator, postgres, tmp_path, sandbox_image):  # noqa: F811
    """SIGKILL of the replica while its python call runs (the kernel is on the shared Docker daemon): the
    adopter takes the session over and collects the result the kernel kept, without running the code
    again; the response completes with the call's output, and the conversation goes on in the same
    container, whose file shows one execution."""
    from .test_sandbox import CODE_TOOL

    instance = f"test-{time.monotonic_ns()}-adopt"
    replicas = _python_replicas(emulator, postgres, tmp_path, instance, timeout_s=15)
    try:
        first, second = (replica.client() for replica in replicas)
        tools: Any = [CODE_TOOL]
        code = "open('/mnt/data/runs.txt', 'a').write('ran\\n'); import time; time.sleep(3); print('slept once')"
        response = first.responses.create(model=MODEL, input=f"[[python {code}]]", tools=tools, background=True)
        assert _wait_for(lambda: any(item.type == "code_interpreter_call" for item in second.responses.retrieve(response.id).output), 20)
        time.sleep(0.5)  # the code runs on the first replica's kernel
        replicas[0].proc.kill()
        ended = poll(second, response.id, timeout=60)
        assert ended.status == "completed", ended.error
        call = next(item for item in ended.output if item.type == "code_interpreter_call")
        assert call.status == "completed" and "slept once" in ended.output_text
        count = "print(open('/mnt/data/runs.txt').read().count('ran'))"
        later = second.responses.create(model=MODEL, input=f"[[python {count}]]", tools=tools, previous_response_id=response.id)
        assert later.output_text.endswith("The tool said: 1"), later.output_text
        followed = next(item for item in later.output if item.type == "code_interpreter_call")
        assert followed.container_id == call.container_id
    finally:
        for replica in replicas:
            replica.stop()
        # The killed replica's warm pool container is left for a live replica's sweep (a lease and
        # `sweep_s` later), which the stopped ones will not run: removed here.
        _remove_containers(instance)


def test_cancelling_an_adopted_run_interrupts_the_python_call_it_waits_for(emulator, postgres, tmp_path, sandbox_image):  # noqa: F811
    """SIGKILL of the replica while its python loop runs; the adopter waits for the kernel's result, and a
    cancel then interrupts the loop there (it does not run its 12 s out), the session's state kept."""
    from .test_sandbox import CODE_TOOL

    instance = f"test-{time.monotonic_ns()}-adopt-cancel"
    replicas = _python_replicas(emulator, postgres, tmp_path, instance, timeout_s=30)
    try:
        first, second = (replica.client() for replica in replicas)
        tools: Any = [CODE_TOOL]
        setup = first.responses.create(model=MODEL, input="[[python kept = 41]]", tools=tools)
        loop = "import time\nfor i in range(12):\n    open('/tmp/ticks', 'a').write('x')\n    time.sleep(1)"
        response = first.responses.create(model=MODEL, input=f"[[python {loop}]]", tools=tools, background=True, previous_response_id=setup.id)
        assert _wait_for(lambda: any(item.type == "code_interpreter_call" for item in second.responses.retrieve(response.id).output), 20)
        time.sleep(0.5)
        replicas[0].proc.kill()
        assert _wait_for(lambda: "which a replica that stopped started" in replicas[1].log.read_text(), 20)
        time.sleep(0.5)  # the adopter waits on the kernel for the result
        cancelled_at = time.monotonic()
        assert second.responses.cancel(response.id).status == "cancelled"
        count = "import time\ntime.sleep(2)\nprint(len(open('/tmp/ticks').read()), kept)"
        later = second.responses.create(model=MODEL, input=f"[[python {count}]]", tools=tools, previous_response_id=setup.id)
        ticks, kept = map(int, later.output_text.rsplit(":", 1)[1].split())
        assert kept == 41 and ticks < 12, ticks  # interrupted, not run to its end
        assert time.monotonic() - cancelled_at < 10
    finally:
        for replica in replicas:
            replica.stop()
        _remove_containers(instance)


def test_a_replica_restarted_under_its_name_before_its_lease_ran_out_has_its_runs_adopted(emulator, postgres, tmp_path):  # noqa: F811
    """SIGKILL of a replica named by `storage.replica_id`, started again at once under the same name,
    its lease still current: the new process lets the runs of the old one go, and they are adopted and
    complete once, the stream whole (no event written twice)."""
    sections = {"storage": {"url": postgres.new_database(), "lease_s": LEASE_S, "replica_id": "named"}, "server": {"reasoning_key": SHARED_KEY}}
    # Started again at once: well within the lease.
    killed_and_started_again(gateway_config(emulator.url, tmp_path, **sections), tmp_path, words=300)


def test_a_run_in_a_conversation_is_adopted_and_adds_its_items_once(cluster):
    """A background response in a conversation, its replica killed mid-answer: the adopter plans the same
    dialog from the conversation, goes on, and adds the response's items to the conversation once."""
    words = 200
    expected = " ".join(f"word{i}" for i in range(words))
    first, second = cluster.client(0), cluster.client(1)
    conversation = first.conversations.create()
    response = first.responses.create(model=MODEL, input=f"[long {words}] [slow 10]", conversation=conversation.id, background=True)
    time.sleep(0.8)
    cluster.replicas[0].proc.kill()
    ended = poll(second, response.id, timeout=30)
    assert ended.status == "completed" and ended.output_text == expected
    items = second.conversations.items.list(conversation.id, order="asc").data
    assert [item.type for item in items] == ["message", "reasoning", "message"]
    assert items[-1].content[0].text == expected and items[-1].id == ended.output[-1].id
    later = second.responses.create(model=MODEL, input="what did I ask? [recall]", conversation=conversation.id)
    assert f"[long {words}]" in later.output_text and expected in later.output_text


def test_a_replica_that_shuts_down_hands_its_run_over_at_once(emulator, postgres, tmp_path):  # noqa: F811
    """SIGTERM stops a background run at its next clean point and releases it: the other replica adopts it
    at once, not when the stopped replica's lease would have run out (5 min here) nor at its next round (100 s)."""
    config = gateway_config(emulator.url, tmp_path, storage={"url": postgres.new_database(), "lease_s": 300.0}, server={"reasoning_key": SHARED_KEY})
    replicas = [Gateway(config, tmp_path).start(timeout=60) for _ in range(2)]
    try:
        response = replicas[0].client().responses.create(model=MODEL, input="[long 200] [slow 20] [chunk 1]", background=True)
        time.sleep(1.5)  # streaming: about a fifth of its 200 words are out
        assert replicas[0].proc is not None
        stopped = time.monotonic()
        replicas[0].proc.send_signal(signal.SIGTERM)
        replicas[0].proc.wait(30)
        ended = poll(replicas[1].client(), response.id, timeout=45)
        assert ended.status == "completed" and ended.output_text.split()[-1] == "word199"
        # The rest of the answer streams at 20 ms a token (some 7 s): at once means within a few seconds of that.
        assert time.monotonic() - stopped < 15, time.monotonic() - stopped
        final = check_response_stream(_read_events(replicas[1].url, response.id))
        assert final.status == "completed" and final.output_text == ended.output_text
    finally:
        for replica in replicas:
            replica.stop()


def test_an_adopted_call_is_shown_as_its_first_replica_showed_it(emulator, postgres, tmp_path):  # noqa: F811
    """The first replica streamed a call live (its engine's grammar held it); the adopter's engine call has
    none (`structured_outputs: off`, as after a configuration change), where a call is shown only once
    written. The adopter goes on showing the call as it was shown: one item, its arguments whole, no event twice."""
    database = postgres.new_database()
    replicas = []
    try:
        for structured_outputs in ("auto", "off"):
            sections = {"storage": {"url": database, "lease_s": LEASE_S}, "server": {"reasoning_key": SHARED_KEY}}
            config = gateway_config(emulator.url, tmp_path, engine={"structured_outputs": structured_outputs}, **sections)
            replicas.append(Gateway(config, tmp_path).start())
        city = " ".join(f"street{i}" for i in range(150))
        seen: list[dict[str, Any]] = []
        body = {"model": MODEL, "input": f'[call functions.get_weather {{"city": "{city}"}}] [slow 20] [chunk 1]', "background": True,
                "stream": True, "tools": [WEATHER]}  # fmt: skip
        with httpx.stream("POST", f"{replicas[0].url}/v1/responses", json=body, timeout=30) as answer:
            for line in answer.iter_lines():
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if [event["type"] for event in seen].count("response.function_call_arguments.delta") == 40:
                        replicas[0].proc.kill()  # SIGKILL mid-arguments
                        break
        response_id = seen[0]["response"]["id"]
        ended = poll(replicas[1].client(), response_id, timeout=45)
        assert ended.status == "completed"
        whole = _read_events(replicas[1].url, response_id)
        assert whole[: len(seen)] == seen
        final = check_response_stream(whole)
        assert [(item.type, item.status) for item in final.output] == [("reasoning", None), ("function_call", "completed")]
        assert json.loads(final.output[-1].arguments) == {"city": city}
        assert [event["item"]["type"] for event in whole if event["type"] == "response.output_item.added"] == ["reasoning", "function_call"]
    finally:
        for replica in replicas:
            replica.stop()


def test_an_adopted_run_gives_its_reasoning_summary_again_and_writes_no_other(cluster, emulator):
    """A reasoning item's summary was shown before the replica died: its adopter, parsing the call's tokens
    again, gives that summary again (from the checkpoint) without asking the model for another."""
    before = emulator_stats(emulator)["summary_calls"]
    seen: list[dict[str, Any]] = []
    body = {"model": MODEL, "input": "[long 300] [slow 15]", "background": True, "stream": True, "reasoning": {"summary": "auto"}}
    with httpx.stream("POST", f"{cluster.replicas[0].url}/v1/responses", json=body, timeout=30) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if len(seen) == 60:
                    cluster.replicas[0].proc.kill()
                    break
    assert "response.reasoning_summary_part.done" in [event["type"] for event in seen]  # shown before the kill
    response_id = seen[0]["response"]["id"]
    assert poll(cluster.client(1), response_id, timeout=45).status == "completed"
    whole = _read_events(cluster.replicas[1].url, response_id)
    assert whole[: len(seen)] == seen
    final = check_response_stream(whole)
    assert final.output[0].summary[0].text.startswith("**Working it out**")
    assert emulator_stats(emulator)["summary_calls"] == before + 1


def test_an_adopted_run_that_fails_later_ends_only_what_was_still_open(cluster):
    """After a tool call, the replica is killed mid-answer; its adopter's engine then fails. The response
    fails once, the answer's item (open) is closed incomplete, and the items the first replica had ended and
    stored before that engine call are not ended again."""
    answer = " ".join(f"word{i}" for i in range(300))
    text = f"[[call functions.nope {{}}]] [[answer {answer}]] [slow 10] [midstream-error 120] [misbehave]"
    seen: list[dict[str, Any]] = []
    body = {"model": MODEL, "input": text, "background": True, "stream": True, "tools": [WEATHER]}
    with httpx.stream("POST", f"{cluster.replicas[0].url}/v1/responses", json=body, timeout=30) as answered:
        for line in answered.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if seen[-1]["type"] == "response.output_text.delta" and seen[-1]["delta"].strip().startswith("word3"):
                    cluster.replicas[0].proc.kill()  # in the second engine call's answer
                    break
    response_id = seen[0]["response"]["id"]
    assert poll(cluster.client(1), response_id, timeout=45).status == "failed"
    whole = _read_events(cluster.replicas[1].url, response_id)
    assert whole[: len(seen)] == seen
    final = check_response_stream(whole)
    assert [item.type for item in final.output] == ["reasoning", "reasoning", "message"]
    assert final.output[-1].status == "incomplete"
    done = [event["output_index"] for event in whole if event["type"] == "response.output_item.done"]
    assert sorted(done) == [0, 1, 2]  # each item ended once


def test_an_adopted_run_cites_the_passages_its_first_replica_found(cluster):
    """A file search made by a replica that is then killed mid-answer: the adopter goes on from the checkpoint,
    with the passages the model was shown, so the answer's citation (written after the take-over) resolves to
    the file, and the search is not made again."""
    import io

    api = cluster.client(0)
    file_id = api.files.create(file=("notes.md", io.BytesIO(b"The archive is in the basement.")), purpose="assistants").id
    store = api.vector_stores.create(name="adopted", file_ids=[file_id])
    assert _wait_for(lambda: api.vector_stores.retrieve(store.id).file_counts.completed == 1, 20)
    answer = " ".join(f"word{i}" for i in range(120)) + " In the basement.【0†notes.md】"
    text = f'Where? [slow 15] [[call file_search.msearch {{"queries": ["archive"]}}]][[answer {answer}]]'
    seen: list[dict[str, Any]] = []
    body = {"model": MODEL, "input": text, "background": True, "stream": True, "tools": [{"type": "file_search", "vector_store_ids": [store.id]}]}
    with httpx.stream("POST", f"{cluster.replicas[0].url}/v1/responses", json=body, timeout=30) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: "):
                seen.append(json.loads(line[6:]))
                if sum(event["type"] == "response.output_text.delta" for event in seen) == 10:  # the search is done, the answer begun
                    cluster.replicas[0].proc.kill()
                    break
    assert any(event["type"] == "response.file_search_call.completed" for event in seen)
    rest = _read_events(cluster.replicas[1].url, seen[0]["response"]["id"], after=seen[-1]["sequence_number"])
    final = check_response_stream(seen + rest)
    assert final.status == "completed" and [item.type for item in final.output].count("file_search_call") == 1
    assert not any(event["type"].startswith("response.file_search_call") for event in rest)
    message = final.output[-1]
    assert message.content[0].text.endswith("In the basement.")  # type: ignore[union-attr]
    assert [(a.type, a.file_id) for a in message.content[0].annotations] == [("file_citation", file_id)]  # type: ignore[union-attr]
