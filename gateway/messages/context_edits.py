"""`context_management` edits, where they mean something for Harmony.

- `clear_thinking_20251015`: Harmony keeps a turn's analysis only until its final answer, whatever the
  edit keeps; within the turn's tool calls it is kept (gpt-oss needs it to go on). Nothing to do.
- `clear_tool_uses_20250919`: once the prompt reaches the trigger (input tokens, counted exactly as the
  gateway renders the prompt, or tool uses), the results of all but the last `keep` tool uses are replaced
  by a note (their inputs too, with `clear_tool_inputs`), unless that would clear fewer than
  `clear_at_least` tokens; `exclude_tools` are never cleared. What was done is told back as Anthropic does,
  in `context_management.applied_edits`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import bad_request
from .blocks import AssistantMessage, ToolResultBlock, ToolUseBlock, UserMessage
from .request import ContextEdit, MessagesRequest

CLEAR_TOOL_USES = "clear_tool_uses_20250919"
KNOWN = frozenset({CLEAR_TOOL_USES, "clear_thinking_20251015"})
CLEARED = "[This tool result was cleared to save context.]"


@dataclass(frozen=True)
class ToolClearing:
    trigger: str  # "input_tokens" or "tool_uses"
    threshold: int
    keep: int
    clear_at_least: int
    exclude: frozenset[str]
    clear_inputs: bool | frozenset[str]

    def due(self, input_tokens: int, request: MessagesRequest) -> bool:
        if self.trigger == "tool_uses":
            return len(_results(request)) >= self.threshold
        return input_tokens >= self.threshold

    def apply(self, request: MessagesRequest) -> tuple[MessagesRequest, int]:
        """A copy of the request with the older tool uses cleared, and how many were."""
        edited = request.model_copy(deep=True)
        names = {block.id: block.name for message in edited.messages if isinstance(message, AssistantMessage) and not isinstance(message.content, str)
                 for block in message.content if isinstance(block, ToolUseBlock)}  # fmt: skip
        results = [result for result in _results(edited) if names.get(result.tool_use_id) not in self.exclude]
        cleared = results[: max(0, len(results) - self.keep)]
        for result in cleared:
            result.content = CLEARED
        ids = {result.tool_use_id for result in cleared}
        for message in edited.messages:
            if isinstance(message, AssistantMessage) and not isinstance(message.content, str):
                for block in message.content:
                    if isinstance(block, ToolUseBlock) and block.id in ids and self._clears_input(block.name):
                        block.input = {}
        return edited, len(cleared)

    def _clears_input(self, name: str) -> bool:
        return name in self.clear_inputs if isinstance(self.clear_inputs, frozenset) else self.clear_inputs


def _results(request: MessagesRequest) -> list[ToolResultBlock]:
    return [block for message in request.messages if isinstance(message, UserMessage) and not isinstance(message.content, str)
            for block in message.content if isinstance(block, ToolResultBlock)]  # fmt: skip


def tool_clearing(request: MessagesRequest) -> ToolClearing | None:
    """The request's `clear_tool_uses` edit, checked; other edits are accepted when they are Anthropic's."""
    found = None
    for index, edit in enumerate(request.context_management.edits if request.context_management else ()):
        if edit.type not in KNOWN:
            raise bad_request(f"context_management.edits.{index}.type: '{edit.type}' is not an edit this gateway knows.")
        if edit.type == CLEAR_TOOL_USES:
            found = _parse(edit, f"context_management.edits.{index}")
    return found


def _parse(edit: ContextEdit, where: str) -> ToolClearing:
    fields: dict[str, Any] = edit.model_extra or {}
    trigger = _amount(fields.get("trigger"), ("input_tokens", "tool_uses"), f"{where}.trigger") or ("input_tokens", 100_000)
    keep = _amount(fields.get("keep"), ("tool_uses",), f"{where}.keep") or ("tool_uses", 3)
    at_least = _amount(fields.get("clear_at_least"), ("input_tokens",), f"{where}.clear_at_least") or ("input_tokens", 0)
    exclude = fields.get("exclude_tools") or []
    inputs = fields.get("clear_tool_inputs") or False
    if not (isinstance(exclude, list) and all(isinstance(name, str) for name in exclude)):
        raise bad_request(f"{where}.exclude_tools: a list of tool names is expected.")
    if not (isinstance(inputs, bool) or (isinstance(inputs, list) and all(isinstance(name, str) for name in inputs))):
        raise bad_request(f"{where}.clear_tool_inputs: true, false or a list of tool names is expected.")
    clear_inputs = frozenset(inputs) if isinstance(inputs, list) else inputs
    return ToolClearing(trigger[0], trigger[1], keep[1], at_least[1], frozenset(exclude), clear_inputs)


def _amount(value: Any, kinds: tuple[str, ...], where: str) -> tuple[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("type") not in kinds or not isinstance(value.get("value"), int) or value["value"] < 0:
        raise bad_request(f"{where}: expected {{'type': {' or '.join(repr(kind) for kind in kinds)}, 'value': a count}}.")
    return value["type"], value["value"]


def applied(cleared: int, tokens: int) -> dict[str, Any]:
    return {"applied_edits": [{"type": CLEAR_TOOL_USES, "cleared_tool_uses": cleared, "cleared_input_tokens": tokens}]}
