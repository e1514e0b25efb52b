"""A turn's run, as the Agents API tells it: the Responses events of one run become the session's
`agent.session.turn.*` events, and its output items the Agents API's own items (openai 3.57
`AgentSessionItem`: `message` with `phase`, `reasoning` with its summary only, `function_call`,
`function_call_output`, `mcp_call`, `web_search_call`, `command_execution`).

A turn may take several runs (one per tool-result round or steer): each run's output indices go on from
where the previous run's ended, so a turn's items are numbered as one list."""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from ..core.ids import new_id
from ..jsontext import dumps
from ..protocol import EventType, ItemStatus
from ..responses.events.log import Batch
from ..responses.shapes.items import Delta, MessageOutput

# Responses events that carry over one for one, renamed; the fields they keep.
_RENAMED = {
    EventType.CONTENT_PART_ADDED: ("agent.session.turn.content_part.added", ("item_id", "content_index", "part")),
    EventType.CONTENT_PART_DONE: ("agent.session.turn.content_part.done", ("item_id", "content_index", "part")),
    EventType.OUTPUT_TEXT_DONE: ("agent.session.turn.output_text.done", ("item_id", "content_index", "text")),
    EventType.REASONING_SUMMARY_PART_ADDED: ("agent.session.turn.reasoning_summary_part.added", ("item_id", "summary_index", "part")),
    EventType.REASONING_SUMMARY_PART_DONE: ("agent.session.turn.reasoning_summary_part.done", ("item_id", "summary_index", "part")),
    EventType.REASONING_SUMMARY_TEXT_DELTA: ("agent.session.turn.reasoning_summary_text.delta", ("item_id", "summary_index", "delta")),
    EventType.REASONING_SUMMARY_TEXT_DONE: ("agent.session.turn.reasoning_summary_text.done", ("item_id", "summary_index", "text")),
}
# Items that stream: added as they open, then their parts. The others are told once whole (a function
# call's arguments complete: a client's tool handler runs on `item.added`).
_STREAMED = frozenset({"message", "reasoning"})


