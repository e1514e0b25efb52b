"""One response: the Harmony loop from request to terminal event.

request → dialog (Harmony messages) → prompt tokens → engine → parser → output items and events.
A tool call that the gateway runs loops back into the dialog and the engine is called again; a call
to a client function ends the response, to be continued by the client's `function_call_output`.
The run is a task of its own (`start()`) that appends every event to the response's log (log.py);
a streamed response is a reader of that log, a non-streamed one waits for its end.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import anyio
from openai_harmony import Role

from tools.namespaces import RESERVED_NAMESPACES

from ..isolation import TooCostly, run_isolated
from ..engine import EngineStream, Sampling
from ..errors import APIError, bad_request
from ..harmony import GrowingPrompt, Preamble, Prompt, ToolDescription, ToolNamespaceConfig, encoding
from ..parser import HarmonyStreamParser, MalformedHarmony, MessageFinished, MessageStarted, TextDelta
from ..storage import StorageError
from ..store import RUNNING, StoredResponse, TooManyRunning
from ..conversations.store import Conversation, DuplicateItem
from ..conversations.history import keep_state, new_items, open_conversation, refuse_known_ids

from ..files.inputs import read_input_files
from .conversation import Dialog, append_input, tool_result
from .hosted import HostedTools
from .services import Services
from .tool_call import CallKind, ToolCall
from .citations import CitationRewriter, Piece, container_file_citations
from .items import CustomToolCallOutput, Delta, Event, Events, FunctionCallOutput, MessageOutput, OutputItem, ReasoningOutput, TextItem, new_id
from .journal import Journal
from .log import EventLog
from .sealed import Unsealable
from .choice import check_choice, forced_header, offered_tools
from .stops import StopMatcher
from .logprobs import ContentLogprob, load_vocabulary, parse_with_logprobs
from .schemas import InvalidSchema, argument_problem, checked_schema
from .grammars import InvalidGrammar, check_grammar, input_problem
from .request import (
    CustomTool, FunctionTool, GrammarInput, McpTool, NamespaceFunction, NamespaceTool, ReasoningItem, ReasoningText, ResponsesRequest,
    UnavailableTool,
    WebSearchTool, unsupported,
)  # fmt: skip

logger = logging.getLogger("gateway.responses")


class ResponseRun:
    def __init__(self, services: Services, request: ResponsesRequest, tenant: str, chat: "ChatOptions | None" = None) -> None:
        self.services = services
        self.request = request
        self.chat = chat or ChatOptions()
        self.tenant = tenant
        self.events_log = Events()
        self.output: list[OutputItem] = []
        self.dialog = Dialog()
        self.input_items: list[dict[str, Any]] = []
        self.conversation: Conversation | None = None  # the conversation the response continues and adds to
        self._new_messages_from = 0  # where this response's messages start in the dialog
        request.tools = _available_tools(request.tools, services.config.server.drop_unavailable_tools, services.browser is not None)
        self.echoed_tools = [_echo_tool(tool) for tool in request.tools]
        self.echoed_choice = request.tool_choice if isinstance(request.tool_choice, str) else request.tool_choice.model_dump(exclude_none=True)
        request.tools, request.tool_choice = offered_tools(request.tools, request.tool_choice)
        self._tool_called = False  # a declared tool was called: a forced choice is satisfied
        # The client's own tools the model calls as `functions.NAME`: JSON functions and raw-text custom tools.
        self.functions = {tool.name: tool for tool in request.tools if isinstance(tool, (FunctionTool, CustomTool))}
        # Every client function by the recipient the model addresses: `functions.NAME`, `NAMESPACE.NAME`.
        self.callables: dict[str, tuple[Any, str | None]] = {tool.recipient: (tool, None) for tool in self.functions.values()}
        for tool in request.tools:
            if isinstance(tool, NamespaceTool):
                self.callables |= {f"{tool.name}.{function.name}": (function, tool.name) for function in tool.tools}
        self.schemas: dict[str, str] = {}  # strict functions' parameters (canonical JSON Schema), by name
        # Alternatives per token when the answer's logprobs are asked for; None when they are not.
        wants_logprobs = request.includes("message.output_text.logprobs") or bool(request.top_logprobs)
        self.logprob_count = (request.top_logprobs or 0) if wants_logprobs else None
        self.log = EventLog()
        self.hosted = HostedTools(services, request, tenant, self.output, self.events_log, self.log.append)
        self.preamble = Preamble()
        self.usage = {"input": 0, "cached": 0, "output": 0, "reasoning": 0}
        self.model_id = ""
        self.response: dict[str, Any] = {}
        self._stream: EngineStream | None = None
        self._prompt = Prompt("", 0)
        self._growing = GrowingPrompt(services.renderer, services.metrics.prompt_tokens)  # this run's prompt, turn after turn
        self._turns = 0
        self.failure: APIError | None = None
        self._prefill: list[int] = []
        self._started = time.perf_counter()
        self._first_token_seen = False
        self._tokens_counted = False
        self._cancel = anyio.CancelScope()
        self.background = bool(request.background)  # runs on whatever the client does; resumable, cancellable
        self.journal: Journal | None = None  # a background response's events and progress, in the store
        # The stored response this one continues, and how many of the dialog's messages are its.
        self._parent_id: str | None = None
        self._parent_length = 0

    # -- before the first event: everything that can still be an HTTP error ------------------------------

    async def prepare(self) -> None:
        """Load the previous response, build the dialog, and open the first engine stream."""
        await self._build_dialog()
        if self.logprob_count is not None:
            await anyio.to_thread.run_sync(load_vocabulary)
        model = await self.services.engine.model()
        self.model_id = model.id
        self.response = self._skeleton()
        # Listings and approved calls come first; the engine is called after them, in execute().
        if not self.hosted.has_work_before_engine:
            self._stream = await self._open_stream()

    async def input_tokens(self) -> int:
        """The exact length of the prompt the first engine call of this request would get."""
        await self._build_dialog(provision=False)
        self._prefill = self._forced_call_header()
        return len(await self._render(max_model_len=None))

    async def _build_dialog(self, provision: bool = True) -> None:
        request = self.request
        if request.previous_response_id:
            previous = await self.services.store.get(request.previous_response_id, self.tenant)
            if previous is None:
                raise APIError(
                    404,
                    f"Previous response with id '{request.previous_response_id}' not found.",
                    param="previous_response_id",
                    code="previous_response_not_found",
                )
            if previous.status in RUNNING:
                raise bad_request(
                    f"Previous response '{request.previous_response_id}' is still running: wait for it to end, or cancel it.",
                    param="previous_response_id",
                )
            self.dialog = Dialog.from_json(previous.dialog, previous.open_calls, previous.state)
            self._growing.seed(previous.tokens)
            self._parent_id, self._parent_length = request.previous_response_id, len(previous.dialog)
        known: set[str] = set()
        if request.conversation_id is not None:
            adding = 1 if isinstance(request.input, str) else max(len(request.input), 1)
            self.conversation, self.dialog, known = await open_conversation(
                self.services.conversations, request.conversation_id, self.tenant, "conversation",
                self.services.config.conversations.max_items, adding,
            )  # fmt: skip
        self._unseal_reasoning()
        self._new_messages_from = len(self.dialog.messages)
        if not isinstance(request.input, str):
            await read_input_files(request.input, self.services.files, self.tenant)
        self.input_items = append_input(self.dialog, request.input, resent_thread=request.previous_response_id is not None)
        if self.conversation is not None:
            refuse_known_ids(self.input_items, known, "input")
        await self.hosted.prepare(self.dialog, provision)
        self.preamble = self._preamble()
        await self._check_grammars()

    async def _render(self, max_model_len: int | None) -> Prompt:
        """The prompt; with `truncation: "auto"`, without as many of the oldest turns as it takes to fit
        the context (the preamble, developer messages and the turn in progress are always kept)."""
        prompt = await self._growing.render(self.preamble, self.dialog.messages) + self._prefill
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
            candidate = await render(self.preamble, kept) + self._prefill
            if len(candidate) < max_model_len:
                best, high = candidate, middle - 1
            else:
                low = middle + 1
                if len(candidate) < len(best):
                    best = candidate
        return best  # still too long when even the turn in progress does not fit: the caller says so

    def _unseal_reasoning(self) -> None:
        """Reasoning items sent back with `encrypted_content` carry the text the gateway sealed: that text
        is what the model reads (a blob that does not open is a 400)."""
        if isinstance(self.request.input, str):
            return
        for index, item in enumerate(self.request.input):
            if isinstance(item, ReasoningItem) and item.encrypted_content is not None:
                try:
                    text = self.services.sealer.open(item.encrypted_content)
                except Unsealable:
                    raise bad_request(
                        "The encrypted content of this reasoning item could not be verified: it was changed, or "
                        "sealed by another gateway key.",
                        param=f"input[{index}].encrypted_content",
                        code="invalid_encrypted_content",
                    ) from None
                item.content = [ReasoningText(type="reasoning_text", text=text)]

    async def _open_stream(self) -> EngineStream:
        self._turns += 1
        # Harmony cannot force a tool call, but the prompt is ours: a forced `tool_choice` starts the
        # assistant's message with the call's header (choice.py).
        self._prefill = self._forced_call_header()
        model = await self.services.engine.model()
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
            budget -= self.usage["output"]
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
        return await self.services.engine.generate(prompt, sampling, self.dialog.session_key)

    # -- the events ---------------------------------------------------------------------------------------

    async def begin(self) -> None:
        """A background response is stored as it starts, for every replica to find (a failure here is the
        request's: a 503, and the engine request opened by `prepare` is closed)."""
        if not self.background:
            return
        services = self.services
        try:
            try:
                await services.store.begin(
                    self.snapshot(), self.input_items, self.tenant, services.replicas.id, services.config.loop.max_background_per_tenant
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
        self.journal = Journal(services.store, self.response["id"], services.replicas.id, self.log, self.snapshot)

    def start(self) -> None:
        """Hand the run to a task of its own; from here on it is read through `self.log`."""
        if self.journal is not None:
            self.services.runs.background[self.response["id"]] = self
            self.services.runs.start(self.journal.run)
        self.services.runs.start(self.execute)

    def cancel(self) -> None:
        """The client went away or stopped reading: stop the run, which aborts its engine request."""
        self._cancel.cancel()

    async def execute(self) -> None:
        """The run's task: every event goes to the log, which ends with exactly one terminal event
        (unless the run was cancelled, when nobody is left to read it)."""
        try:
            await self._execute()
        finally:
            self._count_tokens()  # also when the app cancels the task at a hard shutdown
            self.log.close()

    async def _execute(self) -> None:
        log, emit = self.events_log, self.log.append
        opening = [log.make("response.created", response=self.snapshot())]
        if self.background:
            opening.append(log.make("response.queued", response=self.snapshot()))
            self.response["status"] = "in_progress"
        opening.append(log.make("response.in_progress", response=self.snapshot()))
        emit(opening)
        status, error, incomplete = "completed", None, None
        try:
            with self.services.drain.guard() as guard, self._cancel:
                status, incomplete = await self._loop()
            if guard.cancelled_caught:
                raise APIError(
                    503, "The gateway is shutting down; the response was stopped.", type="server_error", code="server_shutting_down"
                )
            if self._cancel.cancelled_caught:
                status = "cancelled"
        except (APIError, MalformedHarmony) as exc:
            status = "failed"
            self.failure = exc if isinstance(exc, APIError) else APIError(
                502, str(exc), type="server_error", code="model_output_invalid"
            )
        except Exception:  # a fault of the gateway's own: this response fails, the others go on
            logger.exception("response %s failed", self.response["id"])
            status = "failed"
            self.failure = APIError(500, "The gateway failed while running the response.", type="server_error", code="internal_error")
        finally:
            with anyio.CancelScope(shield=True):
                if self._stream is not None:
                    await self._stream.aclose()
        if status in ("failed", "cancelled"):
            emit([event for item in self._open_items() for event in item.closed(log, "incomplete")])
        if self.failure is not None:
            error = {"code": "server_error", "message": self.failure.message}
        self.finish(status, error, incomplete)
        with anyio.CancelScope(shield=True):
            if self.conversation is not None and status in ("completed", "incomplete"):
                await self._add_to_conversation(self.conversation)
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
        log, status = self.events_log, self.response["status"]
        if status != "cancelled":
            return [log.make(f"response.{status}", response=self.response)]
        if self.background:
            return [log.make("error", code="response_cancelled", message="The response was cancelled.", param=None)]
        return []

    async def _finish_background(self) -> None:
        """The terminal event, then the final record with the events not written yet; only then is the run
        forgotten here, so a reader always finds it, live or stored."""
        assert self.journal is not None
        self.log.append(self._terminal_events())
        try:
            await self.journal.finish(lambda frames: self._save(frames, owner=self.services.replicas.id))
        finally:
            self.services.runs.background.pop(self.response["id"], None)

    async def _save_or_fail(self) -> None:
        """Store the response; if the database stays unreachable beyond its retry window, the response
        fails (a client told `completed` would find nothing to continue from)."""
        try:
            await self._save()
        except StorageError as exc:
            logger.error("response %s could not be stored: %s", self.response["id"], exc)
            self.failure = APIError(503, "The response could not be stored.", type="server_error", code="storage_unavailable")
            self.finish("failed", {"code": "server_error", "message": self.failure.message}, None)

    async def _loop(self) -> tuple[str, dict[str, str] | None]:
        """Engine calls and tool calls, until the model answers or a limit is reached: the status."""
        await self.hosted.before_engine()
        if self._stream is None:
            self._stream = await self._open_stream()
        while True:
            outcome = _Outcome()
            await self._generate(outcome)
            if outcome.finish_reason == "length":
                return "incomplete", {"reason": "max_output_tokens"}
            call = outcome.call
            if call is None or call.kind.ends_response:
                return "completed", None
            await self.hosted.run_call(call)
            if call.kind.runs_here:
                self._tool_called = True
            # The tool's output, or what went wrong (no such tool, bad arguments), goes to the model.
            self.dialog.append(tool_result(call.recipient, call.channel, call.output or ""))
            if self._turns >= self.services.config.loop.max_turns:
                return "incomplete", {"reason": "max_messages"}
            self._stream = await self._open_stream()

    async def _generate(self, outcome: "_Outcome") -> None:
        """Stream one engine call: its tokens become items and events until the engine stops."""
        stream = self._stream
        assert stream is not None
        parser = HarmonyStreamParser()
        log, emit = self.events_log, self.log.append
        item: OutputItem | None = None
        stopper: StopMatcher | None = None  # the open message's stop sequences, when the request has any
        rewriter: CitationRewriter | None = None  # the open message's citations, when the browser is on
        tokens = 0
        prefill = self._prefill
        try:
            async for chunk in stream:
                tokens += len(chunk.token_ids)
                if not self._first_token_seen:
                    self._first_token_seen = True
                    self.services.metrics.time_to_first_token.observe(time.perf_counter() - self._started)
                batch: list[Event | Delta] = []
                if prefill:  # the forced header goes through the parser as if the model had written it
                    chunk.token_ids = prefill + chunk.token_ids
                    if chunk.logprobs is not None:
                        chunk.logprobs = [*(None for _ in prefill), *chunk.logprobs]
                    prefill = []
                if self.logprob_count is None:
                    parsed_events: list[Any] = parser.feed(chunk.token_ids)
                else:
                    parsed_events = parse_with_logprobs(parser, chunk, self.logprob_count)
                for parsed in parsed_events:
                    if type(parsed) is TextDelta:
                        if not isinstance(item, TextItem):  # none open, or a web_search_call (shows its action only)
                            pass
                        elif stopper is None and rewriter is None:
                            batch.append(item.delta(log, parsed.text))
                        elif self._visible(item, parsed.text, stopper, rewriter, batch):
                            # A stop sequence: the message ends here, and with it the generation.
                            item = stopper = rewriter = None
                            outcome.finish_reason, outcome.stopped = "stop", True
                            break
                    elif type(parsed) is MessageStarted:
                        item = self._open_item(parsed, outcome)
                        self.dialog.owner = item.id if item is not None else None
                        if item is not None:
                            batch += item.opened(log)
                        stopper = StopMatcher(self.chat.stops) if self.chat.stops and isinstance(item, MessageOutput) else None
                        rewriter = CitationRewriter(self.hosted.cited) if self.hosted.browser is not None and isinstance(item, MessageOutput) else None
                    elif type(parsed) is ContentLogprob:
                        if isinstance(item, MessageOutput):  # reported for the visible answer only
                            item.pending_logprobs.append(parsed.entry)
                    else:
                        assert isinstance(parsed, MessageFinished)
                        self.dialog.append(parsed.message)
                        call = outcome.call
                        if call is not None and call.kind.hosted:
                            batch += self.hosted.call_written(call, _text(parsed.message))
                        elif item is not None:
                            batch += self._held_back(item, stopper, rewriter)
                            if isinstance(item, MessageOutput) and self.hosted.container is not None:
                                cited = container_file_citations(item.text, self.hosted.container_file)
                                batch += [item.annotated(log, citation) for citation in cited]
                            batch += item.closed(log, await self._call_status(item, outcome))
                        item = stopper = rewriter = None
                if chunk.finish_reason is not None:
                    outcome.finish_reason = chunk.finish_reason
                emit(batch)
                if outcome.stopped:
                    break  # a stop sequence: the engine request is aborted when the stream closes
        finally:
            # What the engine did is counted however the call ended: done, failed, cancelled.
            usage = stream.usage
            self.usage["input"] += usage.prompt_tokens or len(self._prompt)
            self.usage["cached"] += usage.cached_tokens
            self.usage["output"] += max(usage.completion_tokens, tokens)
            self.usage["reasoning"] += parser.reasoning_tokens
        # The engine stopped: anything still open was cut off by max_tokens.
        if item is not None:
            emit([*self._held_back(item, stopper, rewriter), *item.closed(log, "incomplete")])
        partial = parser.partial_message()
        if partial is not None:
            self.dialog.append(partial)
        if outcome.finish_reason is None:
            outcome.finish_reason = "stop"
        elif outcome.finish_reason == "abort":
            raise APIError(502, "The engine aborted the generation.", type="server_error", code="engine_error")
        if outcome.call is not None and outcome.call.kind is CallKind.FUNCTION:
            self._finish_function_call(outcome)

    def _visible(
        self, item: Any, text: str, stopper: StopMatcher | None, rewriter: CitationRewriter | None, batch: list[Event | Delta]
    ) -> bool:
        """A message's text as the client gets it: citations made links (each announced as an annotation
        after the delta that ends it), cut at a stop sequence. True when a stop sequence ended the message."""
        log = self.events_log
        for piece in rewriter.feed(text) if rewriter is not None else [Piece(text)]:
            shown, stopped = stopper.feed(piece.text) if stopper is not None else (piece.text, False)
            if shown:
                batch.append(item.delta(log, shown))
            if stopped:
                batch += item.closed(log)
                return True
            if piece.annotation is not None:
                batch.append(item.annotated(log, piece.annotation))
        return False

    def _held_back(self, item: Any, stopper: StopMatcher | None, rewriter: CitationRewriter | None) -> list[Event | Delta]:
        """The end of a message: what could have begun a citation or a stop sequence, once it is clear it did
        not (both watch messages only)."""
        held = "".join(piece.text for piece in rewriter.flush()) if rewriter is not None else ""
        if stopper is not None:
            held = stopper.feed(held)[0] + stopper.flush()
        return [item.delta(self.events_log, held)] if held else []

    def _open_item(self, header: MessageStarted, outcome: "_Outcome") -> OutputItem | None:
        index = len(self.output)
        item: OutputItem | None
        if header.recipient is None:
            if header.channel == "analysis":
                item = ReasoningOutput(index, self.services.sealer.seal if self.request.includes("reasoning.encrypted_content") else None)
            else:
                phase = "commentary" if header.channel == "commentary" else "final_answer"
                item = MessageOutput(index, phase, with_logprobs=self.logprob_count is not None)
        else:
            outcome.call = ToolCall(header.recipient, header.channel)
            item = self._open_tool_item(index, outcome.call)
        if item is not None:
            self.output.append(item)
        return item

    def _open_tool_item(self, index: int, call: ToolCall) -> OutputItem | None:
        recipient = call.recipient
        if recipient in self.callables and self.request.tool_choice != "none":
            function, namespace = self.callables[recipient]
            if isinstance(function, CustomTool):
                return call.claim(CallKind.FUNCTION, CustomToolCallOutput(index, function.name))
            return call.claim(CallKind.FUNCTION, FunctionCallOutput(index, function.name, namespace))
        namespace, _, name = recipient.partition(".")
        if namespace == "functions" or namespace in self.namespaces:
            call.refuse(f"no function named '{name}' is available in {namespace}. Use only the declared functions.")
            return None
        return self.hosted.open_call(index, call)

    async def _call_status(self, item: OutputItem, outcome: "_Outcome") -> str:
        """A function call whose arguments are not JSON, or break a strict function's schema, is not
        handed to the client: it is marked incomplete and the model is told to write the call again."""
        call = outcome.call
        if isinstance(item, CustomToolCallOutput) and call is not None:
            return await self._custom_call_status(item, call)
        if not isinstance(item, FunctionCallOutput) or call is None:
            return "completed"
        try:
            arguments = json.loads(item.text)
        except ValueError as exc:
            call.invalidate(f"the arguments are not valid JSON ({exc}). Call the function again with a JSON object.")
            return "incomplete"
        schema = self.schemas.get(item.recipient)
        if schema is not None:
            # In a worker process, bounded: the client's schema and the model's arguments decide the cost.
            try:
                problem = await run_isolated(self.services.config.isolation.schema_timeout_s, argument_problem, schema, item.text)
            except TooCostly as exc:
                problem = f"the arguments could not be checked against the function's schema ({exc})"
            if problem is not None:
                call.invalidate(
                    f"the arguments do not match the parameters of {item.name}: {problem}. "
                    "Call the function again with arguments that do."
                )
                return "incomplete"
        return "completed"

    async def _custom_call_status(self, item: CustomToolCallOutput, call: ToolCall) -> str:
        """A custom tool's input that breaks its grammar goes back to the model, like bad JSON arguments."""
        tool = self.functions[item.name]
        grammar = tool.format if isinstance(tool, CustomTool) else None
        if not isinstance(grammar, GrammarInput):
            return "completed"
        problem = await input_problem(grammar.syntax, grammar.definition, item.text)
        if problem is None:
            return "completed"
        call.invalidate(f"the input of {item.name} is not valid: {problem}. Call the tool again with input that is.")
        return "incomplete"

    async def _check_grammars(self) -> None:
        for index, tool in enumerate(self.request.tools):
            if isinstance(tool, CustomTool) and isinstance(tool.format, GrammarInput):
                try:
                    await check_grammar(tool.format.syntax, tool.format.definition)
                except InvalidGrammar as exc:
                    raise bad_request(f"Invalid grammar for custom tool '{tool.name}': {exc}.", param=f"tools[{index}].format.definition") from None

    def _finish_function_call(self, outcome: "_Outcome") -> None:
        call = outcome.call
        assert call is not None and isinstance(call.item, (FunctionCallOutput, CustomToolCallOutput))
        self.dialog.open_calls[call.item.call_id] = call.item.recipient

    def _forced_call_header(self) -> list[int]:
        header = None if self._tool_called else forced_header(self.request.tool_choice, self.functions)
        return encoding().encode(header, allowed_special="all") if header else []

    def _open_items(self) -> list[OutputItem]:
        return [item for item in self.output if item.status in ("in_progress", "interpreting", "searching")]

    # -- the Response object ------------------------------------------------------------------------------

    def _preamble(self) -> Preamble:
        request = self.request
        effort = request.reasoning.effort if request.reasoning else None
        functions = []
        if request.tool_choice != "none":
            functions = [_describe(tool) for tool in self.functions.values()]
        self._check_namespaces()
        for index, tool in enumerate(request.tools):
            # (param, recipient, function) of the request's functions: the tool's own, or a namespace's.
            strict_candidates: list[tuple[str, str, FunctionTool | NamespaceFunction]] = []
            if isinstance(tool, FunctionTool):
                strict_candidates = [(f"tools[{index}]", tool.recipient, tool)]
            elif isinstance(tool, NamespaceTool):
                strict_candidates = [
                    (f"tools[{index}].tools[{inner}]", f"{tool.name}.{function.name}", function) for inner, function in enumerate(tool.tools)
                ]
            for param, recipient, function in strict_candidates:
                if function.strict is False:  # OpenAI's default is strict
                    continue
                try:
                    self.schemas[recipient] = checked_schema(function.parameters)
                except InvalidSchema as exc:
                    raise bad_request(
                        f"Invalid schema for function '{function.name}': {exc}.",
                        param=f"{param}.parameters",
                        code="invalid_function_parameters",
                    ) from None
        check_choice(
            request.tool_choice, self.functions, self.hosted.servers, self.hosted.code_interpreter is not None, self.hosted.browser is not None
        )
        response_format = None
        text_format = request.text.format if request.text else None
        if text_format is not None and text_format.type == "json_schema":
            if text_format.schema_ is None:
                raise bad_request("A json_schema format needs a schema.", param="text.format.schema")
            response_format = (text_format.name or "response", text_format.schema_)
        declared = [
            ToolNamespaceConfig(
                name=tool.name,
                description=tool.description,
                tools=[_describe(function) for function in tool.tools],
            )
            for tool in request.tools
            if isinstance(tool, NamespaceTool) and request.tool_choice != "none"
        ]
        return Preamble(
            effort, request.instructions, functions, self.hosted.namespaces(), function_namespaces=declared, response_format=response_format
        )

    @property
    def namespaces(self) -> set[str]:
        return {tool.name for tool in self.request.tools if isinstance(tool, NamespaceTool)}

    def _check_namespaces(self) -> None:
        """A namespace's name may not be one the model already knows another way."""
        taken = {*RESERVED_NAMESPACES, *self.hosted.servers}
        for index, tool in enumerate(self.request.tools):
            if not isinstance(tool, NamespaceTool):
                continue
            if tool.name in taken:
                raise bad_request(
                    f"The namespace '{tool.name}' clashes with another tool of that name.", param=f"tools[{index}].name"
                )
            taken.add(tool.name)
            names = [function.name for function in tool.tools]
            if len(set(names)) != len(names):
                raise bad_request(f"The namespace '{tool.name}' declares a function twice.", param=f"tools[{index}].tools")

    def _skeleton(self) -> dict[str, Any]:
        request = self.request
        text_format = request.text.format.model_dump(by_alias=True, exclude_none=True) if request.text and request.text.format else {"type": "text"}
        return {
            "id": new_id("resp"),
            "object": "response",
            "created_at": int(time.time()),
            "status": "queued" if self.background else "in_progress",
            "background": self.background,
            "completed_at": None,
            "error": None,
            "incomplete_details": None,
            "instructions": request.instructions,
            "max_output_tokens": request.max_output_tokens,
            "max_tool_calls": request.max_tool_calls,
            "model": self.model_id,
            "output": [],
            "parallel_tool_calls": request.parallel_tool_calls,
            "previous_response_id": request.previous_response_id,
            "conversation": {"id": request.conversation_id} if request.conversation_id is not None else None,
            "reasoning": {
                "effort": request.reasoning.effort if request.reasoning else None,
                "summary": (request.reasoning.summary or request.reasoning.generate_summary) if request.reasoning else None,
            },
            "service_tier": "default",
            "store": request.store,
            "temperature": request.temperature if request.temperature is not None else 1.0,
            "text": {"format": text_format, "verbosity": (request.text.verbosity if request.text else None) or "medium"},
            "tool_choice": self.echoed_choice,
            "tools": self.echoed_tools,
            "top_logprobs": request.top_logprobs or 0,
            "top_p": request.top_p if request.top_p is not None else 1.0,
            "truncation": request.truncation or "disabled",
            "usage": None,
            "user": request.user,
            "metadata": request.metadata or {},
            # Fields OpenAI's Response object always has; the gateway has no penalties on this API.
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
            "safety_identifier": request.safety_identifier,
            "prompt_cache_key": request.prompt_cache_key,
            "prompt_cache_retention": request.prompt_cache_retention,
        }

    def snapshot(self) -> dict[str, Any]:
        return self.response | {"output": [item.as_dict() for item in self.output]}

    def _count_tokens(self) -> None:
        """Add the response's tokens to the metrics, once, however it ended."""
        if not self._tokens_counted:
            self._tokens_counted = True
            self.services.metrics.tokens.labels("in").inc(self.usage["input"])
            self.services.metrics.tokens.labels("out").inc(self.usage["output"])

    def finish(self, status: str, error: dict[str, str] | None, incomplete: dict[str, str] | None) -> None:
        usage = self.usage
        self._count_tokens()
        self.response = self.snapshot() | {
            "status": status,
            "error": error,
            "incomplete_details": incomplete,
            "completed_at": int(time.time()) if status == "completed" else None,
            "usage": {
                "input_tokens": usage["input"],
                "input_tokens_details": {"cached_tokens": usage["cached"], "cache_write_tokens": 0},
                "output_tokens": usage["output"],
                "output_tokens_details": {"reasoning_tokens": usage["reasoning"]},
                "total_tokens": usage["input"] + usage["output"],
            },
        }

    async def _save(self, frames: list[tuple[int, bytes]] | None = None, owner: str | None = None) -> bool:
        """Store the response: with a parent, only the messages it added to the parent's dialog."""
        dialog, parent_id, growing = self.dialog, self._parent_id, self._growing
        start = self._parent_length if parent_id is not None else 0
        await growing.complete(dialog.messages, start)
        record = StoredResponse(
            self.response, self.input_items, dialog.to_json(start), dialog.open_calls, dialog.state(), self.tenant,
            parent_id=parent_id, tokens=growing.pieces(start),
        )
        return await self.services.store.put(record, lambda: (dialog.to_json(), growing.pieces(0)), frames=frames, owner=owner)

    async def _add_to_conversation(self, conversation: Conversation) -> None:
        """The response's input and output become the conversation's next items (a failed or cancelled
        response adds nothing, so the client can send the same input again)."""
        items = self.input_items + [item.as_dict() for item in self.output]
        keep_state(conversation, self.dialog)
        try:
            if not await self.services.conversations.append(conversation, new_items(self.dialog, self._new_messages_from, items)):
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


@dataclass
class _Outcome:
    finish_reason: str | None = None
    stopped: bool = False  # a stop sequence ended the generation before the engine did
    call: ToolCall | None = None


def _describe(tool: Any) -> ToolDescription:
    """A client tool as the model reads it in the `functions` namespace; a custom tool takes one string."""
    if not isinstance(tool, CustomTool):
        return ToolDescription.new(tool.name, tool.description or "", parameters=tool.parameters)
    description = (tool.description or "") + "\nWrite the input as raw text, not JSON."
    if isinstance(tool.format, GrammarInput):
        kind = "Lark grammar" if tool.format.syntax == "lark" else "regular expression"
        description += f" It must match this {kind}:\n{tool.format.definition}"
    return ToolDescription.new(tool.name, description.strip(), parameters={"type": "string"})


def _available_tools(tools: list[Any], drop_unavailable: bool, has_browser: bool) -> list[Any]:
    """The request's tools without those nothing here runs: refused by name, or dropped if configured so.
    The web_search tools run on gateways with a `browser` section."""

    def unavailable(tool: Any) -> bool:
        return isinstance(tool, UnavailableTool) or (isinstance(tool, WebSearchTool) and not has_browser)

    for index, tool in enumerate(tools):
        if unavailable(tool):
            if not drop_unavailable:
                raise unsupported(f"tools[{index}]", f"the '{tool.type}' tool is not available here")
            logger.warning("dropped the request's '%s' tool: nothing on this gateway runs it", tool.type)
    if sum(isinstance(tool, WebSearchTool) for tool in tools) > 1:
        raise bad_request("Declare the web_search tool once.", param="tools")
    return [tool for tool in tools if not unavailable(tool)]


def _echo_tool(tool: Any) -> dict[str, Any]:
    """A request's tool as the Response object shows it: MCP credentials left out, `strict` spelled out."""
    if isinstance(tool, McpTool):
        return tool.echo()
    echoed = tool.model_dump(exclude_none=True)
    if isinstance(tool, FunctionTool):
        echoed |= {"strict": tool.strict is not False, "description": tool.description, "parameters": tool.parameters}
    return echoed


def _text(message: Any) -> str:
    return "".join(getattr(part, "text", "") for part in message.content)
