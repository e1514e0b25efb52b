"""The chunks of one streamed completion, read line by line within the call's bounds; a generation the
engine breaks off goes on through its resumer. Closing the stream aborts the request in vLLM and frees its
KV cache."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

import orjson

from ..errors import server_error
from .completion import (
    MAX_LINE_BYTES,
    Bounds,
    EngineBroke,
    EngineChunk,
    EngineUsage,
    FinishReason,
    Resumer,
    TokenLogprob,
    checked_ids,
    transport_error,
)
from .transport import EngineHTTPError, EngineResponse, TimedOut


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
