"""Output items of a response and the stream events each one emits, in the order `STREAMING.md` fixes.

Each item knows its own events: `opened()` (from `output_item.added` to the first delta's part),
`delta(text)`, and `closed(status)` (from the `.done` of its text to `output_item.done`). `Events`
numbers every event, so sequence numbers can neither repeat nor skip. Deltas are the hot path: they
are `Delta` objects whose JSON is formatted from a prefix computed once per item.
"""

from __future__ import annotations

from typing import Any, Callable

from ...core.ids import new_id
from ...jsontext import dumps
from ...protocol import EventType, ItemStatus
from .output_items import CustomToolCallShape, FunctionCallShape, MessageShape, OutputItemShape, ReasoningShape

Event = dict[str, Any]


class Delta:
    """One delta event. `frame()` is the SSE frame, built from the item's prefix without a dict or a
    full json.dumps."""

    __slots__ = ("item", "sequence_number", "text", "logprobs")

    def __init__(self, item: "TextItem", sequence_number: int, text: str, logprobs: list[Event] | None = None) -> None:
        self.item = item
        self.sequence_number = sequence_number
        self.text = text
        self.logprobs = logprobs  # the entries of this delta's tokens, when the client asked for logprobs

    def frame(self) -> bytes:
        text = dumps(self.text)
        if self.logprobs is not None:
            return self.item.delta_frame_with_logprobs(self, text)
        return f'{self.item.delta_prefix}{self.sequence_number},"delta":{text}}}\n\n'.encode()


class Events:
    """Hands out sequence numbers: 0 for `response.created`, then one more per event."""

    def __init__(self) -> None:
        self.sequence_number = 0

    def make(self, type: EventType, **fields: Any) -> Event:
        event = {"type": type, "sequence_number": self.sequence_number, **fields}
        self.sequence_number += 1
        return event

    def delta(self, item: "TextItem", text: str, logprobs: list[Event] | None = None) -> Delta:
        number = self.sequence_number
        self.sequence_number += 1
        return Delta(item, number, text, logprobs)


class OutputItem:
    type: str
    id_prefix: str

    def __init__(self, output_index: int) -> None:
        self.id = self.fresh_id()
        self.output_index = output_index
        self.status: ItemStatus = ItemStatus.IN_PROGRESS
        self.done_sent = False  # its `output_item.done` was emitted: nothing more of it will come

    @classmethod
    def fresh_id(cls) -> str:
        """A new id of this item type: its prefix is spelled here alone, also for one read back without an id."""
        return new_id(cls.id_prefix)

    def as_dict(self) -> OutputItemShape:
        raise NotImplementedError

    def added(self, events: Events) -> Event:
        return events.make(EventType.OUTPUT_ITEM_ADDED, output_index=self.output_index, item=self.as_dict())

    def _event(self, events: Events, type: EventType) -> Event:
        """One of the item's own events (a tool call's progress), naming the item."""
        return events.make(type, output_index=self.output_index, item_id=self.id)

    def done(self, events: Events) -> Event:
        self.done_sent = True
        return events.make(EventType.OUTPUT_ITEM_DONE, output_index=self.output_index, item=self.as_dict())

    def opened(self, events: Events) -> list[Event]:
        """The events that open the item as the model starts writing it."""
        raise NotImplementedError

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        """The events that end the item (cut off, or the response failed: `incomplete`)."""
        raise NotImplementedError


class LiveArgumentsItem(OutputItem):
    """A call item that reads the model's arguments as they are written, to stream events of its own (a
    hosted shell call's commands): Turn feeds it the call's text deltas."""

    def feed(self, events: Events, text: str) -> list[Event]:
        raise NotImplementedError


class TextItem(OutputItem):
    """An item with one text part that streams: a reasoning item or an assistant message."""

    def delta_frame_with_logprobs(self, delta: Delta, text: str) -> bytes:
        """A delta's frame with its tokens' logprobs (only a message has them to give)."""
        raise NotImplementedError

    part_type: str
    delta_type: EventType
    done_type: EventType
    delta_extra = ""  # JSON fields after "delta", e.g. logprobs

    def __init__(self, output_index: int) -> None:
        super().__init__(output_index)
        self.chunks: list[str] = []
        self.delta_prefix = (
            f'event: {self.delta_type}\ndata: {{"type":"{self.delta_type}","item_id":"{self.id}",'
            f'"output_index":{output_index},"content_index":0{self.delta_extra},"sequence_number":'
        )

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    def part(self, text: str) -> Event:
        return {"type": self.part_type, "text": text}

    def opened(self, events: Events) -> list[Event]:
        return [
            self.added(events),
            events.make(
                EventType.CONTENT_PART_ADDED,
                item_id=self.id,
                output_index=self.output_index,
                content_index=0,
                part=self.part(""),
            ),
        ]

    def delta(self, events: Events, text: str) -> Delta:
        self.chunks.append(text)
        return events.delta(self, text)

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        self.status = status
        return [*self.text_done(events), self.done(events)]

    def text_done(self, events: Events) -> list[Event]:
        """The text is whole: its part closes."""
        text = self.text
        ids = {"item_id": self.id, "output_index": self.output_index, "content_index": 0}
        return [
            events.make(self.done_type, **ids, text=text, **self.done_extra()),
            events.make(EventType.CONTENT_PART_DONE, **ids, part=self.part(text)),
        ]

    def done_extra(self) -> dict[str, Any]:
        return {}


