"""Security 5: one response never takes the gateway down, and what reaches the tokenizer, the engine's
stream and the database is bounded first. Each break the campaign found has a test here: the whitespace
answer saved while another tenant is served, faults injected into the app's tasks and a run's ending,
the renderer's worker dying, hostile engine output (ids out of the vocabulary, non-integers, garbage
model lists, comment-line keep-alives, more tokens than asked for), the summary cap, the filter and
pattern budgets, and the address guard's embedded IPv4 forms."""

from __future__ import annotations

import ipaddress
import os
import random
import threading
import time
from typing import Any

import anyio
import httpx
import pytest
from openai_harmony import Conversation, Message, Role

from connectors.browser.guard import AddressPolicy
from gateway.engine.harmony import CUT_EVERY, MAX_RUN_CHARS, encode_text, encoding, render_message, render_messages
from gateway.engine.renderer import PromptRenderer
from runtime.fair import FairLimiter
from runtime.supervision import Supervisor
from runtime.text_runs import long_runs

from .conftest import MODEL, Gateway, Process, emulator_stats, start_emulator, stream_raw
from .stream_checker import check_response_stream
from .test_postgres import postgres  # noqa: F401  (the session's PostgreSQL server)

SPACES_128 = 72056  # one token of 128 spaces (checked below)
KEYS = [{"key": "sk-a", "tenant": "a"}, {"key": "sk-b", "tenant": "b"}]


def _post(gateway: Gateway, key: str, body: dict[str, Any], timeout: float = 120) -> httpx.Response:
    return httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, **body}, headers={"authorization": f"Bearer {key}"}, timeout=timeout)


# -- C1: the whitespace answer ---------------------------------------------------------------------------


def test_a_model_looping_on_whitespace_fails_nobody_and_is_stored(emulator: Process, make_gateway: Any) -> None:
    """8,000 tokens of 128 spaces (a million characters) as the final answer: tokenised for storing while
    another tenant is served, stored, continued; the gateway serves on and stays ready."""
    assert encoding().decode([SPACES_128]) == " " * 128
    gateway = make_gateway(emulator.url, auth={"api_keys": KEYS})
    results: dict[str, Any] = {}

    def hostile() -> None:
        response = _post(gateway, "sk-a", {"input": f"loop [repeat {SPACES_128} 8000]", "max_output_tokens": 20000}, timeout=180)
        results["hostile"] = response

    worker = threading.Thread(target=hostile)
    worker.start()
    served = []
    while worker.is_alive() and len(served) < 20:  # the other tenant, while the answer streams and is stored
        served.append(_post(gateway, "sk-b", {"input": "hello"}).status_code)
    worker.join(240)
    assert served and set(served) == {200}
    hostile_response = results["hostile"]
    assert hostile_response.status_code == 200, hostile_response.text[:500]
    body = hostile_response.json()
    assert body["status"] == "completed"
    answer = body["output"][-1]["content"][0]["text"]
    assert answer.strip() == "" and len(answer) >= 8000 * 128
    # Stored with its tokens: a follow-up continues from it.
    follow = _post(gateway, "sk-a", {"input": "and now?", "previous_response_id": body["id"]})
    assert follow.status_code == 200 and follow.json()["status"] == "completed"
    assert _post(gateway, "sk-b", {"input": "still there?"}).status_code == 200
    ready = httpx.get(gateway.url + "/ready").json()
    assert ready["status"] == "ready" and "stopped" not in ready["tasks"].values()


def test_a_request_with_a_long_run_of_whitespace_is_refused(gateway: Gateway) -> None:
    response = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "a" + " " * 200_000 + "b"}, timeout=30)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "input_too_large"
    tabs = httpx.post(gateway.url + "/v1/responses/input_tokens", json={"model": MODEL, "input": "x" + "\t\n" * 5000}, timeout=30)
    assert tabs.status_code == 400


# -- the bounded tokenizer path equals openai-harmony's ------------------------------------------------------

RUNS = [" ", "\t", "\n", "\r\n", "a", "Z", "\u3000", "é", "-", "."]


