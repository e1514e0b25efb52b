"""Client for vLLM's token-in/token-out surface: `/v1/completions` with Harmony token ids.

The engine only samples; the gateway renders and parses Harmony. Every failure of the engine becomes an
`APIError` in OpenAI's shape: before a stream starts it is the HTTP answer, during one it ends the
response as failed. Closing an `EngineStream` closes its HTTP connection, which aborts the request in
vLLM and frees its KV cache.
"""

from __future__ import annotations

import asyncio
import enum
import json
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping, Protocol

import orjson

from ..config import EngineConfig
from ..errors import APIError, server_error
from .grammar_trust import Enforcement, GrammarTrust
from .harmony import STOP_TOKEN_IDS, VOCAB_SIZE, Prompt
from .transport import ConnectFailed, EngineHTTPError, EnginePool, EngineResponse, ProtocolFault, TimedOut

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


class EngineClient:
    """One engine URL: its connections, the model it serves, and whether it answers (`up`)."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.url = config.url
        self.up = True  # until a connection fails or /health says otherwise (routing.py's health checks)
        headers = {"authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        self._http = EnginePool(
            config.url,
            headers=headers,
            connect_timeout=config.connect_timeout_s,
            read_timeout=config.read_timeout_s,
            max_connections=config.max_connections,
            # vLLM's server (uvicorn) closes idle connections after 5 s: idle ones go well before.
            keepalive_expiry=2.0,
        )
        self._model: ModelInfo | None = None
        self.grammar = GrammarTrust()  # whether it enforces the grammars sent to it (grammar_trust.py)

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def known(self) -> ModelInfo | None:
        """The served model as last read from the engine (or configured), if it was."""
        return self._model

    async def model(self) -> ModelInfo:
        """The served model, asked of the engine once and then remembered (read again by `refresh`)."""
        if self._model is None:
            await self.refresh()
        assert self._model is not None
        return self._model

    async def refresh(self) -> ModelInfo:
        """Read the engine's /v1/models again: a restarted engine may serve another model, or another length."""
        listed = await self.list_models()
        wanted = self.config.model
        chosen = next((m for m in listed if m.id == wanted), None) if wanted else (listed[0] if listed else None)
        if chosen is None and wanted:
            # The engine may serve it under an alias: trust the configuration, length unknown.
            chosen = ModelInfo(id=wanted, max_model_len=None)
        if chosen is None:
            raise server_error(502, "The engine lists no model.", "engine_error")
        self._model = chosen
        self.grammar.read_version(await self._version())
        return chosen

    async def _version(self) -> str | None:
        """vLLM's `/version` (`{"version": "0.11.0"}`); None where the engine has none to give. Within half the
        connect limit: a router that holds it open costs the health check nothing (the engine is not down)."""
        try:
            async with asyncio.timeout(self.config.connect_timeout_s / 2):
                found = json.loads(await self._request("GET", "/version")).get("version")
        except (APIError, ValueError, AttributeError, TimeoutError):
            return None
        return found if isinstance(found, str) and 0 < len(found) <= 64 else None

    def sends_grammar(self, sampling: Sampling) -> bool:
        """Whether a call's grammar goes with it: not to an engine known to ignore it (grammar_trust.py)."""
        return sampling.structural_tag is not None and self.grammar.enforcement is not Enforcement.IGNORED

    async def list_models(self) -> list[ModelInfo]:
        body = await self._request("GET", "/v1/models")
        try:
            data = json.loads(body)["data"]
            return [
                ModelInfo(
                    id=_text(m["id"]),
                    max_model_len=_length(m.get("max_model_len")),
                    created=int(m.get("created") or 0),
                    owned_by=_text(m.get("owned_by") or "vllm"),
                )
                for m in data
            ]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise server_error(502, "The engine answered /v1/models with an unexpected body.", "engine_error") from None

    async def healthy(self) -> bool:
        try:
            async with asyncio.timeout(self.config.connect_timeout_s):  # the whole answer, not its head only
                response = await self._http.request("GET", "/health")
                await response.read(MAX_BODY_BYTES)
        except (EngineHTTPError, TimeoutError):
            return False
        return response.status == 200

    async def generate(
        self, prompt: Prompt, sampling: Sampling, session_key: str | None = None, trace: Mapping[str, str] | None = None
    ) -> "EngineStream":
        """Start a streamed completion; engine errors before the first chunk raise here. `session_key`
        names the conversation to a session-aware router (`engine.session_header`); `trace` is the
        trace context's headers (`traceparent`), which vLLM continues when it traces."""
        response = await self.open(prompt, sampling, session_key, trace)
        return EngineStream(response, self.config.url, Bounds.of(self.config, sampling), held=self.sends_grammar(sampling))

    async def open(
        self, prompt: Prompt, sampling: Sampling, session_key: str | None = None, trace: Mapping[str, str] | None = None
    ) -> EngineResponse:
        """A streamed completion's response, its head read (as `generate`, for a stream to read on)."""
        model = await self.model()
        body = {
            "model": model.id,
            "max_tokens": sampling.max_tokens,
            "stop_token_ids": list(STOP_TOKEN_IDS),
            "return_token_ids": True,
            "skip_special_tokens": False,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        for name in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "priority"):
            value = getattr(sampling, name)
            if value is not None:
                body[name] = value
        if self.sends_grammar(sampling):
            body["structured_outputs"] = {"structural_tag": sampling.structural_tag}
        if sampling.logprobs is not None:
            # Tokens named by id ("token_id:N"): the gateway maps ids to Harmony's tokens itself.
            body |= {"logprobs": sampling.logprobs, "return_tokens_as_token_ids": True}
        # Asked uncompressed, as vLLM sends it anyway: a proxy between that compresses it is an error.
        headers = {"content-type": "application/json", "accept-encoding": "identity", **(trace or {})}
        if self.config.session_header and session_key:
            headers[self.config.session_header] = session_key
        # The prompt's JSON is spliced in as it is: made once per run, never rebuilt id by id on the loop.
        encoded = json.dumps(body, separators=(",", ":"))
        content = f'{encoded[:-1]},"prompt":[{prompt.json}]}}'.encode()
        try:
            response = await self._http.request("POST", "/v1/completions", headers=headers, body=content)
            if response.status != 200:
                raise status_error(response.status, await response.read(MAX_BODY_BYTES))
        except EngineHTTPError as exc:
            if isinstance(exc, ConnectFailed):
                self.up = False  # skipped until its health check answers again
            raise transport_error(exc, self.config.url) from None
        if (response.header(b"content-encoding") or b"identity") != b"identity":
            await response.aclose()
            raise server_error(502, "The engine sent its stream compressed, which the gateway did not ask for.", "engine_error")
        return response

    async def _request(self, method: str, path: str) -> bytes:
        try:
            response = await self._http.request(method, path)
            body = await response.read(MAX_BODY_BYTES)
        except EngineHTTPError as exc:
            raise transport_error(exc, self.config.url) from None
        if response.status != 200:
            raise status_error(response.status, body)
        return body


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > 256:
        raise ValueError("not a name")
    return value


