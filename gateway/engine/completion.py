"""What one engine call is made of, beneath the client and its stream: sampling, chunks, usage, the bounds
of a call, and the errors an engine's answer becomes (in OpenAI's shape)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator, Protocol

from ..config import EngineConfig
from ..errors import APIError, server_error
from .harmony import VOCAB_SIZE
from .transport import ConnectFailed, EngineHTTPError, EngineResponse, ProtocolFault, TimedOut

MAX_LINE_BYTES = 16 * 1024 * 1024  # one stream chunk; real ones are a few hundred bytes
MAX_BODY_BYTES = 16 * 1024 * 1024  # a whole answer read at once: the model list, an error


@dataclass(frozen=True)
class ModelInfo:
    id: str
    max_model_len: int | None
    created: int = 0
    owned_by: str = "vllm"


@dataclass(frozen=True)
class Sampling:
    max_tokens: int
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, int] | None = None
    logprobs: int | None = None  # alternatives per token to report; None: no logprobs at all
    structural_tag: str | None = None  # what the call may generate (structural_tag.py), JSON text; None: anything
    priority: int | None = None  # vLLM's scheduling priority (lower: sooner); None: the engine's default


@dataclass(slots=True)
class TokenLogprob:
    """One generated token's log probability and the most likely alternatives (token id, logprob)."""

    logprob: float
    top: list[tuple[int, float]]


class FinishReason(enum.StrEnum):
    """Why the engine ended a generation (vLLM's `finish_reason`)."""

    STOP = "stop"  # the model's stop token, or a stop sequence
    LENGTH = "length"  # max_tokens
    ABORT = "abort"  # the engine gave the request up: a failure

    @classmethod
    def read(cls, value: Any) -> FinishReason | None:
        """The engine's value; one this gateway does not know ends the generation as a failure."""
        if value is None:
            return None
        return _FINISH_REASONS.get(value, cls.ABORT) if isinstance(value, str) else cls.ABORT


_FINISH_REASONS = {reason.value: reason for reason in FinishReason}


@dataclass(slots=True)
class EngineChunk:
    token_ids: list[int]
    finish_reason: FinishReason | None  # on the last chunk only
    logprobs: list[TokenLogprob | None] | None = None  # per token id, when asked for


@dataclass
class EngineUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


class EngineBroke(APIError):
    """The engine failed, not the request: its connection reset, its body cut off, a 5xx, an error in its
    stream, an abort. What it generated so far stands; the generation may go on elsewhere (resume.py)."""

    def __init__(self, status: int, message: str, code: str = "engine_error") -> None:
        super().__init__(status, message, type="server_error", code=code)


def checked_ids(ids: Any) -> list[int]:
    """A chunk's token ids, each an id of the vocabulary (an engine's garbage is its error, a 502, not a
    fault of the parser's): a type check and a comparison a token."""
    if type(ids) is not list:
        raise ValueError("token_ids is not a list")
    for token in ids:
        if type(token) is not int or not 0 <= token < VOCAB_SIZE:
            raise ValueError("a token id outside the vocabulary")
    return ids


class Chunks(Protocol):
    """What a turn reads: an engine call's chunks (EngineStream), or chunks parsed again (adoption.py)."""

    @property
    def usage(self) -> EngineUsage: ...  # what the engine counted, once the call ended

    @property
    def resumed(self) -> bool: ...  # part of it was generated on from a break, without the call's grammar

    def __aiter__(self) -> AsyncIterator[EngineChunk]: ...

    async def aclose(self) -> None: ...


class Resumer(Protocol):
    """What goes on with a generation its engine broke off (resume.py): the tokens received, and the next
    engine request, which continues the prompt that ends with them."""

    received: list[int]  # every token of the call received so far, in order
    resumes: int  # how many times it went on

    def room_left(self) -> bool: ...  # tokens the call may still generate

    async def resume(self, broke: "EngineBroke") -> tuple[EngineResponse, str]: ...  # raises `broke` when out of attempts

    def usage(self, last: EngineUsage) -> EngineUsage: ...  # the whole call's, from the last request's


@dataclass(frozen=True)
class Bounds:
    """What one engine call may take, whatever the engine does: tokens, the silence between two chunks of
    data, and its whole time."""

    max_tokens: int
    read_timeout_s: float
    call_timeout_s: float

    @classmethod
    def of(cls, config: EngineConfig, sampling: Sampling) -> "Bounds":
        return cls(sampling.max_tokens, config.read_timeout_s, config.call_timeout_s)


def transport_error(exc: EngineHTTPError, url: str) -> APIError:
    if isinstance(exc, ConnectFailed):
        return EngineBroke(503, f"The engine at {url} is unreachable: {exc}.", "engine_unavailable")
    if isinstance(exc, TimedOut):
        return server_error(504, f"The engine at {url} did not answer in time.", "engine_timeout")
    if isinstance(exc, ProtocolFault):
        return server_error(502, f"The engine's answer is not HTTP the gateway can read: {exc}.", "engine_error")
    return EngineBroke(502, "The engine closed the connection before it finished.")


class GrammarRefused(APIError):
    """The engine refused a call's structural tag: it has no structured outputs, or cannot compile this one."""


def status_error(status: int, body: bytes) -> APIError:
    text = body.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error") or {}
        message = error.get("message") or text
        param = error.get("param")
    except (ValueError, AttributeError):
        message, param = text, None
    message = str(message).strip() or f"HTTP {status}"
    if status == 400 and (param == "input_tokens" or "maximum context length" in message):
        return APIError(400, message, param="input", code="context_length_exceeded")
    if status == 400 and param == "structured_outputs":
        return GrammarRefused(400, f"The engine refused the grammar made for this request: {message}", code="structured_outputs_refused")
    if 400 <= status < 500:
        return APIError(400, f"The engine rejected the request: {message}", param=param, code="engine_rejected")
    return EngineBroke(502, f"The engine failed (HTTP {status}): {message[:500]}")
