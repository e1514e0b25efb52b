"""Several models behind one gateway, and engines that die mid-answer unseen by the client.

Real processes on loopback: emulators serving two models; HAProxy (Debian's) hashing on the session
header over two instances of one model; engines SIGKILLed mid-answer and started again.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import httpx
import openai
import pytest

from .chat_checker import check_chat_stream, parse_chat_sse
from .conftest import MODEL, Gateway, Process, emulator_stats, free_port, gateway_config, metric, start_emulator, stream_raw
from .servers import HAProxy
from .stream_checker import check_response_stream, parse_sse, sse_as_it_arrives
from .test_function_tools import LONG_ARGS, WEATHER
from .test_mcp import MCPProcess
from .test_structured_outputs import CITY
from .test_websocket import until_end

BIG = "openai/gpt-oss-120b"
WORDS = " ".join(f"word{i}" for i in range(120))


def engine_on(port: int, workdir: Path, *extra: str) -> Process:
    """An emulator on a given port: an engine started again where it was."""
    args = [sys.executable, "-m", "tests.emulator", "--port", str(port), *extra]
    return Process(args, port, "/health", workdir / f"emulator-{port}.log")


def engines_config(workdir: Path, engines: list[dict[str, Any]], **sections: Any) -> dict[str, Any]:
    config = gateway_config("http://unused", workdir, **sections)
    del config["engine"]
    config["engines"] = engines
    return config


def until(condition: Any, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.1)


# -- several models -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    work = tmp_path_factory.mktemp("models")
    small = start_emulator(work)
    big = start_emulator(work, "--model", BIG, "--max-model-len", "65536")
    engines = [
        {"url": small.url, "model": MODEL, "aliases": ["gpt-oss-20b"]},
        {"url": big.url, "model": BIG, "aliases": ["gpt-oss-120b", "claude-opus-*"]},
    ]
    gateway = Gateway(engines_config(work, engines), work).start()
    yield SimpleNamespace(small=small, big=big, gateway=gateway)
    for process in (gateway, small, big):
        process.stop()


def test_claude_names_by_pattern_and_the_rest_to_the_first_model(two_models: SimpleNamespace) -> None:
    gateway, small, big = two_models.gateway, two_models.small, two_models.big
    asked = lambda engine: emulator_stats(engine)["requests"]  # noqa: E731
    before = asked(small), asked(big)
    for name in ("claude-opus-5-5", "claude-haiku-4-5"):
        body = {"model": name, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]}
        answer = httpx.post(gateway.url + "/v1/messages", json=body, timeout=30).json()
        assert answer["model"] == name
    assert (asked(small), asked(big)) == (before[0] + 1, before[1] + 1)  # `claude-opus-*` is an alias of the big one
    assert responses_status(gateway, "claude-opus-5-5") == 200  # in the Responses door too: an alias like any
    assert responses_status(gateway, "claude-haiku-4-5") == 404  # only the Messages door sends Claude's other names to the first


def responses_status(gateway: Gateway, model: str) -> int:
    return httpx.post(gateway.url + "/v1/responses", json={"model": model, "input": "hi"}, timeout=30).status_code


def test_a_requests_model_picks_its_engine(two_models: SimpleNamespace) -> None:
    gateway, small, big = two_models.gateway, two_models.small, two_models.big
    client = gateway.client()
    asked = lambda engine: emulator_stats(engine)["requests"]  # noqa: E731
    before = asked(small), asked(big)
    assert client.responses.create(model=BIG, input="hi").model == BIG
    assert client.responses.create(model="gpt-oss-120b", input="hi", stream=False).model == BIG  # an alias
    assert client.chat.completions.create(model="gpt-oss-120b", messages=[{"role": "user", "content": "hi"}]).model == BIG
    assert (asked(small), asked(big)) == (before[0], before[1] + 3)
    assert client.responses.create(model="gpt-oss-20b", input="hi").model == MODEL
    nameless = httpx.post(gateway.url + "/v1/responses", json={"input": "hi"}, timeout=30).json()  # no model: the first configured
    assert nameless["model"] == MODEL and (asked(small), asked(big)) == (before[0] + 2, before[1] + 3)
    # Each model's limits are its own engine's: the big one's context is shorter here.
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=BIG, input="word " * 70_000)
    assert err.value.code == "context_length_exceeded"
    assert client.responses.create(model=MODEL, input="word " * 70_000, max_output_tokens=20).status == "incomplete"
    # Streams, background runs and follow-ups run on the model their request names.
    events = [event.to_dict() for event in client.responses.create(model=BIG, input="streamed", stream=True)]
    assert check_response_stream(events).model == BIG
    background = client.responses.create(model=BIG, input="later", background=True)
    until(lambda: client.responses.retrieve(background.id).status == "completed")
    follow = client.responses.create(model=MODEL, input="and now", previous_response_id=background.id)
    assert follow.model == MODEL


def test_an_unknown_model_is_openais_404(two_models: SimpleNamespace) -> None:
    client = two_models.gateway.client()
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model="gpt-4o", input="hi")
    assert err.value.code == "model_not_found" and err.value.body["param"] == "model"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert err.value.code == "model_not_found"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")
    with pytest.raises(openai.NotFoundError):
        client.responses.input_tokens.count(model="gpt-4o", input="hi")
    with pytest.raises(openai.NotFoundError):
        client.responses.compact(model="gpt-4o", input="hi")
    with client.responses.connect() as connection:
        connection.response.create(model="gpt-4o", input="hi")
        (error,) = until_end(connection)
        assert error["type"] == "error" and error["error"]["code"] == "model_not_found"


def test_models_ready_and_metrics_show_every_engine(two_models: SimpleNamespace) -> None:
    gateway = two_models.gateway
    client = gateway.client()
    listed = httpx.get(gateway.url + "/v1/models").json()["data"]
    assert [(model["id"], model["max_model_len"]) for model in listed] == [(MODEL, 131072), (BIG, 65536)]
    assert [model.id for model in client.models.list()] == [MODEL, BIG]
    assert client.models.retrieve("gpt-oss-120b").id == BIG
    ready = httpx.get(gateway.url + "/ready").json()
    assert ready["status"] == "ready" and ready["engine"] is True
    assert [(engine["model"], engine["url"], engine["up"]) for engine in ready["engines"]] == [
        (MODEL, two_models.small.url, True), (BIG, two_models.big.url, True),
    ]  # fmt: skip
    client.responses.create(model=BIG, input="counted")
    text = httpx.get(gateway.url + "/metrics").text
    assert metric(text, "gateway_engine_up", model=BIG, url=two_models.big.url) == 1
    assert metric(text, "gateway_tokens_total", direction="out", model=BIG) > 0
    assert metric(text, "gateway_time_to_first_token_seconds_count", model=BIG) >= 1


def test_an_engine_down_at_start_stops_only_its_model(tmp_path: Path) -> None:
    small = start_emulator(tmp_path)
    port = free_port()  # the big model's engine is not there yet
    engines = [{"url": small.url, "model": MODEL}, {"url": f"http://127.0.0.1:{port}", "model": BIG, "health_interval_s": 0.3}]
    gateway = Gateway(engines_config(tmp_path, engines), tmp_path).start()
    big = engine_on(port, tmp_path, "--model", BIG)
    try:
        client = gateway.client()
        assert client.responses.create(model=MODEL, input="hi").status == "completed"
        began = time.monotonic()
        with pytest.raises(openai.InternalServerError) as err:
            client.responses.create(model=BIG, input="hi")
        assert err.value.status_code == 503 and err.value.code == "engine_unavailable"
        assert time.monotonic() - began < 1.0  # at once: no engine of it answers
        ready = httpx.get(gateway.url + "/ready")
        assert ready.status_code == 503 and [engine["up"] for engine in ready.json()["engines"]] == [True, False]
        assert [model["id"] for model in httpx.get(gateway.url + "/v1/models").json()["data"]] == [MODEL, BIG]
        big.start()
        until(lambda: httpx.get(gateway.url + "/ready").status_code == 200)
        assert client.responses.create(model=BIG, input="hi").model == BIG
    finally:
        for process in (gateway, small, big):
            process.stop()


def test_an_engine_that_loads_another_model_is_read_again(tmp_path: Path) -> None:
    port = free_port()
    engine = engine_on(port, tmp_path).start()
    gateway = Gateway(gateway_config(engine.url, tmp_path, engine={"health_interval_s": 0.3}), tmp_path).start()
    try:
        client = gateway.client()
        assert client.responses.create(model=MODEL, input="hi").model == MODEL
        engine.stop()
        engine = engine_on(port, tmp_path, "--model", "other/model", "--max-model-len", "4096").start()
        until(lambda: [model["id"] for model in httpx.get(gateway.url + "/v1/models").json()["data"]] == ["other/model"])
        assert httpx.get(gateway.url + "/v1/models").json()["data"][0]["max_model_len"] == 4096
        assert client.responses.create(model="other/model", input="hi").model == "other/model"
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model=MODEL, input="hi")
    finally:
        gateway.stop()
        engine.stop()


# -- a generation the engine breaks off ------------------------------------------------------------------


def _resumes(gateway: Gateway, outcome: str) -> float:
    return metric(httpx.get(gateway.url + "/metrics").text, "gateway_engine_resumes_total", 0, outcome=outcome)


@pytest.mark.parametrize("fault", ["crash", "crash-error"])
def test_a_generation_broken_off_goes_on_as_if_unbroken(gateway: Gateway, fault: str) -> None:
    """The engine closes the connection (or writes an error) at token N of its answer, N drawn anew each
    run: the stream the client reads is whole (the checker passes), and its text, items and usage are an
    unbroken run's."""
    seed = random.randrange(1 << 30)
    points = random.Random(seed).sample(range(1, 260), 5)
    unbroken = stream_raw(gateway, {"input": f"tell [long 120] [{fault} 999]"})[-1]["response"]
    assert unbroken["status"] == "completed"
    for point in points:
        resumed_before = _resumes(gateway, "resumed")
        events = stream_raw(gateway, {"input": f"tell [long 120] [{fault} {point:03d}]"})
        final = events[-1]["response"]
        assert final["status"] == "completed", (seed, point, final.get("error"))
        assert _resumes(gateway, "resumed") == resumed_before + 1, (seed, point)  # it was broken off, and went on
        assert final["output"][-1]["content"][0]["text"] == WORDS
        assert [item["type"] for item in final["output"]] == [item["type"] for item in unbroken["output"]]
        assert final["usage"]["output_tokens"] == unbroken["usage"]["output_tokens"], (seed, point)
        assert final["usage"]["input_tokens"] == unbroken["usage"]["input_tokens"], (seed, point)


