"""Reading a JSON request body into a validated model, with OpenAI-shaped 4xx errors.

Every body is hostile until parsed: its size is bounded while it is read (never read whole first),
it must say it is JSON, it is parsed by a strict parser (no lone surrogates, no NaN, bounded depth),
and its text is bounded before anything tokenises it. Large bodies are parsed and validated in a
worker thread, so the event loop never does work proportional to a body's size.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

import anyio
import pydantic_core
from pydantic import BaseModel, ValidationError
from starlette.requests import Request

from runtime.cpu import run_cpu
from runtime.numbers import decimal

from ..errors import APIError, bad_request, from_validation_error

ModelT = TypeVar("ModelT", bound=BaseModel)

INLINE_BYTES = 64 * 1024  # bodies up to this size are parsed on the event loop
_JSON_TYPE = re.compile(r"^application/(?:[\w.+-]+\+)?json\s*(?:;.*)?$", re.IGNORECASE)


@dataclass(frozen=True)
class BodyLimits:
    max_bytes: int
    max_text_chars: int
    max_unbroken_chars: int
    read_timeout_s: float


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
    """Bound the text a request brings before it is tokenised: in all, and in unbroken runs."""
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
            if len(text) > limits.max_unbroken_chars and _has_unbroken_run(text, limits.max_unbroken_chars):
                raise bad_request(
                    f"'{key}' has a run of more than {limits.max_unbroken_chars} characters without a space or "
                    "a change of character class, which the tokenizer cannot handle efficiently.",
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


def _has_unbroken_run(text: str, limit: int) -> bool:
    """Whether `text` has a run longer than `limit`. Such a run lies within a run of non-space characters
    longer than `limit`, which a simple pattern finds several times faster than the exact one: only
    those are searched with the exact pattern. Searches go in overlapping windows: `re` holds the GIL for
    a whole search, and a window is short enough for the event loop's thread to get its turn."""
    candidates = _long_nonspace(limit)
    start, end = 0, len(text)
    while start < end - limit:
        found = candidates.search(text, start, start + _WINDOW)
        if found is None:
            start += _WINDOW - limit - 1  # a run longer than limit lies whole in some window
            continue
        after = _NONSPACE.match(text, found.end())
        run_end = after.end() if after is not None else found.end()
        if _search_windows(_unbroken_run(limit), text, found.start(), run_end, limit):
            return True
        start = run_end
    return False


_WINDOW = 32 * 1024
_NONSPACE = re.compile(r"\S*")


def _search_windows(pattern: re.Pattern[str], text: str, start: int, end: int, limit: int) -> bool:
    window = max(_WINDOW, 4 * (limit + 1))
    step = window - limit - 1
    return any(pattern.search(text, at, min(at + window, end)) for at in range(start, max(end - limit, start + 1), step))


@functools.cache
def _long_nonspace(limit: int) -> re.Pattern[str]:
    """Runs of more than `limit` non-space characters, each tried once from its start (the lookbehind)."""
    return re.compile(rf"(?<!\S)\S{{{limit + 1}}}")


@functools.cache
def _unbroken_run(limit: int) -> re.Pattern[str]:
    """Runs the tokenizer's pre-tokenizer keeps in one piece (letters; punctuation), longer than `limit`:
    byte-pair encoding is quadratic in a piece's length. Each alternative is anchored at the start of a
    run (the lookbehind), so a run is tried once: an unanchored `{n,}` would retry from every position
    inside a long run, which is quadratic too."""
    letters, symbols = r"[^\W\d_]", r"[^\w\s]"
    return re.compile(rf"(?<!{letters}){letters}{{{limit + 1}}}|(?<!{symbols}){symbols}{{{limit + 1}}}")
