"""OpenTelemetry traces of every agent step, with the GenAI semantic conventions: a span per response
(`invoke_agent`), a child per engine call (`text_completion`) and per tool call (`execute_tool`), one
for a sandbox's start-up, and one per webhook attempt (`deliver_webhook`, a trace of its own). W3C trace context comes in with a request's `traceparent` and goes on to vLLM
(headers), to MCP servers (the mcp SDK puts it in each request's `_meta`, and HTTP transports' headers).

Off unless configured (config.py `TracingConfig`): then no provider is installed, OpenTelemetry's API
answers with non-recording spans, and nothing here runs per token. Prompt and output text stay out of
spans unless `capture_content` is on."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator, Mapping, Sequence

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .config import TracingConfig

logger = logging.getLogger("gateway.tracing")
tracer = trace.get_tracer("harmony-gateway")
# The route of the request being served (its API: `/v1/messages`, `/v1/chat/completions`, ...), set by the
# middleware: a run's span says which door started it.
request_route: ContextVar[str | None] = ContextVar("request_route", default=None)

_ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


class Tracing:
    """The process's trace export, started with the app and flushed at its end."""

    def __init__(self, config: TracingConfig) -> None:
        self.config = config
        self._provider: Any = None

    @property
    def enabled(self) -> bool:
        if os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
            return False
        return self.config.enabled or any(os.environ.get(name) for name in _ENDPOINT_VARIABLES)

    def start(self, processors: Sequence[Any] = ()) -> None:
        """With tracing on: spans sent over OTLP, and handed to `processors` too (SDK span processors)."""
        if not self.enabled:
            return
        # Imported only when on: the SDK and the exporter cost start-up time for nothing otherwise.
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": self.config.service_name}))
        exporter = OTLPSpanExporter(endpoint=self.config.endpoint) if self.config.endpoint else OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=int(self.config.export_delay_s * 1000)))
        for processor in processors:
            provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        self._provider = provider
        logger.info("tracing on: spans sent over OTLP/HTTP to %s", self.config.endpoint or "the OTEL_* endpoint")

    def shutdown(self) -> None:
        if self._provider is not None:
            self._provider.shutdown()  # sends what is left


def extract(headers: Mapping[str, str]) -> Context:
    """The trace context a request carries (`traceparent`, `tracestate`), or the current one."""
    return propagate.extract(headers)


def carried(context: Context | None = None) -> dict[str, str]:
    """The headers that carry `context` (the current one by default) on to another service."""
    headers: dict[str, str] = {}
    propagate.inject(headers, context=context)
    return headers


def attach(context: Context) -> object:
    return otel_context.attach(context)


def detach(token: object) -> None:
    otel_context.detach(token)  # type: ignore[arg-type]


def in_span(span: Span) -> Context:
    return trace.set_span_in_context(span)


@contextmanager
def child_span(name: str, parent: Context | None, attributes: Mapping[str, Any], kind: SpanKind = SpanKind.INTERNAL) -> Iterator[Span]:
    """A span under `parent`, current while the block runs (so that libraries tracing inside it, the mcp
    SDK among them, nest their spans and carry its context on); an exception marks it failed."""
    with tracer.start_as_current_span(name, context=parent, kind=kind, attributes=dict(attributes)) as span:
        yield span


def failed(span: Span, message: str) -> None:
    span.set_status(Status(StatusCode.ERROR, message))