def _random_text(rng: random.Random) -> str:
    """Words, punctuation and runs of one repeated character (some longer than the cut threshold, each
    standing where the pre-tokenizer starts a piece with it), in any order."""
    parts = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.random()
        if kind < 0.5:
            parts.append(
                " ".join(rng.choice(["word", "Harmony", "x", "42", "é", "don't", "😀", "foo_bar", "a.b"]) for _ in range(rng.randint(1, 20)))
            )
        else:
            run = rng.choice(RUNS)
            length = rng.choice(
                [rng.randint(1, 300), rng.randint(MAX_RUN_CHARS - 50, MAX_RUN_CHARS + 50), rng.randint(MAX_RUN_CHARS, 4 * MAX_RUN_CHARS)]
            )
            # A letter run stands after a newline (the only place the pre-tokenizer starts a piece with it);
            # whitespace after a letter, punctuation after a letter.
            before = "\n" if run.isalpha() else "x"
            parts.append(before + run * (length // len(run)))
    return "".join(parts)


def test_bounded_encoding_equals_openai_harmony_on_random_text() -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    cut = 0
    for _ in range(60):
        text = _random_text(rng)
        cut += any(end - start > MAX_RUN_CHARS for start, end in long_runs(text, MAX_RUN_CHARS))
        whole = encoding().encode(text, allowed_special=(), disallowed_special=())
        assert encode_text(text) == whole, f"seed {seed}"
        message = Message.from_role_and_content(Role.USER, text)
        assert render_message(message) == encoding().render(message), f"seed {seed}"
    assert cut  # the cut path was taken, not only the whole one


def test_long_runs_render_whole_conversations_as_openai_harmony_does() -> None:
    dialog = [
        Message.from_role_and_content(Role.SYSTEM, "You are helpful."),
        Message.from_role_and_content(Role.USER, "x" + " " * (3 * MAX_RUN_CHARS + 17) + "y"),
        Message.from_role_and_content(Role.ASSISTANT, "thinking" + "\n" * 9000).with_channel("analysis"),
        Message.from_role_and_content(Role.ASSISTANT, "done" + "\t" * 5000).with_channel("final"),
        Message.from_role_and_content(Role.USER, "next"),
    ]
    expected = encoding().render_conversation_for_completion(Conversation.from_messages(dialog), Role.ASSISTANT)
    assert render_messages(dialog) == expected


def test_no_run_is_tokenised_whole_past_the_bound() -> None:
    """A million spaces, a million letters, a million dots: linear, each piece short."""
    for text in [" " * 1_000_000, "\n" + "a" * 1_000_000, "x" + "." * 1_000_000, "ab" * 500_000]:
        started = time.monotonic()
        tokens = encode_text(text)
        assert tokens and time.monotonic() - started < 20
    assert CUT_EVERY % 128 == 0


# -- the renderer's processes ----------------------------------------------------------------------------


def _die(payload: Any) -> Any:  # in the renderer's worker: a hard crash
    os._exit(3)


def _panic(payload: Any) -> Any:  # what a Rust panic looks like from Python: a BaseException
    raise KeyboardInterrupt("panicked")


def test_a_renderer_worker_that_dies_or_panics_fails_its_render_alone() -> None:
    async def main() -> None:
        renderer = PromptRenderer(processes=2)
        big = [Message.from_role_and_content(Role.USER, "word " * 5000)]
        try:
            with pytest.raises(Exception) as died:
                await renderer._in_process(_die, big, "t")
            assert getattr(died.value, "status", None) == 400
            with pytest.raises(Exception) as panicked:
                await renderer._in_process(_panic, big, "t")
            assert getattr(panicked.value, "status", None) == 400
            assert len(await renderer.each(big, "t")) == 1  # a new process serves the next one
        finally:
            renderer.close()

    anyio.run(main)


def test_tenants_take_turns_at_the_renderer() -> None:
    """One tenant queues twelve renders, then another one: the other's is served right after the one in
    progress (round robin), not after all twelve."""

    async def main() -> list[str]:
        limiter = FairLimiter(1)
        order: list[str] = []
        release = anyio.Event()

        async def work(tenant: str) -> None:
            async with limiter.slot(tenant):
                order.append(tenant)
                await release.wait()

        async with anyio.create_task_group() as tasks:
            for _ in range(12):
                tasks.start_soon(work, "a")
            while limiter.waiting < 11:
                await anyio.sleep(0)
            tasks.start_soon(work, "b")
            while limiter.waiting < 12:
                await anyio.sleep(0)
            release.set()
        return order

    order = anyio.run(main)
    assert order[:3] == ["a", "b", "a"], order


def test_a_waiter_that_goes_away_leaves_its_queue() -> None:
    async def main() -> int:
        limiter = FairLimiter(1)
        held = anyio.Event()
        done = anyio.Event()

        async def holder() -> None:
            async with limiter.slot("a"):
                held.set()
                await done.wait()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(holder)
            await held.wait()
            with anyio.move_on_after(0.05):
                async with limiter.slot("b"):
                    raise AssertionError("granted while held")
            assert limiter.waiting == 0
            done.set()
        async with limiter.slot("b"):
            return limiter.busy

    assert anyio.run(main) == 1


# -- supervision: each fault stays where it happened -------------------------------------------------------


def test_a_loop_that_fails_is_restarted_then_left_stopped_and_units_fail_alone() -> None:
    async def main() -> tuple[dict[str, str], list[str], int]:
        faults: list[str] = []
        starts = {"flaky": 0, "broken": 0}
        healthy = anyio.Event()

        async def flaky() -> None:
            starts["flaky"] += 1
            if starts["flaky"] < 3:
                raise RuntimeError("injected")
            healthy.set()
            await anyio.sleep_forever()

        async def broken() -> None:
            starts["broken"] += 1
            raise RuntimeError("always")

        async def unit() -> None:
            raise RuntimeError("one response's fault")

        async with anyio.create_task_group() as group:
            supervisor = Supervisor(group, faults.append, max_faults=3, window_s=60, first_backoff_s=0.01, max_backoff_s=0.02)
            supervisor.keep("flaky", flaky)
            supervisor.keep("broken", broken)
            for _ in range(5):
                supervisor.start_soon(unit, name="response resp_1")
            await healthy.wait()
            with anyio.fail_after(10):
                while supervisor.stopped() != ["broken"]:
                    await anyio.sleep(0.01)
            health = supervisor.health()
            group.cancel_scope.cancel()  # cancellation still ends every child
        return health, faults, starts["broken"]

    health, faults, broken_starts = anyio.run(main)
    assert health == {"flaky": "running", "broken": "stopped"}
    assert faults.count("flaky") == 2 and faults.count("broken") == 3 and faults.count("response") == 5
    assert broken_starts == 3


def test_faults_injected_into_the_app_stay_where_they_happened(emulator: Process, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the gateway itself: a loop of the app's that keeps failing (the files sweep) is reported by
    /ready and the rest serves; a fault in one response's ending fails that response alone, with one
    terminal event, and the next is served."""
    from starlette.testclient import TestClient

    from gateway.app import create_app
    from gateway.config import GatewayConfig
    from gateway.files.service import FileService
    from gateway.responses.loop import ending, run
    from runtime import supervision

    async def sweep_fails(self: Any) -> None:
        raise RuntimeError("injected: the sweep")

    monkeypatch.setattr(FileService, "sweep", sweep_fails)
    monkeypatch.setattr(supervision.Supervisor.__init__, "__defaults__", (None, 2, 60.0, 0.01, 0.02))
    original_save = ending.RunEnding.save

    async def save_fails(self: Any, *args: Any, **kwargs: Any) -> bool:
        if "[fail-save]" in str(self._state.plan.input_items):
            raise RuntimeError("injected: storing")
        return await original_save(self, *args, **kwargs)

    monkeypatch.setattr(ending.RunEnding, "save", save_fails)
    original_end, original_execute = ending.RunEnding.end, run.ResponseRun.execute

    async def end_fails(self: Any, *args: Any, **kwargs: Any) -> None:
        if "[fail-end]" in str(self._state.plan.input_items):
            raise RuntimeError("injected: ending")
        await original_end(self, *args, **kwargs)

    async def execute_fails_after(self: Any) -> None:  # past every handler of the run's own: the supervisor's
        await original_execute(self)
        if "[fail-task]" in str(self.state.plan.input_items):
            raise RuntimeError("injected: the run's task")

    monkeypatch.setattr(ending.RunEnding, "end", end_fails)
    monkeypatch.setattr(run.ResponseRun, "execute", execute_fails_after)
    config = GatewayConfig.model_validate(
        {"engine": {"url": emulator.url}, "storage": {"path": str(tmp_path / "db.sqlite3")}, "files": {"directory": str(tmp_path / "files")}}
    )
    with TestClient(create_app(config)) as client:
        deadline = time.monotonic() + 10
        while client.get("/ready").json()["tasks"].get("files_sweep") != "stopped":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        ready = client.get("/ready")
        assert ready.status_code == 503 and ready.json()["tasks"]["replicas"] == "running"
        for fault in ["[fail-save]", "[fail-end]"]:
            with client.stream("POST", "/v1/responses", json={"model": MODEL, "input": f"hi {fault}", "stream": True}) as response:
                text = "".join(response.iter_text())
            terminal = [line for line in text.splitlines() if line in ("event: response.completed", "event: response.failed")]
            assert terminal == ["event: response.failed"], fault
            after = client.post("/v1/responses", json={"model": MODEL, "input": "and the next one"})
            assert after.status_code == 200 and after.json()["status"] == "completed"
        task_fault = client.post("/v1/responses", json={"model": MODEL, "input": "hi [fail-task]"})
        assert task_fault.status_code == 200  # its answer was whole before its task raised
        for _ in range(3):  # the app's task group lives on
            assert client.post("/v1/responses", json={"model": MODEL, "input": "again"}).status_code == 200
        chat = client.post("/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 200


# -- hostile engine output --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["oov", "text"])
def test_engine_garbage_is_a_502_engine_error(gateway: Gateway, kind: str) -> None:
    events = stream_raw(gateway, {"model": MODEL, "input": f"[long 40] [chunk 1] [garbage {kind}]"})
    assert events[-1]["type"] == "response.failed"
    assert "cannot read" in events[-1]["response"]["error"]["message"]
    response = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": f"[long 40] [chunk 1] [garbage {kind}]"}, timeout=30)
    assert response.status_code == 502 and response.json()["error"]["code"] == "engine_error"
    assert httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "fine"}, timeout=30).status_code == 200


def test_an_engine_listing_a_garbage_length_is_a_502(tmp_path: Any, make_gateway: Any) -> None:
    engine = start_emulator(tmp_path, "--listed-max-model-len", "abc")
    try:
        gateway = make_gateway(engine.url)
        response = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": "hi"}, timeout=30)
        assert response.status_code in (502, 503) and response.json()["error"]["code"] in ("engine_error", "engine_unavailable")
        assert response.status_code != 500
    finally:
        engine.stop()


def test_comment_lines_do_not_keep_an_engine_call_alive(emulator: Process, make_gateway: Any) -> None:
    gateway = make_gateway(emulator.url, engine={"read_timeout_s": 1})
    started = time.monotonic()
    events = stream_raw(gateway, {"model": MODEL, "input": "[long 40] [chunk 1] [comments]"})
    assert time.monotonic() - started < 15
    assert events[-1]["type"] == "response.failed"
    assert "did not answer in time" in events[-1]["response"]["error"]["message"]


def test_a_call_past_its_deadline_ends(emulator: Process, make_gateway: Any) -> None:
    gateway = make_gateway(emulator.url, engine={"call_timeout_s": 1})
    events = stream_raw(gateway, {"model": MODEL, "input": "[long 400] [chunk 1] [slow 20]"})
    assert events[-1]["type"] == "response.failed"


def test_an_engine_writing_past_max_tokens_is_cut_off(gateway: Gateway, emulator: Process) -> None:
    before = emulator_stats(emulator)["aborted"]
    events = stream_raw(gateway, {"model": MODEL, "input": "[long 3000] [overflow] [noanalysis] [slow 5]", "max_output_tokens": 40})
    final = check_response_stream(events)
    assert final.status == "incomplete" and final.incomplete_details.reason == "max_output_tokens"
    assert final.usage.output_tokens <= 40
    deadline = time.monotonic() + 10
    while emulator_stats(emulator)["aborted"] == before:  # the engine request was aborted, not read to its end
        assert time.monotonic() < deadline
        time.sleep(0.02)


# -- budgets ----------------------------------------------------------------------------------------------


def test_reasoning_summaries_are_capped_per_engine_call(gateway: Gateway, emulator: Process) -> None:
    analyses = "".join(f"<|channel|>analysis<|message|>step {i}<|end|><|start|>assistant" for i in range(12))
    raw = f"[[raw {analyses}<|channel|>final<|message|>done<|return|>]]"
    before = emulator_stats(emulator)["summary_calls"]
    response = httpx.post(gateway.url + "/v1/responses", json={"model": MODEL, "input": raw, "reasoning": {"summary": "auto"}}, timeout=60).json()
    assert response["status"] == "completed"
    reasoning = [item for item in response["output"] if item["type"] == "reasoning"]
    assert len(reasoning) == 12
    assert emulator_stats(emulator)["summary_calls"] - before == 4
    assert sum(1 for item in reasoning if item["summary"]) == 4


def test_a_filter_past_its_value_budget_is_a_400_naming_it() -> None:
    from gateway.vector_stores.filters import MAX_VALUES, CompoundFilter, FilterError, filter_sql

    lists = [{"type": "in", "key": f"k{i}", "value": [f"v{j}" for j in range(100)]} for i in range(64)]
    with pytest.raises(FilterError, match=str(MAX_VALUES)):
        filter_sql(CompoundFilter.model_validate({"type": "or", "filters": lists}))
    sql, params = filter_sql(CompoundFilter.model_validate({"type": "or", "filters": lists[:2]}))
    assert len(params) == 400


def test_a_schema_past_its_pattern_budget_is_refused_before_compiling(gateway: Gateway) -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "pattern": f"^[a-z]{{0,{900 + i}}}$"} for i in range(2000)}}
    started = time.monotonic()
    response = httpx.post(
        gateway.url + "/v1/responses",
        json={"model": MODEL, "input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": schema, "strict": True}}},
        timeout=60,
    )
    assert response.status_code == 400 and "patterns" in response.json()["error"]["message"]
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "address",
    [
        "::127.0.0.1",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::a00:1",
        "2002:7f00:1::",
        "2002:a9fe:a9fe::1",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",
        "::ffff:10.0.0.1",
        "240.0.0.1",
        "::",
    ],
)
def test_the_address_guard_refuses_embedded_private_ipv4(address: str) -> None:
    assert not AddressPolicy().permits(ipaddress.ip_address(address))


def test_the_address_guard_still_allows_public_forms() -> None:
    for address in ["8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"]:
        assert AddressPolicy().permits(ipaddress.ip_address(address))


def test_an_item_id_another_tenant_stored_first_is_still_ones_own(emulator: Process, make_gateway: Any) -> None:
    gateway = make_gateway(emulator.url, auth={"api_keys": KEYS})
    item = {"type": "message", "role": "user", "id": "msg_squatted", "content": [{"type": "input_text", "text": "%s's words"}]}
    for key, name in [("sk-a", "alpha"), ("sk-b", "beta")]:
        mine = {**item, "content": [{"type": "input_text", "text": f"{name}'s words"}]}
        assert _post(gateway, key, {"input": [mine]}).status_code == 200
    for key, name in [("sk-a", "alpha"), ("sk-b", "beta")]:
        response = _post(gateway, key, {"input": [{"type": "item_reference", "id": "msg_squatted"}]})
        assert response.status_code == 200, response.text
        assert f"{name}'s words" in response.json()["output"][-1]["content"][0]["text"]


def _hold(seconds: float) -> str:  # in an isolation worker
    time.sleep(seconds)
    return "done"


def test_background_work_never_takes_every_isolation_worker() -> None:
    """Ingestion holding its whole share leaves a worker to a request's PDF or schema check, whose own time
    limit starts only once it has a worker; a tenant's work waits behind at most one of another's."""
    from runtime import isolation

    async def main() -> float:
        isolation.configure(workers=2, memory_bytes=1024**3)
        await isolation.run_isolated(30, _hold, 0.0)  # workers started and warm
        async with anyio.create_task_group() as tasks:
            for _ in range(4):  # a backlog of ingestion, every piece slow
                tasks.start_soon(lambda: isolation.run_isolated(30, _hold, 8.0, tenant="a", background=True))
            share = isolation._limiters()[2]
            while isolation._limiters()[0].busy < 1 or share.statistics().borrowed_tokens + share.statistics().tasks_waiting < 4:
                await anyio.sleep(0.01)  # the backlog holds its share, the rest of it waiting
            started = time.monotonic()
            assert await isolation.run_isolated(1, _hold, 0.1, tenant="b") == "done"  # its 1 s starts once it has a worker
            waited = time.monotonic() - started
            tasks.cancel_scope.cancel()
        return waited

    # Behind the backlog it would wait most of a piece (8 s); with a worker left to it, its own 0.1 s and the
    # round trip, however busy the machine (cancelled, the backlog's workers are killed).
    assert anyio.run(main) < 6.0


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_a_statement_past_its_time_limit_is_stopped_and_the_connection_serves_on(dialect: str, postgres: Any, tmp_path: Any) -> None:
    """What bounds a vector-store search: its transaction's time limit stops a statement that runs on (a
    filter of many values over many chunks), and the next statement is served."""
    from gateway.storage import TooSlow, open_database

    url = f"sqlite:///{tmp_path}/limit.sqlite3" if dialect == "sqlite" else postgres.new_database()
    endless = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000000) SELECT COUNT(*) FROM n"
        if dialect == "sqlite"
        else "SELECT pg_sleep(30)"
    )

    async def check() -> float:
        db = open_database(url, retry_s=1, pool_size=2)
        await db.start()
        try:

            async def limited(tx: Any) -> Any:
                await tx.limit_time(0.3)
                return await tx.fetch(endless)

            started = time.monotonic()
            with pytest.raises(TooSlow):
                await db.transaction(limited)
            took = time.monotonic() - started
            assert (await db.fetch("SELECT 1"))[0][0] == 1
            return took
        finally:
            await db.close()

    assert anyio.run(check) < 5


def test_isolated_work_that_panics_fails_alone() -> None:
    """A Rust panic in a worker (a BaseException that does not pickle) comes back as the work's failure;
    the worker pool serves the next call."""
    from runtime import isolation

    async def main() -> str:
        with pytest.raises(isolation.TooCostly, match="it failed"):
            await isolation.run_isolated(5, _panic, None)
        return await isolation.run_isolated(5, _hold, 0.0)

    assert anyio.run(main) == "done"


def test_the_renderer_serves_tenants_in_turn() -> None:
    """One renderer process: tenant a's six large renders queued first, then tenant b's one. B's is done
    after at most two of a's (a's first holds the process, the turn then goes to b), not after all six as
    the process pool's own first-come order would have it."""

    async def main() -> list[str]:
        renderer = PromptRenderer(processes=1)
        done: list[str] = []
        big = [Message.from_role_and_content(Role.USER, "word " * 40_000)]

        async def render(tenant: str) -> None:
            await renderer.each(big, tenant)
            done.append(tenant)

        try:
            await renderer.each([Message.from_role_and_content(Role.USER, "warm " * 5000)], "w")
            async with anyio.create_task_group() as tasks:
                for _ in range(6):
                    tasks.start_soon(render, "a")
                await anyio.sleep(0)
                tasks.start_soon(render, "b")
        finally:
            renderer.close()
        return done

    done = anyio.run(main)
    assert done.index("b") <= 2, done
