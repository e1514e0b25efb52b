"""The Responses API through the real openai SDK against the gateway and the engine emulator."""

from __future__ import annotations

import secrets
import time

import openai
import pytest

from .conftest import MODEL, emulator_stats, stream_raw, stream_sdk


def output_text(response) -> str:
    return "".join(part.text for item in response.output if item.type == "message" for part in item.content)


def test_create_non_streaming(gateway):
    client = gateway.client()
    response = client.responses.create(model=MODEL, input="hello there")
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message"]
    assert response.output[0].content[0].type == "reasoning_text"
    assert "hello there" in response.output[0].content[0].text
    assert response.output_text == "You said: hello there"
    assert response.output[1].phase == "final_answer"
    usage = response.usage
    assert usage.input_tokens > 50 and usage.output_tokens > 10
    assert 0 < usage.output_tokens_details.reasoning_tokens < usage.output_tokens
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.input_tokens_details.cached_tokens == 16  # the emulator reports 16 cached prompt tokens
    assert response.model == "openai/gpt-oss-20b"


def test_completed_at_and_reasoning_tokens(gateway):
    """`completed_at` is set when a response completes (and only then); `reasoning_tokens` are the tokens of
    the analysis channel's text, nothing else (not the final answer, not a preamble, not message headers)."""
    from gateway.engine.harmony import encoding

    before = int(time.time())
    response = gateway.client().responses.create(model=MODEL, input="count [preamble]")
    assert response.status == "completed"
    assert response.created_at <= response.completed_at <= time.time() + 1 and response.completed_at >= before
    analysis = response.output[0].content[0].text
    assert response.usage.output_tokens_details.reasoning_tokens == len(encoding().encode(analysis, allowed_special=set()))
    failed = stream_raw(gateway, {"input": "fail [drop]"})[-1]["response"]
    assert failed["status"] == "failed" and failed["completed_at"] is None
    # A python call is written on the analysis channel too; its code is not reasoning.
    coded = gateway.client().responses.create(model=MODEL, input="[[python print('a fairly long line of code here')]] [misbehave]")
    reasoning = [item.content[0].text for item in coded.output if item.type == "reasoning"]
    assert len(reasoning) == 2
    expected = sum(len(encoding().encode(text, allowed_special=set())) for text in reasoning)
    assert coded.usage.output_tokens_details.reasoning_tokens == expected


