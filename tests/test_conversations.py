"""The Conversations API through the openai SDK: conversations and items, and responses that continue
a conversation and add to it."""

from __future__ import annotations

import httpx
import openai
import pytest

from .conftest import MODEL, emulator_stats, stream_sdk

WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}


def test_conversation_lifecycle(gateway):
    client = gateway.client()
    conversation = client.conversations.create(metadata={"topic": "demo"}, items=[{"type": "message", "role": "user", "content": "My name is Ada."}])
    assert conversation.id.startswith("conv_") and conversation.object == "conversation"
    assert conversation.metadata == {"topic": "demo"}
    assert client.conversations.retrieve(conversation.id).created_at == conversation.created_at
    updated = client.conversations.update(conversation.id, metadata={"topic": "renamed"})
    assert updated.metadata == {"topic": "renamed"} == client.conversations.retrieve(conversation.id).metadata
    items = client.conversations.items.list(conversation.id)
    assert [(item.type, item.role, item.content[0].text) for item in items.data] == [("message", "user", "My name is Ada.")]
    deleted = client.conversations.delete(conversation.id)
    assert deleted.deleted and deleted.id == conversation.id
    for action in (
        lambda: client.conversations.retrieve(conversation.id),
        lambda: client.conversations.items.list(conversation.id),
        lambda: client.responses.create(model=MODEL, input="hi", conversation=conversation.id),
    ):
        with pytest.raises(openai.NotFoundError):
            action()


def test_responses_continue_and_fill_the_conversation(gateway, emulator):
    client = gateway.client()
    conversation = client.conversations.create(items=[{"role": "user", "content": "first words"}])
    first = client.responses.create(model=MODEL, input="second words", conversation=conversation.id)
    assert first.conversation.id == conversation.id
    # The model read the item the conversation was created with.
    assert "first words" in emulator_stats(emulator)["last_prompt"]
    # Streamed, with the conversation given as an object.
    events = stream_sdk(client, input="[recall]", conversation={"id": conversation.id})
    recalled = events[-1]["response"]["output"][-1]["content"][0]["text"]
    assert "users=['first words', 'second words', '[recall]']" in recalled
    # Harmony drops the reasoning of finished turns from the prompt, as gpt-oss was trained.
    assert "finals=['You said: second words']" in recalled and "analysis_in_prompt=0" in recalled
    items = client.conversations.items.list(conversation.id, order="asc").data
    assert [item.type for item in items] == ["message", "message", "reasoning", "message", "message", "reasoning", "message"]
    assert items[2].id == first.output[0].id and items[3].id == first.output[1].id  # output items keep their ids
    assert items[6].content[0].text == recalled
    # The response's own input items are those of this request only.
    assert [item.content[0].text for item in client.responses.input_items.list(first.id).data] == ["second words"]


def test_items_api_changes_what_the_model_reads(gateway, emulator):
    client = gateway.client()
    conversation = client.conversations.create()
    added = client.conversations.items.create(
        conversation.id,
        items=[
            {"type": "message", "role": "user", "content": "alpha"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "beta"}]},
        ],
    )
    assert [item.content[0].text for item in added.data] == ["alpha", "beta"]
    alpha, beta = added.data
    assert client.conversations.items.retrieve(beta.id, conversation_id=conversation.id).content[0].text == "beta"
    answer = client.responses.create(model=MODEL, input="[recall]", conversation=conversation.id)
    assert "users=['alpha', 'beta', '[recall]']" in answer.output_text
    # Deleting an item takes its messages out of what the model reads next.
    after_delete = client.conversations.items.delete(alpha.id, conversation_id=conversation.id)
    assert after_delete.id == conversation.id and after_delete.object == "conversation"
    again = client.responses.create(model=MODEL, input="[recall]", conversation=conversation.id)
    assert "users=['beta', '[recall]', '[recall]']" in again.output_text
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.retrieve(alpha.id, conversation_id=conversation.id)
    with pytest.raises(openai.NotFoundError):
        client.conversations.items.delete(alpha.id, conversation_id=conversation.id)
    assert "<|message|>alpha<|end|>" not in emulator_stats(emulator)["last_prompt"]


def test_item_pages(gateway):
    client = gateway.client()
    conversation = client.conversations.create(items=[{"role": "user", "content": f"m{i}"} for i in range(7)])
    texts = lambda page: [item.content[0].text for item in page.data]  # noqa: E731
    first = client.conversations.items.list(conversation.id, limit=3, order="asc")
    assert texts(first) == ["m0", "m1", "m2"] and first.has_more and first.last_id == first.data[-1].id
    second = client.conversations.items.list(conversation.id, limit=3, order="asc", after=first.last_id)
    assert texts(second) == ["m3", "m4", "m5"] and second.has_more
    newest = client.conversations.items.list(conversation.id, limit=2)
    assert texts(newest) == ["m6", "m5"]  # newest first by default
    # The SDK's auto-pagination walks every page.
    assert [item.content[0].text for item in client.conversations.items.list(conversation.id, limit=2, order="asc")] == [f"m{i}" for i in range(7)]
    for query in ({"limit": 0}, {"limit": 101}, {"order": "sideways"}, {"after": "msg_nope"}, {"include": ["bogus"]}):
        with pytest.raises(openai.BadRequestError) as err:
            client.conversations.items.list(conversation.id, **query)
        assert err.value.body["param"] in ("limit", "order", "after", "include[0]")


