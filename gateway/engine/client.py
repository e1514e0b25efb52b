"""Client for vLLM's token-in/token-out surface: `/v1/completions` with Harmony token ids.

The engine only samples; the gateway renders and parses Harmony. Every failure of the engine becomes an
`APIError` in OpenAI's shape: before a stream starts it is the HTTP answer, during one it ends the
response as failed. Closing an `EngineStream` closes its HTTP connection, which aborts the request in
vLLM and frees its KV cache.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Mapping

from ..config import EngineConfig
from ..errors import APIError, server_error
from .completion import MAX_BODY_BYTES, Bounds, ModelInfo, Sampling, status_error, transport_error
from .grammar_trust import Enforcement, GrammarTrust
from .harmony import STOP_TOKEN_IDS, Prompt
from .stream import EngineStream
from .transport import ConnectFailed, EngineHTTPError, EnginePool, EngineResponse


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
