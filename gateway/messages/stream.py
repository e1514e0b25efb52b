"""A run told as Anthropic's message stream: `message_start`, then each content block's
`content_block_start`, deltas and `content_block_stop`, then `message_delta` (the stop reason and the
output tokens: never the input again, which Claude Code would add twice) and `message_stop`. A run that
fails ends with an `error` event of type `api_error` (Claude Code then asks again without streaming).

Thinking, text and a client tool's arguments stream as they are written (`thinking_delta`, `text_delta`,
`input_json_delta`); a thinking block's `signature_delta` comes as it closes, when its analysis is sealed;
a hosted tool's blocks come whole once it ran. Deltas are the hot path: each block's frame is formatted
from a prefix made once per block.
"""

from __future__ import annotations

from typing import Any, AsyncIterator

from ..errors import APIError, anthropic_error
from ..jsontext import dumps
from ..protocol import EventType
from ..responses.run_service import LiveResponse
from ..responses.shapes.items import Delta, FunctionCallOutput, MessageOutput, ReasoningOutput
from .content import Block, blocks_of, citation, message_id, start_usage, stop_reason

_DELTA_FIELDS = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


def sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {dumps(data)}\n\n".encode()


class MessageFrames:
    def __init__(self, run: LiveResponse, model: str, max_tokens: int, thinking_shown: bool, edits: dict[str, Any] | None = None) -> None:
        self.edits = edits  # the `context_management` edits applied, told with `message_delta`
        self.run = run
        self.model = model
        self.max_tokens = max_tokens
        self.thinking_shown = thinking_shown
        self.count = 0  # content blocks begun
        # Per open block, by item id: its index and its delta frame's text before and after the delta's JSON
        # (None: its deltas are not shown).
        self.open: dict[str, tuple[int, str | None, str]] = {}
        self.messages: dict[str, MessageOutput] = {}  # the open text blocks' items (their text: citations' spans)

    async def frames(self) -> AsyncIterator[bytes]:
        run = self.run
        start: dict[str, Any] = {"id": message_id(run), "type": "message", "role": "assistant", "model": self.model, "content": [],
                 "stop_reason": None, "stop_sequence": None, "usage": start_usage(run)}  # fmt: skip
        yield sse("message_start", {"type": "message_start", "message": start})
        async for batch in run.follow():
            out: list[bytes] = []
            for event in batch:
                if isinstance(event, Delta):
                    frame = self._delta(event)
                    if frame is not None:
                        out.append(frame)
                    continue
                kind = event["type"]
                if kind == EventType.OUTPUT_ITEM_ADDED:
                    out += self._added(run.items[event["output_index"]])
                elif kind == EventType.OUTPUT_ITEM_DONE:
                    out += self._done(event["item"])
                elif kind == EventType.ANNOTATION_ADDED:
                    out += self._citation(event)
                elif kind in (EventType.COMPLETED, EventType.INCOMPLETE):
                    out += self._ended()
                elif kind == EventType.FAILED:
                    out.append(self._failed(run.failure))
            if out:
                yield b"".join(out)

    def _begin(self, item_id: str | None, block: Block, delta: str | None) -> bytes:
        index = self.count
        self.count += 1
        if item_id is not None:
            self.open[item_id] = (index, None, "") if delta is None else self._delta_frame(index, delta)
        return sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})

    @staticmethod
    def _delta_frame(index: int, delta: str) -> tuple[int, str | None, str]:
        head = (
            f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},"delta":{{"type":"{delta}","{_DELTA_FIELDS[delta]}":'
        )
        return index, head, "}}\n\n"

    def _added(self, item: object) -> list[bytes]:
        if isinstance(item, ReasoningOutput):
            block = {"type": "thinking", "thinking": "", "signature": ""}
            return [self._begin(item.id, block, "thinking_delta" if self.thinking_shown else None)]
        if isinstance(item, MessageOutput):
            self.messages[item.id] = item
            return [self._begin(item.id, {"type": "text", "text": ""}, "text_delta")]
        if isinstance(item, FunctionCallOutput) and item.type == "function_call":
            call: Block = {"type": "tool_use", "id": item.call_id, "name": item.name, "input": {}}
            return [self._begin(item.id, call, "input_json_delta")]
        return []  # a hosted tool's call: its blocks come whole once it ran

    def _delta(self, event: Delta) -> bytes | None:
        item = event.item
        frame = self.open.get(item.id)
        if frame is None or frame[1] is None:
            return None
        return f"{frame[1]}{dumps(event.text)}{frame[2]}".encode()

    def _done(self, item: dict[str, Any]) -> list[bytes]:
        item_id = item["id"]
        if item_id not in self.open:
            return [frame for block in blocks_of(item, self.thinking_shown) for frame in self._whole(block)]
        index = self.open.pop(item_id)[0]
        self.messages.pop(item_id, None)
        out = []
        if item.get("type") == "reasoning":
            delta = {"type": "signature_delta", "signature": item.get("encrypted_content") or ""}
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        return out

    def _whole(self, block: Block) -> list[bytes]:
        index = self.count
        return [self._begin(None, block, None), sse("content_block_stop", {"type": "content_block_stop", "index": index})]

    def _citation(self, event: dict[str, Any]) -> list[bytes]:
        frame = self.open.get(event["item_id"])
        if frame is None:
            return []
        message = self.messages.get(event["item_id"])
        found = citation(event["annotation"], message.text if message is not None else "")
        return [
            sse("content_block_delta", {"type": "content_block_delta", "index": frame[0], "delta": {"type": "citations_delta", "citation": found}})
        ]

    def _ended(self) -> list[bytes]:
        run = self.run
        delta = {"stop_reason": stop_reason(run, self.max_tokens), "stop_sequence": run.stop_sequence}
        ended: dict[str, Any] = {"type": "message_delta", "delta": delta, "usage": {"output_tokens": run.usage.output}}
        if self.edits is not None:
            ended["context_management"] = self.edits
        return [
            sse("message_delta", ended),
            sse("message_stop", {"type": "message_stop"}),
        ]

    @staticmethod
    def _failed(failure: APIError | None) -> bytes:
        error = failure if failure is not None else APIError(500, "The response failed.", type="server_error")
        return sse("error", anthropic_error(error))
