"""The one place the gateway reaches past a library's public API, checked so that an upgrade that
changes it fails here first, not in production.

uvicorn has no public hook to time a request's head (slowloris): gateway/http_protocol.py extends its
protocol classes, relying on the methods and attributes below (pyproject.toml pins the range)."""

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
