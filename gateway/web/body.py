"""Reading a JSON request body into a validated model, with OpenAI-shaped 4xx errors.

Every body is hostile until parsed: its size is bounded while it is read (never read whole first),
it must say it is JSON, it is parsed by a strict parser (no lone surrogates, no NaN, bounded depth),
and its text is bounded before anything tokenises it. Large bodies are parsed and validated in a
worker thread, so the event loop never does work proportional to a body's size.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterator, TypeVar

import anyio
import pydantic_core
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from runtime.cpu import run_cpu
from runtime.numbers import decimal
from runtime.text_runs import has_long_run

from ..config import BodyLimits
from ..errors import APIError, bad_request, from_validation_error

ModelT = TypeVar("ModelT", bound=BaseModel)

INLINE_BYTES = 64 * 1024  # bodies up to this size are parsed on the event loop
_JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json\s*(?:;.*)?$", re.IGNORECASE)


async def parse_body(request: Request, model: type[ModelT], limits: BodyLimits, allow_empty: bool = False) -> ModelT:
    """The request's body as a valid `model`; with `allow_empty`, no body at all reads as `{}` (a POST whose
    every parameter is optional)."""
    body = await _read_bounded(request, limits)
    return await parse_json(b"{}" if allow_empty and not body.strip() else body, model, limits)


async def parse_json(
    body: bytes | str, model: type[ModelT], limits: BodyLimits, prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> ModelT:
    """A JSON object (a request's body, a WebSocket message) as a valid `model`; `prepare` may take the
    parsed object apart first (a socket event's envelope)."""

    def decode_and_validate() -> ModelT:
        data = _decode(body, limits)
        if prepare is not None:
            data = prepare(data)
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            raise from_validation_error(exc, data) from None

    if len(body) <= INLINE_BYTES:
        return decode_and_validate()
    return await run_cpu(decode_and_validate)


async def _read_bounded(request: Request, limits: BodyLimits) -> bytes:
    content_type = request.headers.get("content-type")
    if content_type is not None and not _JSON_TYPE.match(content_type):
        raise APIError(
            415,
            f"Unsupported content type '{content_type[:100]}': send the request body as application/json.",
            code="unsupported_media_type",
        )
    too_large = APIError(413, f"The request body is larger than this gateway's limit of {limits.max_bytes} bytes.", code="request_too_large")
    declared = request.headers.get("content-length")
    if declared is not None and (decimal(declared) or 0) > limits.max_bytes:
        raise too_large
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(limits.read_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limits.max_bytes:
                    raise too_large
                chunks.append(chunk)
    except TimeoutError:
        raise APIError(408, "The request body did not arrive in time.", code="request_timeout") from None
    return b"".join(chunks)


def _decode(body: bytes | str, limits: BodyLimits) -> dict[str, Any]:
    try:
        data = pydantic_core.from_json(body, allow_inf_nan=False)
    except ValueError as exc:
        raise bad_request(f"We could not parse the JSON body of your request ({exc}).", code="invalid_json") from None
    if not isinstance(data, dict):
        raise bad_request("The request body must be a JSON object.", code="invalid_type")
    check_text(data, limits)
    return data


def check_text(data: dict[str, Any], limits: BodyLimits) -> None:
    """Bound the text a request brings before it is tokenised: in all, and in runs of one character class
    (whitespace included: byte-pair encoding is quadratic in any of them)."""
    total = 0
    for key, value in data.items():
        for text in _strings(value):
            total += len(text)
            if total > limits.max_text_chars:
                raise bad_request(
                    f"The request has more than {limits.max_text_chars} characters of text; send less.",
                    param=str(key),
                    code="input_too_large",
                )
            if len(text) > limits.max_unbroken_chars and has_long_run(text, limits.max_unbroken_chars):
                raise bad_request(
                    f"'{key}' has a run of more than {limits.max_unbroken_chars} characters of one kind (letters, "
                    "punctuation or whitespace), which the tokenizer cannot handle efficiently.",
                    param=str(key),
                    code="input_too_large",
                )


def _strings(value: Any) -> Iterator[str]:
    """Every string in a JSON tree, without recursion (the parser already bounded the depth)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(item.keys())
        elif isinstance(item, list):
            stack.extend(item)
