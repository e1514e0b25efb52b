"""One response: the Harmony loop from request to terminal event.

request → dialog (Harmony messages) → prompt tokens → engine → parser → output items and events.
A tool call that the gateway runs loops back into the dialog and the engine is called again; a call
to a client function ends the response, to be continued by the client's `function_call_output`.
The run is a task of its own that appends every event to the response's log (../events/log.py); a streamed
response is a reader of that log, a non-streamed one waits for its end.

The parts: dialog_plan.py (the dialog to start from), run_state.py (what the run carries from
call to call and replica to replica), prompt_builder.py (each engine call's prompt and sampling),
engine_calls.py (each engine call opened, streamed through turn.py into the output, and traced),
../tools/ (every kind of tool behind one interface), ../events/output.py (the one owner of the output and its
events), ending.py (the Response, opened, stored and ended once), durable.py (a background run's side
in the store).
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from functools import partial
from typing import Any, AsyncIterator, Callable, cast

import anyio

from ...core.admission import Slot
from ...core.sealed import Purpose
from ...engine.completion import FinishReason
from ...errors import APIError, bad_request
from ...protocol import Include, ResponseStatus
from ...storage.response_store import Orphan
from ..events.log import Batch
from ..events.output import ResponseOutput
from ..events.tool_call import CallKind, ToolCall
from ..history.dialog import Dialog, tool_result
from ..history.settings import ResponseSettings
from ..shapes.request import ResponsesRequest
from ..shapes.response_object import ResponseObject, skeleton
from ..tools import CallBudget, ToolContext, Toolset
from ..tools.registry import settle_tools
from .compaction_step import CompactionStep
from .constraint import AnswerBackstop
from .dialog_plan import DialogPlan, Remembered, plan_dialog
from .durable import DurableRun
from .ending import RunEnding
from .engine_calls import EngineCalls
from .journal import Journal
from .logprobs import load_vocabulary
from .needs import ResponsesNeeds
from .prompt_builder import ChatOptions, PromptBuilder
from .run_state import Checkpoint, RunState
from .run_trace import RunTrace, failure_text
from .summaries import Summaries, wanted
from .turn import AnswerOptions

logger = logging.getLogger("gateway.responses")


class ResponseRun:
    def __init__(
        self,
        services: ResponsesNeeds,
        request: ResponsesRequest,
        tenant: str,
        chat: ChatOptions | None = None,
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
        self.tenant = tenant
        offered = settle_tools(request, services)
        self.echoed = offered.echoed
        self.background = bool(request.background)  # runs on whatever the client does; resumable, cancellable
        self.output = ResponseOutput()
        self.log = self.output.log  # what every reader of the response follows
        self.toolset = Toolset(ToolContext(services, request, tenant, self.output, CallBudget(request.max_tool_calls), offered.tools, offered.choice))
        self.state = RunState(self.output, self.toolset.context.containers, resumable=self.background)
        # Alternatives per token when the answer's logprobs are asked for; None when they are not.
        wants_logprobs = request.includes(Include.LOGPROBS) or bool(request.top_logprobs)
        self.logprob_count = (request.top_logprobs or 0) if wants_logprobs else None
        chat = chat or ChatOptions()
        seal = partial(services.sealer.seal, purpose=Purpose.REASONING, tenant=tenant) if request.includes(Include.ENCRYPTED_REASONING) else None
        self.served = services.engines.route(request.model)  # an unknown model: a 404 before anything starts
        self.prompts = PromptBuilder(services, self.served, request, tenant, chat, self.state, self.toolset, self.logprob_count)
        self.trace = RunTrace(services.config.tracing.capture_content)  # its spans, when tracing is on
        self.backstop = AnswerBackstop(request, services.config.isolation.schema_timeout_s, tenant)
        options = AnswerOptions(chat.stops, self.logprob_count, seal)
        style = (request.reasoning.summary or request.reasoning.generate_summary) if request.reasoning else None
        summaries = (
            Summaries(services, self.served, style or "", self.state, tenant) if wanted(style, services.config.server.reasoning_summaries) else None
        )
        self.compaction = CompactionStep(services, self.served, request, tenant, self.state, self.prompts)
        self.engine = EngineCalls(
            services, self.served, self.state, self.prompts, self.compaction, self.toolset, options, self.trace, self.backstop, summaries
        )
        self.ending = RunEnding(services, request, tenant, self.state, self.prompts, self.trace)
        self._cancel = anyio.CancelScope()
        # A background run's side in the store: begun there, journaled, handed over (durable.py).
        self.durable = DurableRun(services, tenant, self._request_json or "", self.state, self.ending) if self.background else None
        # Steering input waits for this response (socket.py): it ends at its next safe boundary, after a
        # tool's output and before the next engine call, for a successor to go on with the input.
        self.steered = False
        self.stop_sequence: str | None = None  # the request's stop sequence that ended the answer, if one did
        self._adopted: Checkpoint | None = None  # the checkpoint a run adopted here goes on from
        self._slot: Slot | None = None  # a foreground run's place among those running (admission.py)
        # The sequence number of the first event this process's log holds: an adopted run's log goes on
        # where the events its first replica stored end (readers here read those from the store).
        self.first_logged = 0

    @property
    def journal(self) -> Journal | None:
        """A background response's events and progress, in the store, once it has begun there (durable.py)."""
        return self.durable.journal if self.durable is not None else None

    @property
    def dialog(self) -> Dialog:
        return self.state.dialog

    @property
    def plan(self) -> DialogPlan:
        return self.state.plan

    @property
    def model_id(self) -> str:
        return self.engine.model_id

    @property
    def response(self) -> ResponseObject:
        return self.ending.response

    @property
    def failure(self) -> APIError | None:
        return self.ending.failure

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
        if self.request.compacts and not self.dialog.messages:
            raise bad_request("There is nothing to compact before the compaction_trigger.", param="input")
        await self._meet_model(lambda model_id: skeleton(self.request, model_id, self.echoed.tools, self.echoed.choice))
        try:
            # Listings and approved calls come first; the engine is called after them, in _loop().
            if not self.toolset.work_before_engine and self.generate and not self.request.compacts:
                await self.engine.open()
            await self._begin()
        except BaseException as exc:
            self.trace.end(self.response, failure_text(exc))
            raise
        self._start()

    async def _meet_model(self, response: Callable[[str], ResponseObject]) -> None:
        """The engine's model, and the Response the run writes (made for it, or an adopted run's)."""
        if self.logprob_count is not None:
            await anyio.to_thread.run_sync(load_vocabulary)
        self.engine.model_id = (await self.served.model()).id
        self.ending.response = response(self.model_id)
        self.output.seed = self.response["id"]
        self.trace.begin(self.model_id, self.request.instructions)

    def _start(self) -> None:
        if self.journal is not None:
            self.services.runs.background[self.response["id"]] = self
        self.services.runs.start(self.execute, self.response["id"])

    def _release_slot(self) -> None:
        if self._slot is not None:
            self._slot.release()

    async def input_tokens(self) -> int:
        """The exact length of the prompt the first engine call of this request would get; nothing is
        provisioned for it (no container, no file copied)."""
        await self._plan(provision=False)
        self.prompts.force_call()
        return len(await self.prompts.render(max_model_len=None))

    async def _plan(self, provision: bool, adopted: Checkpoint | None = None) -> None:
        self.state.planned(await plan_dialog(self.services, self.request, self.tenant, self.remembered), adopted)
        # What the conversation's `configuration_update` items set, over the request's own: read from here on.
        self.dialog.tool_state(ResponseSettings).apply(self.request)
        await self.backstop.prepare()
        await self.toolset.prepare(self.dialog, provision)
        self.prompts.planned()

    # -- the run ------------------------------------------------------------------------------------------

    async def _begin(self) -> None:
        """A background response is stored as it starts, for every replica to find (a failure here is the
        request's: a 503 or a 429, and the engine request opened by `prepare` is closed)."""
        if self.durable is None:
            return
        try:
            await self.durable.begin()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.engine.close()
            raise
        self.durable.start_journal(self.cancel)

    def follow(self) -> AsyncIterator[Batch]:
        """The run's events as a reader here may see them: a background run's once journaled (journal.py)."""
        return self.journal.follow() if self.journal is not None else self.log.follow()

    def cancel(self) -> None:
        """The client went away or stopped reading: stop the run, which aborts its engine request."""
        self._cancel.cancel()

    def hand_over(self) -> None:
        """This replica shuts down: stop a background run at its next clean point (at once while the engine
        streams, after the tool call in flight returns), for another replica to adopt and go on with."""
        if self.durable is not None and self.journal is not None:
            self.durable.request_hand_over()

    async def execute(self) -> None:
        """The run's task: every event goes to the log, which ends with exactly one terminal event
        (unless the run was cancelled, when nobody is left to read it)."""
        try:
            await self._execute()
        except Exception as exc:  # past the run's own handling (ending it): it fails alone, with its terminal event
            self.ending.last_resort(exc)
        finally:
            self._release_slot()
            self.ending.count_tokens()  # also when the app cancels the task at a hard shutdown
            self.log.close()
            self.trace.end(self.response, self.failure.message if self.failure is not None else None)

    async def _execute(self) -> None:
        if self._adopted is None:  # an adopted run's opening events were sent by the replica that began it
            self.ending.open(self.background)
        status: ResponseStatus = ResponseStatus.COMPLETED
        incomplete: dict[str, str] | None = None
        handed_over = False
        durable = self.durable
        try:
            with self.services.drain.guard() as guard, self._cancel, durable.scope if durable is not None else nullcontext():
                status, incomplete = await self._loop()
            handed_over = durable is not None and durable.handed_over(cut_off=guard.cancelled_caught)
            if guard.cancelled_caught and not handed_over:
                raise APIError(503, "The gateway is shutting down; the response was stopped.", type="server_error", code="server_shutting_down")
            if self._cancel.cancelled_caught:
                status = ResponseStatus.CANCELLED
        except Exception as exc:  # this response fails; the others go on
            status = ResponseStatus.FAILED
            self.ending.failed(exc)
        finally:
            with anyio.CancelScope(shield=True):
                await self.engine.close()
        if handed_over:
            assert durable is not None
            await durable.hand_over()
            return
        await self.ending.end(status, incomplete, self.journal)

    async def _loop(self) -> tuple[ResponseStatus, dict[str, str] | None]:
        """Engine calls and tool calls, until the model answers or a limit is reached: the status."""
        adopted, self._adopted = self._adopted, None
        if adopted is not None:
            await self.engine.go_on(adopted)
        else:
            if self.request.compacts and self.generate:
                # Its one output is the compaction item (Codex's remote compaction needs exactly one); an adopter
                # would go on past it, so none may: a compaction's replica stopping fails it (run_state.py).
                await self.compaction.run()
                self.state.unmark()
                return ResponseStatus.COMPLETED, None
            await self.toolset.before_engine()
            if not self.generate:
                return ResponseStatus.COMPLETED, None
            if self.engine.current is None:
                await self.engine.open()
        while True:
            outcome = await self.engine.stream(self.output)
            self.stop_sequence = outcome.stop_sequence
            self.output.unmute()
            if outcome.finish_reason is FinishReason.LENGTH:
                return ResponseStatus.INCOMPLETE, {"reason": "max_output_tokens"}
            if outcome.refused is not None:  # an answer that breaks the format, not shown: the model answers again
                self.dialog.append(self.backstop.refused(outcome.refused))
                await self.engine.open()
                continue
            call = outcome.call
            if call is None or call.kind.ends_response:
                return ResponseStatus.COMPLETED, None
            # A call an adopted run was making when its replica stopped is never made twice (tools/base.py).
            await self._run_tool(call, resumed=adopted is not None and adopted.ended)
            adopted = None
            if call.kind is CallKind.HOSTED:
                self.state.tool_ran()
            # The tool's output, or what went wrong (no such tool, bad arguments), goes to the model.
            self.dialog.append(tool_result(call.recipient, call.channel, call.output or ""))
            self.state.mark_turn()
            if self.durable is not None:
                self.durable.at_clean_point()
            if self.steered:
                return ResponseStatus.INCOMPLETE, {"reason": "steered"}
            if self.state.turns >= self.services.config.loop.max_turns:
                return ResponseStatus.INCOMPLETE, {"reason": "max_messages"}
            await self.engine.open()

    async def _run_tool(self, call: ToolCall, resumed: bool) -> None:
        async with self.durable.tool_call(call) if self.durable is not None else nullcontext():
            with self.trace.tool(call):
                await self.toolset.run(call, resumed)

    def snapshot(self) -> ResponseObject:
        return self.ending.snapshot()

    # -- adoption: going on with a background run on another replica (adoption.py) -------------------------

    @classmethod
    async def adopt(cls, services: ResponsesNeeds, orphan: Orphan) -> None:
        """Go on with a run whose replica stopped; raises if it cannot be (the caller then ends it as failed)."""
        request = ResponsesRequest.model_validate_json(services.sealer.open(orphan.request, Purpose.RUN_REQUEST, orphan.tenant))
        run = cls(services, request, orphan.tenant)
        await run.resume(orphan.response, Checkpoint.decode(orphan.checkpoint), orphan.next_sequence_number)
        logger.warning(
            "response %s adopted by replica %s from replica %s, whose lease ran out; going on at event %d",
            orphan.response["id"], services.replicas.id, orphan.stalled.owner, orphan.next_sequence_number,
        )  # fmt: skip

    async def resume(self, response: dict[str, Any], checkpoint: Checkpoint, next_sequence_number: int) -> None:
        """Adopt a background run another replica began, at its checkpoint, and go on with it here."""
        await self._plan(provision=True, adopted=checkpoint)
        await self._meet_model(lambda _model_id: cast(ResponseObject, response))
        self.state.restore(checkpoint, list(response.get("output") or []), next_sequence_number)
        self.first_logged = next_sequence_number
        self._adopted = checkpoint
        assert self.durable is not None  # only background runs are adopted
        self.durable.start_journal(self.cancel)
        self._start()