def test_a_call_broken_off_in_its_arguments_goes_on(gateway: Gateway) -> None:
    events = stream_raw(gateway, {"input": f"[call functions.get_weather {LONG_ARGS}] [crash 40]", "tools": [WEATHER]})
    final = events[-1]["response"]
    call = next(item for item in final["output"] if item["type"] == "function_call")
    assert final["status"] == "completed" and call["status"] == "completed" and json.loads(call["arguments"]) == json.loads(LONG_ARGS)
    assert sum(1 for event in events if event["type"] == "response.output_item.added") == len(final["output"])


def test_chat_websocket_and_background_go_on_too(gateway: Gateway) -> None:
    client = gateway.client()
    body = {"model": MODEL, "stream": True, "messages": [{"role": "user", "content": "tell [long 120] [crash-error 070]"}]}
    chat = httpx.post(gateway.url + "/v1/chat/completions", json=body, timeout=30)
    chunks = parse_chat_sse(chat.content)
    check_chat_stream(chunks)
    assert "".join(chunk["choices"][0]["delta"].get("content") or "" for chunk in chunks if chunk["choices"]) == WORDS
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="tell [long 120] [crash 090]")
        events = until_end(connection)
        assert check_response_stream(events).output_text == WORDS
    background = client.responses.create(model=MODEL, input="tell [long 120] [slow 5] [crash 150]", background=True)
    until(lambda: client.responses.retrieve(background.id).status != "in_progress")
    done = client.responses.retrieve(background.id)
    assert done.status == "completed" and done.output_text == WORDS
    replayed = parse_sse(httpx.get(f"{gateway.url}/v1/responses/{background.id}?stream=true", timeout=30).content)
    assert check_response_stream(replayed).output_text == WORDS