def test_function_calls_through_a_conversation(gateway, emulator):
    """A call the model makes is an item of the conversation; its output, sent with the conversation, answers it."""
    client = gateway.client()
    conversation = client.conversations.create()
    first = client.responses.create(
        model=MODEL, input='weather? [call functions.get_weather {"city":"Oslo"}]', tools=[WEATHER], conversation=conversation.id
    )
    call = first.output[-1]
    assert call.type == "function_call"
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "-3 C"}
    second = client.responses.create(model=MODEL, input=[output], tools=[WEATHER], conversation=conversation.id)
    assert second.output_text == "The tool said: -3 C"
    # The turn was in progress, so the model read its own reasoning before the call, from the conversation.
    reasoning = first.output[0].content[0].text
    assert reasoning in emulator_stats(emulator)["last_prompt"]
    types = [item.type for item in client.conversations.items.list(conversation.id, order="asc").data]
    assert types == ["message", "reasoning", "function_call", "function_call_output", "reasoning", "message"]
    # Answered once: the same output again is skipped (a client sending its thread again), another is a 400.
    third = client.responses.create(model=MODEL, input=[output, {"role": "user", "content": "thanks"}], conversation=conversation.id)
    assert third.output_text == "You said: thanks"
    assert emulator_stats(emulator)["last_prompt"].count("<|message|>-3 C") == 1
    with pytest.raises(openai.BadRequestError):
        client.responses.create(model=MODEL, input=[output | {"output": "other"}], conversation=conversation.id)
    # An output for a call the conversation never held is refused by the items API too.
    with pytest.raises(openai.BadRequestError):
        client.conversations.items.create(conversation.id, items=[output | {"call_id": "call_never"}])


def test_deleting_a_reasoning_item_takes_it_from_the_prompt(gateway, emulator):
    client = gateway.client()
    conversation = client.conversations.create()
    first = client.responses.create(
        model=MODEL, input='weather? [call functions.get_weather {"city":"Rome"}]', tools=[WEATHER], conversation=conversation.id
    )
    reasoning, call = first.output
    client.conversations.items.delete(reasoning.id, conversation_id=conversation.id)
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "25 C"}
    client.responses.create(model=MODEL, input=[output], tools=[WEATHER], conversation=conversation.id)
    prompt = emulator_stats(emulator)["last_prompt"]
    assert reasoning.content[0].text not in prompt and "to=functions.get_weather" in prompt


def test_conversation_refusals(gateway):
    client = gateway.client()
    conversation = client.conversations.create()
    first = client.responses.create(model=MODEL, input="hi", conversation=conversation.id)
    with pytest.raises(openai.BadRequestError) as err:
        client.responses.create(model=MODEL, input="hi", conversation=conversation.id, previous_response_id=first.id)
    assert err.value.body["param"] == "conversation"
    # An item id the conversation holds already.
    message = next(item for item in first.output if item.type == "message")
    replay = [{"type": "message", "id": message.id, "role": "assistant", "content": [{"type": "output_text", "text": "x"}]}]
    for attempt in (
        lambda: client.responses.create(model=MODEL, input=replay, conversation=conversation.id),
        lambda: client.conversations.items.create(conversation.id, items=replay),
    ):
        with pytest.raises(openai.BadRequestError) as err:
            attempt()
        assert err.value.body["code"] == "duplicate_item"
    # Bounds: 20 items at a time, OpenAI's metadata limits, unknown fields.
    url = f"{gateway.url}/v1/conversations"
    for body in (
        {"items": [{"role": "user", "content": "x"}] * 21},
        {"metadata": {f"k{i}": "v" for i in range(17)}},
        {"metadata": {"k": "v" * 513}},
        {"title": "unknown field"},
    ):
        answer = httpx.post(url, json=body)
        assert answer.status_code == 400, body
        assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    assert httpx.post(f"{url}/{conversation.id}/items", json={"items": []}).status_code == 400
    assert httpx.post(f"{url}/{conversation.id}", json={}).status_code == 400  # update needs metadata
    assert httpx.get(f"{url}/conv_missing").status_code == 404


def test_a_failed_response_adds_nothing(gateway):
    client = gateway.client()
    conversation = client.conversations.create()
    events = stream_sdk(client, input="boom [drop]", conversation=conversation.id)
    assert events[-1]["type"] == "response.failed"
    assert client.conversations.items.list(conversation.id).data == []
