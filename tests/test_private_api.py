"""The places the gateway reaches past a library's public API, checked so that an upgrade that changes
them fails here first, not in production.

uvicorn has no public hook to time a request's head (slowloris): gateway/web/http_protocol.py extends its
protocol classes, relying on the methods and attributes below. sse-starlette wraps every send in a
cancel scope (~10% of the streaming CPU when profiled): gateway/web/sse.py overrides the send and the exit
listener with one watchdog. (A streaming response of the gateway's own, tried instead, lost kept-alive
connections in bench/stream_overhead.py's 64-stream runs, 3 runs of 5; sse-starlette's never did.)"""

from __future__ import annotations

import inspect

import pytest


@pytest.mark.parametrize(
    "module, name, members",
    [
        ("uvicorn.protocols.http.h11_impl", "H11Protocol", ["connection_made", "handle_events", "on_response_complete", "connection_lost", "cycle", "loop", "transport"]),
        ("uvicorn.protocols.http.httptools_impl", "HttpToolsProtocol",
         ["connection_made", "on_message_begin", "on_url", "on_header", "on_headers_complete", "on_response_complete", "connection_lost", "pipeline", "loop", "transport"]),
    ],
)  # fmt: skip
def test_the_uvicorn_internals_the_header_timeout_extends(module: str, name: str, members: list[str]) -> None:
    import importlib

    cls = getattr(importlib.import_module(module), name)
    source = inspect.getsource(cls)
    for member in members:
        assert hasattr(cls, member) or f"self.{member} =" in source or f"self.{member}:" in source, f"{name}.{member} is gone"


def test_the_sse_starlette_internals_the_watchdog_overrides() -> None:
    from sse_starlette import EventSourceResponse

    for method in ("_send_with_timeout", "_listen_for_exit_signal_with_grace", "_stream_response"):
        assert callable(getattr(EventSourceResponse, method, None)), f"EventSourceResponse.{method} is gone"
    # Every frame goes through the overridden send, and the exit listener is still the task that ends the response.
    assert "_send_with_timeout" in inspect.getsource(EventSourceResponse._stream_response)
    assert "_listen_for_exit_signal_with_grace" in inspect.getsource(EventSourceResponse.__call__)
