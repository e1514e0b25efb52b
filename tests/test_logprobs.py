"""Logprobs of the answer's tokens: `include: ["message.output_text.logprobs"]` with `top_logprobs` on the
Responses API, `logprobs`/`top_logprobs` on Chat Completions, asked of vLLM and reported as OpenAI does."""

from __future__ import annotations

import httpx
import openai
import pytest

from gateway.engine.harmony import encoding

from .conftest import MODEL, emulator_stats, stream_sdk

LOGPROBS = ["message.output_text.logprobs"]


def expected_logprob(token_id: int) -> float:
    """What the emulator makes up for a sampled token (tests/emulator.py)."""
    return -round(0.05 + (token_id % 13) / 20, 4)


def check_entries(entries: list[dict], text: str, alternatives: int) -> None:
    """One entry per token of the visible text: their bytes are the text, their values the engine's."""
    assert b"".join(bytes(entry["bytes"]) for entry in entries) == text.encode()
    tokens = encoding().encode(text, allowed_special=set())
    assert [entry["logprob"] for entry in entries] == [expected_logprob(token) for token in tokens]
    for entry in entries:
        assert len(entry["top_logprobs"]) == alternatives
        assert all(other["logprob"] <= entry["logprob"] for other in entry["top_logprobs"])


def test_responses_logprobs_non_streamed(gateway, emulator):
    response = gateway.client().responses.create(model=MODEL, input="[unicode]", include=LOGPROBS, top_logprobs=2)
    sent = emulator_stats(emulator)["last_request"]
    assert sent["logprobs"] == 2 and sent["return_tokens_as_token_ids"] is True
    assert response.top_logprobs == 2
    message = response.output[-1]
    part = message.content[0]
    assert part.text == "Héllo 你好世界 🎉🎉 — ok"  # tokens that split a character still add up to it
    check_entries([entry.model_dump() for entry in part.logprobs], part.text, 2)
    assert response.output[0].type == "reasoning"  # the reasoning's tokens are not reported


def test_responses_logprobs_streamed(gateway):
    events = stream_sdk(gateway.client(), input="tell me", include=LOGPROBS)
    deltas = [event for event in events if event["type"] == "response.output_text.delta"]
    streamed = [entry for event in deltas for entry in event["logprobs"]]
    for event in deltas:
        assert b"".join(bytes(entry["bytes"]) for entry in event["logprobs"]) == event["delta"].encode()
    done = next(event for event in events if event["type"] == "response.output_text.done")
    assert done["logprobs"] == streamed
    final = events[-1]["response"]["output"][-1]["content"][0]
    assert final["logprobs"] == streamed
    check_entries(streamed, final["text"], 0)  # top_logprobs 0: the sampled token's logprob only


def test_without_logprobs_nothing_is_asked(gateway, emulator):
    response = gateway.client().responses.create(model=MODEL, input="plain")
    assert "logprobs" not in emulator_stats(emulator)["last_request"]
    assert response.output[-1].content[0].logprobs == [] and response.top_logprobs == 0
    with pytest.raises(openai.BadRequestError) as err:
        gateway.client().responses.create(model=MODEL, input="x", top_logprobs=21)
    assert err.value.body["param"] == "top_logprobs"


def test_chat_logprobs(gateway, emulator):
    client = gateway.client()
    completion = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "chat"}], logprobs=True, top_logprobs=3)
    assert emulator_stats(emulator)["last_request"]["logprobs"] == 3
    choice = completion.choices[0]
    check_entries([entry.model_dump() for entry in choice.logprobs.content], choice.message.content, 3)
    stream = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "chat"}], logprobs=True, stream=True)
    chunks = [chunk for chunk in stream if chunk.choices]
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks)
    entries = [entry.model_dump() for chunk in chunks if chunk.choices[0].logprobs for entry in chunk.choices[0].logprobs.content]
    assert text == choice.message.content
    check_entries(entries, text, 0)
    # A stop sequence holds back the end of the text ("z" could begin "zzz") until the message ends: the
    # tokens reported with it are still the text's own, never the message's end token.
    held = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "chat z"}], logprobs=True, stop=["zzz"])
    assert held.choices[0].message.content == "You said: chat z"
    check_entries([entry.model_dump() for entry in held.choices[0].logprobs.content], "You said: chat z", 0)
    plain = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "chat"}])
    assert plain.choices[0].logprobs is None
    answer = httpx.post(
        f"{gateway.url}/v1/chat/completions", json={"model": MODEL, "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}
    )
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "top_logprobs"
