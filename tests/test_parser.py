"""The per-token parser (gateway/engine/parser.py) reads what openai-harmony's own `StreamableParser` reads: on
random streams of messages of every header shape gpt-oss writes, and some it should not, cut into
random chunks, the same messages, the same headers, the same errors; its deltas add up to each message's
text, and a character split across tokens is never split across deltas."""

from __future__ import annotations

import random

import pytest
from openai_harmony import HarmonyError, Role, StreamableParser

from gateway.engine.harmony import CALL, END, RETURN, START, encoding
from gateway.engine.parser import HarmonyStreamParser, MalformedHarmony, MessageFinished, MessageStarted, TextDelta

HEADERS = [
    "<|channel|>analysis",
    "<|channel|>final",
    "<|channel|>commentary",
    "<|channel|>commentary to=functions.lookup <|constrain|>json",
    "<|channel|>commentary to=functions.get_weather json",
    "<|channel|>analysis to=python code",
    "<|channel|>analysis to=browser.search code",
    "<|channel|>commentary to=mcp-server.some_tool <|constrain|>json",
    " to=functions.lookup<|channel|>commentary <|constrain|>json",
    " to=python<|channel|>analysis code",
    "<|channel|>commentary to=functions.lookup<|constrain|>json",  # no space: read by openai-harmony
    "<|channel|>commentary json",
    "<|channel|>other",
    "<|channel|>commentary to=functions.a to=functions.b",
    "<|channel|>final to=functions.é",
]
TEXTS = ["Hello", " world", "", '{"id": "3"}', "héllo 🌍 世界", "\n\n", "<|constrain|>", "  x", "word " * 3, "🙂🙂"]


def _tokens(rng: random.Random, messages: int) -> list[int]:
    enc, tokens = encoding(), []
    for number in range(messages):
        header = rng.choice(HEADERS)
        start = "" if number == 0 and rng.random() < 0.8 else "<|start|>assistant"
        tokens += enc.encode(start + header + "<|message|>", allowed_special="all")
        text = "".join(rng.choice(TEXTS) for _ in range(rng.randint(0, 5)))
        tokens += enc.encode(text, allowed_special=(), disallowed_special=())
        tokens.append(rng.choice([END, CALL, RETURN]))
    return tokens


def _reference(tokens: list[int]) -> list[tuple[str | None, str | None, str | None, str]] | None:
    """openai-harmony's reading, token by token: each message's header and text (None: not Harmony)."""
    # The prompt began the first message (`<|start|>assistant`), unless the model wrote it again itself.
    parser = StreamableParser(encoding(), None if tokens[:1] == [START] else Role.ASSISTANT, strict=False)
    try:
        for token in tokens:
            parser.process(token)
    except HarmonyError:
        return None
    return [(m.channel, m.recipient, m.content_type, "".join(part.text for part in m.content)) for m in parser.messages]  # type: ignore[union-attr]


def _ours(rng: random.Random, tokens: list[int]) -> tuple[list[tuple[str | None, str | None, str | None, str]] | None, list[str]]:
    """Our parser's reading, fed in chunks of random sizes, and what it said it repaired."""
    parser, read, position = HarmonyStreamParser(), [], 0
    header: MessageStarted | None = None
    deltas: list[str] = []
    try:
        while position < len(tokens):
            size = rng.choice([1, 1, 2, 3, 8])
            for event in parser.feed(tokens[position : position + size]):
                if isinstance(event, MessageStarted):
                    header, deltas = event, []
                elif isinstance(event, TextDelta):
                    assert "\ufffd" not in event.text  # a split character is never cut in two
                    deltas.append(event.text)
                else:
                    assert isinstance(event, MessageFinished) and header is not None
                    text = "".join(part.text for part in event.message.content)  # type: ignore[union-attr]
                    assert "".join(deltas) == text
                    assert (event.message.channel, event.message.recipient, event.message.content_type) == (
                        header.channel,
                        header.recipient,
                        header.content_type,
                    )
                    read.append((header.channel, header.recipient, header.content_type, text))
            position += size
    except MalformedHarmony:
        return None, parser.recovered
    return read, parser.recovered


@pytest.mark.parametrize("seed", range(6))
def test_the_parser_reads_what_openai_harmony_reads(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(150):
        tokens = _tokens(rng, rng.randint(1, 4))
        expected, (read, recovered) = _reference(tokens), _ours(rng, tokens)
        if expected is not None:
            assert read == expected, encoding().decode(tokens)
        else:  # what openai-harmony cannot read, ours reads as far as it can, never without saying what it repaired
            assert read is None or recovered, encoding().decode(tokens)


def test_a_header_without_end_is_malformed() -> None:
    parser = HarmonyStreamParser()
    with pytest.raises(MalformedHarmony):
        parser.feed(encoding().encode("<|channel|>analysis" + " to" * 300, allowed_special="all"))
    given_up = HarmonyStreamParser()  # a header ended without <|message|>: dropped, and nothing is left
    assert given_up.feed(encoding().encode("<|channel|>final<|end|>", allowed_special="all")) == []
    assert given_up.finished == 0 and "ended without <|message|>" in given_up.recovered[0]
    with pytest.raises(MalformedHarmony):  # an end before any header at all
        HarmonyStreamParser().feed(encoding().encode("<|end|>", allowed_special="all"))
