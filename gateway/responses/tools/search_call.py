"""What a hosted search's call item does, for web_search's and file_search's: added with its status when the
model starts the call, `searching` once its arguments are written and it runs, `completed` (unless it
failed) and done. Each kind names its three events and what it shows once done."""

from __future__ import annotations

from typing import ClassVar

from ...protocol import EventType, ItemStatus
from ..shapes.items import Event, Events, OutputItem


class SearchCallOutput(OutputItem):
    in_progress_event: ClassVar[EventType]
    searching_event: ClassVar[EventType]
    completed_event: ClassVar[EventType]

    def opened(self, events: Events) -> list[Event]:
        return [self.added(events), self._event(events, self.in_progress_event)]

    def running(self, events: Events) -> list[Event]:
        self.status = ItemStatus.SEARCHING
        return [self._event(events, self.searching_event)]

    def ended(self, events: Events, failed: bool) -> list[Event]:
        """It ran: completed or failed, then done (with what the subclass set before)."""
        self.status = ItemStatus.FAILED if failed else ItemStatus.COMPLETED
        completed = [] if failed else [self._event(events, self.completed_event)]
        return completed + [self.done(events)]

    def closed(self, events: Events, status: ItemStatus = ItemStatus.INCOMPLETE) -> list[Event]:
        """Ended without running (the response was cut off or failed)."""
        self.status = status
        return [self.done(events)]
