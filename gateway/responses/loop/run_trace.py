"""The spans of one response's run (gateway/tracing.py): the response, each engine call, each tool call,
with the GenAI semantic conventions' attributes. With tracing off every span is OpenTelemetry's
non-recording one and the attributes are not even built."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from opentelemetry import context as otel_context
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind

from ...engine.completion import FinishReason
from ...tracing import carried, child_span, failed, in_span, request_route, tracer
from ..events.tool_call import ToolCall

SYSTEM = "openai"  # gpt-oss speaks OpenAI's API through the gateway


class RunTrace:
    def __init__(self, capture_content: bool) -> None:
        self._parent = otel_context.get_current()  # the request's: its `traceparent`, when it had one
        self._route = request_route.get()  # the door that started the run
        self._capture = capture_content
        self._response: Span = INVALID_SPAN
        self._engine: Span = INVALID_SPAN
        self._engine_started = 0.0

    def begin(self, model: str, instructions: str | None) -> None:
        span = tracer.start_span(f"invoke_agent {model}", context=self._parent, kind=SpanKind.INTERNAL)
        if span.is_recording():
            span.set_attributes({"gen_ai.operation.name": "invoke_agent", "gen_ai.system": SYSTEM, "gen_ai.request.model": model})
            if self._route is not None:
                span.set_attribute("http.route", self._route)
            if self._capture and instructions:
                span.set_attribute("gen_ai.system_instructions", instructions)
        self._response = span

    def engine_call(self, model: str, prompt_tokens: int, max_tokens: int) -> dict[str, str]:
        """A span for the engine call about to be made; the headers that carry it on to vLLM."""
        span = tracer.start_span(f"text_completion {model}", context=in_span(self._response), kind=SpanKind.CLIENT)
        if not span.is_recording():
            return {}
        span.set_attributes(
            {
                "gen_ai.operation.name": "text_completion", "gen_ai.system": SYSTEM, "gen_ai.request.model": model,
                "gen_ai.request.max_tokens": max_tokens, "gen_ai.usage.input_tokens": prompt_tokens,
            }
        )  # fmt: skip
        self._engine, self._engine_started = span, time.perf_counter()
        return carried(in_span(span))

    def first_token(self) -> None:
        if self._engine.is_recording():
            self._engine.set_attribute("gen_ai.response.time_to_first_chunk", time.perf_counter() - self._engine_started)

    def engine_done(self, output_tokens: int, finish_reason: FinishReason | None, error: str | None = None) -> None:
        span, self._engine = self._engine, INVALID_SPAN
        if span.is_recording():
            span.set_attribute("gen_ai.usage.output_tokens", output_tokens)
            if finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [finish_reason])
            if error is not None:
                failed(span, error)
        span.end()

    @contextmanager
    def tool(self, call: ToolCall) -> Iterator[None]:
        """The tool call's span, current while it runs: an MCP call's request carries it in `_meta`."""
        attributes: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.recipient, "gen_ai.tool.type": call.metric}
        item_id = getattr(call.item, "id", None)
        if item_id:
            attributes["gen_ai.tool.call.id"] = item_id
        if self._capture and call.arguments:
            attributes["gen_ai.tool.call.arguments"] = call.arguments
        with child_span(f"execute_tool {call.recipient}", in_span(self._response), attributes) as span:
            yield
            if span.is_recording() and call.output is not None and call.output.startswith("Error:"):
                failed(span, call.output[:200])

    @contextmanager
    def storage(self, operation: str) -> Iterator[None]:
        """A write to the store that the response waits for."""
        with child_span(f"storage {operation}", in_span(self._response), {"db.operation.name": operation}):
            yield

    def end(self, response: Mapping[str, Any], error: str | None) -> None:
        """The response's span, and an engine call's still open (the run stopped between opening it and
        reading it), ended."""
        if self._engine is not INVALID_SPAN:
            self.engine_done(0, None, error or "the response ended before the engine call was read")
        span = self._response
        if span.is_recording():
            usage = response.get("usage") or {}
            span.set_attributes(
                {
                    "gen_ai.response.id": response.get("id", ""), "gen_ai.response.model": response.get("model", ""),
                    "gen_ai.usage.input_tokens": usage.get("input_tokens", 0), "gen_ai.usage.output_tokens": usage.get("output_tokens", 0),
                    "gateway.response.status": str(response.get("status", "")),
                }
            )  # fmt: skip
            if error is not None:
                failed(span, error)
        span.end()


def failure_text(exc: BaseException) -> str:
    """What a span says of the exception that ended it: an API error's message, else its type's name."""
    return getattr(exc, "message", None) or type(exc).__name__
