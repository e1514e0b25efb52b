"""The prompt the gateway builds from each message's tokens is the prompt Harmony renders from the whole
conversation, on random conversations, whether the tokens of the past are rendered now or reused."""

from __future__ import annotations

import random
from collections import Counter

import anyio
import pytest
from openai_harmony import Author, Conversation, DeveloperContent, Message, Role

from gateway.engine.harmony import GrowingPrompt, Preamble, ToolDescription, dropped_analysis, encoding, render_message
from gateway.engine.renderer import PromptRenderer


def _assistant(channel: str, text: str, recipient: str | None = None) -> Message:
    message = Message.from_role_and_content(Role.ASSISTANT, text).with_channel(channel)
    return message.with_recipient(recipient).with_content_type("<|constrain|>json") if recipient else message


def _conversation(rng: random.Random, length: int, long_text: bool = False) -> list[Message]:
    messages: list[Message] = []
    for number in range(length):
        kind = rng.choice(["user", "analysis", "final", "call", "commentary", "developer"])
        text = f"{kind} {number} " + "words " * rng.randint(0, 4)
        if long_text and number == 0:
            text += "a long unbroken piece " * 1500  # past the inline limit: rendered in the renderer's process
        if kind == "user":
            messages.append(Message.from_role_and_content(Role.USER, text))
        elif kind == "developer":
            messages.append(Message.from_role_and_content(Role.DEVELOPER, DeveloperContent.new().with_instructions(text)))
        elif kind == "call":
            messages.append(_assistant("commentary", '{"a": 1}', "functions.f"))
            tool = Author.new(Role.TOOL, "functions.f")
            messages.append(Message.from_author_and_content(tool, text).with_channel("commentary").with_recipient("assistant"))
        else:
            messages.append(_assistant(kind, text))
    return messages


def _preamble(rng: random.Random) -> Preamble:
    functions = [ToolDescription.new("f", "Does f.", parameters={"type": "object", "properties": {"a": {"type": "integer"}}})]
    return Preamble(
        effort=rng.choice([None, "low", "high"]),
        instructions=rng.choice([None, "Be brief."]),
        function_tools=rng.choice([[], functions]),
    )


def _whole(preamble: Preamble, dialog: list[Message]) -> list[int]:
    conversation = Conversation.from_messages(preamble.messages() + dialog)
    return encoding().render_conversation_for_completion(conversation, Role.ASSISTANT)


def test_harmony_drops_the_analysis_before_the_first_final_answer_once_the_last_one_is_final():
    user, analysis, final = Message.from_role_and_content(Role.USER, "u"), _assistant("analysis", "a"), _assistant("final", "f")
    assert dropped_analysis([user, analysis, final, user, analysis, final]) == {1}
    assert dropped_analysis([user, analysis, final, user, analysis]) == set()
    assert dropped_analysis([user, analysis, _assistant("commentary", "c")]) == set()


@pytest.mark.parametrize("seed", range(4))
def test_a_prompt_from_each_messages_tokens_is_harmonys_render(seed):
    rng = random.Random(seed)
    renderer = PromptRenderer()

    async def check() -> None:
        for trial in range(150):
            preamble, dialog = _preamble(rng), _conversation(rng, rng.randint(0, 10), long_text=trial == 0)
            # A first request: every message rendered now.
            first = GrowingPrompt(renderer)
            prompt = await first.render(preamble, dialog)
            assert prompt.ids() == _whole(preamble, dialog)
            await first.complete(dialog, 0)
            # Its continuation with its stored tokens, another preamble and more messages: the same as a
            # whole render, with none of the stored messages rendered again.
            more, later = _conversation(rng, rng.randint(1, 4)), _preamble(rng)
            stored = first.pieces(0)
            assert all(piece is not None for piece in stored)
            counted: Counter[str] = Counter()
            second = GrowingPrompt(renderer, lambda source, count, counted=counted: counted.update({source: count}))
            second.seed(stored)
            prompt = await second.render(later, dialog + more)
            assert prompt.ids() == _whole(later, dialog + more)
            dropped = dropped_analysis(dialog + more)
            fresh = [piece for index, piece in enumerate(await renderer.each(more), len(dialog)) if index not in dropped]
            head = await renderer.preamble(later)
            assert counted["rendered"] == head.length + sum(piece.length for piece in fresh)
            assert counted["rendered"] + counted["reused"] + 2 == len(prompt)
            # Its continuation from memory (a WebSocket's next response): the same prompt; with the same
            # preamble and the same analysis dropped, only the new messages are rendered.
            same = rng.random() < 0.5
            carried: Counter[str] = Counter()
            third = GrowingPrompt(renderer, lambda source, count, carried=carried: carried.update({source: count}))
            third.adopt(first.state())
            assert (await third.render(preamble if same else later, dialog + more)).ids() == _whole(preamble if same else later, dialog + more)
            if same and dropped == dropped_analysis(dialog):
                assert carried["rendered"] == sum(piece.length for piece in await renderer.each(more))
            # A later turn of the run appends to it: the past stays as the first turn rendered it.
            turn = _conversation(rng, 2)
            extended = await second.render(later, dialog + more + turn)
            added = [token for piece in await renderer.each(turn) for token in piece.ids()]
            assert extended.ids() == prompt.ids()[:-2] + added + prompt.ids()[-2:]

    try:
        anyio.run(check)
    finally:
        renderer.close()


PIECES = ["record 3", " ", "", "<|end|>", "<|start|>assistant", "héllo 🌍 世界", "\n\n", '{"id": "3"}', "  x", "\u00e9", "word " * 5, "\t"]


def test_a_message_renders_as_harmony_renders_it():
    rng = random.Random(7)
    authors = [Author.new(Role.TOOL, "functions.lookup"), Author.new(Role.TOOL, "python"), Author.new(Role.USER, None)] + [
        Author.new(Role.ASSISTANT, None)
    ] * 3
    for _ in range(600):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 6)))
        author = rng.choice(authors)
        message = Message.from_author_and_content(author, text)
        if author.role != Role.USER:
            message = message.with_channel(rng.choice(["analysis", "commentary", "final"]))
        if author.role == Role.TOOL:
            message = message.with_recipient("assistant")
        elif author.role == Role.ASSISTANT and rng.random() < 0.5:
            recipient = rng.choice(["functions.lookup", "python", "browser.search", "mcp.x-y.z"])
            message = message.with_recipient(recipient).with_content_type(rng.choice(["<|constrain|>json", "code", None]))
        assert render_message(message) == encoding().render(message), message.to_dict()
