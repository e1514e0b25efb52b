"""Chat Completions on the wire: a run told as one `chat.completion`, or as `chat.completion.chunk` frames.

Streaming follows the Chat Completions rules: the role once, reasoning before content, each tool call's
first fragment with index, id, type and name and later fragments with index and argument text only,
`finish_reason` on the last choice chunk, a usage chunk when asked, then `data: [DONE]`.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Literal

from ..jsontext import dumps
from ..protocol import RESPONSE_ENDINGS, EventType, ItemStatus, ResponseStatus
from ..responses.run_service import LiveResponse
from ..responses.shapes.items import CustomToolCallOutput, Delta, FunctionCallOutput, MessageOutput, ReasoningOutput

DONE = b"data: [DONE]\n\n"


ChatFinishReason = Literal["stop", "length", "tool_calls"]


def finish_reason(run: LiveResponse) -> ChatFinishReason:
    if any(isinstance(item, FunctionCallOutput) and item.status == ItemStatus.COMPLETED for item in run.items):
        return "tool_calls"
    return "length" if run.response["status"] == ResponseStatus.INCOMPLETE else "stop"


def chat_usage(run: LiveResponse) -> dict[str, Any]:
    usage = run.usage
    return {
        "prompt_tokens": usage.input,
        "completion_tokens": usage.output,
        "total_tokens": usage.input + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cached},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    }


def completion(completion_id: str, run: LiveResponse, include_reasoning: bool) -> dict[str, Any]:
    content = "".join(item.text for item in run.items if isinstance(item, MessageOutput))
    reasoning = "".join(item.text for item in run.items if isinstance(item, ReasoningOutput))
    calls = [tool_call(item) for item in run.items if isinstance(item, FunctionCallOutput) and item.status == ItemStatus.COMPLETED]
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if calls else ""), "annotations": message_annotations(run)}
    logprobs = None
    if run.logprob_count is not None:
        entries = [entry for item in run.items if isinstance(item, MessageOutput) for entry in item.logprobs or ()]
        logprobs = {"content": entries, "refusal": None}
    if include_reasoning and reasoning:
        message["reasoning"] = reasoning
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": run.response["created_at"],
        "model": run.model_id,
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish_reason(run)}],
        "usage": chat_usage(run),
    }


def tool_call(item: FunctionCallOutput) -> dict[str, Any]:
    """A completed call as a message's tool call: a function's JSON arguments, or a custom tool's raw input."""
    if isinstance(item, CustomToolCallOutput):
        return {"id": item.call_id, "type": "custom", "custom": {"name": item.name, "input": item.text}}
    return {"id": item.call_id, "type": "function", "function": {"name": item.name, "arguments": item.text}}


def message_annotations(run: LiveResponse) -> list[dict[str, Any]]:
    """The messages' url_citation annotations, in Chat Completions' shape, over the joined content."""
    found, offset = [], 0
    for item in run.items:
        if isinstance(item, MessageOutput):
            found += [chat_annotation(annotation, offset) for annotation in item.annotations]
            offset += len(item.text)
    return found


def chat_annotation(annotation: dict[str, Any], offset: int) -> dict[str, Any]:
    citation = {key: annotation[key] for key in ("url", "title")}
    citation |= {"start_index": annotation["start_index"] + offset, "end_index": annotation["end_index"] + offset}
    return {"type": "url_citation", "url_citation": citation}