def test_an_answer_written_on_without_the_grammar_is_checked(gateway: Gateway) -> None:
    """A continuation is generated without the call's grammar: a strict `text.format` answer is checked once
    whole, and one that breaks the format fails the response instead of completing it."""
    text = {"format": {"type": "json_schema", "name": "city", "schema": CITY, "strict": True}}
    fits = stream_raw(
        gateway, {"input": '[[raw <|channel|>final<|message|>{"city": "Paris", "population": 2100000}<|return|>]] [crash 8]', "text": text}
    )
    assert fits[-1]["type"] == "response.completed" and _resumes(gateway, "resumed") > 0
    assert json.loads(fits[-1]["response"]["output"][-1]["content"][0]["text"])["city"] == "Paris"
    breaks = stream_raw(
        gateway, {"input": '[[raw <|channel|>final<|message|>{"city": "Paris", "population": "many"} and more<|return|>]] [crash 8]', "text": text}
    )
    assert breaks[-1]["type"] == "response.failed", breaks[-1]
    assert "does not fit the response's text.format" in breaks[-1]["response"]["error"]["message"]


def test_an_engine_that_keeps_failing_fails_the_response_after_its_attempts(make_gateway: Any, emulator: Process) -> None:
    """A lasting fault: each continuation fails at once; after `resume_attempts` the response fails, in
    bounded time, with one terminal event. And with no attempts allowed, one break fails it."""
    gateway = make_gateway(emulator.url, engine={"resume_attempts": 2})
    asked = emulator_stats(emulator)["requests"]
    began = time.monotonic()
    events = stream_raw(gateway, {"input": "tell [long 120] [midstream-error 30]"})
    assert events[-1]["type"] == "response.failed" and "The engine failed" in events[-1]["response"]["error"]["message"]
    assert emulator_stats(emulator)["requests"] == asked + 3 and time.monotonic() - began < 10
    assert _resumes(gateway, "resumed") == 2 and _resumes(gateway, "given_up") == 1
    once = make_gateway(emulator.url, engine={"resume_attempts": 0})
    events = stream_raw(once, {"input": "tell [long 120] [crash 030]"})
    assert events[-1]["type"] == "response.failed"