def _length(value: Any) -> int | None:
    """A model's context length as the engine gives it: a positive integer, or none given."""
    if value is None:
        return None
    if type(value) is not int or value <= 0:
        raise ValueError("not a length")
    return value


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


class EngineStream:
    """The chunks of one streamed completion. Iterate it once; `aclose()` aborts it in the engine. With a
    `resumer`, a generation the engine breaks off goes on through another request, in the same loop: the
    reader sees one stream, and the per-token path no extra step."""

    def __init__(self, response: EngineResponse, url: str, bounds: Bounds, resumer: Resumer | None = None, held: bool = False) -> None:
        self._response = response
        self._url = url
        self.opened_at = url  # the URL its first request went to
        self.held = held  # its grammar went with it (`EngineClient.sends_grammar`)
        self._resumer = resumer
        # Tokens the call may still be sent: an engine that writes past `max_tokens` is cut off here and
        # its request aborted, so the gateway's own bound holds whatever the engine does.
        self._left = bounds.max_tokens
        self._bounds = bounds
        self.usage = EngineUsage()

    @property
    def resumed(self) -> bool:
        return self._resumer is not None and self._resumer.resumes > 0

    async def aclose(self) -> None:
        await self._response.aclose()

    async def __aiter__(self) -> AsyncIterator[EngineChunk]:
        resumer = self._resumer
        received = resumer.received if resumer is not None else None
        clock = asyncio.get_running_loop().time
        silence_s = self._bounds.read_timeout_s
        last_data = clock()
        deadline = last_data + self._bounds.call_timeout_s
        while True:
            lines = Lines()
            done = False
            first = True
            try:
                while True:
                    data = await self._response.read_some()
                    # The transport times out a silent connection; bytes that bring no chunk (SSE comments,
                    # blank lines) are silence too, and no call streams past its deadline.
                    now = clock()
                    if b"data: " in data:
                        last_data = now
                    elif now - last_data > silence_s:
                        raise TimedOut(f"no data for {silence_s:g} s")
                    if now > deadline:
                        raise TimedOut(f"the call took longer than {self._bounds.call_timeout_s:g} s")
                    for line in lines.feed(data) if data else lines.rest():
                        if not line.startswith(b"data: "):
                            continue
                        payload = line[6:]
                        if payload == b"[DONE]":
                            # Read on to the end of the body, so the connection goes back to the pool.
                            done = True
                            continue
                        if first:
                            first = False
                            payload = without_prompt_ids(payload)
                        chunk = self._chunk(orjson.loads(payload))  # one a token: a third of the standard parser's time
                        if chunk is None:
                            continue
                        self._left -= len(chunk.token_ids)
                        if self._left < 0:  # more than was asked for: the call ends at the limit
                            del chunk.token_ids[len(chunk.token_ids) + self._left :]
                            chunk.finish_reason = FinishReason.LENGTH
                            if received is not None:
                                received += chunk.token_ids
                            yield chunk
                            await self._response.aclose()  # aborts the request in the engine
                            if resumer is not None:
                                self.usage = resumer.usage(self.usage)
                            return
                        if received is not None:
                            received += chunk.token_ids  # before the reader has it: a turn puts a prefill before the first
                            if chunk.finish_reason is FinishReason.ABORT:  # the engine gave the request up: go on elsewhere
                                chunk.finish_reason = None
                                if chunk.token_ids:
                                    yield chunk
                                raise EngineBroke(502, "The engine aborted the generation.")
                        yield chunk
                    if not data:
                        break
                if not done:  # the connection ended without [DONE]: the engine went away mid-stream
                    raise EngineBroke(502, "The engine closed the stream before it finished.")
                if resumer is not None:
                    self.usage = resumer.usage(self.usage)
                return
            except EngineHTTPError as exc:
                failure = transport_error(exc, self._url)
            except EngineBroke as exc:
                failure = exc
            except (ValueError, AttributeError, TypeError, KeyError):
                raise server_error(502, "The engine sent a chunk the gateway cannot read.", "engine_error") from None
            if resumer is None or not isinstance(failure, EngineBroke):
                raise failure
            await self._response.aclose()
            if not resumer.room_left():  # broken off after its last token: the call was cut there
                self.usage = resumer.usage(EngineUsage())
                yield EngineChunk([], FinishReason.LENGTH)
                return
            self._response, self._url = await resumer.resume(failure)
            self.usage = EngineUsage()

    def _chunk(self, data: dict[str, Any]) -> EngineChunk | None:
        choices = data.get("choices")
        chunk = None
        if choices:
            choice = choices[0]
            logprobs = choice.get("logprobs")
            reason = choice.get("finish_reason")  # None on every chunk but the last: read only when there is one
            finish = None if reason is None else FinishReason.read(reason)
            chunk = EngineChunk(checked_ids(choice.get("token_ids") or []), finish, None if logprobs is None else _logprobs(logprobs))
        elif "error" in data:
            error = data["error"] if isinstance(data["error"], dict) else {}
            raise EngineBroke(502, f"The engine failed: {str(error.get('message', 'unknown error'))[:500]}")
        if data.get("usage"):
            self._read_usage(data["usage"])
        return chunk

    def _read_usage(self, usage: dict[str, Any]) -> None:
        details = usage.get("prompt_tokens_details") or {}
        self.usage = EngineUsage(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
        )


