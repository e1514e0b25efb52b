"""Errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, and in Anthropic's,
`{"type": "error", "error": {"type", "message"}, "request_id"}`, for the requests that speak its API (the
Messages door, and any request with an `anthropic-version` header)."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Scope
from starlette.websockets import WebSocket

from .jsontext import JSONResponse


class APIError(Exception):
    """An error the client sees, with the HTTP status it is sent with."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status)


class ContextTooLong(APIError):
    """The prompt does not fit the model's context: how long it is and the most there is room for."""

    def __init__(self, tokens: int, maximum: int) -> None:
        super().__init__(
            400,
            f"This model's maximum context length is {maximum} tokens. However, your request has {tokens} input tokens. "
            "Please reduce the length of the input.",
            param="input",
            code="context_length_exceeded",
        )
        self.tokens = tokens
        self.maximum = maximum


class Overloaded(APIError):
    """Back-pressure: the gateway as a whole runs as much as it may (not one tenant's limit)."""


# Anthropic's error types by status (`anthropic/_client.py`); 529 is its own "overloaded".
_ANTHROPIC_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error", 403: "permission_error", 404: "not_found_error",
    413: "request_too_large", 429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error",
}  # fmt: skip


def speaks_anthropic(scope: Scope) -> bool:
    """The request is the Messages API's, or says it speaks Anthropic's (its clients send `anthropic-version`)."""
    path: str = scope.get("path", "")
    return path.startswith("/v1/messages") or any(name == b"anthropic-version" for name, _ in scope.get("headers", ()))


def anthropic_status(error: APIError) -> int:
    """Back-pressure (the gateway's own cap, and every 503: an engine not answering, a shutdown) is Anthropic's
    529, which its clients wait out with backoff."""
    return 529 if isinstance(error, Overloaded) or error.status == 503 else error.status


def anthropic_error(error: APIError, request_id: str | None = None) -> dict[str, Any]:
    status = anthropic_status(error)
    message = error.message
    if isinstance(error, ContextTooLong):  # the wording Claude Code compacts on
        message = f"prompt is too long: {error.tokens} tokens > {error.maximum} maximum"
    elif error.code == "invalid_encrypted_content":
        message = "Invalid `signature` in `thinking` block: it was not made by this gateway for this key."
    kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


def error_response(scope: Scope, error: APIError) -> JSONResponse:
    """The error in the shape the request's API has."""
    if not speaks_anthropic(scope):
        return error.response()
    request_id = scope.get("state", {}).get("request_id")
    return JSONResponse(anthropic_error(error, request_id), status_code=anthropic_status(error))


async def refuse_websocket(websocket: WebSocket, error: APIError) -> None:
    """Refuse a WebSocket handshake with the error as an HTTP answer where the server can send one (the
    ASGI denial response extension, which uvicorn has), else with a policy-violation close."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(error.response())
    else:
        await websocket.close(1008, error.message[:120])


def bad_request(message: str, param: str | None = None, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


def not_found(message: str, param: str | None = None) -> APIError:
    return APIError(404, message, type="invalid_request_error", param=param, code="not_found")


def server_error(status: int, message: str, code: str) -> APIError:
    return APIError(status, message, type="server_error", code=code)


def param_path(loc: tuple[Any, ...], data: Any = None) -> str:
    """`("input", 0, "role")` → `input[0].role`.

    pydantic puts the names of union members ("message", "str", "literal['auto','none']", …) into
    locations; with the validated `data` at hand, a part is kept only if it is really a key or index
    there, or is the last part and names a missing key of an object (a field's name, never a member's).
    """
    path = ""
    current = data
    for position, part in enumerate(loc):
        last = position == len(loc) - 1
        if data is not None:
            if isinstance(current, dict) and (part in current or (last and isinstance(part, str) and part.isidentifier())):
                current = current.get(part)
            elif isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current):
                current = current[part]
            else:
                continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def from_validation_error(exc: ValidationError, data: Any = None) -> APIError:
    errors = exc.errors(include_url=False)
    # Prefer the error that names the deepest field: it is the one the client must fix.
    first = max(errors, key=lambda e: len(param_path(tuple(e["loc"]), data)))
    param = param_path(tuple(first["loc"]), data) or None
    kind = first["type"]
    if kind == "missing":
        code, message = "missing_required_parameter", f"Missing required parameter: '{param}'."
    elif kind.endswith("_type") or kind in {"model_type", "model_attributes_type", "dict_type", "list_type"}:
        code, message = "invalid_type", f"Invalid type for '{param}': {first['msg']}."
    elif kind == "extra_forbidden":
        code, message = "unknown_parameter", f"Unknown parameter: '{param}'."
    elif kind in ("union_tag_invalid", "unsupported_item"):
        # An item or tool of a type no member takes: named by the request's path and the type it gave,
        # never by pydantic's view of the union (its discriminator function, its tags).
        ctx = first.get("ctx") or {}
        shown = first["msg"] if kind == "unsupported_item" else f"'{str(ctx.get('tag'))[:64]}' is not a type this gateway accepts here"
        code, message = "invalid_value", f"Invalid value for '{param}': {shown}."
    else:
        code, message = "invalid_value", f"Invalid value for '{param}': {first['msg']}."
    if param is None:
        message = f"Invalid request body: {first['msg']}."
    return bad_request(message, param=param, code=code)


async def handle_api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return error_response(request.scope, exc)


async def handle_storage_error(request: Request, exc: Exception) -> JSONResponse:
    logging.getLogger("gateway").error("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    return error_response(request.scope, server_error(503, "The gateway's database is unavailable; try again shortly.", "storage_unavailable"))


async def handle_unstorable_value(request: Request, exc: Exception) -> JSONResponse:
    message = "A value of the request holds a character this gateway cannot store (a NUL character)."
    return error_response(request.scope, bad_request(message))


async def handle_unexpected(request: Request, exc: Exception) -> JSONResponse:
    logging.getLogger("gateway").exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(request.scope, server_error(500, "The gateway failed to handle the request.", "internal_error"))