def test_create_streaming_events(gateway):
    events = stream_sdk(gateway.client(), input="stream me")
    types = [e["type"] for e in events]
    assert types[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert types[-1] == "response.completed"
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "You said: stream me"
    assert sum(1 for t in types if t == "response.output_text.delta") > 1  # streamed, not one blob


def test_stream_accumulates_in_sdk(gateway):
    with gateway.client().responses.stream(model=MODEL, input="accumulate [preamble]") as stream:
        for _ in stream:
            pass
        final = stream.get_final_response()
    assert [item.type for item in final.output] == ["reasoning", "message", "message"]
    assert final.output[1].phase == "commentary"
    assert final.output[1].content[0].text == "Let me think about that."
    assert final.output_text.endswith("You said: accumulate [preamble]")


def test_raw_sse_frames(gateway):
    events = stream_raw(gateway, {"input": "raw frames [unicode]"})
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Héllo 你好世界 🎉🎉 — ok"


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085", "\x1c"])
def test_unicode_line_separators_in_model_output(gateway, separator):
    """vLLM sends raw UTF-8; only CR and LF end an SSE line, whatever else Unicode calls a line break."""
    said = f"one{separator}two"
    events = stream_raw(gateway, {"input": said})
    assert events[-1]["type"] == "response.completed"
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == f"You said: {said}"
    assert gateway.client().responses.create(model=MODEL, input=said).output_text == f"You said: {said}"


def test_preamble_without_analysis(gateway):
    response = gateway.client().responses.create(model=MODEL, input="x [noanalysis] [preamble]")
    assert [(i.type, i.phase) for i in response.output] == [("message", "commentary"), ("message", "final_answer")]


def test_empty_final_message_still_gets_all_events(gateway):
    events = stream_raw(gateway, {"input": "[empty-final] [noanalysis]"})
    types = [e["type"] for e in events]
    assert "response.output_text.done" in types and "response.content_part.done" in types
    assert events[-1]["response"]["output"][0]["content"][0]["text"] == ""


def test_instructions_and_reasoning_effort_reach_the_prompt(gateway):
    response = gateway.client().responses.create(model=MODEL, input="[instructions]", instructions="Answer in French.", reasoning={"effort": "high"})
    assert "Answer in French." in response.output_text
    assert "effort=high" in response.output_text
    assert response.reasoning.effort == "high"


def test_sampling_parameters_reach_the_engine(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input="x", temperature=0.3, top_p=0.9, max_output_tokens=500)
    sent = emulator_stats(emulator)["last_request"]
    assert sent["temperature"] == 0.3 and sent["top_p"] == 0.9
    assert sent["max_tokens"] == 500
    assert sent["stop_token_ids"] == [200002, 200012]
    assert sent["return_token_ids"] is True and sent["stream"] is True


def test_default_max_tokens_is_explicit(gateway, emulator):
    gateway.client().responses.create(model=MODEL, input="y")
    sent = emulator_stats(emulator)["last_request"]
    # vLLM's default would be 16: the gateway always sends the room left in the context.
    assert sent["max_tokens"] > 100_000


def test_max_output_tokens_incomplete(gateway):
    client = gateway.client()
    response = client.responses.create(model=MODEL, input="[long 200]", max_output_tokens=40)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 40
    events = stream_sdk(client, input="[long 200]", max_output_tokens=40)
    final = events[-1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["output"][-1]["status"] == "incomplete"


def test_input_as_items_with_earlier_output(gateway):
    client = gateway.client()
    response = client.responses.create(
        model=MODEL,
        input=[
            {"role": "developer", "content": "Be terse."},
            {"role": "user", "content": [{"type": "input_text", "text": "first"}]},
            {
                "type": "reasoning",
                "id": "rs_1",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": "old thoughts"}],
            },
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "answer one"}]},
            {"role": "user", "content": "second [recall]"},
        ],
    )
    text = response.output_text
    assert "users=['first', 'second [recall]']" in text
    assert "finals=['answer one']" in text
    # The analysis of a finished turn is dropped from the prompt, as Harmony prescribes.
    assert "analysis_in_prompt=0" in text


def test_previous_response_id_continues(gateway):
    client = gateway.client()
    first = client.responses.create(model=MODEL, input="my name is Ada", metadata={"k": "v"})
    assert first.metadata == {"k": "v"}
    second = client.responses.create(model=MODEL, input="who am I? [recall]", previous_response_id=first.id)
    assert "users=['my name is Ada', 'who am I? [recall]']" in second.output_text
    assert "finals=['You said: my name is Ada']" in second.output_text
    assert second.previous_response_id == first.id


def _prompt_tokens_built(gateway) -> dict[str, float]:
    import httpx

    counts = {"rendered": 0.0, "reused": 0.0}
    for line in httpx.get(gateway.url + "/metrics").text.splitlines():
        if line.startswith("gateway_prompt_tokens_built_total{"):
            source = line.split('source="')[1].split('"')[0]
            counts[source] = float(line.rsplit(" ", 1)[1])
    return counts


def test_a_continuation_renders_only_its_new_messages(gateway):
    """A stored response keeps its messages' prompt tokens: continuing it renders the preamble and what is
    new, and reuses the rest, along the whole chain (each response stores only its own messages)."""
    client = gateway.client()
    previous = client.responses.create(model=MODEL, input="tell me a story [long 400]")
    for turn in range(3):
        before = _prompt_tokens_built(gateway)
        response = client.responses.create(model=MODEL, input=f"and then? {turn}", previous_response_id=previous.id)
        after = _prompt_tokens_built(gateway)
        rendered, reused = after["rendered"] - before["rendered"], after["reused"] - before["reused"]
        # Every prompt token was either rendered or reused; the answer of the turn is rendered too, once
        # (at the end of the response, to be stored).
        answer_and_prompt = response.usage.input_tokens + response.usage.output_tokens
        assert response.usage.input_tokens - 2 <= rendered + reused <= answer_and_prompt
        assert reused > 400 and rendered < 0.5 * reused, (rendered, reused)
        previous = response