class Lines:
    """A stream body's lines, from its bytes as they arrive. vLLM writes raw UTF-8 JSON, so a line ends at
    CR or LF only: text decoders (httpx's `aiter_lines` among them) also break at U+2028, U+2029 and
    U+0085, inside a chunk."""

    def __init__(self) -> None:
        self._pending = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The lines `data` completes."""
        end = max(data.rfind(b"\n"), data.rfind(b"\r"))
        if end < 0:  # searched in the new bytes only, so a long line costs no rescans
            self._pending += data
            if len(self._pending) > MAX_LINE_BYTES:
                raise server_error(502, "The engine sent a line longer than the gateway accepts.", "engine_error")
            return []
        if self._pending:
            self._pending += data[: end + 1]
            complete, self._pending = bytes(self._pending), bytearray(data[end + 1 :])
        elif end + 1 == len(data):  # the usual case: the read ended with a line
            complete = data
        else:
            complete, self._pending = data[: end + 1], bytearray(data[end + 1 :])
        return complete.splitlines()  # bytes split at CR, LF and CRLF only

    def rest(self) -> list[bytes]:
        """What is left at the body's end: its last line, when it did not end with a line break."""
        rest, self._pending = bytes(self._pending), bytearray()
        return [rest] if rest else []


_PROMPT_IDS = b'"prompt_token_ids":'


