"""A session's turns: input events in, background runs of the Responses loop out, the session's state and
events kept as they go.

A turn is one or more runs in the session's conversation: the first with the user's message; then, when a run
stops for what the client owes (a function's result, an MCP approval), the session waits (`requires_action`)
and the next run goes on with what the client gave; a steer ends the running run at its next safe boundary
and the next goes on with the new message. Every change to a session is one transaction on its locked row
(`AgentStore.change`), with the events it emits and the webhooks it sends: whichever replica is given the
session's input (a tool result here, the run's end there) acts on what it read, and only once."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Mapping, Sequence

import anyio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span
from pydantic import ValidationError

from ..core.ids import new_id
from ..errors import APIError, bad_request
from ..protocol import ResponseStatus, SessionStatus, TurnStatus
from ..responses.events.log import sequence_number
from ..responses.run_service import RunService
from ..responses.shapes.request import ResponsesRequest
from ..storage import StorageError, Tx
from ..storage.agent_store import SessionRecord, SessionState, TurnRecord
from ..webhooks.events import event_body, random_id
from . import wakeups
from .artifacts import keep_artifacts
from .following import final_response, run_events
from .models import ApprovalInput, CancelInput, InputEvent, MessageInput, ToolResultInput
from .needs import AgentsNeeds
from .objects import run_request
from .session_state import Emitted, action_id, added, function_output, required_actions, turn_error, unknown_call
from .traces import otlp_json, turn_span
from .translate import RunTranslation, event, frame, tool_output, user_message
from .vault_use import mcp_tokens
from .wakeup_functions import NAMES

log = logging.getLogger("gateway.agents")

EVENTS_KEPT_S = 600.0  # the live log's rows older than this go when a turn ends (no reader is that far behind)


class Turns:
    def __init__(self, services: AgentsNeeds) -> None:
        self._services = services
        self._store = services.agents

    # Input

    async def submit(self, session_id: str, tenant: str, events: Sequence[InputEvent], key: str | None) -> bool:
        """Apply the input events in order, each one change; with a key, the whole submission at most once.
        False when the tenant has no such session."""
        for index, input_event in enumerate(events):
            once = f"{key}/{index}" if key is not None else None
            emitted = await self.change(session_id, tenant, lambda tx, session, one=input_event, once=once: self._apply(tx, session, one, once))
            if emitted is None:
                return False
            if emitted.cancel is not None:
                await self.stop(emitted.cancel, tenant)
            if emitted.start is not None and emitted.record is not None:
                await self._run(emitted.record, emitted.start)
        return True

    async def _apply(self, tx: Tx, session: SessionRecord, input_event: InputEvent, once: str | None) -> Emitted:
        emitted = Emitted()
        if once is not None and not await self._store.first_use(tx, session.id, once):
            return emitted
        state = session.state
        if isinstance(input_event, MessageInput):
            messages = [message.model_dump(exclude_none=True) for message in input_event.input]
            if state.status == SessionStatus.IN_PROGRESS:
                state.steers.extend(messages)  # the run ends at its next boundary; the next goes on with them
                self._steer(state.response_id, session.tenant)
            elif state.status == SessionStatus.REQUIRES_ACTION:
                raise bad_request("The session waits for the results of its tool calls (see required_actions): send them first.", param="events")
            else:
                limit = self._services.config.agents.max_running_sessions_per_tenant
                if await self._store.running_sessions(tx, session.tenant) >= limit:
                    raise APIError(
                        429, f"At most {limit} sessions may run a turn at once for a project.", type="rate_limit_error", code="rate_limit_exceeded"
                    )
                await self._new_turn(tx, session, messages, emitted)
        elif isinstance(input_event, CancelInput):
            await self._cancel(tx, session, emitted)
        elif isinstance(input_event, ToolResultInput):
            await self._answer(tx, session, input_event.call_id, input_event.turn_id, function_output(input_event), emitted)
        elif isinstance(input_event, ApprovalInput):
            answer = {
                "type": "mcp_approval_response",
                "approval_request_id": input_event.request_id,
                "approve": input_event.response.decision == "approve",
            }
            await self._answer(tx, session, input_event.request_id, None, answer, emitted)
        else:
            raise bad_request("Computer use approvals are not supported by this gateway (it has no computer_use tool).", param="events")
        return emitted

    async def _new_turn(self, tx: Tx, session: SessionRecord, messages: list[dict[str, Any]], emitted: Emitted) -> None:
        now = int(time.time())
        turn = TurnRecord(new_id("turn"), session.id, session.tenant, now, {
            "id": "", "object": "agent.session.turn", "agent_id": session.agent_id, "session_id": session.id, "created_at": now,
            "started_at": now, "completed_at": None, "status": TurnStatus.IN_PROGRESS, "error": None, "usage": None, "subagent_id": None,
            "prompt_cache_options": session.body.get("prompt_cache_options"),
        })  # fmt: skip
        turn.body["id"] = turn.id
        await self._store.put_turn(tx, turn)
        session.state = SessionState(status=SessionStatus.IN_PROGRESS, turn_id=turn.id, usage=session.state.usage)
        emitted.events += [
            event("agent.session.turn.created", session_id=session.id, turn_id=turn.id, turn={**turn.body, "status": TurnStatus.QUEUED}),
            event("agent.session.turn.in_progress", session_id=session.id, turn_id=turn.id, turn=turn.body),
        ]
        emitted.session(session, SessionStatus.IN_PROGRESS)
        await self._user_items(tx, session, messages, emitted)
        emitted.start = messages

    async def _user_items(self, tx: Tx, session: SessionRecord, messages: list[dict[str, Any]], emitted: Emitted) -> None:
        turn_id = session.state.turn_id or ""
        items = [user_message(message, turn_id) for message in messages]
        await self._put(tx, session, items, emitted)

    async def _put(self, tx: Tx, session: SessionRecord, items: list[dict[str, Any]], emitted: Emitted) -> None:
        await self._store.put_items(tx, session.id, items)
        for item in items:  # input, not output: `item.added` alone (`item.done` carries the model's output items)
            index = session.state.output_index
            session.state.output_index += 1
            emitted.events.append(
                event("agent.session.turn.item.added", session_id=session.id, turn_id=item["turn_id"], output_index=index, item=item)
            )

    async def _answer(self, tx: Tx, session: SessionRecord, call_id: str, turn_id: str | None, answer: dict[str, Any], emitted: Emitted) -> None:
        state = session.state
        owed = {action_id(action) for action in state.required_actions}
        if (
            state.status not in (SessionStatus.IN_PROGRESS, SessionStatus.REQUIRES_ACTION)
            or (turn_id is not None and turn_id != state.turn_id)
            or call_id in state.answers
        ):
            raise unknown_call(call_id)
        if call_id not in owed and not (turn_id is not None and await self._called(tx, session.id, state.turn_id, call_id)):
            raise unknown_call(call_id)
        state.answers[call_id] = answer
        if answer["type"] == "function_call_output":
            await self._put(
                tx, session, [tool_output(call_id, answer["output"], not answer.pop("unsuccessful", False), state.turn_id or "")], emitted
            )
        if state.status == SessionStatus.REQUIRES_ACTION and owed <= set(state.answers):
            await self._go_on(tx, session, emitted)
            await self._turn_status(tx, session, TurnStatus.IN_PROGRESS)
            emitted.session(session, SessionStatus.IN_PROGRESS)

    async def _go_on(self, tx: Tx, session: SessionRecord, emitted: Emitted) -> None:
        """The turn's next run, with what the client gave for each required action, then any steering
        messages that waited (their items told now, as the run takes them)."""
        state = session.state
        emitted.start = state.given + [state.answers[action_id(action)] for action in state.required_actions] + state.steers
        await self._user_items(tx, session, state.steers, emitted)
        state.required_actions, state.answers, state.steers, state.given = [], {}, [], []

    async def _called(self, tx: Tx, session_id: str, turn_id: str | None, call_id: str) -> bool:
        """A function call the turn's running run made (its item told), not yet in its required actions, and
        not answered already."""
        items = await self._store.turn_items(tx, session_id, turn_id or "")
        kinds = {item["type"] for item in items if item.get("call_id") == call_id}
        return kinds == {"function_call"}

    async def _cancel(self, tx: Tx, session: SessionRecord, emitted: Emitted) -> None:
        state = session.state
        if state.status == SessionStatus.IN_PROGRESS and state.response_id is not None:
            state.error = TurnStatus.CANCELLED  # the run's end, wherever it runs, ends the turn as cancelled
            emitted.cancel = state.response_id  # stopped once this change is committed
        elif state.status in (SessionStatus.IN_PROGRESS, SessionStatus.REQUIRES_ACTION):
            await self._end_turn(tx, session, TurnStatus.CANCELLED, None, emitted)

    def _steer(self, response_id: str | None, tenant: str) -> None:
        live = RunService(self._services).live(response_id, tenant) if response_id is not None else None
        if live is not None:
            live.steer()
        # On another replica, the run goes on to its own end; the next run then takes the message.

    async def stop(self, response_id: str, tenant: str) -> None:
        live = RunService(self._services).live(response_id, tenant)
        if live is not None:
            live.cancel()
            return
        stored = await self._services.store.get(response_id, tenant, dialog=False)
        if stored is not None:
            await self._services.replicas.cancel(stored, wait_s=0)

    # Runs

    async def _run(self, session: SessionRecord, input_items: list[dict[str, Any]]) -> None:
        """Start the turn's next run with this input, and follow it; a run that cannot start fails the turn."""
        session_id, tenant = session.id, session.tenant
        traced = turn_span(self._services.agent_spans, session)
        token = otel_context.attach(trace.set_span_in_context(traced)) if traced is not None else None
        try:
            tokens = await mcp_tokens(self._services, session)
            request = ResponsesRequest.model_validate(run_request(session, input_items, self._services.sealer, tokens))
            live = await RunService(self._services).start(request, tenant)  # its spans children of the turn's
        except (APIError, ValidationError) as exc:
            message = exc.message if isinstance(exc, APIError) else "the turn's request is not valid"
            await self.change(session_id, tenant, lambda tx, s: self._failed(tx, s, session.state.turn_id, message))
            await self._keep_trace(session, traced)
            return
        finally:
            if token is not None:
                otel_context.detach(token)

        turn_id = session.state.turn_id

        async def started(tx: Tx, current: SessionRecord) -> Emitted:
            emitted, state = Emitted(), current.state
            if state.status != SessionStatus.IN_PROGRESS or state.turn_id != turn_id or state.error == TurnStatus.CANCELLED:
                emitted.stale = True  # cancelled (or deleted) while it started
                if state.turn_id == turn_id and state.status == SessionStatus.IN_PROGRESS:
                    state.response_id, state.runner, state.run_base = live.id, self._services.replicas.id, state.output_index
                return emitted
            state.response_id, state.runner, state.followed, state.run_base = live.id, self._services.replicas.id, -1, state.output_index
            state.pending = None
            return emitted

        begun = await self.change(session_id, tenant, started)
        if begun is None or begun.stale:
            live.cancel()
            if begun is None or begun.record is None or begun.record.state.response_id != live.id:
                await self._keep_trace(session, traced)
                return
        self._follow_soon(session, live.id, -1, traced)

    async def _keep_trace(self, session: SessionRecord, traced: Span | None) -> None:
        """The run's trace, once it is over, kept with the session (with tracing on)."""
        spans = self._services.agent_spans
        if traced is None or spans is None:
            return
        traced.end()
        with contextlib.suppress(StorageError):
            trace_id = format(traced.get_span_context().trace_id, "032x")
            await self._store.put_trace(session.id, trace_id, session.state.turn_id or "", otlp_json(spans.take(traced)))

    def _follow_soon(self, session: SessionRecord, response_id: str, after: int, traced: Span | None = None) -> None:
        summaries = session.body["agent"]["reasoning"]["summary"] is not None
        state = session.state
        translation = RunTranslation(session.id, state.turn_id or "", state.run_base if after >= 0 else state.output_index, summaries)
        self._services.supervisor.start_soon(self._follow, session, response_id, translation, after, traced, name=f"agent turn {session.id}")

    async def _follow(self, session: SessionRecord, response_id: str, translation: RunTranslation, after: int, traced: Span | None) -> None:
        try:
            await self._followed(session.id, session.tenant, response_id, translation, after)
        finally:
            await self._keep_trace(session, traced)

    async def _followed(self, session_id: str, tenant: str, response_id: str, translation: RunTranslation, after: int) -> None:
        """Translate the run's events into the session's log until its end, then act on how it ended. Each
        batch is written with how far it reached, so a replica taking the following over goes on from there."""
        me = self._services.replicas.id
        try:
            async for batch in run_events(self._services, response_id, tenant, after):
                events = translation.batch(batch)
                items, translation.items = translation.items, []
                if not events and not items:
                    continue  # nothing to tell (a run's own lifecycle events): no write; a taker-over sees them again
                if not await self._write(session_id, tenant, me, response_id, events, items, sequence_number(batch[-1])):
                    return  # another replica follows it now
            response = await final_response(self._services, response_id, tenant)
        except StorageError:
            log.warning("agent session %s: the database failed while its turn's run was followed", session_id)
            return  # the following is taken over once this replica's lease lapses, or when it is back
        if response is None:
            return
        if response.get("status") == ResponseStatus.COMPLETED:  # kept before the turn's end is told: a client told it ended finds them
            await keep_artifacts(self._services, session_id, tenant, translation.turn_id)
        ended = await self.change(session_id, tenant, lambda tx, session: self._run_ended(tx, session, response_id, response, translation))
        if ended is not None and ended.start is not None and ended.record is not None:
            await self._run(ended.record, ended.start)

    async def _write(
        self,
        session_id: str,
        tenant: str,
        me: str,
        response_id: str,
        events: list[dict[str, Any]],
        items: list[dict[str, Any]],
        followed: int,
    ) -> bool:
        async def work(tx: Tx, session: SessionRecord) -> Emitted:
            emitted = Emitted()
            state = session.state
            if state.response_id != response_id or state.runner != me:
                emitted.stale = True
                return emitted
            await self._store.put_items(tx, session_id, items)
            state.followed = followed
            emitted.events = events
            return emitted

        emitted = await self.change(session_id, tenant, work)
        return emitted is not None and not emitted.stale

    async def recover(self) -> None:
        """Take over the turns of sessions whose runner's replica is gone (killed, or cut off past its lease):
        following a run from the last event its follower wrote, wherever the run now runs; or starting the
        run its runner died before starting."""
        replicas = self._services.replicas
        while True:
            await anyio.sleep(replicas.lease_s)
            if replicas.draining:
                continue
            try:
                alive = await replicas.live()
                for session_id, tenant, state in await self._store.running():
                    if state.runner not in alive and (state.response_id is not None or state.pending is not None):
                        await self._take_over(session_id, tenant, state.runner)
            except StorageError:
                continue

    async def _take_over(self, session_id: str, tenant: str, gone: str | None) -> None:
        me = self._services.replicas.id

        async def claim(tx: Tx, session: SessionRecord) -> Emitted:
            emitted = Emitted()
            emitted.stale = session.state.status != SessionStatus.IN_PROGRESS or session.state.runner != gone
            if not emitted.stale:
                session.state.runner = me
            return emitted

        emitted = await self.change(session_id, tenant, claim)
        session = await self._store.session(session_id, tenant)
        if emitted is None or emitted.stale or session is None:
            return
        if session.state.pending is not None:  # its runner died before the run started: started here
            log.info("agent session %s: its turn's run started here, its runner (replica %s) gone before it started it", session_id, gone)
            await self._run(session, session.state.pending)
        elif session.state.response_id is not None:
            log.info("agent session %s: following its turn's run, taken over from replica %s", session_id, gone)
            self._follow_soon(session, session.state.response_id, session.state.followed)

    async def _run_ended(self, tx: Tx, session: SessionRecord, response_id: str, response: Mapping[str, Any], translation: RunTranslation) -> Emitted:
        emitted = Emitted()
        state = session.state
        if state.response_id != response_id or state.status != SessionStatus.IN_PROGRESS or state.runner != self._services.replicas.id:
            return emitted  # a later change already moved on, or another replica follows it now
        state.output_index = max(state.output_index, translation.last_index + 1)
        usage: Any = response.get("usage")
        state.usage, state.turn_usage = added(state.usage, usage), added(state.turn_usage, usage)
        status = response["status"]
        if state.error == TurnStatus.CANCELLED or status == ResponseStatus.CANCELLED:
            await self._end_turn(tx, session, TurnStatus.CANCELLED, None, emitted)
            return emitted
        if status == ResponseStatus.FAILED:
            error = response.get("error") or {}
            await self._end_turn(
                tx,
                session,
                TurnStatus.FAILED,
                {"code": turn_error(error.get("code")), "message": error.get("message") or "The turn failed."},
                emitted,
            )
            return emitted
        owed = await self._answer_own(tx, session, required_actions(response.get("output", []), state.turn_id or ""), emitted)
        state.required_actions = owed
        if owed and not {action_id(action) for action in owed} <= set(state.answers):
            await self._turn_status(tx, session, TurnStatus.WAITING)
            emitted.session(session, SessionStatus.REQUIRES_ACTION)
        elif owed or state.steers or state.given:  # every result came while the run ran on, a steer waits, or own results
            await self._go_on(tx, session, emitted)
        else:
            await self._end_turn(tx, session, TurnStatus.COMPLETED, None, emitted)
        return emitted

    async def _answer_own(self, tx: Tx, session: SessionRecord, actions: list[dict[str, Any]], emitted: Emitted) -> list[dict[str, Any]]:
        """The calls of the gateway's own agent tools (the automations tool) answered now, in this change: their
        results kept for the next run (`given`) and told as items. What is left, the client owes."""
        if not wakeups.has_tool(session):
            return actions
        owed = []
        for action in actions:
            if action["type"] != "function_call" or action["name"] not in NAMES:
                owed.append(action)
                continue
            output, succeeded = await wakeups.call(self._services, tx, session, action)
            session.state.given.append({"type": "function_call_output", "call_id": action["call_id"], "output": output})
            await self._put(tx, session, [tool_output(action["call_id"], output, succeeded, session.state.turn_id or "")], emitted)
        return owed

    async def _failed(self, tx: Tx, session: SessionRecord, turn_id: str | None, message: str) -> Emitted:
        emitted = Emitted()
        if session.state.turn_id == turn_id:
            await self._end_turn(tx, session, TurnStatus.FAILED, {"code": "invalid_request", "message": message}, emitted)
        return emitted

    async def _end_turn(self, tx: Tx, session: SessionRecord, status: TurnStatus, error: dict[str, str] | None, emitted: Emitted) -> None:
        state = session.state
        turn = await self._turn_status(tx, session, status, error)
        if turn is not None:
            emitted.events.append(
                event(f"agent.session.turn.{status}", session_id=session.id, turn_id=turn.id, turn=turn.body, usage=turn.body["usage"])
            )
        state.required_actions, state.answers, state.steers, state.given, state.error, state.runner = [], {}, [], [], None, None
        state.pending = None
        emitted.session(session, SessionStatus.IDLE)
        await self._store.forget_events(tx, session.id, time.time() - EVENTS_KEPT_S)

    async def _turn_status(self, tx: Tx, session: SessionRecord, status: TurnStatus, error: dict[str, str] | None = None) -> TurnRecord | None:
        turn_id = session.state.turn_id
        turn = await self._store.turn(session.id, turn_id, tx) if turn_id is not None else None
        if turn is None:
            return None
        turn.body.update(status=status, error=error, usage=session.state.turn_usage)
        if status.ended:
            turn.body["completed_at"] = int(time.time())
        await self._store.put_turn(tx, turn)
        return turn

    # One change

    async def change(self, session_id: str, tenant: str, work: Any) -> Emitted | None:
        """`work(tx, session)` on the locked session; its events written and its webhook queued in the same
        transaction, subscribers told once it committed."""
        webhooks = self._services.webhook_outbox

        async def changed(tx: Tx, session: SessionRecord) -> Emitted:
            emitted: Emitted = await work(tx, session)
            if emitted.start is not None:  # kept until the run has started: if this replica dies first, another starts it
                state = session.state
                state.pending, state.runner, state.response_id = emitted.start, self._services.replicas.id, None
            emitted.record = session
            if emitted.events:
                emitted.frames = [frame(item) for item in emitted.events]
                emitted.first_number = await self._store.append(tx, session.id, emitted.frames)
            if emitted.webhook is not None:
                body = event_body(emitted.webhook, session.id, int(time.time()))
                await webhooks.enqueue(tx, tenant, emitted.webhook, body, time.time(), lambda: random_id("wh"))
            return emitted

        emitted = await self._store.change(session_id, tenant, changed)
        if emitted is not None and emitted.events:
            await self._services.agent_feed.deliver(session_id, emitted.first_number, emitted.frames)  # this replica's, at once
            await self._store.published(session_id)  # every replica's
        if emitted is not None and emitted.webhook is not None:
            webhooks.written()
        return emitted
