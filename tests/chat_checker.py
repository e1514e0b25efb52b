"""Checker for Chat Completions streams: the SDK's chunk model and the tool-call streaming rules."""

from __future__ import annotations

import json
from typing import Any

from openai.types.chat import ChatCompletionChunk


def parse_chat_sse(raw: bytes) -> list[dict[str, Any]]:
    frames = [f for f in raw.decode().split("\n\n") if f.strip() and not f.startswith(":")]
    assert frames[-1] == "data: [DONE]", "the stream must end with data: [DONE]"
    assert sum(1 for f in frames if f == "data: [DONE]") == 1
    chunks = []
    for frame in frames[:-1]:
        assert frame.startswith("data: ") and "\n" not in frame, f"bad frame {frame[:80]!r}"
        chunks.append(json.loads(frame[6:]))
    return chunks


def check_chat_stream(chunks: list[dict[str, Any]], include_usage: bool = False) -> dict[str, Any]:
    """Validate one stream; return the accumulated message: role, content, reasoning, tool_calls, finish."""
    assert chunks, "no chunks"
    if "error" in chunks[-1]:
        return {"error": chunks[-1]["error"]}
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    first = chunks[0]
    for chunk in chunks:
        assert (chunk["id"], chunk["created"], chunk["model"]) == (first["id"], first["created"], first["model"])
        assert chunk["object"] == "chat.completion.chunk"
    usage_chunks = [c for c in chunks if not c["choices"]]
    if include_usage:
        assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1], "one usage chunk, last"
        usage = usage_chunks[0]["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    else:
        assert not usage_chunks

    choice_chunks = [c["choices"][0] for c in chunks if c["choices"]]
    roles = [c["delta"]["role"] for c in choice_chunks if c["delta"].get("role")]
    assert roles == ["assistant"], f"role sent {len(roles)} times"
    finishes = [c["finish_reason"] for c in choice_chunks]
    assert all(f is None for f in finishes[:-1]) and finishes[-1] is not None, "finish_reason only on the last chunk"

    content, reasoning = "", ""
    calls: list[dict[str, Any]] = []
    seen_content = False
    for choice in choice_chunks:
        delta = choice["delta"]
        if delta.get("reasoning"):
            assert not seen_content and not calls, "reasoning after content or tool calls"
            reasoning += delta["reasoning"]
        if delta.get("content"):
            seen_content = True
            content += delta["content"]
        for fragment in delta.get("tool_calls") or []:
            index = fragment["index"]
            if index == len(calls):  # a new call: its first fragment names it
                assert fragment.get("id") and fragment.get("type") == "function" and fragment["function"].get("name")
                calls.append({"id": fragment["id"], "name": fragment["function"]["name"], "arguments": fragment["function"].get("arguments", "")})
            else:
                assert index == len(calls) - 1, f"tool call index {index} jumps (have {len(calls)})"
                assert set(fragment) == {"index", "function"}, f"later fragment carries {set(fragment)}"
                assert set(fragment["function"]) == {"arguments"}, "later fragment repeats the name"
                calls[index]["arguments"] += fragment["function"]["arguments"]
    for call in calls:
        json.loads(call["arguments"])  # exactly one JSON object per call
    finish = finishes[-1]
    if calls:
        assert finish == "tool_calls"
    return {"content": content, "reasoning": reasoning, "tool_calls": calls, "finish_reason": finish}
