"""Each engine call's prompt and sampling parameters, from the run's state.

The prompt is the preamble (system and developer messages: instructions, tools, the answer's format)
and the dialog, rendered turn after turn on the tokens of the last (`GrowingPrompt`); then a forced
`tool_choice`'s call header, and an adopted call's tokens. When it does not fit, `truncation: "auto"`
drops the oldest turns, and `context_management` first replaces the past with the model's summary of it
(a `compaction` item). What the call may generate is what the request and the context leave.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from openai_harmony import Role

from ...engine.completion import Sampling
from ...engine.harmony import GrowingPrompt, Preamble, Prompt, encoding
from ...engine.routing import ModelEngine
from ...errors import ContextTooLong, bad_request
from ..shapes.request import ResponsesRequest
from ..tools import Toolset
from .constraint import TurnConstraint
from .needs import ResponsesNeeds
from .run_state import RunState
from .service_tier import engine_priority, engine_tier

COMPACT_AT = 0.8  # of the context, where `context_management` names no threshold


@dataclass(frozen=True)
class ChatOptions:
    """What only Chat Completions asks of a run: stop sequences (applied to the visible text by the
    gateway) and sampling penalties (sent to vLLM)."""

    stops: tuple[str, ...] = ()
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, int] | None = None


@dataclass(frozen=True)
class EngineCall:
    prompt: Prompt
    sampling: Sampling
    model_id: str


class PromptBuilder:
    def __init__(
        self,
        services: ResponsesNeeds,
        engine: ModelEngine,
        request: ResponsesRequest,
        tenant: str,
        chat: ChatOptions,
        state: RunState,
        toolset: Toolset,
        logprobs: int | None,
    ) -> None:
        self._services = services
        self._engine = engine  # the model the request names, and its settings
        self._request = request
        self._tier = engine_tier(request.service_tier, engine.config.priority_scheduling)
        self._tenant = tenant
        self._chat = chat
        self._state = state
        self._toolset = toolset
        self._logprobs = logprobs
        self.growing = GrowingPrompt(services.renderer.for_tenant(tenant), services.metrics.prompt_tokens)  # this run's prompt, turn after turn
        self.preamble = Preamble()
        self.prefill: list[int] = []  # a forced call's header, which the model's tokens go on from
        self.header = ""  # that header's text
        # What each engine call may generate, sent for the engine to enforce (engine.structured_outputs).
        self.constraint = TurnConstraint(request, toolset) if engine.config.structured_outputs != "off" else None
        self.continuing: list[int] = []  # an adopted call's tokens, which the engine goes on from
        self.prompt = Prompt("", 0)  # the last call's

    @property
    def affinity_key(self) -> str:
        """The key a router keeps this conversation on one engine by (`engine.session_header`): the client's
        `prompt_cache_key`, hashed with its tenant (no tenant shares another's, no byte of it reaches a
        header as written), otherwise the chain's own key."""
        key = self._request.prompt_cache_key
        if key is None:
            return self._state.dialog.session_key
        return "pck-" + hashlib.sha256(f"{self._tenant}\0{key}".encode()).hexdigest()[:32]

    def planned(self) -> None:
        """The run's dialog is planned and its tools prepared: the prompt starts from the parent's tokens."""
        plan = self._state.plan
        if plan.parent_prompt is not None:
            self.growing.adopt(plan.parent_prompt)
        else:
            self.growing.seed(plan.parent_tokens)
        self.preamble = self._preamble()

    def _preamble(self) -> Preamble:
        request = self._request
        response_format = None
        text_format = request.text.format if request.text else None
        if text_format is not None and text_format.type == "json_schema":
            if text_format.schema_ is None:
                raise bad_request("A json_schema format needs a schema.", param="text.format.schema")
            response_format = (text_format.name or "response", text_format.schema_)
        declared = self._toolset.declarations()
        effort = request.reasoning.effort if request.reasoning else None
        return Preamble(effort, request.instructions, declared.functions, declared.system, declared.developer, response_format)

    def force_call(self) -> None:
        """Harmony cannot force a tool call, but the prompt is ours: a forced `tool_choice` starts the
        assistant's message with the call's header (tools/base.py, `forced_header`), until one is called."""
        header = None if self._state.tool_called else self._toolset.forced_header()
        self.header = header or ""
        self.prefill = encoding().encode(header, allowed_special="all") if header else []

    async def render(self, max_model_len: int | None) -> Prompt:
        """The prompt; with `truncation: "auto"`, without as many of the oldest turns as it takes to fit
        the context (the preamble, developer messages and the turn in progress are always kept)."""
        prompt = await self.growing.render(self.preamble, self._state.dialog.messages) + self.prefill + self.continuing
        if max_model_len is None or len(prompt) < max_model_len or self._request.truncation != "auto":
            return prompt
        return Prompt.of(await self._truncated(max_model_len, prompt.ids()))

    async def _truncated(self, max_model_len: int, whole: list[int]) -> list[int]:
        render, messages = self._services.renderer.for_tenant(self._tenant).render, self._state.dialog.messages
        # Turns start at user messages; cutting at the last one keeps only the turn in progress. The
        # fewest turns to drop is found by bisection, so the prompt is rendered a few times, not per turn.
        cuts = [index for index, message in enumerate(messages) if message.author.role == Role.USER and index > 0]
        low, high, best = 0, len(cuts) - 1, whole
        while low <= high:
            middle = (low + high) // 2
            cut = cuts[middle]
            kept = [m for m in messages[:cut] if m.author.role == Role.DEVELOPER] + messages[cut:]
            candidate = await render(self.preamble, kept) + self.prefill + self.continuing
            if len(candidate) < max_model_len:
                best, high = candidate, middle - 1
            else:
                low = middle + 1
                if len(candidate) < len(best):
                    best = candidate
        return best  # still too long when even the turn in progress does not fit: the caller says so

    async def next_call(self) -> EngineCall | None:
        """The next engine call's prompt and sampling; None when the dialog is to be compacted first (the
        loop's step, compaction_step.py); refused (400) when even the truncated prompt leaves no room."""
        self.force_call()
        model = await self._engine.model()
        prompt = await self.render(model.max_model_len)
        if not self.continuing and self._compaction_due(len(prompt), model.max_model_len):
            return None
        room = None if model.max_model_len is None else model.max_model_len - len(prompt)
        if model.max_model_len is not None and len(prompt) >= model.max_model_len:
            raise ContextTooLong(len(prompt), model.max_model_len)
        budget = self._request.max_output_tokens
        if budget is not None:
            budget -= self._state.usage.output
        else:
            budget = room if room is not None else self._engine.config.default_max_tokens
        if room is not None:
            budget = min(budget, room)
        self.prompt = prompt
        request, chat = self._request, self._chat
        sampling = Sampling(
            max_tokens=max(budget, 1),
            temperature=request.temperature,
            top_p=request.top_p,
            seed=request.seed,
            presence_penalty=chat.presence_penalty,
            frequency_penalty=chat.frequency_penalty,
            logit_bias=chat.logit_bias,
            logprobs=self._logprobs,
            # An adopted call goes on from tokens the tag does not start from: it is generated unconstrained.
            structural_tag=self.constraint.tag(self._state.tool_called, self.header) if self.constraint and not self.continuing else None,
            # After a tool's output, a step ahead of its tier: a running agent keeps its place.
            priority=engine_priority(self._tier, self._engine.config.priority_scheduling, continuing=self._state.turns > 1),
        )
        return EngineCall(prompt, sampling, model.id)

    def _compaction_due(self, prompt_tokens: int, max_model_len: int | None) -> bool:
        """`context_management` asks for compaction past a threshold; once per growth of the dialog, so a
        summary that still does not fit ends as the context allows, not in a loop."""
        settings = self._request.context_management
        if not settings or self._state.compaction_is_fresh:
            return False
        threshold = settings[0].compact_threshold or (int(max_model_len * COMPACT_AT) if max_model_len else None)
        return threshold is not None and prompt_tokens > threshold

    def dialog_rewritten(self) -> None:
        """The dialog's past was replaced (a compaction): the prompt is rendered anew from the start."""
        services = self._services
        self.growing = GrowingPrompt(services.renderer.for_tenant(self._tenant), services.metrics.prompt_tokens)
