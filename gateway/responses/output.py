"""The one owner of a response's output: its items in order, the sequence numbers of its events, and the
log the events go to.

Whatever adds an item (the run loop for the model's messages, a tool for its call) asks `add()` for the
item's place, and whatever has events to send hands them to `emit()`: no one else appends to the output
or counts it, so indices and sequence numbers can neither repeat nor skip.
"""

from __future__ import annotations

from typing import Callable, TypeVar

from .items import Events, OutputItem
from .log import Batch, EventLog

ItemT = TypeVar("ItemT", bound=OutputItem)


class ResponseOutput:
    def __init__(self) -> None:
        self.items: list[OutputItem] = []
        self.events = Events()  # hands out the sequence numbers
        self.log = EventLog()

    def add(self, make: Callable[[int], ItemT]) -> ItemT:
        """A new item at the end of the output; `make` builds it for its index."""
        item = make(len(self.items))
        self.items.append(item)
        return item

    def emit(self, batch: Batch) -> None:
        """Send the events of one step of the run to every reader."""
        self.log.append(batch)

    def unfinished(self) -> list[OutputItem]:
        """The items whose `output_item.done` was not sent: those a failure or cancellation cuts off."""
        return [item for item in self.items if not item.done_sent]

    def as_dicts(self) -> list[dict[str, object]]:
        return [item.as_dict() for item in self.items]