class ReasoningOutput(TextItem):
    """The analysis channel."""

    type = "reasoning"
    id_prefix = "rs"
    part_type = "reasoning_text"
    delta_type = EventType.REASONING_TEXT_DELTA
    done_type = EventType.REASONING_TEXT_DONE

    def __init__(self, output_index: int, seal: Callable[[str], str] | None = None) -> None:
        super().__init__(output_index)
        self.seal = seal  # set when the client asked for reasoning.encrypted_content
        self._sealed: str | None = None
        self.summary = ""  # what the model wrote of it for the user (loop/summaries.py)
        self._text_ended = False  # its text part closed: the item waits for its summary

    def text_done(self, events: Events) -> list[Event]:
        self._text_ended = True
        return super().text_done(events)

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        if not self._text_ended:
            return super().closed(events, status)
        self.status = status  # cut off while its summary was being written: it ends without one
        return [self.done(events)]

    def as_dict(self) -> ReasoningShape:
        content = [self.part(self.text)] if self.status != ItemStatus.IN_PROGRESS else []
        summary = [{"type": "summary_text", "text": self.summary}] if self.summary else []
        item: ReasoningShape = {"id": self.id, "type": "reasoning", "summary": summary, "content": content}
        if self.seal is not None and self.status != ItemStatus.IN_PROGRESS:
            if self._sealed is None:
                self._sealed = self.seal(self.text)
            item["encrypted_content"] = self._sealed
        if self.status == ItemStatus.INCOMPLETE:
            item["status"] = ItemStatus.INCOMPLETE
        return item


class MessageOutput(TextItem):
    """The final channel (`phase: final_answer`), or a commentary preamble (`phase: commentary`)."""

    type = "message"
    id_prefix = "msg"
    part_type = "output_text"
    delta_type = EventType.OUTPUT_TEXT_DELTA
    done_type = EventType.OUTPUT_TEXT_DONE
    delta_extra = ',"logprobs":[]'

    def __init__(self, output_index: int, phase: str, with_logprobs: bool = False) -> None:
        super().__init__(output_index)
        self.phase = phase
        # With logprobs asked for: every reported token's entry, and those not yet sent with a delta.
        self.logprobs: list[Event] | None = [] if with_logprobs else None
        self.pending_logprobs: list[Event] = []
        self.annotations: list[Event] = []  # url_citation annotations of the text (citations.py)

    def annotated(self, events: Events, annotation: Event) -> Event:
        """An annotation of the text sent so far, announced right after the delta that ends its span."""
        self.annotations.append(annotation)
        return events.make(
            EventType.ANNOTATION_ADDED,
            item_id=self.id,
            output_index=self.output_index,
            content_index=0,
            annotation_index=len(self.annotations) - 1,
            annotation=annotation,
        )

    def delta(self, events: Events, text: str) -> Delta:
        if self.logprobs is None:
            return super().delta(events, text)
        self.chunks.append(text)
        sent, self.pending_logprobs = self.pending_logprobs, []
        self.logprobs.extend(sent)
        return events.delta(self, text, sent)

    def delta_frame_with_logprobs(self, delta: Delta, text: str) -> bytes:
        logprobs = dumps(delta.logprobs)
        prefix = self.delta_prefix.replace(',"logprobs":[]', f',"logprobs":{logprobs}', 1)
        return f'{prefix}{delta.sequence_number},"delta":{text}}}\n\n'.encode()

    def part(self, text: str) -> Event:
        # A copy: events are written out later, while the list may still grow.
        return {"type": "output_text", "annotations": list(self.annotations), "logprobs": list(self.logprobs or ()), "text": text}

    def done_extra(self) -> dict[str, Any]:
        return {"logprobs": list(self.logprobs or ())}

    def as_dict(self) -> MessageShape:
        content = [self.part(self.text)] if self.status != ItemStatus.IN_PROGRESS else []
        return {
            "id": self.id,
            "type": "message",
            "status": self.status,
            "content": content,
            "role": "assistant",
            "phase": self.phase,
        }


