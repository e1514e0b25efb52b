"""The renderer's memory of rendered messages: the same tokens as a fresh render, a tenant's own, bounded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from openai_harmony import Message, Role

from gateway.engine import renderer as rendering
from gateway.engine.harmony import render_each
from gateway.engine.renderer import PromptRenderer


def dialog(count: int, word: str = "turn") -> list[Message]:
    return [Message.from_role_and_content(Role.USER if index % 2 else Role.ASSISTANT, f"{word} {index} " * 20) for index in range(count)]


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    rendered: list[int] = []

    def render(messages: list[Message]) -> Any:
        rendered.append(len(messages))
        return render_each(messages)

    monkeypatch.setattr(rendering, "render_each", render)
    return rendered


def test_a_tenants_messages_are_rendered_once_and_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = counting(monkeypatch)
    renderer, messages = PromptRenderer(), dialog(6)
    first = asyncio.run(renderer.each(messages, "alice"))
    again = asyncio.run(renderer.each([*messages, *dialog(2, "more")], "alice"))  # a client sending its history again
    assert [piece.ids() for piece in again[:6]] == [piece.ids() for piece in first] == [piece.ids() for piece in render_each(messages)]
    assert rendered == [6, 2]  # only the new messages the second time
    asyncio.run(renderer.each(messages, "mallory"))  # another tenant's are its own: rendered again
    assert rendered == [6, 2, 6]


def test_the_memory_is_bounded_in_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered = counting(monkeypatch)
    monkeypatch.setattr(rendering, "CACHED_MESSAGE_TOKENS", 16 * 150)  # room for a few messages of ~45 tokens
    renderer = PromptRenderer()
    asyncio.run(renderer.each(dialog(100), "alice"))
    assert renderer._piece_tokens <= 16 * 150 and len(renderer._pieces) < 100
    asyncio.run(renderer.each(dialog(1), "alice"))  # the oldest went first
    assert rendered == [100, 1]