def test_a_request_the_engine_refuses_is_not_tried_again(make_gateway: Any, emulator: Process) -> None:
    """The request's fault (here a model name the engine does not serve: its 404) is answered as it is."""
    gateway = make_gateway(emulator.url, engine={"model": "not-served"})
    asked = emulator_stats(emulator)["requests"]
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model="not-served", input="hi")
    assert err.value.code == "engine_rejected" and emulator_stats(emulator)["requests"] == asked + 1


# -- behind a router --------------------------------------------------------------------------------------


@pytest.fixture
def routed(tmp_path: Path) -> Iterator[SimpleNamespace]:
    """Two instances of one model behind HAProxy, which hashes on the gateway's session header."""
    instances = [engine_on(free_port(), tmp_path).start() for _ in range(2)]
    router = HAProxy([instance.port for instance in instances], tmp_path, balance="hdr(x-session-key)\n    hash-type consistent", check="/health")
    router.start()
    config = gateway_config(router.url, tmp_path, engine={"session_header": "x-session-key"})
    gateway = Gateway(config, tmp_path).start()
    yield SimpleNamespace(instances=instances, router=router, gateway=gateway)
    gateway.stop()
    router.stop()
    for instance in instances:
        instance.stop()


def _serving(instances: list[Process]) -> int:
    """Which instance is streaming now."""
    active = [emulator_stats(instance)["active"] for instance in instances]
    assert sorted(active) == [0, 1], active
    return active.index(1)


