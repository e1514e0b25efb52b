"""The model's output is hostile input: gpt-oss's broken Harmony, as users reported it, is read as far as it
can be; what cannot be is dropped (and logged), never shown; a response fails only when nothing is left.

Each shape is written by the scripted model as it is (`[[raw ...]]`), with where it was reported. Under
the engine's grammar (test_structured_outputs.py) none of them can be generated; these are for an engine
that does not enforce one, and for what slips through anyway.
"""

from __future__ import annotations

import json

import pytest

from .conftest import stream_raw

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False},
    "strict": True,
}
ANALYSIS = "<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant"

# (shape, where it was reported, what the model writes, the output item types, the answer's text)
ANSWERS = [
    (
        "a final answer closed twice",
        "vllm-project/vllm#50690 (Unexpected token 200002 while expecting start token 200006)",
        f"{ANALYSIS}<|channel|>final<|message|>Done.<|end|><|return|>",
        ["reasoning", "message"],
        "Done.",
    ),
    (
        "a header given up with <|end|> before a good turn",
        "openai/harmony#38 (unexpected tokens remaining in message header)",
        "<|channel|>analysis<|end|><|start|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["message"],
        "Hi there.",
    ),
    (
        "text with no header before the turn",
        "vllm-project/vllm#22515 (Unexpected token 12606 while expecting start token 200006)",
        "Sure!<|start|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["message"],
        "Hi there.",
    ),
    (
        "<|start|>assistant written twice",
        "unslothai/unsloth#5162 (harmony specials emitted twice or as plain text)",
        f"{ANALYSIS}<|start|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["reasoning", "message"],
        "Hi there.",
    ),
    (
        "'assistant' as plain text where <|start|>assistant belongs",
        "unslothai/unsloth#5162 (Unexpected token 173781 while expecting start token 200006)",
        "<|channel|>analysis<|message|>Let me think.<|end|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["reasoning", "message"],
        "Hi there.",
    ),
    (
        "a channel switched inside a message",
        "openai/harmony#60 (Unexpected token while expecting start token)",
        "<|channel|>analysis<|message|>Let me think.<|channel|>final<|message|>Hi there.<|return|>",
        ["reasoning", "message"],
        "Hi there.",
    ),
    (
        "special tokens inside the answer",
        "openai/harmony#60 (<|constrain|>response in a header)",
        "<|channel|>final<|message|>Hi<|constrain|> there<|message|>.<|return|>",
        ["message"],
        "Hi there.",
    ),
    (
        "a channel header of free text, given up before a good turn",
        "ggml-org/llama.cpp#27720 (malformed Harmony channel header: <|channel|> + free text / ?? / commentary?)",
        "<|channel|>commentary?<|end|><|start|>assistant<|channel|>analysis<|message|>Let me think.<|end|><|start|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["reasoning", "message"],
        "Hi there.",
    ),
    (
        "a doubled <|channel|> addressed to the assistant, given up",
        "ggml-org/llama.cpp#27720 (<|channel|>commentary to=assistant<|channel|>commentary?...)",
        "<|channel|>commentary to=assistant<|channel|>commentary?<|end|><|start|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["message"],
        "Hi there.",
    ),
    (
        "a channel marker with no channel",
        "tenstorrent/vllm#386 (channel marker present but no channel value found in header)",
        "<|channel|><|message|>Hmm.<|end|><|start|>assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["message"],
        "Hi there.",
    ),
    (
        "the answer with no header at all",
        "ggml-org/llama.cpp#25321 (a final without channel markup: does not match the expected format)",
        "Hi there.<|return|>",
        ["message"],
        "Hi there.",
    ),
    (
        "the role written twice",
        "tenstorrent/vllm#386 (Unknown role: assistantassistant)",
        f"{ANALYSIS}assistant<|channel|>final<|message|>Hi there.<|return|>",
        ["reasoning", "message"],
        "Hi there.",
    ),
    (
        "the answer ended without <|return|>",
        "lmstudio-ai/lmstudio-bug-tracker#942 (Unexpected end of content: the engine stopped with no end token)",
        f"{ANALYSIS}<|channel|>final<|message|>Hi there.",
        ["reasoning", "message"],
        "Hi there.",
    ),
    (
        "a final answer constrained to JSON, with no recipient",
        "vllm-project/vllm#45571, openai/harmony#144 (<|constrain|>json read as a recipient: the answer became an MCP call)",
        f'{ANALYSIS}<|channel|>final <|constrain|>json<|message|>{{"ok": true}}<|return|>',
        ["reasoning", "message"],
        '{"ok": true}',
    ),
    (
        "a constrain with no recipient on the final channel",
        "openai/harmony#60 (unexpected tokens remaining in message header: <|constrain|>response)",
        f"{ANALYSIS}<|channel|>final <|constrain|>response<|message|>Hi there.<|return|>",
        ["reasoning", "message"],
        "Hi there.",
    ),
]


