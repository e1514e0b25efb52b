"""A thread sent again whole with `previous_response_id`, recognised so that it is read once.

Some clients (Semantic Kernel's `OpenAIResponsesAgent`) send, with `previous_response_id`, the whole
thread again: the first user message and every tool output so far, then what is new. Read as new input,
the repeated user message would come after the model's own call, and the model would read its question
twice. A response's dialog therefore keeps a mark of the inputs its chain was given, in order (their
count and a running digest, so the check costs the length of the input sent, never of the history); an
input that begins with exactly those inputs, and has more after them, skips them. Output items a client
replays between them (the model's calls and messages) are passed over in the comparison. An input that is
only the chain's inputs again (the same `hi` sent twice) is new input, as it always was.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

from ..shapes.input_models import (
    AdditionalToolsItem,
    ConfigurationUpdateItem,
    CustomToolCallOutputItem,
    FunctionCallOutputItem,
    InputItem,
    McpApprovalResponseItem,
    MessageItem,
)


@dataclass
class ThreadMark:
    """The inputs a chain of responses was given: how many, and their running digest."""

    count: int = 0
    digest: str = ""

    def add(self, key: str) -> None:
        self.count += 1
        self.digest = hashlib.sha256(f"{self.digest}\n{key}".encode()).hexdigest()

    def as_json(self) -> list[object]:
        return [self.count, self.digest]

    @classmethod
    def from_json(cls, data: object) -> "ThreadMark":
        if isinstance(data, list) and len(data) == 2 and isinstance(data[0], int) and isinstance(data[1], str):
            return cls(data[0], data[1])
        return cls()


def input_key(item: str | InputItem) -> str | None:
    """What identifies an input the client gave (a message of the user's side, a tool output, an approval);
    None for an item the model wrote, which a client may replay or not."""
    if isinstance(item, str):
        return f"user\0{item}"
    if isinstance(item, MessageItem):
        return None if item.role == "assistant" else f"{item.role}\0{item.text()}"
    if isinstance(item, (FunctionCallOutputItem, CustomToolCallOutputItem)):
        return f"{item.type}\0{item.call_id}\0{item.text()}"
    if isinstance(item, McpApprovalResponseItem):
        return f"approval\0{item.approval_request_id}\0{item.approve}"
    if isinstance(item, (AdditionalToolsItem, ConfigurationUpdateItem)):  # the client's, sent again with the thread
        return f"{item.type}\0{item.model_dump_json(exclude={'id'})}"
    return None


def resent_prefix(items: Sequence[InputItem], mark: ThreadMark) -> int:
    """How many of `items` are the chain's inputs sent again (0 when they are not, or are all there is)."""
    if mark.count == 0:
        return 0
    seen = ThreadMark()
    for index, item in enumerate(items):
        key = input_key(item)
        if key is None:
            continue
        seen.add(key)
        if seen.count == mark.count:
            if seen.digest != mark.digest:
                return 0
            rest = items[index + 1 :]
            return index + 1 if any(input_key(later) is not None for later in rest) else 0
    return 0