class ChatChunks:
    """Turns the run's events into `chat.completion.chunk` frames. Deltas are formatted from prefixes
    computed once per stream, as on the Responses path."""

    def __init__(self, completion_id: str, created: int, model: str, include_usage: bool, include_reasoning: bool) -> None:
        self.base = f'data: {{"id":"{completion_id}","object":"chat.completion.chunk","created":{created},"model":{dumps(model)}'
        self.head = self.base + ',"choices":[{"index":0,"delta":'
        usage = ',"usage":null' if include_usage else ""
        self.tail = f',"logprobs":null,"finish_reason":null}}]{usage}}}\n\n'
        self.include_usage = include_usage
        self.include_reasoning = include_reasoning
        self.tool_index: dict[str, int] = {}  # function call item id → tool call index
        # Per output item: the chunk text before a delta's JSON string and after it (None: not sent).
        self.delta_frames: dict[object, tuple[str, str] | None] = {}
        self.content_chars = 0  # of the content sent so far: where each message's annotations start from
        self.message_starts: dict[str, int] = {}  # message item id → its offset in the content

    def chunk(self, delta: str) -> bytes:
        return f"{self.head}{delta}{self.tail}".encode()

    async def frames(self, run: LiveResponse) -> AsyncIterator[bytes]:
        yield self.chunk('{"role":"assistant","content":""}')
        async for batch in run.follow():
            out = []
            for event in batch:
                if isinstance(event, Delta):
                    frame = self._delta(event)
                elif (kind := event["type"]) == EventType.OUTPUT_ITEM_ADDED:  # the item itself, not its snapshot
                    item = run.items[event["output_index"]]
                    frame = self._tool_call_start(item) if isinstance(item, FunctionCallOutput) else None
                elif kind == EventType.ANNOTATION_ADDED:
                    annotation = chat_annotation(event["annotation"], self.message_starts.get(event["item_id"], 0))
                    frame = self.chunk(dumps({"annotations": [annotation]}))
                else:
                    frame = self._terminal(run, event) if kind in _TERMINAL else None
                if frame:
                    out.append(frame)
            if out:
                yield b"".join(out)

    def _delta(self, event: Delta) -> bytes | None:
        item = event.item
        try:
            frame = self.delta_frames[item]
        except KeyError:
            frame = self.delta_frames[item] = self._delta_frame(item)
        if frame is None:
            return None
        if isinstance(item, MessageOutput):
            self.message_starts.setdefault(item.id, self.content_chars)
            self.content_chars += len(event.text)
        text = dumps(event.text)
        if event.logprobs is not None:  # asked for: this delta's tokens, in the choice's `logprobs`
            logprobs = dumps({"content": event.logprobs, "refusal": None})
            tail = frame[1].replace('"logprobs":null', f'"logprobs":{logprobs}', 1)
            return f"{frame[0]}{text}{tail}".encode()
        return f"{frame[0]}{text}{frame[1]}".encode()

    def _delta_frame(self, item: object) -> tuple[str, str] | None:
        if isinstance(item, MessageOutput):
            return self.head + '{"content":', "}" + self.tail
        if isinstance(item, ReasoningOutput):
            return (self.head + '{"reasoning":', "}" + self.tail) if self.include_reasoning else None
        assert isinstance(item, FunctionCallOutput)
        index = self.tool_index[item.id]
        field = '"custom":{"input":' if isinstance(item, CustomToolCallOutput) else '"function":{"arguments":'
        return self.head + f'{{"tool_calls":[{{"index":{index},{field}', "}}]}" + self.tail

    def _tool_call_start(self, item: FunctionCallOutput) -> bytes:
        """A call's first fragment: index, id, type and name (a custom tool's input follows as `custom.input`)."""
        index = self.tool_index[item.id] = len(self.tool_index)
        call: dict[str, Any] = {"index": index, "id": item.call_id}
        if isinstance(item, CustomToolCallOutput):
            call |= {"type": "custom", "custom": {"name": item.name, "input": ""}}
        else:
            call |= {"type": "function", "function": {"name": item.name, "arguments": ""}}
        return self.chunk(dumps({"tool_calls": [call]}))

    def _terminal(self, run: LiveResponse, event: dict[str, Any]) -> bytes:
        if event["type"] == EventType.FAILED:
            error = (
                run.failure.body()
                if run.failure
                else {"error": {"message": "The response failed.", "type": "server_error", "param": None, "code": None}}
            )
            return f"data: {dumps(error)}\n\n".encode() + DONE
        final = self.head + "{}" + self.tail.replace('"finish_reason":null', f'"finish_reason":"{finish_reason(run)}"')
        frames = [final.encode()]
        if self.include_usage:
            usage_chunk = f'{self.base},"choices":[],"usage":{dumps(chat_usage(run))}}}\n\n'
            frames.append(usage_chunk.encode())
        frames.append(DONE)
        return b"".join(frames)


_TERMINAL = frozenset(RESPONSE_ENDINGS)