@pytest.mark.parametrize("shape, source, written, types, answer", ANSWERS, ids=[shape for shape, *_ in ANSWERS])
def test_a_broken_answer_is_read_as_far_as_it_can_be(gateway, shape, source, written, types, answer):
    events = stream_raw(gateway, {"input": f"hi [[raw {written}]]"})
    final = events[-1]["response"]
    assert final["status"] == "completed", (source, final.get("error"))
    assert [item["type"] for item in final["output"]] == types
    assert final["output"][-1]["content"][0]["text"] == answer
    assert "<|" not in json.dumps([event for event in events if event["type"] != "response.created"])


CALLS = [
    (
        "a call closed by <|end|> and then <|call|>",
        "vllm-project/vllm#22519 (Unexpected token 200012 after <|end|>)",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|end|><|call|>',
    ),
    (
        "a call the model did not end with <|call|>",
        "lmstudio-ai/lmstudio-bug-tracker#942 (Failed to parse tool call: Unexpected end of content)",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}',
    ),
    (
        "the recipient written where the role belongs",
        "tilesprivacy/tiles#145 (Unknown role: bash)",
        '<|start|>functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}<|call|>',
    ),
    (
        "junk after the content type",
        "openai/harmony#38 (unexpected tokens remaining in message header)",
        '<|channel|>commentary to=functions.get_weather <|constrain|>json args<|message|>{"city": "Oslo"}<|call|>',
    ),
    (
        "the recipient written before the channel, with a stray word before it",
        "unslothai/unsloth#5162 (assistant as plain BPE)",
        f'{ANALYSIS[: -len("<|start|>assistant")]}assistant to=functions.get_weather<|channel|>commentary json<|message|>{{"city": "Oslo"}}<|call|>',
    ),
]


@pytest.mark.parametrize("shape, source, written", CALLS, ids=[shape for shape, *_ in CALLS])
def test_a_broken_call_is_still_the_call(gateway, shape, source, written):
    events = stream_raw(gateway, {"input": f"weather [[raw {written}]]", "tools": [WEATHER]})
    final = events[-1]["response"]
    assert final["status"] == "completed", (source, final.get("error"))
    call = final["output"][-1]
    assert call["type"] == "function_call" and call["status"] == "completed"
    assert json.loads(call["arguments"]) == {"city": "Oslo"}


def test_output_with_nothing_readable_fails_the_response(gateway):
    events = stream_raw(gateway, {"input": "hi [[raw <|channel|>final<|end|>]]"})
    assert events[-1]["type"] == "response.failed"
    assert "not valid Harmony" in events[-1]["response"]["error"]["message"]


@pytest.mark.parametrize(
    "shape, source, written",
    [
        (
            "a declared function named without its namespace",
            "vllm-project/vllm#22519 (tool calls to bare function names)",
            '<|channel|>commentary to=get_weather <|constrain|>json<|message|>{"city": "Oslo"}<|call|>',
        ),
        (
            "<|channel|> written twice in a header",
            "openai/harmony#38 (unexpected tokens remaining in message header)",
            '<|channel|><|channel|>commentary to=functions.get_weather json<|message|>{"city": "Oslo"}<|call|>',
        ),
    ],
)
def test_a_recipient_written_slightly_wrong_but_unambiguously_is_the_call(gateway, shape, source, written):
    final = stream_raw(gateway, {"input": f"weather [[raw {written}]]", "tools": [WEATHER]})[-1]["response"]
    call = final["output"][-1]
    assert (call["type"], call["name"], call["status"]) == ("function_call", "get_weather", "completed"), source


def test_an_undeclared_bare_name_is_still_refused(gateway):
    final = stream_raw(gateway, {"input": "x [[call launch_rocket {}]] [misbehave]", "tools": [WEATHER]})[-1]["response"]
    assert "function_call" not in [item["type"] for item in final["output"]]
    assert "there is no tool 'launch_rocket'" in final["output"][-1]["content"][0]["text"]


# Arguments gpt-oss writes that are not JSON: (shape, where it was reported, what the model writes).
BAD_ARGUMENTS = [
    ("over-escaped quotes", "digitalocean/langchain-gradient#31 (gpt-oss-20b over-escapes JSON in tool call arguments)", '{"city": \\"Rome\\"}'),
    ("a missing colon", "vllm-project/vllm#22386 (broken function call arguments: asymmetric quotes, missing colons)", '{"city" "Rome"}'),
    ("asymmetric quotes", "vllm-project/vllm#22386 (broken function call arguments: asymmetric quotes, missing colons)", '{\'city": "Rome"}'),
]


@pytest.mark.parametrize("shape, source, written", BAD_ARGUMENTS, ids=[shape for shape, *_ in BAD_ARGUMENTS])
def test_arguments_that_are_not_json_never_reach_the_client(emulator, make_gateway, shape, source, written):
    """Where no grammar held the call: nothing of it is streamed, the model is told and writes it again."""
    gateway = make_gateway(emulator.url, engine={"structured_outputs": "off"})
    events = stream_raw(gateway, {"input": f'weather [args {written}] [args {{"city": "Rome"}}]', "tools": [WEATHER], "tool_choice": "required"})
    final = events[-1]["response"]
    assert [(item["type"], item["status"]) for item in final["output"]] == [("function_call", "completed")], source
    assert json.loads(final["output"][0]["arguments"]) == {"city": "Rome"}
    assert "Rome\\" not in "".join(event.get("delta", "") for event in events)