def frame(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode()


def event(type: str, **fields: Any) -> dict[str, Any]:
    return {"type": type, "event_id": new_id("event"), **fields}


class RunTranslation:
    """One run of a turn: its events in, the session's events and finished items out."""

    def __init__(self, session_id: str, turn_id: str, base_index: int, summaries: bool) -> None:
        self.session_id, self.turn_id, self.base_index = session_id, turn_id, base_index
        self.summaries = summaries  # reasoning items are shown for their summaries: none asked, none shown
        self.items: list[dict[str, Any]] = []  # items made whole, in order: what the turn's item list keeps
        self._commands: dict[str, tuple[str, str, float]] = {}  # shell call_id -> (item id, command, started)
        self._outputs: dict[str, str] = {}  # a shell call output's item id -> its command's item id
        self.last_index = base_index - 1

    def batch(self, batch: Batch) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for raw in batch:
            out.extend(self.one(raw))
        return out

    def one(self, raw: Delta | Mapping[str, Any]) -> Iterable[dict[str, Any]]:
        if isinstance(raw, Delta):
            if raw.item.delta_type == EventType.OUTPUT_TEXT_DELTA:
                yield self._at("agent.session.turn.output_text.delta", raw.item.output_index, item_id=raw.item.id, content_index=0, delta=raw.text)
            return
        kind = raw["type"]
        renamed = _RENAMED.get(kind)
        if renamed is not None:
            name, fields = renamed
            if kind in (EventType.CONTENT_PART_ADDED, EventType.CONTENT_PART_DONE) and raw["part"].get("type") != "output_text":
                return  # a reasoning item's raw text: the Agents API shows its summary alone
            yield self._at(name, raw["output_index"], **{field: raw[field] for field in fields})
        elif kind == EventType.OUTPUT_TEXT_DELTA:
            yield self._at(
                "agent.session.turn.output_text.delta",
                raw["output_index"],
                item_id=raw["item_id"],
                content_index=raw["content_index"],
                delta=raw["delta"],
            )
        elif kind == EventType.SHELL_CALL_OUTPUT_CONTENT_DELTA and raw["item_id"] in self._outputs:
            text = "".join(raw["delta"].values())
            yield self._at("agent.output.command_execution_output.delta", raw["output_index"], item_id=self._outputs[raw["item_id"]], delta=text)
        elif kind == EventType.OUTPUT_ITEM_ADDED:
            yield from self._added(raw["item"], raw["output_index"])
        elif kind == EventType.OUTPUT_ITEM_DONE:
            yield from self._done(raw["item"], raw["output_index"])

    def _added(self, item: Mapping[str, Any], index: int) -> Iterable[dict[str, Any]]:
        kind, opened = item["type"], self.item(item, opening=True)
        if kind in _STREAMED and opened is not None:
            yield self._at("agent.session.turn.item.added", index, item=opened)
        elif kind == "shell_call_output" and item["call_id"] in self._commands:
            self._outputs[item["id"]] = self._commands[item["call_id"]][0]

    def _done(self, item: Mapping[str, Any], index: int) -> Iterable[dict[str, Any]]:
        if item["type"] == "shell_call":  # whole now (its commands streamed as the model wrote them)
            command = "\n".join(item.get("action", {}).get("commands", []))
            self._commands[item["call_id"]] = (item["id"], command, time.monotonic())
            yield self._at("agent.session.turn.item.added", index, item=self._command(item["id"], command, ItemStatus.IN_PROGRESS))
            return
        if item["type"] == "shell_call_output":
            yield from self._command_done(item, index)
            return
        made = self.item(item)
        if made is None:
            return
        self.items.append(made)
        if item["type"] not in _STREAMED:
            yield self._at("agent.session.turn.item.added", index, item=made)
        yield self._at("agent.session.turn.item.done", index, item=made)

    def _command_done(self, item: Mapping[str, Any], index: int) -> Iterable[dict[str, Any]]:
        self._outputs.pop(item["id"], None)
        known = self._commands.pop(item["call_id"], None)
        if known is None:
            return
        item_id, command, started = known
        outputs = item.get("output") or []
        text = "".join(str(part.get("stdout", "")) + str(part.get("stderr", "")) for part in outputs)
        outcome = outputs[-1].get("outcome", {}) if outputs else {}
        exit_code = outcome.get("exit_code") if outcome.get("type") == "exit" else None
        status = ItemStatus.COMPLETED if exit_code == 0 else ItemStatus.FAILED
        done = self._command(item_id, command, status, exit_code=exit_code, output=text, duration_ms=int((time.monotonic() - started) * 1000))
        self.items.append(done)
        yield self._at("agent.session.turn.item.done", index, item=done)

    def _command(self, item_id: str, command: str, status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": item_id, "type": "command_execution", "command": command, "cwd": "/mnt/data", "status": status, "turn_id": self.turn_id,
            "exit_code": None, "output": None, "duration_ms": None, **fields,
        }  # fmt: skip

    def item(self, item: Mapping[str, Any], opening: bool = False) -> dict[str, Any] | None:
        """The Agents API's item for a Responses output item; None for what it does not show."""
        kind, turn = item["type"], self.turn_id
        status = ItemStatus.IN_PROGRESS if opening else _status(item.get("status"))
        if kind == "message":
            content = (
                []
                if opening
                else [{**part, "annotations": part.get("annotations", [])} for part in item.get("content", []) if part.get("type") == "output_text"]
            )
            return {
                "id": item["id"],
                "type": "message",
                "role": "assistant",
                "content": content,
                "phase": item.get("phase"),
                "status": status,
                "turn_id": turn,
            }
        if kind == "reasoning":
            if not self.summaries:
                return None
            return {
                "id": item["id"],
                "type": "reasoning",
                "summary": [] if opening else list(item.get("summary", [])),
                "status": status,
                "turn_id": turn,
            }
        if kind == "function_call":
            return {
                "id": item["id"], "type": "function_call", "call_id": item["call_id"], "name": item["name"], "arguments": item["arguments"],
                "status": status, "turn_id": turn,
            }  # fmt: skip
        if kind == "mcp_call":
            return {
                "id": item["id"], "type": "mcp_call", "name": item["name"], "server_label": item["server_label"], "arguments": item["arguments"],
                "output": item.get("output"), "error": item.get("error"), "status": ItemStatus.FAILED if item.get("error") else status, "turn_id": turn,
            }  # fmt: skip
        if kind == "web_search_call":
            return {"id": item["id"], "type": "web_search_call", "status": status, "action": item.get("action"), "turn_id": turn}
        return None

    def _at(self, type: str, index: int, **fields: Any) -> dict[str, Any]:
        output_index = self.base_index + index
        self.last_index = max(self.last_index, output_index)
        return event(type, session_id=self.session_id, turn_id=self.turn_id, output_index=output_index, **fields)


def _status(status: Any) -> ItemStatus:
    shown = (ItemStatus.IN_PROGRESS, ItemStatus.COMPLETED, ItemStatus.INCOMPLETE)  # the Agents API's item statuses
    return ItemStatus(status) if status in shown else ItemStatus.COMPLETED


def user_message(message: Mapping[str, Any], turn_id: str) -> dict[str, Any]:
    """A user's input message as the turn's item (its parts as the Agents API shows them)."""
    content = [part for part in message["content"] if part.get("type") in ("input_text", "input_image")]
    return {"id": MessageOutput.fresh_id(), "type": "message", "role": "user", "content": content, "status": ItemStatus.COMPLETED, "turn_id": turn_id}


def tool_output(call_id: str, output: Any, success: bool, turn_id: str) -> dict[str, Any]:
    return {
        "id": new_id("fco"),
        "type": "function_call_output",
        "call_id": call_id,
        "output": output,
        "status": ItemStatus.COMPLETED if success else ItemStatus.FAILED,
        "turn_id": turn_id,
    }
