"""One response: the Harmony loop from request to terminal event.

request → dialog (Harmony messages) → prompt tokens → engine → parser → output items and events.
A tool call that the gateway runs loops back into the dialog and the engine is called again; a call
to a client function ends the response, to be continued by the client's `function_call_output`.
The run is a task of its own that appends every event to the response's log (log.py); a streamed
response is a reader of that log, a non-streamed one waits for its end.

The parts: dialog_plan.py (the dialog to start from), tools/ (every kind of tool behind one interface),
turn.py (one engine call streamed into the output), output.py (the one owner of the output and its
events), response_object.py (the Response object).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import Any, AsyncIterator, cast

import anyio
from openai_harmony import Role

from ..engine import Chunks, EngineStream, Sampling
from ..errors import APIError, bad_request
from ..harmony import GrowingPrompt, Preamble, Prompt, encoding
from ..parser import MalformedHarmony
from ..protocol import EventType, Include, ItemStatus, ResponseStatus, ending_event
from ..storage import StorageError
from ..store import StoredResponse, TooManyRunning
from ..core.conversation_store import Conversation, DuplicateItem
from .history import keep_state, new_items
from .conversation import Dialog, tool_result
from .compaction import CompactionOutput, summarize
from .dialog_plan import DialogPlan, Remembered, plan_dialog
from .items import Event
from .admission import Slot
from .adoption import WHOLE, Checkpoint, ReplayStream, turn_start
from .journal import Journal
from .log import Batch
from .logprobs import load_vocabulary
from .output import ResponseOutput
from .request import ResponsesRequest
from .sealed import Purpose
from .run_trace import RunTrace, failure_text
from .response_object import ResponseObject, echo_tool, ended, skeleton
from ..core.services import Services
from .tool_call import CallKind, ToolCall
from .tools import CallBudget, ToolContext, Toolset
from .tools.registry import available_tools, check_include, offered_tools
from .turn import AnswerOptions, Turn, TurnOutcome, Usage

logger = logging.getLogger("gateway.responses")
COMPACT_AT = 0.8  # of the context, where `context_management` names no threshold


class ResponseRun:
    def __init__(
        self,
        services: Services,
        request: ResponsesRequest,
        tenant: str,
        chat: "ChatOptions | None" = None,
        remembered: Remembered | None = None,
        generate: bool = True,
    ) -> None:
        self.services = services
        # A background run's request as it came, for a replica that adopts the run (adoption.py).
        self._request_json = request.model_dump_json(by_alias=True, exclude_unset=True) if request.background else None
        self.remembered = remembered  # the response before it on its WebSocket, in memory
        # False: the request's state is prepared (dialog, tools) and the response completes with no output,
        # for a later one to continue (the WebSocket's `generate: false`, a warm-up).
        self.generate = generate
        self.request = request
        self.chat = chat or ChatOptions()
        self.tenant = tenant
        check_include(request.include or [])
        request.tools = available_tools(request.tools, services)
        self.echoed_tools = [echo_tool(tool) for tool in request.tools]
        self.echoed_choice = request.tool_choice if isinstance(request.tool_choice, str) else request.tool_choice.model_dump(exclude_none=True)
        request.tools, request.tool_choice = offered_tools(request.tools, request.tool_choice)
        self.output = ResponseOutput()
        self.log = self.output.log  # what every reader of the response follows
        self.toolset = Toolset(ToolContext(services, request, tenant, self.output, CallBudget(request.max_tool_calls)))
        # Alternatives per token when the answer's logprobs are asked for; None when they are not.
        wants_logprobs = request.includes(Include.LOGPROBS) or bool(request.top_logprobs)
        self.logprob_count = (request.top_logprobs or 0) if wants_logprobs else None
        seal = partial(services.sealer.seal, purpose=Purpose.REASONING, tenant=tenant) if request.includes(Include.ENCRYPTED_REASONING) else None
        self.answer_options = AnswerOptions(self.chat.stops, self.logprob_count, seal)
        self.plan = DialogPlan()
        self.preamble = Preamble()
        self.usage = Usage()
        self.model_id = ""
        self.response: ResponseObject  # made by launch()
        self._stream: Chunks | None = None
        self._prompt = Prompt("", 0)
        self._growing = GrowingPrompt(services.renderer, services.metrics.prompt_tokens)  # this run's prompt, turn after turn
        self._turns = 0
        self._tool_called = False  # a declared tool was called: a forced choice is satisfied
        self.failure: APIError | None = None
        self._prefill: list[int] = []
        self._started = time.perf_counter()
        self._first_token_seen = False
        self._tokens_counted = False
        self._cancel = anyio.CancelScope()
        self.background = bool(request.background)  # runs on whatever the client does; resumable, cancellable
        self.journal: Journal | None = None  # a background response's events and progress, in the store
        # Steering input waits for this response (socket.py): it ends at its next safe boundary, after a
        # tool's output and before the next engine call, for a successor to go on with the input.
        self.steered = False
        self._compacted_at = -1  # the dialog's length after the last compaction
        self.trace = RunTrace(services.config.tracing.capture_content)  # its spans, when tracing is on
        # Adoption (adoption.py): the engine call in progress as it began, encoded; the checkpoint a run
        # adopted here goes on from; the tokens a continued call's prompt ends with.
        self._turn_start: str | None = None
        self._planned_length = 0  # the planned dialog's messages: those before the run's own
        self._adopted: Checkpoint | None = None
        self._continuing: list[int] = []
        # Shutting down (`hand_over`): the run stops at its next clean point and another replica goes on.
        self._handover = anyio.CancelScope()
        self._handing_over = False
        self._in_tool = False
        self._slot: Slot | None = None  # a foreground run's place among those running (admission.py)
        # The sequence number of the first event this process's log holds: an adopted run's log goes on
        # where the events its first replica stored end (readers here read those from the store).
        self.first_logged = 0

    @property
    def dialog(self) -> Dialog:
        return self.plan.dialog

    # -- before the first event: everything that can still be an HTTP error ------------------------------

    async def launch(self) -> None:
        """Plan the response, provision its tools, store it if it runs in the background, and start its run:
        in that order, each once. Until it returns, a failure is the request's (an HTTP error); after, the
        run goes on as a task of its own, read through `self.log`."""
        if not self.background:
            self._slot = self.services.runs.admission.admit(self.tenant)
        try:
            await self._launch()
        except BaseException:
            self._release_slot()
            raise

    async def _launch(self) -> None:
        await self._plan(provision=True)
        if self.logprob_count is not None:
            await anyio.to_thread.run_sync(load_vocabulary)
        model = await self.services.engine.model()
        self.model_id = model.id
        self.response = skeleton(self.request, self.model_id, self.echoed_tools, self.echoed_choice)
        self.output.seed = self.response["id"]
        self.trace.begin(self.model_id, self.request.instructions)
        try:
            # Listings and approved calls come first; the engine is called after them, in _loop().
            if not self.toolset.work_before_engine and self.generate:
                self._stream = await self._open_stream()
            await self._begin()
        except BaseException as exc:
            self.trace.end(self.response, failure_text(exc))
            raise
        if self.journal is not None:
            self.services.runs.background[self.response["id"]] = self
            self.services.runs.start(self.journal.run)
        self.services.runs.start(self.execute)

    def _release_slot(self) -> None:
        if self._slot is not None:
            self._slot.release()

    async def input_tokens(self) -> int:
        """The exact length of the prompt the first engine call of this request would get; nothing is
        provisioned for it (no container, no file copied)."""
        await self._plan(provision=False)
        self._prefill = self._forced_call_header()
        return len(await self._render(max_model_len=None))

    async def _plan(self, provision: bool, adopted: Checkpoint | None = None) -> None:
        self.plan = await plan_dialog(self.services, self.request, self.tenant, self.remembered)
        self._planned_length = len(self.plan.dialog.messages)
        if adopted is not None:  # the dialog as the adopted run's engine call began
            self.plan.dialog = adopted.dialog(self.plan.dialog)
            if adopted.turn.base == WHOLE:  # compacted: its past was rewritten, as in _compact
                self.plan.parent_id, self.plan.parent_length, self.plan.new_messages_from = None, 0, 0
                self.plan.parent_tokens = []
        if self.plan.parent_prompt is not None:
            self._growing.adopt(self.plan.parent_prompt)
        else:
            self._growing.seed(self.plan.parent_tokens)
        await self.toolset.prepare(self.dialog, provision)
        self.preamble = self._preamble()

    def _preamble(self) -> Preamble:
        request = self.request
        response_format = None
        text_format = request.text.format if request.text else None
        if text_format is not None and text_format.type == "json_schema":
            if text_format.schema_ is None:
                raise bad_request("A json_schema format needs a schema.", param="text.format.schema")
            response_format = (text_format.name or "response", text_format.schema_)
        declared = self.toolset.declarations()
        effort = request.reasoning.effort if request.reasoning else None
        return Preamble(effort, request.instructions, declared.functions, declared.system, declared.developer, response_format)

    async def _render(self, max_model_len: int | None) -> Prompt:
        """The prompt; with `truncation: "auto"`, without as many of the oldest turns as it takes to fit
        the context (the preamble, developer messages and the turn in progress are always kept)."""
        prompt = await self._growing.render(self.preamble, self.dialog.messages) + self._prefill + self._continuing
        if max_model_len is None or len(prompt) < max_model_len or self.request.truncation != "auto":
            return prompt
        return Prompt.of(await self._truncated(max_model_len, prompt.ids()))

    async def _truncated(self, max_model_len: int, whole: list[int]) -> list[int]:
        render, messages = self.services.renderer.render, self.dialog.messages
        # Turns start at user messages; cutting at the last one keeps only the turn in progress. The
        # fewest turns to drop is found by bisection, so the prompt is rendered a few times, not per turn.
        cuts = [index for index, message in enumerate(messages) if message.author.role == Role.USER and index > 0]
        low, high, best = 0, len(cuts) - 1, whole
        while low <= high:
            middle = (low + high) // 2
            cut = cuts[middle]
            kept = [m for m in messages[:cut] if m.author.role == Role.DEVELOPER] + messages[cut:]
            candidate = await render(self.preamble, kept) + self._prefill + self._continuing
            if len(candidate) < max_model_len:
                best, high = candidate, middle - 1
            else:
                low = middle + 1
                if len(candidate) < len(best):
                    best = candidate
        return best  # still too long when even the turn in progress does not fit: the caller says so

    async def _open_stream(self) -> EngineStream:
        if self._turn_start is None:  # the run's first engine call
            self._mark_turn()
        self._turns += 1
        # Harmony cannot force a tool call, but the prompt is ours: a forced `tool_choice` starts the
        # assistant's message with the call's header (tools/base.py, `forced_header`).
        self._prefill = self._forced_call_header()
        model = await self.services.engine.model()
        prompt = await self._render(model.max_model_len)
        if not self._continuing and self._compaction_due(len(prompt), model.max_model_len):
            await self._compact()
            prompt = await self._render(model.max_model_len)
        room = None if model.max_model_len is None else model.max_model_len - len(prompt)
        if room is not None and room <= 0:
            raise APIError(
                400,
                f"This model's maximum context length is {model.max_model_len} tokens. However, your "
                f"request has {len(prompt)} input tokens. Please reduce the length of the input.",
                param="input",
                code="context_length_exceeded",
            )
        budget = self.request.max_output_tokens
        if budget is not None:
            budget -= self.usage.output
        else:
            budget = room if room is not None else self.services.config.engine.default_max_tokens
        if room is not None:
            budget = min(budget, room)
        self._prompt = prompt
        sampling = Sampling(
            max_tokens=max(budget, 1),
            temperature=self.request.temperature,
            top_p=self.request.top_p,
            seed=self.request.seed,
            presence_penalty=self.chat.presence_penalty,
            frequency_penalty=self.chat.frequency_penalty,
            logit_bias=self.chat.logit_bias,
            logprobs=self.logprob_count,
        )
        headers = self.trace.engine_call(self.model_id or model.id, len(prompt), sampling.max_tokens)
        try:
            return await self.services.engine.generate(prompt, sampling, self.dialog.session_key, headers)
        except BaseException as exc:
            self.trace.engine_done(0, None, failure_text(exc))
            raise

    def _compaction_due(self, prompt_tokens: int, max_model_len: int | None) -> bool:
        """`context_management` asks for compaction past a threshold; once per growth of the dialog, so a
        summary that still does not fit ends as the context allows, not in a loop."""
        settings = self.request.context_management
        if not settings or self._compacted_at == len(self.dialog.messages):
            return False
        threshold = settings[0].compact_threshold or (int(max_model_len * COMPACT_AT) if max_model_len else None)
        return threshold is not None and prompt_tokens > threshold

    async def _compact(self) -> None:
        """Replace the dialog's past with the model's summary of it, streamed as a `compaction` item; the
        prompt is rendered anew from there, and the response is stored whole (its past was rewritten)."""
        output, dialog = self.output, self.dialog
        self._turn_start = None  # no adoption in the middle of a compaction: the run fails if its replica stops here
        item = output.add(CompactionOutput)
        output.emit(item.compacting(output.events))
        effort = self.request.reasoning.effort if self.request.reasoning else None
        summary = await summarize(self.services, dialog.messages, dialog.session_key, effort)
        self.usage.input += summary.input_tokens
        self.usage.output += summary.output_tokens
        dialog.owner = item.id
        dialog.compact(summary.text)
        self._compacted_at = len(dialog.messages)
        output.emit(item.sealed(output.events, self.services.sealer.seal(summary.text, Purpose.COMPACTION, self.tenant)))
        self._growing = GrowingPrompt(self.services.renderer, self.services.metrics.prompt_tokens)
        self.plan.parent_id, self.plan.parent_length, self.plan.new_messages_from = None, 0, 0
        self._mark_turn(self._turns - 1)

    # -- the run ------------------------------------------------------------------------------------------

    async def _begin(self) -> None:
        """A background response is stored as it starts, for every replica to find (a failure here is the
        request's: a 503, and the engine request opened by `prepare` is closed)."""
        if not self.background:
            return
        services = self.services
        try:
            try:
                await services.store.begin(
                    self.snapshot(), self.plan.input_items, self.tenant, services.replicas.id, services.config.loop.max_background_per_tenant,
                    services.sealer.seal(self._request_json or "", Purpose.RUN_REQUEST, self.tenant),
                )
            except TooManyRunning as exc:
                raise APIError(
                    429, f"You have {exc.limit} background responses running, as many as this gateway runs for one project at once; "
                    "wait for one to end (or cancel one).", code="too_many_background_responses",
                ) from None  # fmt: skip
        except BaseException:
            with anyio.CancelScope(shield=True):
                if self._stream is not None:
                    await self._stream.aclose()
            raise
        self._start_journal()

    def _start_journal(self) -> None:
        services = self.services
        self.journal = Journal(services.store, self.response["id"], services.replicas.id, self.output.log, self.snapshot, self.checkpoint, self.cancel)

    def follow(self) -> AsyncIterator[Batch]:
        """The run's events as a reader here may see them: a background run's once journaled (journal.py)."""
        return self.journal.follow() if self.journal is not None else self.log.follow()

    def cancel(self) -> None:
        """The client went away or stopped reading: stop the run, which aborts its engine request."""
        self._cancel.cancel()

    def hand_over(self) -> None:
        """This replica shuts down: stop a background run at its next clean point (at once while the engine
        streams, after the tool call in flight returns), for another replica to adopt and go on with."""
        if self.journal is None:
            return
        self._handing_over = True
        if not self._in_tool:
            self._handover.cancel()

    async def _hand_over(self) -> None:
        assert self.journal is not None
        response_id = self.response["id"]
        self._tokens_counted = True  # the adopter counts the run's tokens, these among them
        try:
            with anyio.CancelScope(shield=True):
                if await self.journal.hand_over(lambda: self.services.replicas.hand_over(response_id)):
                    logger.info("response %s handed over to another replica", response_id)
        finally:
            self.services.runs.background.pop(response_id, None)

    async def execute(self) -> None:
        """The run's task: every event goes to the log, which ends with exactly one terminal event
        (unless the run was cancelled, when nobody is left to read it)."""
        try:
            await self._execute()
        finally:
            self._release_slot()
            self._count_tokens()  # also when the app cancels the task at a hard shutdown
            self.log.close()
            self.trace.end(self.response, self.failure.message if self.failure is not None else None)

    async def _execute(self) -> None:
        log, emit = self.output.events, self.output.emit
        if self._adopted is None:  # an adopted run's opening events were sent by the replica that began it
            opening = [log.make(EventType.CREATED, response=self.snapshot())]
            if self.background:
                opening.append(log.make(EventType.QUEUED, response=self.snapshot()))
                self.response["status"] = ResponseStatus.IN_PROGRESS
            opening.append(log.make(EventType.IN_PROGRESS, response=self.snapshot()))
            emit(opening)
        status: ResponseStatus = ResponseStatus.COMPLETED
        error: dict[str, str] | None = None
        incomplete: dict[str, str] | None = None
        handed_over = False
        try:
            with self.services.drain.guard() as guard, self._cancel, self._handover:
                status, incomplete = await self._loop()
            # Stopped for another replica to go on: at a clean point, or where the grace period cut it off.
            handed_over = self._handing_over and (self._handover.cancelled_caught or guard.cancelled_caught)
            if guard.cancelled_caught and not handed_over:
                raise APIError(
                    503, "The gateway is shutting down; the response was stopped.", type="server_error", code="server_shutting_down"
                )
            if self._cancel.cancelled_caught:
                status = ResponseStatus.CANCELLED
        except (APIError, MalformedHarmony) as exc:
            status = ResponseStatus.FAILED
            self.failure = exc if isinstance(exc, APIError) else APIError(
                502, str(exc), type="server_error", code="model_output_invalid"
            )
        except Exception:  # a fault of the gateway's own: this response fails, the others go on
            logger.exception("response %s failed", self.response["id"])
            status = ResponseStatus.FAILED
            self.failure = APIError(500, "The gateway failed while running the response.", type="server_error", code="internal_error")
        finally:
            with anyio.CancelScope(shield=True):
                if self._stream is not None:
                    await self._stream.aclose()
        if handed_over:
            await self._hand_over()
            return
        if status in (ResponseStatus.FAILED, ResponseStatus.CANCELLED):
            emit([event for item in self.output.unfinished() for event in item.closed(log, ItemStatus.INCOMPLETE)])
        if self.failure is not None:
            error = {"code": "server_error", "message": self.failure.message}
        self.finish(status, error, incomplete)
        with anyio.CancelScope(shield=True):
            conversation = self.plan.conversation
            if conversation is not None and status in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE):
                await self._add_to_conversation(conversation)
            if self.journal is not None:
                await self._finish_background()
            else:
                if self.request.store:
                    await self._save_or_fail()
                emit(self._terminal_events())

    def _terminal_events(self) -> list[Event]:
        """The stream's last event, as the response ended. A cancelled response's stream has readers only
        in the background (a foreground one was cancelled because its reader left): it ends with an
        error event, since OpenAI's stream has no cancelled event."""
        log, status = self.output.events, self.response["status"]
        if status != ResponseStatus.CANCELLED:
            return [log.make(ending_event(status), response=self.response)]
        if self.background:
            return [log.make(EventType.ERROR, code="response_cancelled", message="The response was cancelled.", param=None)]
        return []

    async def _finish_background(self) -> None:
        """The terminal event, then the final record with the events not written yet; only then is the run
        forgotten here, so a reader always finds it, live or stored."""
        assert self.journal is not None
        self.output.emit(self._terminal_events())
        try:
            await self.journal.finish(lambda frames: self._save(frames, owner=self.services.replicas.id))
        finally:
            self.services.runs.background.pop(self.response["id"], None)

    async def _save_or_fail(self) -> None:
        """Store the response; if the database stays unreachable beyond its retry window, the response
        fails (a client told `completed` would find nothing to continue from)."""
        try:
            with self.trace.storage("save"):
                await self._save()
        except StorageError as exc:
            logger.error("response %s could not be stored: %s", self.response["id"], exc)
            self.failure = APIError(503, "The response could not be stored.", type="server_error", code="storage_unavailable")
            self.finish(ResponseStatus.FAILED, {"code": "server_error", "message": self.failure.message}, None)

    async def _loop(self) -> tuple[ResponseStatus, dict[str, str] | None]:
        """Engine calls and tool calls, until the model answers or a limit is reached: the status."""
        adopted, self._adopted = self._adopted, None
        if adopted is not None:
            self._stream = await self._go_on(adopted)
        else:
            await self.toolset.before_engine()
            if not self.generate:
                return ResponseStatus.COMPLETED, None
            if self._stream is None:
                self._stream = await self._open_stream()
        while True:
            outcome = await self._turn()
            self.output.unmute()
            if outcome.finish_reason == "length":
                return ResponseStatus.INCOMPLETE, {"reason": "max_output_tokens"}
            call = outcome.call
            if call is None or call.kind.ends_response:
                return ResponseStatus.COMPLETED, None
            # A call an adopted run was making when its replica stopped is never made twice (tools/base.py).
            await self._run_tool(call, resumed=adopted is not None and adopted.ended)
            adopted = None
            if call.kind is CallKind.HOSTED:
                self._tool_called = True
            # The tool's output, or what went wrong (no such tool, bad arguments), goes to the model.
            self.dialog.append(tool_result(call.recipient, call.channel, call.output or ""))
            self._mark_turn()
            if self._handing_over:
                self._handover.cancel()  # the tool's output is in: a clean point to stop at
            if self.steered:
                return ResponseStatus.INCOMPLETE, {"reason": "steered"}
            if self._turns >= self.services.config.loop.max_turns:
                return ResponseStatus.INCOMPLETE, {"reason": "max_messages"}
            self._stream = await self._open_stream()

    async def _run_tool(self, call: ToolCall, resumed: bool) -> None:
        # A background run's events, the call's among them, are written first: a replica that adopts the run
        # then finds the call made, and does not make it again.
        if self.journal is not None and call.kind is CallKind.HOSTED:
            try:
                if not await self.journal.flush():  # another replica runs the response now: this run was cancelled
                    await anyio.lowlevel.checkpoint()  # and stops here, before the call
            except StorageError as exc:
                logger.warning("response %s: the call's checkpoint was not written (%s); running it anyway", self.response["id"], exc)
        self._in_tool = True
        try:
            with self.trace.tool(call):
                await self.toolset.run(call, resumed)
        finally:
            self._in_tool = False

    async def _turn(self) -> TurnOutcome:
        """Stream one engine call into the output."""
        assert self._stream is not None
        turn = Turn(self.output, self.dialog, self.toolset, self.answer_options)
        written = self.usage.output
        try:
            outcome = await turn.stream(self._stream, self._prefill, self.usage, len(self._prompt), self._first_chunk)
        except BaseException as exc:
            self.trace.engine_done(self.usage.output - written, None, failure_text(exc))
            raise
        self.trace.engine_done(self.usage.output - written, outcome.finish_reason)
        return outcome

    def _first_chunk(self) -> None:
        """An engine call's first tokens: for its span, and for the metrics the response's first ones."""
        self.trace.first_token()
        if not self._first_token_seen:
            self._first_token()

    def _first_token(self) -> None:
        self._first_token_seen = True
        self.services.metrics.time_to_first_token.observe(time.perf_counter() - self._started)

    def _forced_call_header(self) -> list[int]:
        header = None if self._tool_called else self.toolset.forced_header()
        return encoding().encode(header, allowed_special="all") if header else []

    async def remember(self) -> Remembered | None:
        """What a WebSocket keeps of this response, for the next one on it to continue: nothing of one
        that cannot be continued (failed, cancelled) or that belongs to a conversation."""
        if self.response["status"] not in (ResponseStatus.COMPLETED, ResponseStatus.INCOMPLETE) or self.plan.conversation is not None:
            return None
        await self._growing.complete(self.dialog.messages, self.plan.new_messages_from)
        return Remembered(self.response["id"], self.dialog, self._growing.state(), bool(self.request.store))

    # -- adoption: going on with a background run on another replica (adoption.py) -------------------------

    def _mark_turn(self, turns: int | None = None) -> None:
        """An engine call begins (or will, once a tool's output is in the dialog): what an adopter puts back."""
        self.output.new_call()
        if self.background:
            base = WHOLE if self._compacted_at >= 0 else self._planned_length
            turns = self._turns if turns is None else turns
            containers = self.toolset.context.containers
            self._turn_start = turn_start(
                self.dialog, base, len(self.output.items), self.usage, turns, self._tool_called, self._compacted_at, containers.auto_id
            )

    def checkpoint(self) -> str | None:
        """Where another replica would go on from, as of the events emitted so far; None where it cannot (in
        the work before the first engine call, in a compaction)."""
        if self._turn_start is None:
            return None
        return Checkpoint.encode(self._turn_start, self.output)

    async def resume(self, response: dict[str, Any], checkpoint: Checkpoint, next_sequence_number: int) -> None:
        """Adopt a background run another replica began, at its checkpoint, and go on with it here."""
        turn = checkpoint.turn
        self.toolset.context.containers.adopted_auto = turn.container_id
        await self._plan(provision=True, adopted=checkpoint)
        if self.logprob_count is not None:
            await anyio.to_thread.run_sync(load_vocabulary)
        self.model_id = (await self.services.engine.model()).id
        self.response = cast(ResponseObject, response)
        self.output.seed = response["id"]
        self.output.restore(list(response.get("output") or [])[: turn.items], next_sequence_number)
        self.first_logged = next_sequence_number
        self.usage, self._turns, self._tool_called, self._compacted_at = checkpoint.usage(), turn.turns, turn.tool_called, turn.compacted_at
        self._turn_start, self._adopted = turn.encode(), checkpoint
        self.trace.begin(self.model_id, self.request.instructions)
        self._start_journal()
        self.services.runs.background[response["id"]] = self
        assert self.journal is not None
        self.services.runs.start(self.journal.run)
        self.services.runs.start(self.execute)

    async def _go_on(self, checkpoint: Checkpoint) -> Chunks:
        """The engine call the adopted run was in: its tokens parsed again, then, if the engine had not
        finished it, the engine's continuation of the prompt that ends with them."""
        if checkpoint.finish_reason is not None:
            self._turns += 1
            self._prefill = self._forced_call_header()
            return ReplayStream(self.output, checkpoint, None)
        self._continuing = checkpoint.generated
        try:
            return ReplayStream(self.output, checkpoint, await self._open_stream())
        finally:
            self._continuing = []

    # -- the Response object ------------------------------------------------------------------------------

    def snapshot(self) -> ResponseObject:
        return self.response | {"output": self.output.as_dicts()}

    def _count_tokens(self) -> None:
        """Add the response's tokens to the metrics, once, however it ended."""
        if not self._tokens_counted:
            self._tokens_counted = True
            self.services.metrics.tokens.labels("in").inc(self.usage.input)
            self.services.metrics.tokens.labels("out").inc(self.usage.output)

    def finish(self, status: ResponseStatus, error: dict[str, str] | None, incomplete: dict[str, str] | None) -> None:
        self._count_tokens()
        self.response = ended(self.snapshot(), status, error, incomplete, self.usage)

    async def _save(self, frames: list[tuple[int, bytes]] | None = None, owner: str | None = None) -> bool:
        """Store the response: with a parent, only the messages it added to the parent's dialog."""
        dialog, parent_id, growing = self.dialog, self.plan.parent_id, self._growing
        start = self.plan.parent_length if parent_id is not None else 0
        await growing.complete(dialog.messages, start)
        record = StoredResponse(
            self.response, self.plan.input_items, dialog.to_json(start), dialog.open_calls, dialog.state(), self.tenant,
            parent_id=parent_id, tokens=growing.pieces(start),
        )
        return await self.services.store.put(record, lambda: (dialog.to_json(), growing.pieces(0)), frames=frames, owner=owner)

    async def _add_to_conversation(self, conversation: Conversation) -> None:
        """The response's input and output become the conversation's next items (a failed or cancelled
        response adds nothing, so the client can send the same input again)."""
        items = self.plan.input_items + self.output.as_dicts()
        keep_state(conversation, self.dialog)
        try:
            if not await self.services.conversations.append(conversation, new_items(self.dialog, self.plan.new_messages_from, items)):
                logger.warning("conversation %s was deleted while response %s ran", conversation.id, self.response["id"])
        except DuplicateItem as exc:  # another response of the conversation added the same client item meanwhile
            logger.warning("response %s not added to conversation %s: item %s is there already", self.response["id"], conversation.id, exc.item_id)


@dataclass(frozen=True)
class ChatOptions:
    """What only Chat Completions asks of a run: stop sequences (applied to the visible text by the
    gateway) and sampling penalties (sent to vLLM)."""

    stops: tuple[str, ...] = ()
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, int] | None = None
