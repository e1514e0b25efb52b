"""Compaction: `POST /v1/responses/compact` through the SDK's `responses.compact()`, its sealed item sent
back as input, and `context_management` compacting a long agent loop that would not fit the context."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from .conftest import MODEL, Process, emulator_stats, start_emulator, stream_sdk
from .test_background import poll
from .test_websocket import until_end

HEAD = "Summary of the conversation so far (earlier turns were compacted):\n"
SEARCH = {"type": "tool_search"}
HIDDEN = {
    "type": "function",
    "name": "hidden",
    "description": "Never found.",
    "parameters": {"type": "object", "properties": {}},
    "defer_loading": True,
}


def test_compact_returns_the_users_messages_and_a_sealed_summary(gateway: Any, emulator: Process) -> None:
    client = gateway.client()
    first = client.responses.create(model=MODEL, input="plan the trip")
    second = client.responses.create(model=MODEL, input="book the train", previous_response_id=first.id)
    compacted = client.responses.compact(model=MODEL, previous_response_id=second.id)
    assert compacted.object == "response.compaction"
    kinds = [(item.type, getattr(item, "role", None)) for item in compacted.output]
    assert kinds == [("message", "user"), ("message", "user"), ("compaction", None)]
    assert [item.content[0].text for item in compacted.output[:2]] == ["plan the trip", "book the train"]  # type: ignore[union-attr]
    assert compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0
    sealed = compacted.output[-1].encrypted_content  # type: ignore[union-attr]
    assert "done" not in sealed  # sealed, not readable
    # Sent back, the summary is what the model reads in place of the turns it replaced.
    items = [item.to_dict() for item in compacted.output]
    again = client.responses.create(model=MODEL, input=[*items, {"role": "user", "content": "and now? [recall]"}], store=False)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert HEAD + "[[done 0]] The work goes on." in prompt
    assert "You said: plan the trip" not in prompt  # the answers it summarised are gone
    assert "users=['plan the trip', 'book the train', 'and now? [recall]']" in again.output_text
    # After a stored response, too: the parent's turns are left out, the summary read in their place.
    after = client.responses.create(model=MODEL, input=[items[-1], {"role": "user", "content": "go on [recall]"}], previous_response_id=second.id)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert HEAD + "[[done 0]]" in prompt and "You said: plan the trip" not in prompt and "You said: book the train" not in prompt
    assert "users=['plan the trip', 'book the train', 'go on [recall]']" in after.output_text
    tampered = dict(items[-1], encrypted_content=sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB"))
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input=[tampered, {"role": "user", "content": "x"}], store=False)
    assert err.value.body["code"] == "invalid_encrypted_content"


def test_a_long_agent_loop_goes_on_past_the_context_with_compaction(workdir: Any, make_gateway: Any) -> None:
    small = start_emulator(workdir, "--max-model-len", "4000")
    try:
        gateway = make_gateway(small.url, loop={"max_turns": 80})
        client = gateway.client()
        calls = " ".join(f'[[call tool_search.search {{"query": "nothing {number}"}}]]' for number in range(50))
        task = f"{calls} [[answer all fifty done]]"
        failed = client.responses.create(model=MODEL, input=task, tools=[SEARCH, HIDDEN])
        # Without compaction the loop runs out of context before its fiftieth search.
        assert failed.status == "incomplete" and len([item for item in failed.output if item.type == "tool_search_call"]) < 50
        events = stream_sdk(client, input=task, tools=[SEARCH, HIDDEN], context_management=[{"type": "compaction", "compact_threshold": 2000}])
        response = events[-1]["response"]
        assert response["status"] == "completed" and response["output"][-1]["content"][0]["text"] == "all fifty done"
        searches = [item for item in response["output"] if item["type"] == "tool_search_call"]
        assert [item["arguments"]["query"] for item in searches] == [f"nothing {number}" for number in range(50)]
        compactions = [item for item in response["output"] if item["type"] == "compaction"]
        assert len(compactions) >= 2 and all(item["encrypted_content"] for item in compactions)
        compacting = [event for event in events if event["type"] == "response.compaction.compacting"]
        assert [event["item_id"] for event in compacting] == [item["id"] for item in compactions]
        # What the model read last starts from the latest summary, not from the first turns.
        prompt = emulator_stats(small)["last_prompt"]
        assert HEAD in prompt and '"nothing 0"' not in prompt.split(HEAD)[-1]
        # The stored response keeps the compacted dialog: it is continued from there.
        later = client.responses.create(model=MODEL, input="what now? [recall]", previous_response_id=response["id"])
        assert later.status == "completed" and "[[done" in emulator_stats(small)["last_prompt"]
    finally:
        small.stop()


def test_a_conversation_keeps_the_compaction_and_goes_on_from_it(workdir: Any, make_gateway: Any) -> None:
    small = start_emulator(workdir, "--max-model-len", "4000")
    try:
        client = make_gateway(small.url, loop={"max_turns": 40}).client()
        conversation = client.conversations.create(items=[{"type": "message", "role": "user", "content": "remember the plan"}])
        calls = " ".join(f'[[call tool_search.search {{"query": "item {number}"}}]]' for number in range(20))
        first = client.responses.create(
            model=MODEL, input=f"{calls} [[answer twenty done]]", tools=[SEARCH, HIDDEN], conversation=conversation.id,
            context_management=[{"type": "compaction", "compact_threshold": 1200}],
        )  # fmt: skip
        assert first.status == "completed" and first.output_text == "twenty done"
        assert any(item.type == "compaction" for item in first.output)
        kinds = [item.type for item in client.conversations.items.list(conversation.id, order="asc")]
        assert "compaction" in kinds and kinds[-1] == "message"
        # The conversation's next response reads the summary in place of the turns it replaced.
        later = client.responses.create(model=MODEL, input="what now? [recall]", conversation=conversation.id)
        prompt = emulator_stats(small)["last_prompt"]
        assert HEAD in prompt and "[[done" in prompt and "matches 'item 0'" not in prompt  # the first search's answer is gone
        assert "users=['remember the plan'," in later.output_text and "'what now? [recall]']" in later.output_text
    finally:
        small.stop()


def test_a_compaction_item_added_to_a_conversation_replaces_what_came_before(gateway: Any, emulator: Process) -> None:
    client = gateway.client()
    conversation = client.conversations.create()
    client.responses.create(model=MODEL, input="plan the trip", conversation=conversation.id)
    items = [item.to_dict() for item in client.conversations.items.list(conversation.id, order="asc")]
    compacted = client.responses.compact(model=MODEL, input=items)  # type: ignore[arg-type]
    summary = compacted.output[-1].to_dict()
    client.responses.create(model=MODEL, input=[summary, {"role": "user", "content": "book it"}], conversation=conversation.id)  # type: ignore[list-item]
    assert "You said: plan the trip" not in emulator_stats(emulator)["last_prompt"]
    # Read back from the conversation on the next turn, the compaction still stands in for the turns before it.
    later = client.responses.create(model=MODEL, input="and now? [recall]", conversation=conversation.id)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert "You said: plan the trip" not in prompt and HEAD + "[[done 0]]" in prompt
    assert "users=['plan the trip', 'book it', 'and now? [recall]']" in later.output_text


TRIGGER = {"type": "compaction_trigger"}


def test_a_compaction_trigger_answers_with_one_compaction_item(gateway: Any, emulator: Process) -> None:
    """SDK 3.57's `compaction_trigger`, last in the input: the response compacts what comes before it and
    its one output item is the compaction (no answer is generated); streamed or not, stored or not."""
    client = gateway.client()
    history = [{"role": "user", "content": "plan the trip"}, {"role": "assistant", "content": "Paris, then Rome."}]
    compacted = client.responses.create(model=MODEL, input=[*history, TRIGGER])
    assert compacted.status == "completed" and [item.type for item in compacted.output] == ["compaction"]
    assert compacted.usage is not None and compacted.usage.input_tokens > 0 and compacted.usage.output_tokens > 0
    item = compacted.output[0]
    assert item.id.startswith("cmp_") and "done" not in item.encrypted_content  # type: ignore[union-attr]
    # Stored: the next response goes on from the summary, without what it replaced.
    after = client.responses.create(model=MODEL, input="and now? [recall]", previous_response_id=compacted.id)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert HEAD + "[[done 0]] The work goes on." in prompt and "Paris, then Rome." not in prompt
    assert "users=['plan the trip', 'and now? [recall]']" in after.output_text
    # Streamed, as Codex reads it: one compaction item among the items done, then response.completed.
    events = stream_sdk(client, input=[*history, TRIGGER], store=False)
    done = [event["item"]["type"] for event in events if event["type"] == "response.output_item.done"]
    assert done == ["compaction"]
    assert [event["type"] for event in events][-1] == "response.completed"
    assert events[-1]["response"]["usage"]["total_tokens"] > 0
    assert "response.compaction.compacting" in [event["type"] for event in events]
    # Sent back (what Codex keeps: the user's messages and the item), it is read as any compaction item.
    sent_back = [history[0], events[-1]["response"]["output"][0], {"role": "user", "content": "go on [recall]"}]
    again = client.responses.create(model=MODEL, input=sent_back, store=False)
    assert "users=['plan the trip', 'go on [recall]']" in again.output_text
    assert HEAD + "[[done 0]]" in emulator_stats(emulator)["last_prompt"]


def test_a_compaction_trigger_in_the_background_and_on_a_socket(gateway: Any, emulator: Process) -> None:
    client = gateway.client()
    queued = client.responses.create(model=MODEL, input=[{"role": "user", "content": "plan the trip"}, TRIGGER], background=True)
    ended = poll(client, queued.id)
    assert ended.status == "completed" and [item.type for item in ended.output] == ["compaction"]
    # On the socket, incremental as Codex sends it: the previous `store: false` response, then the trigger alone.
    with client.responses.connect() as connection:
        connection.response.create(model=MODEL, input="plan the trip", store=False)
        first = until_end(connection)[-1]["response"]
        connection.response.create(model=MODEL, input=[TRIGGER], previous_response_id=first["id"], store=False)
        events = until_end(connection)
        assert [event["item"]["type"] for event in events if event["type"] == "response.output_item.done"] == ["compaction"]
        assert events[-1]["type"] == "response.completed"
        # A trigger with nothing before it compacts nothing: an error event, and the socket goes on.
        connection.response.create(model=MODEL, input=[TRIGGER], store=False)
        (error,) = until_end(connection)
        assert error["type"] == "error" and error["error"]["param"] == "input"
    gateway_log = gateway.log.read_text()
    assert "WEBSOCKET /v1/responses response.create 400" in gateway_log  # the refusal is in the access log


@pytest.mark.parametrize(
    ("items", "param", "words"),
    [
        ([TRIGGER, {"role": "user", "content": "hi"}], "input[0]", "must be the last input item"),
        ([{"type": "program", "id": "p1", "call_id": "c1", "code": "1", "fingerprint": "f"}], "input[0]", "'program' items are not supported"),
        (
            [{"role": "user", "content": "hi"}, {"type": "program_output", "id": "p", "call_id": "c", "result": "1", "status": "completed"}],
            "input[1]",
            "programmatic tool calling",
        ),
        (
            [{"role": "user", "content": "hi"}, {"type": "computer_call_output", "call_id": "c", "output": {}}],
            "input[1]",
            "'computer_call_output' is not a type",
        ),
    ],
)
def test_items_nothing_here_reads_are_refused_by_path(gateway: Any, items: list[dict[str, Any]], param: str, words: str) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input=items)
    body = err.value.body
    assert body["param"] == param and words in body["message"], body
    assert "_item_type" not in body["message"] and "tag" not in body["message"]


def test_codex_bookkeeping_on_items_is_accepted_and_ignored(gateway: Any, emulator: Process) -> None:
    passthrough = {"turn_id": "t1", "create_time": 1764250000, "content_item_kinds": ["input_text"]}
    message = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi there"}]}
    answer = gateway.client().responses.create(model=MODEL, input=[message | {"internal_chat_message_metadata_passthrough": passthrough}])
    assert answer.output_text == "You said: hi there"
    assert "turn_id" not in emulator_stats(emulator)["last_prompt"]
