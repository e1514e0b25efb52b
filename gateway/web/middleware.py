"""The ASGI layer in front of every route: request ids, API keys, request metrics and the access log.

Pure ASGI (not BaseHTTPMiddleware), so streamed responses pass through untouched.
"""

from __future__ import annotations

import hmac
import logging
import re
import secrets
import time
from contextvars import ContextVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from .. import tracing
from ..config import OPEN_TENANT, AuthConfig
from ..errors import APIError, error_response, refuse_websocket
from ..metrics import Metrics, endpoint_label

request_id_var: ContextVar[str | None] = ContextVar("request_id", default=None)
access_log = logging.getLogger("gateway.access")

_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_OPEN_PATHS = {"/health", "/ready"}
_TRACE_HEADERS = (b"traceparent", b"tracestate")


class GatewayMiddleware:
    def __init__(self, app: ASGIApp, auth: AuthConfig, metrics: Metrics, log_access: bool, traced: bool = False) -> None:
        self.app = app
        self.traced = traced  # a request's `traceparent` is the parent of what it starts (tracing.py)
        self.keys = [(entry.key.encode(), entry.tenant_id()) for entry in auth.api_keys]
        self.open_paths = _OPEN_PATHS if auth.metrics_need_key else _OPEN_PATHS | {"/metrics"}
        self.metrics = metrics
        self.log_access = log_access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.traced or scope["type"] not in ("http", "websocket"):
            await self._serve(scope, receive, send)
            return
        carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"] if name in _TRACE_HEADERS}
        token = tracing.attach(tracing.extract(carrier))
        try:
            await self._serve(scope, receive, send)
        finally:
            tracing.detach(token)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # the same keys as HTTP; a refusal is the handshake's answer
            tenant = self._tenant(scope)
            if isinstance(tenant, APIError):
                await refuse_websocket(WebSocket(scope, receive, send), tenant)
                return
            scope.setdefault("state", {})["tenant"] = tenant
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        token = request_id_var.set(request_id)
        route = tracing.request_route.set(endpoint_label(scope["path"]))
        scope.setdefault("state", {})["request_id"] = request_id  # for errors in Anthropic's shape (errors.py)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # `request-id` too: Anthropic's clients read that one.
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode()), (b"request-id", request_id.encode())]
            await send(message)

        try:
            tenant = self._tenant(scope)
            if isinstance(tenant, APIError):
                await error_response(scope, tenant)(scope, receive, send_with_id)
            else:
                scope.setdefault("state", {})["tenant"] = tenant
                await self.app(scope, receive, send_with_id)
        finally:
            path = scope["path"]
            self.metrics.requests.labels(endpoint_label(path), str(status)).inc()
            if self.log_access:
                access_log.info("%s %s %d %.1fms", scope["method"], path, status, (time.perf_counter() - started) * 1000)
            request_id_var.reset(token)
            tracing.request_route.reset(route)

    def _tenant(self, scope: Scope) -> str | APIError:
        """The tenant of the request's key, or a 401 when keys are configured and the request has none of
        them. The key comes as `Authorization: Bearer KEY`, or as Anthropic's clients send it, `x-api-key`."""
        if not self.keys or scope["path"] in self.open_paths:
            return OPEN_TENANT
        headers = scope["headers"]
        header = next((value for name, value in headers if name == b"authorization"), None)
        if header is not None and header.lower().startswith(b"bearer "):
            presented = header[7:].strip()
        elif (api_key := next((value for name, value in headers if name == b"x-api-key"), None)) is not None:
            presented = api_key.strip()
        else:
            return APIError(
                401,
                "You didn't provide an API key. Send it in the Authorization header (Authorization: Bearer YOUR_KEY) or as x-api-key.",
                code="missing_api_key",
            )
        # Every key is compared, in constant time, so timing tells nothing about which one came close.
        tenant = None
        for key, key_tenant in self.keys:
            if hmac.compare_digest(presented, key):
                tenant = key_tenant
        if tenant is None:
            return APIError(401, "Incorrect API key provided.", code="invalid_api_key")
        return tenant


def _request_id(scope: Scope) -> str:
    """The client's X-Request-Id if it is a sane token, else a new one."""
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1")
            if _VALID_ID.match(candidate):
                return candidate
            break
    return new_request_id()


def new_request_id() -> str:
    return f"req_{secrets.token_hex(12)}"