def test_an_engine_killed_mid_answer_is_invisible_behind_a_router(routed: SimpleNamespace) -> None:
    """SIGKILL the instance streaming an answer at its Nth delta (N drawn anew each run): the router sends
    the continuation to the other, and the client reads one unbroken stream with an unbroken run's text."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    instances = routed.instances
    for run in range(3):
        point = rng.randrange(2, 60)
        events: list[dict[str, Any]] = []
        body = {"model": MODEL, "input": "tell [long 120] [slow 15]", "stream": True}
        deltas = 0
        with httpx.stream("POST", routed.gateway.url + "/v1/responses", json=body, timeout=60) as answer:
            for event in sse_as_it_arrives(answer.iter_bytes()):
                events.append(event)
                deltas += event["type"] == "response.output_text.delta"
                if deltas == point and event["type"] == "response.output_text.delta":
                    killed = _serving(instances)
                    assert instances[killed].proc is not None
                    instances[killed].proc.kill()
        final = check_response_stream(events)
        assert final.status == "completed" and final.output_text == WORDS, (seed, run, point)
        instances[killed].start()  # back, for the next run
        until(lambda: httpx.get(routed.gateway.url + "/ready").status_code == 200)


def test_a_conversation_keeps_to_one_instance(routed: SimpleNamespace) -> None:
    client = routed.gateway.client()
    asked = [emulator_stats(instance)["requests"] for instance in routed.instances]
    first = client.responses.create(model=MODEL, input="one")
    second = client.responses.create(model=MODEL, input="two", previous_response_id=first.id)
    client.responses.create(model=MODEL, input="three", previous_response_id=second.id)
    now = [emulator_stats(instance)["requests"] for instance in routed.instances]
    assert sorted(n - a for n, a in zip(now, asked)) == [0, 3]  # all three on one instance
    serving = routed.instances[[n - a for n, a in zip(now, asked)].index(3)]
    keys = emulator_stats(serving)["session_keys"][-3:]
    assert len(set(keys)) == 1 and keys[0].startswith("sess")
    # A prompt_cache_key names the conversation instead: two chains that give the same one share it.
    for _ in range(2):
        client.responses.create(model=MODEL, input="cached", prompt_cache_key="project-7\r\nx-injected: 1")
    keys = [key for instance in routed.instances for key in emulator_stats(instance)["session_keys"][-2:] if key and key.startswith("pck-")]
    assert len(keys) == 2 and len(set(keys)) == 1


def test_a_background_agent_outlives_engine_restarts(tmp_path: Path) -> None:
    """Ten tool turns; the engine is SIGKILLed and started again twice while the agent runs (whatever it is
    doing then: a tool's call or a turn's stream), and once breaks a turn off: the run completes, every tool
    call made exactly once."""
    port = free_port()
    engine = engine_on(port, tmp_path).start()
    server = MCPProcess("streamable-http", name="shared")
    config = gateway_config(engine.url, tmp_path, mcp={"allowed_urls": [f"http://127.0.0.1:{server.port}/"]})
    config["tool_servers"] = [{"label": "shared", "transport": "streamable-http", "url": server.url}]
    gateway = Gateway(config, tmp_path).start()
    try:
        client = gateway.client()
        tools: Any = [{"type": "mcp", "server_label": "shared", "require_approval": "never"}]
        agent = "[slow 10] [crash@4 12] " + " ".join('[[call shared.slow_tally {"seconds": 0.4}]]' for _ in range(10))
        response = client.responses.create(model=MODEL, input=agent, tools=tools, background=True)
        for pause in (1.5, 2.0):
            time.sleep(pause)
            assert engine.proc is not None
            engine.proc.kill()
            engine.proc.wait()
            engine.start()
        until(lambda: client.responses.retrieve(response.id).status != "in_progress", timeout=90)
        done = client.responses.retrieve(response.id)
        assert done.status == "completed", done.error
        calls = [item for item in done.output if item.type == "mcp_call"]
        assert [call.output for call in calls] == [str(n) for n in range(1, 11)]  # each made once, in order
        assert client.responses.create(model=MODEL, input="[[call shared.tally_count {}]]", tools=tools).output_text == "The tool said: 10"
    finally:
        gateway.stop()
        engine.stop()
        server.stop()


def test_a_model_is_reached_without_its_organisation_unless_that_is_ambiguous(tmp_path: Path) -> None:
    """LiteLLM's `openai/` provider strips the prefix before it sends: `gpt-oss-20b` reaches
    `openai/gpt-oss-20b` with no alias configured. Two models that shorten alike are reached only by name."""
    small = start_emulator(tmp_path)
    twin = start_emulator(tmp_path, "--model", "other/gpt-oss-20b")
    big = start_emulator(tmp_path, "--model", BIG)
    engines = [{"url": small.url, "model": MODEL}, {"url": big.url, "model": BIG}]
    gateway = Gateway(engines_config(tmp_path, engines), tmp_path).start()
    both = [{"url": small.url, "model": MODEL}, {"url": twin.url, "model": "other/gpt-oss-20b"}]
    ambiguous = Gateway(engines_config(tmp_path / "twins", both), tmp_path).start()
    try:
        client = gateway.client()
        assert client.responses.create(model="gpt-oss-20b", input="hi").model == MODEL
        assert client.chat.completions.create(model="gpt-oss-120b", messages=[{"role": "user", "content": "hi"}]).model == BIG
        assert client.models.retrieve("gpt-oss-120b").id == BIG
        assert [model.id for model in client.models.list()] == [MODEL, BIG]  # listed by their own names
        with pytest.raises(openai.NotFoundError):
            client.responses.create(model="gpt-oss", input="hi")
        with pytest.raises(openai.NotFoundError) as err:
            ambiguous.client().responses.create(model="gpt-oss-20b", input="hi")
        assert "ambiguous" in err.value.message and "other/gpt-oss-20b" in err.value.message
        assert ambiguous.client().responses.create(model="other/gpt-oss-20b", input="hi").model == "other/gpt-oss-20b"
    finally:
        for process in (gateway, ambiguous, small, twin, big):
            process.stop()
