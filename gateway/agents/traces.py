"""A session's traces (`GET …/traces`): each run of a turn, as OTLP JSON, from the spans the gateway makes
anyway (tracing.py: the run, its engine calls, its tool calls). With tracing on, every run a turn starts is
the child of a span of its own (`agent_turn`), whose trace `TurnSpans` collects as its spans end; when the run
is over, the trace is encoded and kept with the session. With tracing off, no span records and none is kept.

Only the traces of runs a turn started are collected, each up to `MAX_SPANS` spans; nothing else is held."""

from __future__ import annotations

import base64
from typing import Any, Sequence

from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import Span

from ..storage.agent_store import SessionRecord
from ..tracing import tracer

MAX_SPANS = 1000  # of one run's trace; a run making more keeps its first ones


class TurnSpans(SpanProcessor):
    """The spans of the traces being watched, as they end (OpenTelemetry calls `on_end` where a span ends:
    here, on the event loop)."""

    def __init__(self) -> None:
        self._watched: dict[int, list[ReadableSpan]] = {}

    def watch(self, span: Span) -> None:
        if span.is_recording():
            self._watched[span.get_span_context().trace_id] = []

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        kept = self._watched.get(context.trace_id) if context is not None else None
        if kept is not None and len(kept) < MAX_SPANS:
            kept.append(span)

    def take(self, span: Span) -> list[ReadableSpan]:
        """The watched trace's spans (the watching span's own among them once it ended); watched no more."""
        return self._watched.pop(span.get_span_context().trace_id, [])


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """The spans as an OTLP/JSON `ExportTraceServiceRequest` (ids in hex, as OTLP/JSON writes them)."""
    encoded: dict[str, Any] = MessageToDict(encode_spans(spans))
    for resource in encoded.get("resourceSpans", []):
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for field in ("traceId", "spanId", "parentSpanId"):
                    if field in span:
                        span[field] = base64.b64decode(span[field]).hex()
    return encoded


def turn_span(spans: TurnSpans | None, session: SessionRecord) -> Span | None:
    """With tracing on, the span a run of the session's turn starts under, its trace watched."""
    if spans is None:
        return None
    attributes = {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": session.agent_id, "gen_ai.conversation.id": session.id,
        "gateway.agent.turn_id": session.state.turn_id or "",
    }  # fmt: skip
    span = tracer.start_span(f"agent_turn {session.body['agent']['model']}", attributes=attributes)
    spans.watch(span)
    return span
