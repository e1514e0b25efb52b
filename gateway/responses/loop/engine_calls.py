"""A run's engine calls: each opened with the next prompt, streamed into the output, traced and timed.

One engine request is open at a time (`current`); the run closes it however it ends. An adopted run's
first call is the one its replica was in, replayed (adoption.py) before the engine goes on with it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from ...engine.completion import Chunks, GrammarRefused
from ...engine.routing import ModelEngine
from ...engine.stream import EngineStream
from ...errors import APIError
from ..events.output import ResponseOutput
from ..tools import Toolset
from .adoption import ReplayStream
from .compaction_step import CompactionStep
from .constraint import AnswerBackstop
from .needs import ResponsesNeeds
from .prompt_builder import EngineCall, PromptBuilder
from .run_state import Checkpoint, RunState
from .run_trace import RunTrace, failure_text
from .summaries import Summaries
from .turn import AnswerOptions, Turn, TurnOutcome

logger = logging.getLogger("gateway.responses")
_refusals_told = False


def _warn_once(refused: GrammarRefused) -> None:
    global _refusals_told
    if not _refusals_told:
        _refusals_told = True
        logger.warning(
            "the engine refused the grammar of an engine call (%s); such calls are made without it and validated after the fact "
            "(engine.structured_outputs: auto; gateway_structured_outputs_refused_total counts them)",
            refused,
        )


class EngineCalls:
    def __init__(
        self,
        services: ResponsesNeeds,
        engine: ModelEngine,
        state: RunState,
        prompts: PromptBuilder,
        compaction: CompactionStep,
        toolset: Toolset,
        options: AnswerOptions,
        trace: RunTrace,
        backstop: AnswerBackstop,
        summaries: Summaries | None,
    ) -> None:
        self._services = services
        self._engine = engine  # the model the request names
        self._state = state
        self._compaction = compaction
        self._prompts = prompts
        self._toolset = toolset
        self._options = options
        self._trace = trace
        self._backstop = backstop
        self._summaries = summaries
        self.model_id = ""
        self.current: Chunks | None = None  # the engine request open now, if any
        self._opened_at = ""  # the engine URL the open call went to first
        self._started = time.perf_counter()
        self._first_token_seen = False

    async def open(self) -> None:
        """Open the run's next engine call, with the prompt the dialog makes now."""
        self._state.begin_call()
        call = await self._prompts.next_call()
        if call is None:  # past `context_management`'s threshold: the dialog is compacted first, a step of the loop
            await self._compaction.run()
            call = await self._prompts.next_call()
            assert call is not None, "not due again until the dialog grows"
        headers = self._trace.engine_call(self.model_id or call.model_id, len(call.prompt), call.sampling.max_tokens)
        try:
            self.current = await self._generate(call, headers)
        except BaseException as exc:
            self._trace.engine_done(0, None, failure_text(exc))
            raise

    async def _generate(self, call: EngineCall, headers: dict[str, str]) -> EngineStream:
        """The call, with its grammar where the engine takes it (`engine.structured_outputs`: with `auto`,
        one the engine refuses is made again without it, and what it writes is validated after the fact)."""
        engine, session_key, output = self._engine, self._prompts.affinity_key, self._state.output
        # A run under way waits a while for an engine that restarts; its first call fails at once instead.
        patient = self._state.turns > 1
        try:
            stream = await engine.generate(call.prompt, call.sampling, session_key, headers, patient)
        except GrammarRefused as refused:
            if engine.config.structured_outputs != "auto":
                raise
            _warn_once(refused)
            self._services.metrics.structured_outputs_refused.inc()
            stream = await engine.generate(call.prompt, replace(call.sampling, structural_tag=None), session_key, headers, patient)
        output.enforced = stream.held  # not where the engine refused the grammar, or is known to ignore it
        self._opened_at = stream.opened_at
        return stream

    async def go_on(self, checkpoint: Checkpoint) -> None:
        """Open the engine call an adopted run was in: its tokens parsed again, then, if the engine had not
        finished it, the engine's continuation of the prompt that ends with them."""
        prompts, output = self._prompts, self._state.output
        if checkpoint.finish_reason is not None:
            self._state.begin_call()
            prompts.force_call()
            self.current = ReplayStream(output, checkpoint, None)
        else:
            prompts.continuing = checkpoint.generated
            try:
                await self.open()
                self.current = ReplayStream(output, checkpoint, self.current)
            finally:
                prompts.continuing = []
        # Its tokens are shown as they were (a call live or whole) whatever the engine does with the rest:
        # what the client saw and what follows it then line up.
        output.enforced = checkpoint.enforced

    async def stream(self, output: ResponseOutput) -> TurnOutcome:
        """Stream the open engine call into the output."""
        assert self.current is not None
        turn = Turn(output, self._state.dialog, self._toolset, self._options, self._summaries)
        state = self._state
        written = state.usage.output
        try:
            outcome = await self._streamed(turn, output)
            if output.enforced:
                await self._verify(outcome)
        except BaseException as exc:
            self._trace.engine_done(state.usage.output - written, None, failure_text(exc))
            raise
        output.call_ended = True  # its events are all out, its summaries' too
        self._trace.engine_done(state.usage.output - written, outcome.finish_reason)
        return outcome

    async def _verify(self, outcome: TurnOutcome) -> None:
        """What the grammar held, checked at its end. Held only in part (resumed without it), the final answer
        is checked whole against its format. Held whole, what any grammar guarantees is checked: a call's
        arguments are a JSON object (parsed in `written` anyway), a JSON format's answer parses (one parse);
        either broken, the engine does not enforce grammars, and is told so. An answer that breaks it was
        shown as it came: the response fails."""
        assert self.current is not None
        last = self._state.dialog.messages[-1] if self._state.dialog.messages else None
        if self.current.resumed:
            await self._backstop.check_unheld(last)
            return
        broken_answer = await self._backstop.unparsable(last)
        if broken_answer or (outcome.call is not None and outcome.call.broke_grammar):
            self._grammar_broken()
        if broken_answer:
            raise APIError(
                502, "The model's answer, written past the grammar the engine was sent, is not the JSON the response's text.format asks for.",
                type="server_error", code="model_output_invalid",
            )  # fmt: skip

    def _grammar_broken(self) -> None:
        engine, url = self._engine, self._opened_at
        if not url:  # a call replayed on adoption, no engine's of this replica
            return
        self._services.metrics.grammar_violations.labels(self.model_id, url).inc()
        if engine.config.distrust_on_violation and engine.grammar_broken(url):
            logger.warning(
                "the engine at %s wrote what the grammar sent with the call forbids: it does not enforce grammars (an engine that "
                "ignores `structured_outputs`?). No grammar is sent to it from now on; its calls are held back and checked before "
                "they are shown (engine.distrust_on_violation; gateway_grammar_violations_total counts them)",
                url,
            )

    async def _streamed(self, turn: Turn, output: ResponseOutput) -> TurnOutcome:
        assert self.current is not None
        check = None if output.enforced else self._backstop.check  # what the grammar did not hold, checked
        stream = turn.stream(self.current, self._prompts.prefill, self._state.count, len(self._prompts.prompt), self._first_chunk, check)
        if self._summaries is None:
            return await stream
        failure: Exception | None = None
        async with self._summaries.during_call():  # the call's summaries end with it
            try:
                outcome = await stream
            except Exception as exc:  # raised as it is, not in the task group's exception group
                failure = exc
                self._summaries.cancel()
        if failure is not None:
            raise failure
        return outcome

    async def close(self) -> None:
        if self.current is not None:
            await self.current.aclose()

    def _first_chunk(self) -> None:
        """An engine call's first tokens: for its span, and for the metrics the response's first ones."""
        self._trace.first_token()
        if not self._first_token_seen:
            self._first_token_seen = True
            self._services.metrics.time_to_first_token.labels(self.model_id).observe(time.perf_counter() - self._started)
