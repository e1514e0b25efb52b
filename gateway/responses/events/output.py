"""The one owner of a response's output: its items in order, the sequence numbers of its events, and the
log the events go to.

Whatever adds an item (the run loop for the model's messages, a tool for its call) asks `add()` for the
item's place, and whatever has events to send hands them to `emit()`: no one else appends to the output
or counts it, so indices and sequence numbers can neither repeat nor skip.

It also keeps what another replica needs to adopt the run at the last event sent (adoption.py): the
tokens of the engine call in progress whose events are out, in step with them.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar, cast

from ...core.ids import derived_ids
from ...engine.completion import FinishReason
from ...protocol import ItemStatus
from ..shapes.items import Events, OutputItem
from ..shapes.output_items import OutputItemShape
from .log import Batch, EventLog

ItemT = TypeVar("ItemT", bound=OutputItem)


class ResponseOutput:
    def __init__(self) -> None:
        self.items: list[OutputItem] = []
        self.events = Events()  # hands out the sequence numbers
        self.log = EventLog()
        self.seed = ""  # the response's id, once known: items' ids follow from it and their index
        # The engine call in progress: its tokens whose events were emitted, and whether the call's own
        # events are all out (the model's turn ended; a tool call may run).
        self.generated: list[int] = []
        self.finish_reason: FinishReason | None = None
        self.call_ended = False
        # Whether the engine's grammar holds the call's calls to their tools' shapes as they are written: a
        # client's call then streams live, otherwise it is shown once it is known to be usable (tools/client.py).
        self.enforced = True
        # The summaries of the call's reasoning items whose events are out, by output index ("": none could be
        # written): an adopter gives them again instead of writing others (summaries.py).
        self.summaries: dict[int, str] = {}
        self._muted = False  # adoption: the events of tokens parsed again were sent before
        self._resume_at = 0
        self._after_replay: list[Callable[[], None]] = []  # what emits events the client never had (when_unmuted)

    def add(self, make: Callable[[int], ItemT]) -> ItemT:
        """A new item at the end of the output; `make` builds it for its index."""
        index = len(self.items)
        with derived_ids(f"{self.seed}/{index}"):
            item = make(index)
        self.items.append(item)
        return item

    def emit(self, batch: Batch) -> None:
        """Send the events of one step of the run to every reader."""
        if not self._muted:
            self.log.append(batch)

    def emit_tokens(self, batch: Batch, tokens: list[int], finish_reason: FinishReason | None) -> None:
        """The events of one engine chunk, and its tokens noted as out with them."""
        if not self._muted:
            self.log.append(batch)
        self.generated += tokens
        if finish_reason is not None:
            self.finish_reason = finish_reason

    def new_call(self) -> None:
        self.generated = []
        self.finish_reason = None
        self.call_ended = False
        self.enforced = True
        self.summaries = {}

    # -- adoption ------------------------------------------------------------------------------------------

    @property
    def muted(self) -> bool:
        return self._muted

    def restore(self, items: list[dict[str, Any]], resume_at: int) -> None:
        """The output of a run adopted from another replica: its ended items as they were stored; what it
        emits next is muted (parsed again, sent before) until `unmute()`, which goes on at `resume_at`."""
        self.items = [StoredItem(index, item) for index, item in enumerate(items)]
        self._muted, self._resume_at = True, resume_at

    def unmute(self) -> None:
        if self._muted:
            self._muted = False
            self.events.sequence_number = self._resume_at
            waiting, self._after_replay = self._after_replay, []
            for show in waiting:
                show()

    def when_unmuted(self, show: Callable[[], None]) -> None:
        """`show` emits events the client never had: now, or once the adopted events parsed again are behind."""
        if self._muted:
            self._after_replay.append(show)
        else:
            show()

    # ------------------------------------------------------------------------------------------------------

    def unfinished(self) -> list[OutputItem]:
        """The items whose `output_item.done` was not sent: those a failure or cancellation cuts off."""
        return [item for item in self.items if not item.done_sent]

    def as_dicts(self) -> list[OutputItemShape]:
        return [item.as_dict() for item in self.items]


class StoredItem(OutputItem):
    """An ended item of a run adopted from another replica, as that replica stored it."""

    type = "stored"
    id_prefix = "item"

    def __init__(self, output_index: int, stored: dict[str, Any]) -> None:
        self.id = str(stored.get("id", ""))
        self.output_index = output_index
        self.status = ItemStatus(stored.get("status", ItemStatus.COMPLETED))
        self.done_sent = True
        self._stored = stored

    def as_dict(self) -> OutputItemShape:
        return cast(OutputItemShape, self._stored)  # as the replica that made it wrote it