def test_retrieve_delete_and_input_items(gateway):
    client = gateway.client()
    created = client.responses.create(model=MODEL, input=[{"role": "user", "content": "one"}, {"role": "user", "content": "two"}])
    fetched = client.responses.retrieve(created.id)
    assert fetched.id == created.id and fetched.output_text == created.output_text
    items = client.responses.input_items.list(created.id, order="asc")
    assert [i.content[0].text for i in items.data] == ["one", "two"]
    desc = client.responses.input_items.list(created.id)
    assert [i.content[0].text for i in desc.data] == ["two", "one"]
    page = client.responses.input_items.list(created.id, order="asc", limit=1)
    assert page.has_more and page.data[0].content[0].text == "one"
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.retrieve(created.id)
    assert err.value.body["message"].startswith("No response found")
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(created.id)


def test_store_false_is_not_retrievable(gateway):
    client = gateway.client()
    response = client.responses.create(model=MODEL, input="forget me", store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError) as err:
        client.responses.create(model=MODEL, input="x", previous_response_id=response.id)
    assert err.value.body["param"] == "previous_response_id"


def test_stored_streamed_response_matches_the_stream(gateway):
    client = gateway.client()
    events = stream_sdk(client, input="keep this")
    final = events[-1]["response"]
    assert client.responses.retrieve(final["id"]).to_dict()["output"] == final["output"]


def test_models_lists_the_engine_model(gateway):
    models = gateway.client().models.list()
    assert [m.id for m in models.data] == ["openai/gpt-oss-20b"]
    # The engine's context length, for clients that size their prompts by it.
    assert models.data[0].to_dict()["max_model_len"] == 131072


def test_previous_response_survives_restart(emulator, make_gateway):
    first_gateway = make_gateway(emulator.url)
    first = first_gateway.client().responses.create(model=MODEL, input="remember the number 42")
    first_gateway.stop()
    first_gateway.start()
    second = first_gateway.client().responses.create(model=MODEL, input="what number? [recall]", previous_response_id=first.id)
    assert "remember the number 42" in second.output_text


def test_engine_session_key_follows_the_conversation(emulator, make_gateway, gateway):
    """`engine.session_header` names each conversation to a router in front of several engines: the same
    key on every engine call of a chain or a conversation, another key for another one."""
    routed = make_gateway(emulator.url, engine={"session_header": "x-session-id"})
    client = routed.client()
    run = secrets.token_hex(4)  # this test's calls, told from other tests' leftover work on the same engine

    def key(said: str) -> str | None:
        return emulator_stats(emulator)["headers_by_input"][f"{said} {run}"].get("x-session-id")

    first = client.responses.create(model=MODEL, input=f"one {run}")
    chain = key("one")
    assert chain is not None
    client.responses.create(model=MODEL, input=f"two {run}", previous_response_id=first.id)
    assert key("two") == chain
    client.responses.create(model=MODEL, input=f"elsewhere {run}")
    assert key("elsewhere") != chain
    conversation = client.conversations.create()
    client.responses.create(model=MODEL, input=f"a {run}", conversation=conversation.id)
    talk = key("a")
    client.responses.create(model=MODEL, input=f"b {run}", conversation=conversation.id)
    assert key("b") == talk != chain
    gateway.client().responses.create(model=MODEL, input=f"unrouted {run}")
    assert key("unrouted") is None


def test_stored_responses_expire(emulator, make_gateway, tmp_path):
    """`storage.ttl_s`: responses older than it are removed, with a background response's events."""
    expiring = make_gateway(emulator.url, storage={"ttl_s": 1.5, "sweep_interval_s": 0.2})
    client = expiring.client()
    plain = client.responses.create(model=MODEL, input="short-lived")
    background = client.responses.create(model=MODEL, input="also short-lived", background=True)
    for _ in range(50):
        if client.responses.retrieve(background.id).status == "completed":
            break
        time.sleep(0.05)
    assert len(list(client.responses.retrieve(background.id, stream=True))) > 3  # its events are kept
    time.sleep(3)
    for response_id in (plain.id, background.id):
        with pytest.raises(openai.NotFoundError):
            client.responses.retrieve(response_id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(background.id, stream=True)
    import sqlite3

    with sqlite3.connect(tmp_path / "responses.sqlite3") as db:  # nothing of them is left on disk
        assert db.execute("SELECT count(*) FROM response_events WHERE response_id = ?", (background.id,)).fetchone() == (0,)