class FunctionCallOutput(TextItem):
    """A call to `functions.NAME`: its arguments stream while the model writes them."""

    type = "function_call"
    id_prefix = "fc"
    part_type = ""
    delta_type = EventType.FUNCTION_CALL_ARGUMENTS_DELTA
    done_type = EventType.FUNCTION_CALL_ARGUMENTS_DONE

    def __init__(self, output_index: int, name: str, namespace: str | None = None) -> None:
        self.name = name
        self.namespace = namespace  # set for a function of a `namespace` tool
        self.call_id = new_id("call")
        super().__init__(output_index)
        self.delta_prefix = (
            f'event: {self.delta_type}\ndata: {{"type":"{self.delta_type}","item_id":"{self.id}","output_index":{output_index},"sequence_number":'
        )

    def opened(self, events: Events) -> list[Event]:
        return [self.added(events)]

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        self.status = status
        return [
            events.make(
                self.done_type,
                item_id=self.id,
                output_index=self.output_index,
                name=self.name,
                arguments=self.text,
            ),
            self.done(events),
        ]

    @property
    def recipient(self) -> str:
        # A deferred top-level function's call names it as its namespace too (OpenAI's shape): still functions.NAME.
        namespace = self.namespace if self.namespace and self.namespace != self.name else "functions"
        return f"{namespace}.{self.name}"

    def as_dict(self) -> FunctionCallShape | CustomToolCallShape:  # a custom tool's call writes its own
        item: FunctionCallShape = {
            "id": self.id,
            "type": "function_call",
            "status": self.status,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.text if self.status != ItemStatus.IN_PROGRESS else "",
        }
        if self.namespace is not None:
            item["namespace"] = self.namespace
        return item


class CustomToolCallOutput(FunctionCallOutput):
    """A call to a custom tool: its raw text input streams while the model writes it."""

    type = "custom_tool_call"
    id_prefix = "ctc"
    delta_type = EventType.CUSTOM_TOOL_CALL_INPUT_DELTA
    done_type = EventType.CUSTOM_TOOL_CALL_INPUT_DONE

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        self.status = status
        ids = {"item_id": self.id, "output_index": self.output_index}
        return [events.make(self.done_type, **ids, input=self.text), self.done(events)]

    def as_dict(self) -> CustomToolCallShape:
        item: CustomToolCallShape = {
            "id": self.id,
            "type": "custom_tool_call",
            "status": self.status,
            "call_id": self.call_id,
            "name": self.name,
            "input": self.text if self.status != ItemStatus.IN_PROGRESS else "",
        }
        if self.namespace is not None:
            item["namespace"] = self.namespace
        return item


class ToolCallItem(TextItem):
    """A call whose input (code, arguments) streams while the model writes it, then runs in the gateway.

    Events come in three steps: `opened()` when the model starts the call, `written()` when its input is
    complete, `finished()` once it ran. `closed()` ends it without running (cut off, or the response failed).
    """

    part_type = ""
    input_field: str  # the field of the input's `.done` event: code, arguments
    in_progress_type: EventType
    completed_type: EventType
    failed_type: EventType | None = None
    running_status: ItemStatus = ItemStatus.IN_PROGRESS

    def __init__(self, output_index: int) -> None:
        super().__init__(output_index)
        self.delta_prefix = (
            f'event: {self.delta_type}\ndata: {{"type":"{self.delta_type}","item_id":"{self.id}","output_index":{output_index},"sequence_number":'
        )
        self.input_done = False

    def _input_done(self, events: Events) -> Event:
        self.input_done = True
        return events.make(self.done_type, output_index=self.output_index, item_id=self.id, **{self.input_field: self.text})

    def running(self, events: Events) -> list[Event]:
        return []

    def opened(self, events: Events) -> list[Event]:
        return [self.added(events), self._event(events, self.in_progress_type)]

    def written(self, events: Events) -> list[Event]:
        self.status = self.running_status
        return [self._input_done(events), *self.running(events)]

    def finished(self, events: Events, status: ItemStatus) -> list[Event]:
        self.status = status
        kind = self.completed_type if status == ItemStatus.COMPLETED else self.failed_type
        return ([self._event(events, kind)] if kind else []) + [self.done(events)]

    def closed(self, events: Events, status: ItemStatus = ItemStatus.COMPLETED) -> list[Event]:
        written = [] if self.input_done else [self._input_done(events)]
        self.status = status
        return written + [self.done(events)]

    @property
    def input_text(self) -> str:
        return self.text if self.input_done else ""
