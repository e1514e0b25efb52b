"""The grammar each engine call generates under: what the request guarantees, enforced by the engine;
and the check of the final answer where nothing enforced it.

A strict `text.format` holds the final answer to its schema (`json_object` to any JSON object); the calls
are those the request's tools allow now, each with its arguments' grammar (tools/base.py, `call_shapes`);
`tool_choice` decides what the turn may end with: `none` no call, `required` only calls, a named tool
only that call (its header is in the prompt already), until the run has called a tool. The tag is made
again only when any of that changed: a continuation after a tool's output whose tools did not change
costs a comparison of the shapes.
"""

from __future__ import annotations

import json

from openai_harmony import Message, Role

from runtime.cpu import run_cpu

from ...engine.structural_tag import JSON_OBJECT, TEXT, CallShape, Content, TurnGrammar, json_schema
from ...errors import APIError, bad_request
from ..shapes.request import ResponsesRequest
from ..shapes.schemas import InvalidSchema, checked_schema, json_problem, schema_compiles
from ..tools import Toolset
from .turn import CheckAnswer


def final_content(request: ResponsesRequest) -> Content:
    """What the final answer may hold, by the request's `text.format`."""
    text_format = request.text.format if request.text else None
    if text_format is None or text_format.type == "text":
        return TEXT
    if text_format.type == "json_schema" and text_format.schema_ is not None and text_format.strict is not False:
        return json_schema(text_format.schema_)
    return JSON_OBJECT


class TurnConstraint:
    def __init__(self, request: ResponsesRequest, toolset: Toolset) -> None:
        self._request = request
        self._toolset = toolset
        self._final: Content | None = None  # read at the first call: the request is planned by then (run.py)
        self._made: tuple[tuple[CallShape, ...], bool, str] | None = None  # what the last tag was made of
        self._tag: str | None = None

    def tag(self, tool_called: bool, prefill: str) -> str | None:
        """The structural tag of the next engine call, as JSON text; `prefill` is the forced call's header
        the prompt ends with. None when nothing constrains it (a prefill of another shape)."""
        choice = self._toolset.context.tool_choice
        shapes = tuple(self._toolset.call_shapes()) if choice != "none" else ()
        must_call = choice != "auto" and choice != "none" and not tool_called  # required, or a named tool
        made = (shapes, must_call, prefill)
        if made != self._made:  # a tuple compares its items by identity first: unchanged shapes cost no rebuild
            if self._final is None:
                self._final = final_content(self._request)
            grammar = TurnGrammar(None if must_call and shapes else self._final, shapes)
            self._tag, self._made = grammar.tag(prefill), made
        return self._tag


MAX_REFUSED_ANSWERS = 2  # answers told to try again, where no grammar holds them to the format


class AnswerBackstop:
    """Where no grammar held the final answer to a JSON `text.format` (`engine.structured_outputs: off`, or
    an engine that refused it), the answer is checked when whole: one that breaks the format is never
    shown; the model is told why and answers again, a bounded number of times, then the response fails."""

    def __init__(self, request: ResponsesRequest, schema_timeout_s: float, tenant: str) -> None:
        self._request = request
        self._timeout = schema_timeout_s
        self._tenant = tenant
        self._canonical: str | None = None
        self.check: CheckAnswer | None = None
        self._refused = 0

    async def prepare(self) -> None:
        """The format as the planned request has it (a conversation's update may have set it), its schema
        compiled off the event loop (a 400 if it cannot be), before the run starts."""
        content = final_content(self._request)
        self._canonical = checked_format(self._request) if content.kind == "json_schema" else None
        self.check = self._problem if content.kind != "text" else None
        if self._canonical is not None:
            try:
                await schema_compiles(self._canonical, self._timeout, self._tenant)
            except InvalidSchema as exc:
                raise _invalid_format(self._request, exc) from None

    async def _problem(self, text: str) -> str | None:
        return await json_problem(text, self._canonical, self._timeout, self._tenant)

    async def check_unheld(self, message: Message | None) -> None:
        """A final answer the grammar held only in part (its engine call went on without it after the engine
        broke off, or on another replica): checked when whole. Its text was shown as it came, so one that
        breaks the format fails the response rather than completing it."""
        text = _final_text(message)
        if self.check is None or text is None:
            return
        problem = await self.check(text)
        if problem is not None:
            raise APIError(
                502, f"The model's answer, written on after the engine broke off (without the grammar), does not fit the response's text.format: {problem}.",
                type="server_error", code="model_output_invalid",
            )  # fmt: skip

    async def unparsable(self, message: Message | None) -> bool:
        """A final answer a grammar held to JSON that does not parse: the engine did not hold it (one parse,
        off the event loop when long)."""
        text = _final_text(message)
        if self.check is None or text is None:
            return False
        return not (json_value(text) if len(text) <= INLINE_CHARS else await run_cpu(json_value, text))

    def refused(self, problem: str) -> Message:
        """The model's next instruction after an answer that breaks the format; past the bound, the failure."""
        self._refused += 1
        if self._refused > MAX_REFUSED_ANSWERS:
            raise APIError(
                502, f"The model's answer did not fit the response's text.format after {self._refused} tries: {problem}.",
                type="server_error", code="model_output_invalid",
            )  # fmt: skip
        instruction = f"Your answer does not fit the required format: {problem}. Answer again, with only what the format allows."
        return Message.from_role_and_content(Role.DEVELOPER, instruction)


def checked_format(request: ResponsesRequest) -> str:
    """A strict `text.format` schema as the canonical JSON answers are checked against; a 400 if it cannot be."""
    text_format = request.text.format if request.text else None
    assert text_format is not None and text_format.schema_ is not None
    try:
        return checked_schema(text_format.schema_)
    except InvalidSchema as exc:
        raise _invalid_format(request, exc) from None


def _invalid_format(request: ResponsesRequest, exc: InvalidSchema) -> APIError:
    text_format = request.text.format if request.text else None
    name = (text_format.name if text_format is not None else None) or "response"
    return bad_request(f"Invalid schema for response_format '{name}': {exc}.", param="text.format.schema")


INLINE_CHARS = 64 * 1024  # an answer up to this long is parsed on the event loop


def _final_text(message: Message | None) -> str | None:
    if message is None or message.author.role != Role.ASSISTANT or message.channel != "final":
        return None
    return "".join(getattr(part, "text", "") for part in message.content)


def json_value(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True
