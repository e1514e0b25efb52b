"""A run's Response object, and how the run ends: once, in this order.

The Response ends with its status, error or reason, and usage (its tokens counted in the metrics once,
however it ended); a completed or incomplete response's input and output become its conversation's next
items; then it is stored (a background run's final record, with its last events, in one transaction)
and its stream's terminal event goes out. A foreground response the store cannot take fails rather than
tell the client `completed` with nothing to continue from.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

import anyio

from ...engine.parser import MalformedHarmony
from ...errors import APIError
from ...protocol import EventType, ItemStatus, ResponseStatus, terminal_event
from ...storage import StorageError
from ...storage.conversation_store import Conversation, DuplicateItem
from ...storage.response_store import StoredResponse
from ..history.conversation_items import keep_state, new_items
from ..shapes.items import Event
from ..shapes.request import ResponsesRequest
from ..shapes.response_object import ResponseObject, ended
from .dialog_plan import Remembered
from .journal import Frames, Journal
from .needs import ResponsesNeeds
from .prompt_builder import PromptBuilder
from .run_state import RunState
from .run_trace import RunTrace

logger = logging.getLogger("gateway.responses")


class RunEnding:
    def __init__(
        self, services: ResponsesNeeds, request: ResponsesRequest, tenant: str, state: RunState, prompts: PromptBuilder, trace: RunTrace
    ) -> None:
        self._services = services
        self._request = request
        self._tenant = tenant
        self._state = state
        self._prompts = prompts
        self._trace = trace
        self.response: ResponseObject  # made by the run's launch (or resume)
        self.failure: APIError | None = None
        self._tokens_counted = False
        self.announced = False  # the terminal event went out (or, cancelled in the foreground, none will)
        self._unrendered = False  # what the run added could not be tokenised

    def snapshot(self) -> ResponseObject:
        snapshot = self.response.copy()
        snapshot["output"] = self._state.output.as_dicts()
        return snapshot

    def open(self, background: bool) -> None:
        """The stream's first events: created, queued (a background response is queued until it runs),
        in progress."""
        events = self._state.output.events
        opening = [events.make(EventType.CREATED, response=self.snapshot())]
        if background:
            opening.append(events.make(EventType.QUEUED, response=self.snapshot()))
            self.response["status"] = ResponseStatus.IN_PROGRESS
        opening.append(events.make(EventType.IN_PROGRESS, response=self.snapshot()))
        self._state.output.emit(opening)

    def failed(self, exc: Exception) -> None:
        """What made the run fail, as the error the response ends with: the model's unreadable output is
        a 502; a fault of the gateway's own fails this response only, and says nothing of its cause."""
        if isinstance(exc, APIError):
            self.failure = exc
        elif isinstance(exc, MalformedHarmony):
            self.failure = APIError(502, str(exc), type="server_error", code="model_output_invalid")
        else:
            logger.error("response %s failed", self.response["id"], exc_info=exc)
            self.failure = APIError(500, "The gateway failed while running the response.", type="server_error", code="internal_error")

    def count_tokens(self) -> None:
        """Add the response's tokens to the metrics, once, however it ended."""
        if not self._tokens_counted:
            self._tokens_counted = True
            usage, tokens = self._state.usage, self._services.metrics.tokens
            model = self.response.get("model") or ""
            tokens.labels("in", model).inc(usage.input)
            tokens.labels("out", model).inc(usage.output)

    def counted_elsewhere(self) -> None:
        """The run was handed over: the adopter counts its tokens, these among them."""
        self._tokens_counted = True

    async def remembered(self) -> Remembered | None:
        """What a WebSocket keeps of this response, for the next one on it to continue: nothing of one
        that cannot be continued (failed, cancelled) or that belongs to a conversation."""
        plan = self._state.plan
        if self.response["status"] not in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE) or plan.conversation is not None:
            return None
        growing = self._prompts.growing
        await growing.complete(plan.dialog.messages, plan.new_messages_from)
        return Remembered(self.response["id"], plan.dialog, growing.state(), bool(self._request.store))

    def finish(self, status: ResponseStatus, error: dict[str, str] | None, incomplete: dict[str, str] | None) -> None:
        self.count_tokens()
        self.response = ended(self.snapshot(), status, error, incomplete, self._state.usage)

    async def end(self, status: ResponseStatus, incomplete: dict[str, str] | None, journal: Journal | None) -> None:
        """The response ends with `status` (and `self.failure`, if it failed): recorded, added to its
        conversation, stored, and its terminal event sent."""
        output = self._state.output
        if status in (ResponseStatus.FAILED, ResponseStatus.CANCELLED):  # what was still being written ends too
            output.emit([event for item in output.unfinished() for event in item.closed(output.events, ItemStatus.INCOMPLETE)])
        with anyio.CancelScope(shield=True):
            status = await self._rendered_or_failed(status)
        error = {"code": "server_error", "message": self.failure.message} if self.failure is not None else None
        self.finish(status, error, incomplete)
        with anyio.CancelScope(shield=True):
            conversation = self._state.plan.conversation
            if conversation is not None and status in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE):
                await self._add_to_conversation(conversation)
            if journal is not None:
                await self._finish_background(journal)
            else:
                if self._request.store:
                    await self._save_or_fail()
                self._state.output.emit(self._terminal_events(background=False))

    async def _rendered_or_failed(self, status: ResponseStatus) -> ResponseStatus:
        """Tokenise what the run added (its answer, its tools' output) before anything is stored or
        announced: text that cannot be tokenised (the renderer refused it or failed on it) fails this
        response, before its terminal event, instead of failing its storing after it."""
        plan = self._state.plan
        start = plan.parent_length if plan.parent_id is not None else 0
        try:
            await self._prompts.growing.complete(plan.dialog.messages, start)
        except Exception as exc:
            logger.error("response %s: its messages could not be tokenised", self.response["id"], exc_info=not isinstance(exc, APIError))
            unrenderable = APIError(500, "The response's messages could not be tokenised.", type="server_error", code="internal_error")
            self.failed(exc if isinstance(exc, APIError) else unrenderable)
            self._unrendered = True  # stored without the tokens of what it added
            return ResponseStatus.FAILED
        return status

    def last_resort(self, exc: BaseException) -> None:
        """A fault after the run's own error handling (storing it, its conversation): logged with the
        response's id, and the stream still gets its one terminal event if it had none yet."""
        logger.error("response %s failed while ending", self.response["id"], exc_info=exc)
        if self.announced:
            return
        self.failure = APIError(500, "The gateway failed while ending the response.", type="server_error", code="internal_error")
        self.finish(ResponseStatus.FAILED, {"code": "server_error", "message": self.failure.message}, None)
        self._state.output.emit(self._terminal_events(background=False))

    def _terminal_events(self, background: bool) -> list[Event]:
        """The stream's last event, as the response ended. A cancelled response's stream has readers only
        in the background (a foreground one was cancelled because its reader left): it ends with an
        error event, since OpenAI's stream has no cancelled event."""
        status = self.response["status"]
        self.announced = True
        if status == ResponseStatus.CANCELLED and not background:
            return []
        kind, fields = terminal_event(status, self.response)
        return [self._state.output.events.make(kind, **fields)]

    async def _finish_background(self, journal: Journal) -> None:
        """The terminal event, then the final record with the events not written yet; only then is the run
        forgotten here, so a reader always finds it, live or stored."""
        self._state.output.emit(self._terminal_events(background=True))
        try:
            await journal.finish(lambda frames: self.save(frames, owner=self._services.replicas.id))
        finally:
            self._services.runs.background.pop(self.response["id"], None)

    async def _save_or_fail(self) -> None:
        """Store the response; if the database stays unreachable beyond its retry window, the response
        fails (a client told `completed` would find nothing to continue from)."""
        try:
            with self._trace.storage("save"):
                await self.save()
        except StorageError as exc:
            logger.error("response %s could not be stored: %s", self.response["id"], exc)
            self.failure = APIError(503, "The response could not be stored.", type="server_error", code="storage_unavailable")
            self.finish(ResponseStatus.FAILED, {"code": "server_error", "message": self.failure.message}, None)
        except Exception:  # a fault of the gateway's own: this response fails, with its terminal event
            logger.exception("response %s could not be stored", self.response["id"])
            self.failure = APIError(500, "The response could not be stored.", type="server_error", code="internal_error")
            self.finish(ResponseStatus.FAILED, {"code": "server_error", "message": self.failure.message}, None)

    async def save(self, frames: Frames | None = None, owner: str | None = None) -> bool:
        """Store the response: with a parent, only the messages it added to the parent's dialog."""
        plan, growing = self._state.plan, self._prompts.growing
        dialog, parent_id = plan.dialog, plan.parent_id
        start = plan.parent_length if parent_id is not None else 0
        if not self._unrendered:
            await growing.complete(dialog.messages, start)
        record = StoredResponse(
            self.response, plan.input_items, dialog.to_json(start), dialog.open_calls, dialog.state(), self._tenant,
            parent_id=parent_id, tokens=growing.pieces(start),
        )  # fmt: skip
        return await self._services.store.put(record, lambda: (dialog.to_json(), growing.pieces(0)), frames=frames, owner=owner)

    async def _add_to_conversation(self, conversation: Conversation) -> None:
        """The response's input and output become the conversation's next items (a failed or cancelled
        response adds nothing, so the client can send the same input again)."""
        plan = self._state.plan
        items: list[Mapping[str, Any]] = [*plan.input_items, *self._state.output.as_dicts()]
        keep_state(conversation, plan.dialog)
        try:
            if not await self._services.conversations.append(conversation, new_items(plan.dialog, plan.new_messages_from, items)):
                logger.warning("conversation %s was deleted while response %s ran", conversation.id, self.response["id"])
        except DuplicateItem as exc:  # another response of the conversation added the same client item meanwhile
            logger.warning("response %s not added to conversation %s: item %s is there already", self.response["id"], conversation.id, exc.item_id)