def without_prompt_ids(payload: bytes) -> bytes:
    """The first chunk without the prompt's ids, which vLLM echoes with `return_token_ids` and the gateway
    does not need: cut out by a byte search instead of parsed into as many Python ints as the context
    is long. (Inside a JSON string a quote is escaped, so the key cannot be matched there.)"""
    start = payload.find(_PROMPT_IDS)
    if start < 0:
        return payload
    opening = start + len(_PROMPT_IDS)
    while payload[opening : opening + 1] in (b" ", b"\t"):
        opening += 1
    end = payload.find(b"]", opening) if payload[opening : opening + 1] == b"[" else -1
    if end < 0:
        return payload
    before, after = payload[:start].rstrip(), payload[end + 1 :].lstrip()
    if before.endswith(b","):
        before = before[:-1]
    elif after.startswith(b","):
        after = after[1:]
    return before + after


def _logprobs(data: dict[str, Any]) -> list[TokenLogprob | None]:
    """vLLM's completion logprobs (`token_logprobs` and `top_logprobs` keyed "token_id:N"), per token."""
    values = data.get("token_logprobs") or []
    tops = data.get("top_logprobs") or [None] * len(values)
    result: list[TokenLogprob | None] = []
    for value, top in zip(values, tops):
        if value is None:
            result.append(None)
            continue
        alternatives = [(_token_id(key), float(logprob)) for key, logprob in (top or {}).items()]
        result.append(TokenLogprob(float(value), alternatives))
    return result


def _token_id(key: str) -> int:
    if not key.startswith("token_id:"):
        raise ValueError(f"not a token id: {key[:40]!r}")
    return int(key[9:])


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
